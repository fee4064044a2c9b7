//! `gsm-bench streams`: a `gossamer::stream` from rank 0 to rank 1 against `iperf3` between the
//! same two places and against `memcpy`, measured in the same job.
//!
//! ```text
//! gsmrun -np 2 gsm-bench streams [--runs N] [--budget-ms B] [--json FILE]             # shm
//! gsmrun -np 2 --fabric tcp gsm-bench streams [--json FILE]                           # loopback tcp
//! gsmrun -np 2 --hostfile H --launch-agent A gsm-bench streams --iperf-host ADDR1      # two hosts
//! gsm-bench streams --two-hosts [--runs N]     # as root: the test bed's two namespace hosts
//! ```
//!
//! `--two-hosts` (see `twohosts.rs`) makes the test bed's two network-namespace hosts, runs the
//! job with one rank on each (Gossamer's `auto` fabric is then `tcp` over the veth link), and
//! points iperf3 at the second host's address (`GSM_BENCH_PEER_HOST`), so the stream and iperf3
//! cross the same bridge in the same run.
//!
//! **Cases** (rank 0 writes, rank 1 reads; the rate is rank 1's: bytes read over the time from
//! its `accept` to end of stream):
//! - *write_all → read*: rank 0 `write_all`s blocks of 256 KiB from one buffer, rank 1 `read`s into
//!   a 256 KiB buffer (one copy in, one copy out).
//! - *lend → fill_buf*: rank 0 fills lent ring bytes from its buffer (one copy), rank 1 reads
//!   them in place (`fill_buf`, one load per cache line), the zero-copy form.
//!
//! Peers: `iperf3 -c ADDR` to `iperf3 -s -1` started by rank 1 (its received rate, Gbit/s), run
//! by the ranks themselves between the Gossamer runs, so that it crosses the same link: loopback
//! when both ranks share a host (`--iperf-host 127.0.0.1`, the default), the bridge between two
//! namespace hosts when given rank 1's address. And, on rank 0 while rank 1 sleeps:
//! - `memcpy` on one thread of 256 KiB blocks from the writer's 256 KiB source buffer into a
//!   256 KiB buffer like the reader's (the same bytes in the same blocks between buffers of the
//!   same sizes, all in cache: the issue's "shm vs memcpy"), and from 64 MiB into 64 MiB (out of
//!   cache, the machine's copy bandwidth);
//! - *memcpy of bytes another core just wrote* (the goal's baseline): one thread copies a
//!   256 KiB block into its own buffer right after another thread wrote it, the two taking
//!   turns, only the copy timed: each line crosses between two cores once, as it must in any
//!   stream between two cores, and nothing else is counted. The header states the stream's ratio
//!   to it, which is what a stream's bandwidth is judged by: a cache-resident one-thread memcpy
//!   moves no line between cores, so no two-core design reaches it (the bare pipeline below shows
//!   the ceiling);
//! - the *bare pipeline*: the same bytes through a ring of the stream's default capacity between
//!   two threads (so two cores), a copy in and a copy out, with only a Release/Acquire head and
//!   tail and spin-then-yield waits. It is what any stream of two copies between two cores can
//!   reach on the machine: every byte crosses from the writer's cache to the reader's, which a
//!   one-thread memcpy never does.
//!
//! All rates in Gbit/s. The header states the memory a stream holds. Only rank 0 prints.

use crate::case::{Case, Figure};
use crate::peers::Limit;
use crate::report::RankReport;
use crate::stats::summarize;
use gossamer::{Config, WorkerId, rank, stream, workers_of_rank};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::time::{Duration, Instant};

/// Options of `gsm-bench streams`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repetitions per figure.
    pub runs: usize,
    /// Timed length of one repetition of one figure.
    pub budget: Duration,
    /// Where rank 0's `iperf3 -c` connects to rank 1's `iperf3 -s`.
    pub iperf_host: String,
    /// The `iperf3` program.
    pub iperf3: String,
}

const BLOCK: usize = 256 << 10;
const PORT: u16 = 5299;

mod names {
    pub const COPY: &str = "gsm write_all/read";
    pub const LEND: &str = "gsm lend/fill_buf";
    pub const IPERF: &str = "iperf3";
    pub const MEMCPY: &str = "memcpy";
    pub const MEMCPY_RAM: &str = "memcpy ram";
    pub const PIPELINE: &str = "bare pipeline";
    pub const CROSS: &str = "memcpy cross-core";
}

type Sample = Vec<(&'static str, f64)>;

fn first(r: usize) -> WorkerId {
    WorkerId::new(workers_of_rank(r).start)
}

/// Rank 0's side of one stream: writes for `budget`; returns its most bytes in flight.
fn write_side(tag: u64, budget: Duration, lend: bool) -> u64 {
    let mut w = stream::connect(first(1), tag).expect("connect");
    let src = vec![0x5au8; BLOCK];
    let deadline = Instant::now() + budget;
    while Instant::now() < deadline {
        if lend {
            let mut left = BLOCK;
            while left > 0 {
                let mut slot = w.lend(left).expect("lend");
                let n = slot.len();
                slot.bytes_mut().copy_from_slice(&src[..n]);
                slot.commit(n).expect("commit");
                left -= n;
            }
        } else {
            w.write_all(&src).expect("write");
        }
    }
    let most = w.most_in_flight();
    w.finish().expect("finish");
    most
}

/// Rank 1's side: reads to the end; returns Gbit/s.
fn read_side(tag: u64, lend: bool) -> f64 {
    let mut r = stream::accept(first(0), tag).expect("accept");
    let start = Instant::now();
    let mut total = 0u64;
    let mut sink = 0u64;
    if lend {
        loop {
            let b = r.fill_buf().expect("fill_buf");
            if b.is_empty() {
                break;
            }
            for line in b.chunks(64) {
                sink = sink.wrapping_add(u64::from(line[0]));
            }
            let n = b.len();
            r.consume(n);
            total += n as u64;
        }
    } else {
        let mut buf = vec![0u8; BLOCK];
        loop {
            let n = r.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            sink = sink.wrapping_add(u64::from(buf[n - 1]));
            total += n as u64;
        }
    }
    std::hint::black_box(sink);
    total as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9
}

fn gsm_figures(budget: Duration) -> (Sample, u64) {
    let mut out = Vec::new();
    let mut most = 0;
    for (tag, lend, name) in [(1u64, false, names::COPY), (2, true, names::LEND)] {
        if rank() == 0 {
            most = most.max(write_side(tag, budget, lend));
            let rate: f64 = gossamer::recv(first(1), 100 + tag);
            out.push((name, rate));
        } else {
            let rate = read_side(tag, lend);
            gossamer::send(first(0), 100 + tag, rate);
        }
    }
    (out, most)
}

/// One `iperf3` measurement across the ranks: rank 1 serves once, rank 0 sends for `secs`.
fn iperf(world: &SimpleCommunicator, opts: &Options, secs: u64) -> anyhow::Result<Option<f64>> {
    use std::process::{Command, Stdio};
    let port = PORT.to_string();
    if world.rank() == 1 {
        let mut server = Command::new(&opts.iperf3)
            .args(["-s", "-1", "-p", &port])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!(
                    "starting `{} -s`: {e} (scripts/install-deps installs iperf3)",
                    opts.iperf3
                )
            })?;
        std::thread::sleep(Duration::from_millis(300));
        world.barrier();
        world.barrier();
        let _ = server.wait();
        return Ok(None);
    }
    world.barrier();
    let out = Command::new(&opts.iperf3)
        .args([
            "-c",
            &opts.iperf_host,
            "-p",
            &port,
            "-t",
            &secs.to_string(),
            "-J",
        ])
        .output()
        .map_err(|e| anyhow::anyhow!("running `{} -c`: {e}", opts.iperf3))?;
    world.barrier();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        anyhow::anyhow!(
            "iperf3's JSON: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| anyhow::anyhow!("iperf3 reported no received rate: {}", v["error"]))?;
    Ok(Some(bps / 1e9))
}

/// memcpy of 256 KiB blocks from a source of `src_blocks` blocks into a destination of
/// `dst_blocks`, moving through both: (1, 1) is the writer's source to a buffer like the reader's
/// (cache-resident), (256, 256) is 64 MiB each way (out of cache).
fn memcpy_rate(budget: Duration, src_blocks: usize, dst_blocks: usize) -> f64 {
    // Hidden from the optimiser: a source it knows to be all 7s makes the copy a memset.
    let src = std::hint::black_box(vec![7u8; src_blocks * BLOCK]);
    // Written once first, so that no page is first touched while timed.
    let mut dst = vec![1u8; dst_blocks * BLOCK];
    let start = Instant::now();
    let n = Limit::steps(u64::MAX, start + budget, |i| {
        let (s, d) = (
            (i as usize % src_blocks) * BLOCK,
            (i as usize % dst_blocks) * BLOCK,
        );
        dst[d..d + BLOCK].copy_from_slice(std::hint::black_box(&src[s..s + BLOCK]));
        std::hint::black_box(&mut dst[d]);
    });
    (n as usize * BLOCK) as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9
}

/// Runs every repetition on both ranks; rank 0 prints. Whether this process printed.
pub fn run(opts: &Options, json: Option<&std::path::Path>) -> anyhow::Result<bool> {
    crate::report::mpi_job(json, |world| run_in(world, opts))
}

fn run_in(world: &SimpleCommunicator, opts: &Options) -> anyhow::Result<Option<RankReport>> {
    if world.size() != 2 {
        anyhow::bail!(
            "`gsm-bench streams` needs exactly 2 ranks: run it as `gsmrun -np 2 gsm-bench streams`"
        );
    }
    let transports = crate::remote::Transports::from_env();
    let config = Config::from_env()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .workers(1);
    let secs = opts.budget.as_secs().max(1);
    let mut samples: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut most = 0u64;
    for run in 0..opts.runs {
        if world.rank() == 0 {
            crate::report::run_progress("streams", run, opts.runs);
        }
        let budget = opts.budget;
        let (gsm, m) = gossamer::run(config.clone(), move || gsm_figures(budget))
            .map_err(|e| anyhow::anyhow!("the gossamer runtime failed: {e}"))?;
        most = most.max(m);
        for (name, v) in gsm {
            samples.entry(name).or_default().push(v);
        }
        if let Some(g) = iperf(world, opts, secs)? {
            samples.entry(names::IPERF).or_default().push(g);
        }
        if world.rank() == 0 {
            samples
                .entry(names::MEMCPY)
                .or_default()
                .push(memcpy_rate(budget, 1, 1));
            samples
                .entry(names::MEMCPY_RAM)
                .or_default()
                .push(memcpy_rate(budget, 256, 256));
            samples
                .entry(names::CROSS)
                .or_default()
                .push(crosscore::rate(budget, BLOCK));
            samples
                .entry(names::PIPELINE)
                .or_default()
                .push(pipeline::rate(
                    budget,
                    stream::Options::default().capacity,
                    BLOCK,
                ));
        } else {
            // Out of the way of rank 0's threads: MPI's barrier would poll a CPU.
            std::thread::sleep(budget * 4 + budget / 2);
        }
        world.barrier();
    }
    if world.rank() != 0 {
        return Ok(None);
    }
    crate::report::progress_done();
    let s = |n: &str| samples.get(n).and_then(|v| summarize(v));
    let fabric = transports
        .fabric
        .split_whitespace()
        .next()
        .unwrap_or("auto")
        .to_string();
    let peers = || {
        vec![
            Figure {
                name: format!("iperf3 -c {} ({secs} s)", opts.iperf_host),
                summary: s(names::IPERF),
            },
            Figure {
                name: "memcpy of 256 KiB another core just wrote (the goal's baseline)".into(),
                summary: s(names::CROSS),
            },
            Figure {
                name: "memcpy 256 KiB → 256 KiB, one thread (cache-resident)".into(),
                summary: s(names::MEMCPY),
            },
            Figure {
                name: "memcpy 256 KiB blocks, 64 MiB → 64 MiB (out of cache)".into(),
                summary: s(names::MEMCPY_RAM),
            },
            Figure {
                name: "bare pipeline of 2 threads, 1 MiB ring, copy in + copy out".into(),
                summary: s(names::PIPELINE),
            },
        ]
    };
    let cases = vec![
        Case {
            case: format!("stream rank 0 → 1, write_all/read [gsm {fabric}]"),
            unit: "Gbit/s".into(),
            higher_is_better: true,
            gsm: s(names::COPY),
            peers: peers(),
        },
        Case {
            case: format!("stream rank 0 → 1, lend/fill_buf [gsm {fabric}]"),
            unit: "Gbit/s".into(),
            higher_is_better: true,
            gsm: s(names::LEND),
            peers: peers(),
        },
    ];
    let o = stream::Options::default();
    let ratio = |n: &str| match (s(n), s(names::CROSS)) {
        (Some(g), Some(c)) if c.median > 0.0 => format!("{:.2}×", g.median / c.median),
        _ => "-".into(),
    };
    let goal = if fabric == "shm" {
        format!(
            "shm stream against a memcpy of bytes another core just wrote: lend/fill_buf \
             (zero-copy) {}, write_all/read {}\n",
            ratio(names::LEND),
            ratio(names::COPY)
        )
    } else {
        String::new()
    };
    let header = format!(
        "gsm-bench streams: 2 ranks × 1 worker, {} runs of {} ms per figure\ngossamer fabric: {}\n\
         memory held by a stream: its ring, {} B + a 4096 B header, in the reader; the writer's most \
         bytes in flight seen: {most} (bound: the ring; between hosts plus one unsent chunk of {} B)\n{goal}",
        opts.runs,
        opts.budget.as_millis(),
        transports.fabric,
        o.capacity,
        o.chunk
    );
    Ok(Some(RankReport { cases, header }))
}

/// The goal's memcpy peer: one thread copies 256 KiB that another thread has just written into
/// a buffer of its own, the two taking turns, and only the copy is timed. Every line crosses
/// from the writer's cache to the copier's once, as in any transfer between two cores, and
/// nothing else is counted (no ring, no waiting, no concurrency).
mod crosscore {
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    #[repr(align(128))]
    struct Line(AtomicU64);

    struct Shared {
        buf: Vec<UnsafeCell<u8>>,
        /// Rounds written (by the writer).
        written: Line,
        /// Rounds copied (by the copier).
        copied: Line,
        stop: AtomicBool,
    }

    // SAFETY: `buf` is written by the writer only while `written == copied` and read by the
    // copier only while `written == copied + 1`: they take turns.
    unsafe impl Sync for Shared {}

    fn wait(sh: &Shared, w: &AtomicU64, v: u64) -> bool {
        let mut spins = 0u32;
        while w.load(Ordering::Acquire) != v {
            if sh.stop.load(Ordering::Relaxed) {
                return false;
            }
            spins += 1;
            if spins < 256 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        true
    }

    /// Gbit/s of the copier's memcpy of `block` bytes, over its copying time, for `budget`.
    pub(super) fn rate(budget: Duration, block: usize) -> f64 {
        let sh = Shared {
            buf: (0..block).map(|_| UnsafeCell::new(0)).collect(),
            written: Line(AtomicU64::new(0)),
            copied: Line(AtomicU64::new(0)),
            stop: AtomicBool::new(false),
        };
        let base = UnsafeCell::raw_get(sh.buf.as_ptr());
        let base = base as usize;
        std::thread::scope(|s| {
            s.spawn(|| {
                for r in 1u64.. {
                    if !wait(&sh, &sh.copied.0, r - 1) {
                        return;
                    }
                    // SAFETY: the writer's turn (see `Shared`); `block` bytes of `buf`.
                    unsafe { std::ptr::write_bytes(base as *mut u8, r as u8, block) };
                    sh.written.0.store(r, Ordering::Release);
                }
            });
            let copier = s.spawn(|| {
                let mut dst = vec![0u8; block];
                let (end, mut busy, mut rounds) = (Instant::now() + budget, Duration::ZERO, 0u64);
                while Instant::now() < end {
                    if !wait(&sh, &sh.written.0, rounds + 1) {
                        break;
                    }
                    let t = Instant::now();
                    // SAFETY: the copier's turn (see `Shared`); `dst` is ours.
                    unsafe {
                        std::ptr::copy_nonoverlapping(base as *const u8, dst.as_mut_ptr(), block)
                    };
                    std::hint::black_box(&mut dst[block - 1]);
                    busy += t.elapsed();
                    rounds += 1;
                    sh.copied.0.store(rounds, Ordering::Release);
                }
                sh.stop.store(true, Ordering::Relaxed);
                (rounds * block as u64) as f64 * 8.0 / busy.as_secs_f64().max(1e-9) / 1e9
            });
            copier.join().expect("the copier panicked")
        })
    }
}

/// The bare two-thread pipeline peer (see the module docs).
mod pipeline {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    #[repr(align(128))]
    struct Line(AtomicU64);

    struct Shared {
        ring: Vec<std::cell::UnsafeCell<u8>>,
        tail: Line,
        head: Line,
        stop: AtomicBool,
    }

    // SAFETY: the ring's bytes are written only by the producer between its `head` check and
    // its `tail` store, and read only by the consumer between its `tail` load and `head` store.
    unsafe impl Sync for Shared {}

    /// Spins a little, then yields: a descheduled partner must get the CPU back.
    fn wait_until(stop: &AtomicBool, mut ready: impl FnMut() -> bool) -> bool {
        let mut spins = 0u32;
        while !ready() {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            spins += 1;
            if spins < 256 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        true
    }

    fn produce(sh: &Shared, block: usize) {
        let cap = sh.ring.len() as u64;
        let src = vec![0x5au8; block];
        let base = std::cell::UnsafeCell::raw_get(sh.ring.as_ptr());
        let mut tail = 0u64;
        loop {
            let mut off = 0;
            while off < block {
                let mut head = 0;
                let room = || {
                    head = sh.head.0.load(Ordering::Acquire);
                    head + cap != tail
                };
                if !wait_until(&sh.stop, room) {
                    return;
                }
                let n = (cap - (tail - head))
                    .min((block - off) as u64)
                    .min(cap - tail % cap) as usize;
                // SAFETY: `n` free bytes at `tail % cap`, inside the ring (see `Shared`).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.as_ptr().add(off),
                        base.add((tail % cap) as usize),
                        n,
                    );
                }
                tail += n as u64;
                off += n;
                sh.tail.0.store(tail, Ordering::Release);
            }
        }
    }

    fn consume(sh: &Shared, block: usize) -> u64 {
        let cap = sh.ring.len() as u64;
        let mut dst = vec![0u8; block];
        let base = std::cell::UnsafeCell::raw_get(sh.ring.as_ptr());
        let (mut head, mut off) = (0u64, 0usize);
        loop {
            let mut tail = 0;
            let data = || {
                tail = sh.tail.0.load(Ordering::Acquire);
                tail != head
            };
            if !wait_until(&sh.stop, data) {
                return head;
            }
            let n = (tail - head)
                .min((block - off) as u64)
                .min(cap - head % cap) as usize;
            // SAFETY: `n` published bytes at `head % cap` (see `Shared`); `dst` is ours.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    base.add((head % cap) as usize),
                    dst.as_mut_ptr().add(off),
                    n,
                );
            }
            std::hint::black_box(&mut dst[off]);
            off = (off + n) % block;
            head += n as u64;
            sh.head.0.store(head, Ordering::Release);
        }
    }

    /// Gbit/s through a ring of `cap` bytes, `block`-byte writes and reads, for `budget`.
    pub(super) fn rate(budget: Duration, cap: usize, block: usize) -> f64 {
        let sh = Shared {
            ring: (0..cap).map(|_| std::cell::UnsafeCell::new(0)).collect(),
            tail: Line(AtomicU64::new(0)),
            head: Line(AtomicU64::new(0)),
            stop: AtomicBool::new(false),
        };
        std::thread::scope(|s| {
            let start = Instant::now();
            s.spawn(|| produce(&sh, block));
            let reader = s.spawn(|| consume(&sh, block));
            std::thread::sleep(budget);
            sh.stop.store(true, Ordering::Relaxed);
            let bytes = reader.join().expect("the pipeline's reader panicked");
            bytes as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9
        })
    }
}
