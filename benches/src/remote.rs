//! `gsm-bench remote`: delegation between two ranks against MPI point-to-point messages, both
//! measured in the same job, the same processes, one after the other.
//!
//! ```text
//! gsmrun -np 2 gsm-bench remote [--runs N] [--budget-ms B] [--workers W] [--json FILE]
//! OMPI_MCA_btl=self,tcp gsmrun -np 2 --fabric tcp gsm-bench remote [--json FILE]
//! ```
//!
//! `gsm-bench remote --two-hosts` (as root, not under gsmrun) runs the same job across the two
//! network-namespace hosts of the test bed (`twohosts.rs`), so the figures cross a veth link.
//! The header also prints the computed tcp connections and registered bytes per rank
//! ([`connection_table`]).
//!
//! The first line measures Gossamer over the `shm` fabric (`auto` picks it for ranks on one
//! host) against Open MPI's default transports (the `vader` shared-memory BTL between ranks on
//! one host). The second restricts both sides to TCP: `--fabric tcp` for Gossamer, and
//! `OMPI_MCA_btl=self,tcp` in `gsmrun`'s environment for MPI (`gsmrun` has no `--mca`; `mpirun`
//! passes `OMPI_MCA_*` variables of its own environment on to the ranks). The output names the
//! fabric and the BTLs it ran with, in the table header and in every case's name, so two JSON
//! files from the two set-ups cannot be confused.
//!
//! **How the job is shared.** The program initialises MPI itself (`FUNNELED`) before the first
//! `gossamer::run`, so Gossamer joins that MPI instead of starting its own and leaves
//! `MPI_Finalize` to this module (it happens when the universe is dropped, after the last run).
//! Every repetition first measures the MPI peers with plain MPI calls from the main thread (no
//! Gossamer worker exists then), then starts one `gossamer::run` (collective: both ranks call it)
//! and measures the Gossamer figures in it; so slow phases of this shared machine spread over
//! both sides. Only rank 0 prints.
//!
//! **Cases** (rank 0's first worker is the client, rank 1's first worker the trustee; more
//! workers per rank with `--workers` only serve):
//! - *round trip*: blocking `apply` on a `u64` held by rank 1, one after the other, ns per apply;
//!   peer: 8-byte MPI ping-pong (rank 0 sends and receives, rank 1 receives and sends), ns per
//!   round trip.
//! - *throughput*: `apply_then(move |n: &mut u64| *n += k, ..)` (an 8-byte capture) to a counter
//!   on rank 1, as fast as the runtime accepts them, timed until the last callback ran on rank 0;
//!   the counter's final value is checked against the sum of every `k` sent. Peer: the MPI
//!   message rate of 8-byte messages in windows of 64 `MPI_Isend`s, the receiver posting 64
//!   `MPI_Irecv`s and acknowledging each window (as `osu_mbw_mr` does). Millions per second.
//! - *throughput of promises*: the same stream with `apply_async`, each answer a promise taken
//!   when it is ready (the waiting ones from the front, the rest at the end); its peer is the
//!   `apply_then` stream of the same repetition, not MPI.
//! - *bidirectional throughput*: the same in both directions at once (a fiber on rank 1 streams
//!   into a counter on rank 0 while rank 0 streams into rank 1); peer: both ranks exchange windows
//!   of 64 `MPI_Isend`/`MPI_Irecv` (as `osu_bibw`). Messages of both directions per second.
//!
//! Each repetition of each figure runs for `--budget-ms` (default 300 ms) after a warm-up of a
//! tenth of that; figures are medians of `--runs` (at least 5) repetitions. `--quick` (for the
//! test) allows one run of 20 ms.
//!
//! **Run it on a quiet machine.** Open MPI busy-polls: when a third runnable thread shares the
//! two cores, its ping-pong waits for scheduler time slices, while Gossamer's workers park and
//! are woken, so on a loaded machine the speedups are meaningless. The load average is printed after
//! the table; look at the interquartile ranges too.
//!
//! Current figures and how to reproduce them are in docs/performance.md.
//!
//! # Slot memory per rank
//!
//! Every worker consumes one request ring and one response ring from every other worker of the
//! job; a ring of `S` slots of `Z` bytes takes `B = 128 + S·(Z + 64)` bytes (slot headers and
//! ring control included; `B` = 66 688 bytes for the default 16 slots × 4 KiB). With `L`
//! workers per rank and `N` ranks (`W = N·L` workers in the job), a rank holds
//! - `2·L·(L−1)` heap rings between its own workers;
//! - with **shm** (every rank on one host): `R = 2·L·(W−L)` rings in its segment, which is
//!   `align128(align64(128 + 64·L) + 32·R) + R·B` bytes (see `libgsm/src/fabric/shm/layout.rs`);
//! - with **tcp** (every other rank on another host): `2·2·L·(W−L)` rings (an incoming and an
//!   outgoing shadow ring per remote worker and lane), plus per connection (`L·(N−1)` of them) a
//!   256 KiB read buffer and up to 256 KiB of write buffer, not counted below.
//!
//! For `L` = 16 and the default rings (computed by [`slot_memory`], printed by the subcommand):
//!
//! | ranks × workers | rings in the rank (shm) | shm, per rank | tcp rings | tcp, per rank |
//! |-----------------|-------------------------|---------------|-----------|---------------|
//! | 2 × 16          | 992                     | 63.1 MiB      | 1 504     | 95.7 MiB      |
//! | 64 × 16         | 32 736                  | 2.03 GiB      | 64 992    | 4.04 GiB      |
//! | 1024 × 16       | 524 256                 | 32.6 GiB      | 1 048 032 | 65.1 GiB      |
//!
//! The payload alone is `2·L·W·S·Z` bytes (the runtime's `Config::slot_memory_per_worker` times
//! `L`): 64 MiB, 2 GiB and 32 GiB. Beyond a few hundred workers the all-to-all mesh needs fewer
//! or smaller slots (`Config::slots_per_ring`, `GSM_SLOT_SIZE`).

use crate::case::{Case, Figure};
use crate::peers::Limit;
use crate::report::RankReport;
use crate::stats::summarize;
use gossamer::{
    Config, Promise, Trust, WorkerId, entrust_on, rank, spawn_on, workers_of_rank, yield_now,
};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Options of `gsm-bench remote`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repetitions per figure.
    pub runs: usize,
    /// Timed length of one repetition of one figure.
    pub budget: Duration,
    /// Workers per rank (the first of each rank takes part, the others only serve).
    pub workers: usize,
    /// MiB of the large-record case's argument (0: no such case), see `record.rs`.
    pub record_mib: usize,
    /// Where rank 0's `iperf3 -c` of that case connects to rank 1's `iperf3 -s`.
    pub iperf_host: String,
    /// The `iperf3` program.
    pub iperf3: String,
}

/// Messages per window of the MPI message-rate peers.
pub const WINDOW: usize = 64;
/// A message value that tells the MPI receiver this window (or round trip) is the last.
const STOP: u64 = u64::MAX;
/// The Gossamer streams yield every this many `apply_then`s, so that the worker serves its
/// rings and runs callbacks.
const YIELD_EVERY: u64 = 64;

/// Names of the figures.
mod names {
    pub const MPI_PINGPONG: &str = "mpi pingpong";
    pub const MPI_RATE: &str = "mpi rate";
    pub const MPI_BIRATE: &str = "mpi birate";
    pub const GSM_APPLY: &str = "gsm apply";
    pub const GSM_RATE: &str = "gsm apply_then";
    pub const GSM_RATE_ASYNC: &str = "gsm apply_async";
    pub const GSM_BIRATE: &str = "gsm apply_then both ways";
    pub const GSM_RECORD: &str = "gsm large record";
    pub const IPERF: &str = "iperf3";
}

type Sample = Vec<(&'static str, f64)>;

/// The transports this job runs over, from the environment `gsmrun` and `mpirun` set.
#[derive(Debug, Clone)]
pub struct Transports {
    /// Gossamer's fabric between the two ranks, e.g. `"shm"` or `"tcp"`.
    pub fabric: String,
    /// Open MPI's BTL selection, e.g. `"default"` or `"self,tcp"`.
    pub btl: String,
}

impl Transports {
    /// Reads `GSM_FABRIC` (auto when unset: shm when every rank is on one host, which
    /// `GSM_RANK_HOSTS` tells) and `OMPI_MCA_btl`.
    pub fn from_env() -> Self {
        use gsm_contract::table::{FABRIC, RANK_HOSTS};
        let hosts = gsm_contract::value::<Option<String>>(&RANK_HOSTS);
        let one_host = hosts.is_some_and(|hosts| {
            let mut ids = hosts.split(',');
            let first = ids.next();
            ids.all(|id| Some(id) == first)
        });
        let fabric = match gsm_contract::value::<&str>(&FABRIC) {
            "auto" if one_host => "shm (auto, one host)".to_string(),
            other => other.to_string(),
        };
        let btl = std::env::var("OMPI_MCA_btl")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| "default".to_string());
        Transports { fabric, btl }
    }

    /// The short fabric name for case names (`shm`, `tcp`, `auto`).
    fn fabric_short(&self) -> &str {
        self.fabric.split_whitespace().next().unwrap_or("auto")
    }
}

// ---------------------------------------------------------------------------------------------
// The MPI peers. Every function is called on both ranks; rank 0 returns the figure.
// ---------------------------------------------------------------------------------------------

/// 8-byte ping-pong for `budget`: ns per round trip (on rank 0).
fn mpi_pingpong(world: &SimpleCommunicator, budget: Duration) -> Option<f64> {
    let me = world.rank();
    let other = world.process_at_rank(1 - me);
    world.barrier();
    if me == 0 {
        let start = Instant::now();
        let deadline = start + budget;
        let mut trips = 0u64;
        loop {
            let last = trips % 64 == 63 && Instant::now() >= deadline;
            let msg = if last { STOP } else { trips };
            other.send(&msg);
            let (back, _) = other.receive::<u64>();
            debug_assert_eq!(back, msg);
            trips += 1;
            if last {
                break;
            }
        }
        Some(start.elapsed().as_nanos() as f64 / trips as f64)
    } else {
        loop {
            let (msg, _) = other.receive::<u64>();
            other.send(&msg);
            if msg == STOP {
                break None;
            }
        }
    }
}

/// One window of sends (and, when `recv` is given, receives) in flight at once, all waited for.
fn window(
    other: &mpi::topology::Process<'_>,
    send: Option<&[u64; WINDOW]>,
    recv: Option<&mut [u64; WINDOW]>,
) {
    mpi::request::multiple_scope(2 * WINDOW, |scope, coll| {
        if let Some(recv) = recv {
            for r in recv.iter_mut() {
                coll.add(other.immediate_receive_into(scope, r));
            }
        }
        if let Some(send) = send {
            for s in send {
                coll.add(other.immediate_send(scope, s));
            }
        }
        let mut done = Vec::with_capacity(2 * WINDOW);
        coll.wait_all(&mut done);
    });
}

/// 8-byte message rate, windows of [`WINDOW`] non-blocking sends, one acknowledgement per window:
/// millions of messages per second (on rank 0).
fn mpi_rate(world: &SimpleCommunicator, budget: Duration) -> Option<f64> {
    let me = world.rank();
    let other = world.process_at_rank(1 - me);
    world.barrier();
    if me == 0 {
        let mut send = [0u64; WINDOW];
        let start = Instant::now();
        let deadline = start + budget;
        let mut windows = 0u64;
        loop {
            let last = Instant::now() >= deadline;
            send.fill(if last { STOP } else { windows });
            window(&other, Some(&send), None);
            let (_ack, _) = other.receive::<u64>();
            windows += 1;
            if last {
                break;
            }
        }
        Some((windows * WINDOW as u64) as f64 / start.elapsed().as_secs_f64() / 1e6)
    } else {
        let mut recv = [0u64; WINDOW];
        loop {
            window(&other, None, Some(&mut recv));
            other.send(&1u64);
            if recv[0] == STOP {
                break None;
            }
        }
    }
}

/// Both ranks send windows of [`WINDOW`] 8-byte messages to each other at once: millions of
/// messages (both directions) per second (on rank 0).
fn mpi_birate(world: &SimpleCommunicator, budget: Duration) -> Option<f64> {
    let me = world.rank();
    let other = world.process_at_rank(1 - me);
    let mut send = [1u64; WINDOW];
    let mut recv = [0u64; WINDOW];
    world.barrier();
    let start = Instant::now();
    let deadline = start + budget;
    let mut windows = 0u64;
    loop {
        let last = me == 0 && Instant::now() >= deadline;
        if last {
            send.fill(STOP);
        }
        window(&other, Some(&send), Some(&mut recv));
        windows += 1;
        if last || (me == 1 && recv[0] == STOP) {
            break;
        }
    }
    (me == 0).then(|| (2 * windows * WINDOW as u64) as f64 / start.elapsed().as_secs_f64() / 1e6)
}

fn mpi_once(world: &SimpleCommunicator, budget: Duration) -> Sample {
    let warm = budget / 10;
    let mut out = Vec::new();
    let mut measure = |name, f: fn(&SimpleCommunicator, Duration) -> Option<f64>| {
        f(world, warm);
        if let Some(v) = f(world, budget) {
            out.push((name, v));
        }
    };
    measure(names::MPI_PINGPONG, mpi_pingpong);
    measure(names::MPI_RATE, mpi_rate);
    measure(names::MPI_BIRATE, mpi_birate);
    out
}

// ---------------------------------------------------------------------------------------------
// The Gossamer side, inside one `gossamer::run`; driven from rank 0.
// ---------------------------------------------------------------------------------------------

/// The first worker of `rank`.
fn first_worker_of(rank: usize) -> WorkerId {
    WorkerId::new(workers_of_rank(rank).start)
}

/// Blocking `apply`s to a `u64` on rank 1 for `budget`: ns per apply.
fn gsm_round_trip(budget: Duration) -> f64 {
    let cell: Trust<u64> = entrust_on(first_worker_of(1), || 0u64);
    let bump = |n: &mut u64| {
        *n += 1;
        *n
    };
    let warm = Limit::steps(u64::MAX, Instant::now() + budget / 10, |_| {
        std::hint::black_box(cell.apply(bump));
    });
    let start = Instant::now();
    let trips = Limit::steps(u64::MAX, start + budget, |_| {
        std::hint::black_box(cell.apply(bump));
    });
    let nanos = start.elapsed().as_nanos() as f64;
    let total = cell.apply(|n| *n);
    assert_eq!(
        total,
        warm + trips,
        "gsm-bench remote: the remote counter missed applies"
    );
    nanos / trips as f64
}

/// What one stream of `apply_then`s did: requests issued (= callbacks run) and the nanoseconds
/// from the first to the last callback.
type Streamed = (u64, u64);

/// Streams `apply_then(move |n| *n += k)` to `target` for `budget`, waits for every callback,
/// and checks the counter's final value against the sum of every `k` sent.
fn stream(target: &Trust<u64>, budget: Duration) -> Streamed {
    let done = Rc::new(Cell::new(0u64));
    let start = Instant::now();
    let mut sum = 0u64;
    let issued = Limit::steps(u64::MAX, start + budget, |n| {
        let k = n + 1;
        sum += k;
        let d = done.clone();
        target.apply_then(move |c: &mut u64| *c += k, move |()| d.set(d.get() + 1));
        if n % YIELD_EVERY == YIELD_EVERY - 1 {
            yield_now();
        }
    });
    while done.get() < issued {
        yield_now();
    }
    let nanos = start.elapsed().as_nanos() as u64;
    let total = target.apply(|c| *c);
    assert_eq!(
        total, sum,
        "gsm-bench remote: the remote counter holds {total}, but the {issued} apply_thens sent \
         {sum} in all"
    );
    (issued, nanos)
}

/// [`stream`] with `apply_async`: each answer is a promise, taken from the front of the waiting
/// ones while they are ready (as the callbacks run there), the rest at the end.
fn stream_async(target: &Trust<u64>, budget: Duration) -> Streamed {
    let mut waiting: VecDeque<Promise<()>> = VecDeque::new();
    let start = Instant::now();
    let mut sum = 0u64;
    let issued = Limit::steps(u64::MAX, start + budget, |n| {
        let k = n + 1;
        sum += k;
        waiting.push_back(target.apply_async(move |c: &mut u64| *c += k));
        while waiting.front().is_some_and(Promise::is_ready) {
            waiting.pop_front().map(Promise::wait);
        }
        if n % YIELD_EVERY == YIELD_EVERY - 1 {
            yield_now();
        }
    });
    for p in waiting {
        p.wait();
    }
    let nanos = start.elapsed().as_nanos() as u64;
    let total = target.apply(|c| *c);
    assert_eq!(
        total, sum,
        "gsm-bench remote: the remote counter holds {total}, but the {issued} apply_asyncs sent \
         {sum} in all"
    );
    (issued, nanos)
}

/// A fresh counter on `worker`, a warm-up stream and a timed one, of `apply_async`s.
fn stream_async_to(worker: WorkerId, budget: Duration) -> Streamed {
    let warm: Trust<u64> = entrust_on(worker, || 0u64);
    stream_async(&warm, budget / 10);
    drop(warm);
    let counter: Trust<u64> = entrust_on(worker, || 0u64);
    stream_async(&counter, budget)
}

/// A fresh counter on `worker`, a warm-up stream and a timed one.
fn stream_to(worker: WorkerId, budget: Duration) -> Streamed {
    let warm: Trust<u64> = entrust_on(worker, || 0u64);
    stream(&warm, budget / 10);
    drop(warm);
    let counter: Trust<u64> = entrust_on(worker, || 0u64);
    stream(&counter, budget)
}

fn rate((ops, nanos): Streamed) -> f64 {
    ops as f64 / (nanos as f64 / 1e9) / 1e6
}

/// Rank 0's part of one repetition: every Gossamer figure once (the large record's when
/// `record` bytes is not 0).
fn gsm_figures(budget: Duration, record: usize) -> Sample {
    let latency = gsm_round_trip(budget);
    let one_way = rate(stream_to(first_worker_of(1), budget));
    let one_way_async = rate(stream_async_to(first_worker_of(1), budget));
    // Both ways: a fiber on rank 1 streams into a counter on rank 0 while this fiber streams
    // into one on rank 1.
    let back = spawn_on(first_worker_of(1), move || {
        stream_to(first_worker_of(0), budget)
    });
    let (ops0, nanos0) = stream_to(first_worker_of(1), budget);
    let (ops1, nanos1) = back.join();
    let both = (ops0 + ops1) as f64 / (nanos0.max(nanos1) as f64 / 1e9) / 1e6;
    let mut out = vec![
        (names::GSM_APPLY, latency),
        (names::GSM_RATE, one_way),
        (names::GSM_RATE_ASYNC, one_way_async),
        (names::GSM_BIRATE, both),
    ];
    if record > 0 {
        let sink: Trust<u64> = entrust_on(first_worker_of(1), || 0u64);
        out.push((
            names::GSM_RECORD,
            crate::record::gsm_rate(&sink, record, budget),
        ));
    }
    out
}

/// One `gossamer::run` (collective): rank 0 measures, rank 1 serves.
fn gsm_once(config: &Config, budget: Duration, record: usize) -> anyhow::Result<Sample> {
    gossamer::run(config.clone(), move || {
        if rank() == 0 {
            gsm_figures(budget, record)
        } else {
            Vec::new()
        }
    })
    .map_err(|e| anyhow::anyhow!("the gossamer runtime failed: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Slot memory.
// ---------------------------------------------------------------------------------------------

/// Ring memory of one rank (see the module docs for the formulas).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotMemory {
    /// Ranks in the job.
    pub ranks: u64,
    /// Workers per rank.
    pub workers: u64,
    /// Rings the rank holds when every rank is on one host (shm).
    pub shm_rings: u64,
    /// Bytes of those rings, the shm segment's header and table included.
    pub shm_bytes: u64,
    /// Rings the rank holds when every other rank is on another host (tcp).
    pub tcp_rings: u64,
    /// Bytes of those rings.
    pub tcp_bytes: u64,
}

fn align_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

/// The ring memory of one rank of `ranks` × `workers`, with rings of `ring_bytes` bytes.
pub fn slot_memory(ranks: u64, workers: u64, ring_bytes: u64) -> SlotMemory {
    let l = workers;
    let w = ranks * l;
    let local = 2 * l * (l - 1);
    let remote = 2 * l * (w - l);
    let segment = align_up(align_up(128 + 64 * l, 64) + 32 * remote, 128) + remote * ring_bytes;
    SlotMemory {
        ranks,
        workers,
        shm_rings: local + remote,
        shm_bytes: local * ring_bytes + segment,
        tcp_rings: local + 2 * remote,
        tcp_bytes: (local + 2 * remote) * ring_bytes,
    }
}

/// The bytes of one ring with the runtime's default geometry.
fn default_ring_bytes() -> u64 {
    let c = Config::default();
    gossamer::wire::ring::RingLayout::new(c.slots_per_ring as u32, c.slot_size as u32)
        .map(|l| l.bytes() as u64)
        .unwrap_or(0)
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    let gib = b / (1u64 << 30) as f64;
    if gib >= 10.0 {
        format!("{gib:.1} GiB")
    } else if gib >= 1.0 {
        format!("{gib:.2} GiB")
    } else {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    }
}

/// The slot-memory lines the subcommand prints.
pub fn slot_memory_table() -> String {
    let c = Config::default();
    let b = default_ring_bytes();
    let mut out = format!(
        "slot memory per rank (computed; {} slots × {} B per ring, {} B per ring with headers; \
         shm: every rank on one host, tcp: every other rank on another host):\n",
        c.slots_per_ring, c.slot_size, b
    );
    for ranks in [2, 64, 1024] {
        let m = slot_memory(ranks, 16, b);
        out.push_str(&format!(
            "  {ranks:>4} ranks × 16 workers: shm {:>7} rings {:>10}   tcp {:>7} rings {:>10}\n",
            m.shm_rings,
            human(m.shm_bytes),
            m.tcp_rings,
            human(m.tcp_bytes)
        ));
    }
    out
}

/// The tcp connections of one rank and the bytes it sets aside for them, with `hosts` hosts of
/// `ranks` ranks of `workers` workers each (tcp between hosts, shm within).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connections {
    /// Sockets of the rank with one-way connections (`GSM_TCP_TWO_WAY=0`): one per (local
    /// worker, remote rank) out, one from every remote worker in.
    pub one_way: u64,
    /// Sockets of the rank with `GSM_TCP_PER_HOST=0`: one two-way connection per pair of
    /// workers with the same index between two ranks (equal worker counts: one per (local
    /// worker, remote rank)).
    pub per_rank: u64,
    /// Sockets of the rank as built: one two-way connection per (local worker, remote host)
    /// (equal worker counts per host).
    pub per_host: u64,
    /// Bytes the rank registers for tcp with `GSM_TCP_PER_HOST=0`: its incoming and shadow
    /// rings, and a read and a write buffer per connection.
    pub bytes: u64,
    /// The same as built: the same rings (the ones another rank of the host fills are in this
    /// rank's tcp segment), buffers for fewer connections.
    pub bytes_per_host: u64,
}

/// Read and write buffer of one connection (`WRITE_LIMIT`, and the read buffer's floor).
const CONN_BUFFER: u64 = 256 * 1024;

/// [`Connections`] for `hosts` × `ranks` × `workers`, rings of `ring_bytes`.
pub fn connections(hosts: u64, ranks: u64, workers: u64, ring_bytes: u64) -> Connections {
    let remote_ranks = (hosts - 1) * ranks;
    let remote_workers = remote_ranks * workers;
    let per_rank = workers * remote_ranks;
    let per_host = workers * (hosts - 1);
    let rings = 2 * 2 * workers * remote_workers * ring_bytes;
    Connections {
        one_way: workers * remote_ranks + remote_workers,
        per_rank,
        per_host,
        bytes: rings + 2 * per_rank * CONN_BUFFER,
        bytes_per_host: rings + 2 * per_host * CONN_BUFFER,
    }
}

/// The connection lines the subcommand prints: for this job (`hosts` × `ranks` × `workers`),
/// and for 64 and 1,024 hosts of 16 workers each, as one rank of 16 or four ranks of 4.
pub fn connection_table(hosts: u64, ranks: u64, workers: u64) -> String {
    let b = default_ring_bytes();
    let mut out = String::from(
        "tcp connections per rank (computed; built: one two-way per (worker, remote host); \
         per rank (GSM_TCP_PER_HOST=0): one two-way per pair of workers of the same index \
         between two ranks; one-way: one per (worker, remote rank) out and one from each remote \
         worker in):\n",
    );
    let cases = [
        (hosts, ranks, workers, "this job"),
        (64, 1, 16, ""),
        (64, 4, 4, ""),
        (1024, 1, 16, ""),
        (1024, 4, 4, ""),
    ];
    for (h, r, w, what) in cases {
        if h < 2 {
            out.push_str(&format!(
                "  {what}: one host, no tcp connection between hosts (--fabric tcp: every rank \
                 is a peer)\n"
            ));
            continue;
        }
        let c = connections(h, r, w, b);
        out.push_str(&format!(
            "  {h:>4} hosts × {r} rank(s) × {w:>2} workers{}: built {:>6} connections, {:>10} \
             registered; per rank {:>6}, {:>10}; one-way {:>6}\n",
            if what.is_empty() {
                String::new()
            } else {
                format!(" ({what})")
            },
            c.per_host,
            human(c.bytes_per_host),
            c.per_rank,
            human(c.bytes),
            c.one_way,
        ));
    }
    out
}

/// Hosts, ranks per host of this job, from `GSM_RANK_HOSTS` (one host id per rank); with
/// `--fabric tcp` on one host every rank counts as its own host.
fn job_shape(ranks: u64) -> (u64, u64) {
    let ids: Vec<String> = gsm_contract::value::<Option<String>>(&gsm_contract::table::RANK_HOSTS)
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let tcp = gsm_contract::value::<&str>(&gsm_contract::table::FABRIC) == "tcp";
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    if tcp || distinct.is_empty() {
        (ranks, 1)
    } else {
        let h = distinct.len() as u64;
        (h, ranks / h)
    }
}

// ---------------------------------------------------------------------------------------------
// The subcommand.
// ---------------------------------------------------------------------------------------------

/// Runs every repetition on every rank; rank 0 prints the report (`--json`: also to that file).
/// MPI is initialised here and finalised before this returns. Whether this process printed.
pub fn run(opts: &Options, json: Option<&std::path::Path>) -> anyhow::Result<bool> {
    crate::report::mpi_job(json, |world| run_in(world, opts))
}

fn run_in(world: &SimpleCommunicator, opts: &Options) -> anyhow::Result<Option<RankReport>> {
    if world.size() != 2 {
        anyhow::bail!(
            "`gsm-bench remote` needs exactly 2 ranks, this job has {}: run it as \
             `gsmrun -np 2 gsm-bench remote` (add --oversubscribe on a 1-CPU machine)",
            world.size()
        );
    }
    let me = world.rank();
    let transports = Transports::from_env();
    let config = Config::from_env()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .workers(opts.workers);
    let mut samples: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for run in 0..opts.runs {
        if me == 0 {
            crate::report::run_progress("remote", run, opts.runs);
        }
        let record = opts.record_mib << 20;
        for (name, v) in
            mpi_once(world, opts.budget)
                .into_iter()
                .chain(gsm_once(&config, opts.budget, record)?)
        {
            samples.entry(name).or_default().push(v);
        }
        if record > 0 {
            if let Some(g) = crate::record::iperf(world, &opts.iperf3, &opts.iperf_host) {
                samples.entry(names::IPERF).or_default().push(g);
            }
        }
    }
    if me != 0 {
        return Ok(None);
    }
    crate::report::progress_done();
    let s = |name: &str| samples.get(name).and_then(|v| summarize(v));
    let fabric = transports.fabric_short().to_string();
    let btl = transports.btl.clone();
    let case =
        |what: &str, unit: &str, higher: bool, gsm: &str, peer: String, peer_name: &str| Case {
            case: format!("{what} [gsm {fabric}]"),
            unit: unit.to_string(),
            higher_is_better: higher,
            gsm: s(gsm),
            peers: vec![Figure {
                name: format!("{peer} [MPI btl {btl}]"),
                summary: s(peer_name),
            }],
        };
    let mut cases = vec![
        case(
            "round trip: blocking apply on a u64 on rank 1",
            "ns",
            false,
            names::GSM_APPLY,
            "MPI 8-byte ping-pong round trip".into(),
            names::MPI_PINGPONG,
        ),
        case(
            "throughput: apply_then, 8-byte capture, rank 0 → rank 1",
            "M/s",
            true,
            names::GSM_RATE,
            format!("MPI 8-byte message rate, window of {WINDOW}"),
            names::MPI_RATE,
        ),
        case(
            "throughput: apply_then both ways at once",
            "M/s",
            true,
            names::GSM_BIRATE,
            format!("MPI 8-byte messages both ways, window of {WINDOW}"),
            names::MPI_BIRATE,
        ),
    ];
    // The promises' rate beside apply_then's, which is their peer here.
    cases.insert(
        2,
        Case {
            case: format!("throughput: apply_async (promises), rank 0 → rank 1 [gsm {fabric}]"),
            unit: "M/s".into(),
            higher_is_better: true,
            gsm: s(names::GSM_RATE_ASYNC),
            peers: vec![Figure {
                name: format!("gsm apply_then, the same stream [gsm {fabric}]"),
                summary: s(names::GSM_RATE),
            }],
        },
    );
    if opts.record_mib > 0 {
        cases.push(Case {
            case: format!(
                "bandwidth: apply_with of a {} MiB record, rank 0 → rank 1 [gsm {fabric}]",
                opts.record_mib
            ),
            unit: "Gbit/s".into(),
            higher_is_better: true,
            gsm: s(names::GSM_RECORD),
            peers: vec![Figure {
                name: format!("iperf3 -c {} (1 s)", opts.iperf_host),
                summary: s(names::IPERF),
            }],
        });
    }
    let (hosts, per_host) = job_shape(2);
    let header = format!(
        "gsm-bench remote: 2 ranks × {} worker(s), {} runs of {} ms per figure\n\
         gossamer fabric: {}\nMPI: {}, OMPI_MCA_btl={} ({})\n{}{}",
        opts.workers,
        opts.runs,
        opts.budget.as_millis(),
        transports.fabric,
        mpi::environment::library_version()
            .ok()
            .and_then(|v| v.split([',', '\n']).next().map(str::to_string))
            .unwrap_or_else(|| "unknown version".into()),
        transports.btl,
        if transports.btl == "default" {
            "Open MPI's default transports: vader shared memory between ranks on one host"
        } else {
            "transports restricted to these BTLs"
        },
        slot_memory_table(),
        connection_table(hosts, per_host, opts.workers as u64)
    );
    Ok(Some(RankReport { cases, header }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rings_are_66688_bytes() {
        assert_eq!(default_ring_bytes(), 128 + 16 * (4096 + 64));
    }

    #[test]
    fn slot_memory_of_the_documented_cases() {
        let b = 66_688;
        let two = slot_memory(2, 16, b);
        assert_eq!(two.shm_rings, 992);
        assert_eq!(two.tcp_rings, 1504);
        // 480 heap rings + a segment of 512 rings with its header (1152 B) and table (16 KiB).
        assert_eq!(two.shm_bytes, 480 * b + 1152 + 512 * 32 + 512 * b);
        assert_eq!(human(two.shm_bytes), "63.1 MiB");
        assert_eq!(human(two.tcp_bytes), "95.7 MiB");
        let m64 = slot_memory(64, 16, b);
        assert_eq!((m64.shm_rings, m64.tcp_rings), (32_736, 64_992));
        assert_eq!(human(m64.shm_bytes), "2.03 GiB");
        assert_eq!(human(m64.tcp_bytes), "4.04 GiB");
        let m1024 = slot_memory(1024, 16, b);
        assert_eq!((m1024.shm_rings, m1024.tcp_rings), (524_256, 1_048_032));
        assert_eq!(human(m1024.shm_bytes), "32.6 GiB");
        assert_eq!(human(m1024.tcp_bytes), "65.1 GiB");
    }

    #[test]
    fn connections_of_the_documented_cases() {
        // 2 hosts × 2 ranks × 2 workers: one-way, 2 workers × 2 remote ranks out and 4 remote
        // workers in; two-way per rank, 2 × 2; by host, 2 × 1 (`tests/tests/two_hosts.rs`
        // counts 4 and 8 for the job).
        let c = connections(2, 2, 2, 100);
        assert_eq!((c.one_way, c.per_rank, c.per_host), (8, 4, 2));
        assert_eq!(c.bytes, 4 * 2 * 4 * 100 + 2 * 4 * 256 * 1024);
        assert_eq!(c.bytes_per_host, 4 * 2 * 4 * 100 + 2 * 2 * 256 * 1024);
        let k4 = connections(1024, 4, 4, 100);
        assert_eq!((k4.per_rank, k4.per_host), (4 * 4 * 1023, 4 * 1023));
        // One rank per host: built and design are the same, half the one-way count.
        let m = connections(64, 1, 16, 100);
        assert_eq!(
            (m.one_way, m.per_rank, m.per_host),
            (2 * 16 * 63, 16 * 63, 16 * 63)
        );
        let k = connections(1024, 1, 16, 100);
        assert_eq!(k.per_rank, 16 * 1023);
    }

    #[test]
    fn one_worker_per_rank_has_no_local_rings() {
        let m = slot_memory(2, 1, 100);
        assert_eq!(m.shm_rings, 2);
        assert_eq!(m.tcp_rings, 4);
        assert_eq!(m.tcp_bytes, 400);
    }
}
