//! `gsm-bench segments`: one-sided segment operations from rank 0 on rank 1's segment against
//! MPI's one-sided operations on a window in the same job, the cache-line round trip and memcpy.
//!
//! ```text
//! gsmrun -np 2 gsm-bench segments [--runs N] [--budget-ms B] [--json FILE]
//! OMPI_MCA_btl=self,tcp gsmrun -np 2 --fabric tcp gsm-bench segments [--json FILE]
//! ```
//!
//! **Cases** (rank 0 operates, rank 1 owns; with 2 ranks on one host the segment is mapped and
//! no code runs on rank 1; with `--fabric tcp` every operation is a request to rank 1's handler):
//! - *get 8 bytes*: blocking `get` of 8 bytes, one after the other, ns each; peers: the
//!   cache-line round trip of two threads of rank 0 (an `AtomicU64` ping-pong, as in `gsm-bench
//!   local`) and `MPI_Get` of 8 bytes + `MPI_Win_flush`. Nobody writes that word, so within a
//!   host its line stays in rank 0's cache; the next case makes each get fetch it:
//! - *get 8 bytes rank 1 keeps rewriting*: the same while rank 1's worker stores to that word in
//!   a loop; peer: the cache-line round trip.
//! - *fetch_add*: blocking `fetch_add(1)` on one word, millions per second (the final value is
//!   checked); peer: `MPI_Fetch_and_op(MPI_SUM)` + `MPI_Win_flush`.
//! - *put 1 MiB*: blocking `put` of 1 MiB, GB/s, from the same source buffer as the MPI peer's;
//!   peers: `MPI_Put` of 1 MiB + `MPI_Win_flush`, and `memcpy` of 1 MiB between two buffers of
//!   rank 0 (one thread).
//!
//! MPI's window is allocated once (`MPI_Win_allocate`, passive target, `MPI_Win_lock_all`); each
//! repetition measures the MPI peers from the main thread (rank 1 waits in a barrier, which lets
//! MPI progress), then the two local peers on rank 0 (rank 1 sleeps, so as not to take a CPU),
//! then the Gossamer figures in one `gossamer::run`. Figures are medians of `--runs` repetitions
//! of `--budget-ms` each (after a warm-up of a tenth). Only rank 0 prints.

use crate::case::{Case, Figure};
use crate::peers::{Limit, pingpong};
use crate::report::RankReport;
use crate::rma::Window;
use crate::stats::summarize;
use gossamer::segment::{self, Rights};
use gossamer::{Config, WorkerId, rank, workers_of_rank};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Options of `gsm-bench segments`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repetitions per figure.
    pub runs: usize,
    /// Timed length of one repetition of one figure.
    pub budget: Duration,
}

const MIB: usize = 1 << 20;

mod names {
    pub const GSM_GET: &str = "gsm get8";
    pub const GSM_GET_HOT: &str = "gsm get8 rewritten";
    pub const GSM_ADD: &str = "gsm fetch_add";
    pub const GSM_PUT: &str = "gsm put1m";
    pub const MPI_GET: &str = "mpi get8";
    pub const MPI_ADD: &str = "mpi fetch_and_op";
    pub const MPI_PUT: &str = "mpi put1m";
    pub const LINE: &str = "cache line";
    pub const MEMCPY: &str = "memcpy1m";
}

type Sample = Vec<(&'static str, f64)>;

/// Times `op` for `budget` after a warm-up of a tenth; returns (ops, seconds).
fn timed(budget: Duration, mut op: impl FnMut(u64)) -> (u64, f64) {
    Limit::steps(u64::MAX, Instant::now() + budget / 10, &mut op);
    let start = Instant::now();
    let n = Limit::steps(u64::MAX, start + budget, op);
    (n, start.elapsed().as_secs_f64())
}

fn mpi_figures(world: &SimpleCommunicator, win: &Window, budget: Duration, data: &[u8]) -> Sample {
    let mut out = Vec::new();
    world.barrier();
    if world.rank() == 0 {
        let mut b = [0u8; 8];
        let (n, s) = timed(budget, |_| win.get(1, 0, &mut b));
        out.push((names::MPI_GET, s * 1e9 / n as f64));
        let before = win.fetch_add(1, 8, 0);
        let (n, s) = timed(budget, |_| {
            win.fetch_add(1, 8, 1);
        });
        let after = win.fetch_add(1, 8, 0);
        assert!(after - before >= n, "MPI_Fetch_and_op lost additions");
        out.push((names::MPI_ADD, n as f64 / s / 1e6));
        let (n, s) = timed(budget, |_| win.put(1, 4096, data));
        out.push((names::MPI_PUT, (n as usize * MIB) as f64 / s / 1e9));
    }
    world.barrier();
    out
}

fn local_figures(world: &SimpleCommunicator, budget: Duration) -> Sample {
    let mut out = Vec::new();
    if world.rank() == 0 {
        let limit = Limit {
            max_ops: u64::MAX,
            budget,
        };
        pingpong(Limit {
            max_ops: u64::MAX,
            budget: budget / 10,
        });
        out.push((names::LINE, pingpong(limit)));
        // Hidden from the optimiser: a source it knows to be all 5s makes the copy a memset.
        let src = std::hint::black_box(vec![5u8; MIB]);
        let mut dst = vec![0u8; MIB];
        let (n, s) = timed(budget, |i| {
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&mut dst[(i as usize) % MIB]);
        });
        out.push((names::MEMCPY, (n as usize * MIB) as f64 / s / 1e9));
    } else {
        // Out of the way of rank 0's two threads: MPI's barrier would poll a CPU.
        std::thread::sleep(budget * 3);
    }
    world.barrier();
    out
}

/// Rank 1's side: waits, then rewrites the word at offset 64 of its own segment (so that each of
/// rank 0's gets of it must fetch the line) until told to stop, then waits for the end.
fn owner_side(sym: &segment::Symmetric) {
    let zero = WorkerId::new(workers_of_rank(0).start);
    let _: u8 = gossamer::recv(zero, tags::WRITE);
    gossamer::send(zero, tags::WRITING, 0u8);
    let mine = sym.on(1);
    let mut i = 0u64;
    loop {
        mine.put(64, &i.to_le_bytes()).unwrap();
        i += 1;
        if i % 256 == 0 {
            if gossamer::try_recv::<u8>(zero, tags::STOP).is_some() {
                break;
            }
            gossamer::yield_now();
        }
    }
    let _: u8 = gossamer::recv(zero, tags::DONE);
}

mod tags {
    pub const WRITE: u64 = 0xB5E1;
    pub const WRITING: u64 = 0xB5E2;
    pub const STOP: u64 = 0xB5E3;
    pub const DONE: u64 = 0xB5E4;
}

fn gsm_figures(budget: Duration, data: std::sync::Arc<Vec<u8>>) -> Sample {
    let sym = segment::alloc_symmetric(&[0, 1], 2 * MIB, Rights::ALL).unwrap();
    if rank() != 0 {
        owner_side(&sym);
        return Vec::new();
    }
    let one = WorkerId::new(workers_of_rank(1).start);
    let h = sym.on(1);
    let mut b = [0u8; 8];
    let (n, s) = timed(budget, |_| h.get(0, &mut b).unwrap());
    let get = s * 1e9 / n as f64;
    gossamer::send(one, tags::WRITE, 0u8);
    let _: u8 = gossamer::recv(one, tags::WRITING);
    let (n, s) = timed(budget, |_| h.get(64, &mut b).unwrap());
    let get_hot = s * 1e9 / n as f64;
    gossamer::send(one, tags::STOP, 0u8);
    let before = h.fetch_add(8, 0).unwrap();
    let (n, s) = timed(budget, |_| {
        h.fetch_add(8, 1).unwrap();
    });
    let after = h.fetch_add(8, 0).unwrap();
    assert!(after - before >= n, "fetch_add lost additions");
    let add = n as f64 / s / 1e6;
    let (n, s) = timed(budget, |_| h.put(4096, &data).unwrap());
    let put = (n as usize * MIB) as f64 / s / 1e9;
    gossamer::send(one, tags::DONE, 0u8);
    vec![
        (names::GSM_GET, get),
        (names::GSM_GET_HOT, get_hot),
        (names::GSM_ADD, add),
        (names::GSM_PUT, put),
    ]
}

/// Runs every repetition on both ranks; rank 0 prints. Whether this process printed.
pub fn run(opts: &Options, json: Option<&std::path::Path>) -> anyhow::Result<bool> {
    crate::report::mpi_job(json, |world| run_in(world, opts))
}

fn run_in(world: &SimpleCommunicator, opts: &Options) -> anyhow::Result<Option<RankReport>> {
    if world.size() != 2 {
        anyhow::bail!(
            "`gsm-bench segments` needs exactly 2 ranks: run it as `gsmrun -np 2 gsm-bench segments`"
        );
    }
    let transports = crate::remote::Transports::from_env();
    let config = Config::from_env()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .workers(1);
    let win = Window::allocate(world, 2 * MIB);
    let mut samples: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    // One source for both puts: the same bytes at the same address.
    let data = std::sync::Arc::new(std::hint::black_box(vec![3u8; MIB]));
    for run in 0..opts.runs {
        if world.rank() == 0 {
            crate::report::run_progress("segments", run, opts.runs);
        }
        let budget = opts.budget;
        let d = data.clone();
        let gsm = gossamer::run(config.clone(), move || gsm_figures(budget, d))
            .map_err(|e| anyhow::anyhow!("the gossamer runtime failed: {e}"))?;
        for (name, v) in mpi_figures(world, &win, budget, &data)
            .into_iter()
            .chain(local_figures(world, budget))
            .chain(gsm)
        {
            samples.entry(name).or_default().push(v);
        }
    }
    drop(win);
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
    let btl = transports.btl.clone();
    let fig = |name: &str, key: &str| Figure {
        name: name.to_string(),
        summary: s(key),
    };
    let cases = vec![
        Case {
            case: format!("get 8 bytes from rank 1's segment [gsm {fabric}]"),
            unit: "ns".into(),
            higher_is_better: false,
            gsm: s(names::GSM_GET),
            peers: vec![
                fig(
                    "cache-line round trip (2 threads, AtomicU64 ping-pong)",
                    names::LINE,
                ),
                fig(
                    &format!("MPI_Get 8 B + MPI_Win_flush [btl {btl}]"),
                    names::MPI_GET,
                ),
            ],
        },
        Case {
            case: format!("get 8 bytes rank 1 keeps rewriting [gsm {fabric}]"),
            unit: "ns".into(),
            higher_is_better: false,
            gsm: s(names::GSM_GET_HOT),
            peers: vec![fig(
                "cache-line round trip (2 threads, AtomicU64 ping-pong)",
                names::LINE,
            )],
        },
        Case {
            case: format!("fetch_add on rank 1's word [gsm {fabric}]"),
            unit: "M/s".into(),
            higher_is_better: true,
            gsm: s(names::GSM_ADD),
            peers: vec![fig(
                &format!("MPI_Fetch_and_op + MPI_Win_flush [btl {btl}]"),
                names::MPI_ADD,
            )],
        },
        Case {
            case: format!("put 1 MiB to rank 1's segment [gsm {fabric}]"),
            unit: "GB/s".into(),
            higher_is_better: true,
            gsm: s(names::GSM_PUT),
            peers: vec![
                fig(
                    &format!("MPI_Put 1 MiB + MPI_Win_flush [btl {btl}]"),
                    names::MPI_PUT,
                ),
                fig("memcpy 1 MiB (one thread)", names::MEMCPY),
            ],
        },
    ];
    let header = format!(
        "gsm-bench segments: 2 ranks × 1 worker, {} runs of {} ms per figure\ngossamer fabric: {}\nMPI: OMPI_MCA_btl={}\n",
        opts.runs,
        opts.budget.as_millis(),
        transports.fabric,
        btl
    );
    Ok(Some(RankReport { cases, header }))
}
