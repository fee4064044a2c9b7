//! `gsm-bench local`: Gossamer's delegation within one process against shared-memory peers, on
//! two workers / two threads, each figure the median of `--runs` repetitions.
//!
//! Cases: a contended `u64` counter (`apply_then`; `apply_async`, whose promises are shown
//! beside `apply_then` as their peer; blocking `apply` with 1 and with 64 fibers per worker) against `std::sync::Mutex`, `parking_lot::Mutex`, `AtomicU64::fetch_add` and
//! a crossbeam-channel server thread; the thesis's shared `HashMap<u64, u64>` (50 % inserts, 50 %
//! lookups, keys uniform in `0..1<<16`, seeded, prefilled with the even keys) against
//! `Mutex<HashMap>` and `dashmap`, with one thread alone on an unshared map beside them as the
//! bound of any design that keeps the map with one owner; and the latency of one blocking `apply`
//! to the other worker against the cache-line round trip of two threads ping-ponging an
//! `AtomicU64`.
//!
//! The counter lives on worker 0, so worker 0's applies run inline and only worker 1's cross
//! workers; each counter case therefore also has a row with worker 1's part alone (no peer), the
//! rate at which requests actually crossed.
//!
//! Every repetition measures every figure once, in the same order, so slow phases of this shared
//! machine spread over all figures instead of landing on one. Each repetition of a figure stops at
//! `--ops` operations or after `--budget-ms`, whichever comes first, and its rate counts the
//! operations actually done. On a machine whose load is above its core count the two threads of a
//! peer often do not run at the same time, so lock-based peers then look uncontended (and fast);
//! the load average is printed beside the table for that reason. On the 2-vCPU development
//! machines the figures also switch between levels over time, from one runtime to the next and
//! sometimes within one, with the cost of moving a cache line between the two vCPUs (the
//! ping-pong peer shows the level), and in the slow phases the Gossamer counter cases, which move
//! batches between the vCPUs, drop more than the peers. Address-space randomisation is not the
//! cause (`setarch -R` runs show both levels).
//! Compare builds by alternating several processes of each, or two variants within one process
//! in A-B-B-A order, not by one run, and read each Gossamer figure against the peers of the same
//! run. The Gossamer side is the default `gossamer` feature (see `gsm.rs`); built without it, the
//! cases show the peers alone.

use crate::case::{Case, Figure};
use crate::peers;
use crate::stats::summarize;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::peers::Limit;

/// Options of `gsm-bench local`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repetitions per figure.
    pub runs: usize,
    /// At most this many operations per throughput repetition, over both threads; latency cases
    /// do at most `ops / 10` round trips.
    pub ops: u64,
    /// Each repetition of each figure stops issuing work after this long.
    pub budget: Duration,
    /// Seed of the map workload.
    pub seed: u64,
}

/// What one repetition measured: figure name → value.
type Sample = Vec<(&'static str, f64)>;

/// Names of the figures.
mod names {
    pub const STD_MUTEX: &str = "std::sync::Mutex";
    pub const PARKING_LOT: &str = "parking_lot::Mutex";
    pub const FETCH_ADD: &str = "AtomicU64::fetch_add";
    pub const CHANNEL: &str = "crossbeam-channel server (32 in flight)";
    pub const MAP_MUTEX: &str = "Mutex<HashMap>";
    pub const MAP_DASHMAP: &str = "dashmap::DashMap";
    pub const MAP_ONE_THREAD: &str = "one thread, unshared HashMap (bound of one owner)";
    pub const PINGPONG: &str = "cache-line round trip (AtomicU64 ping-pong)";
    pub const GSM_APPLY_THEN: &str = "gsm counter apply_then";
    pub const GSM_APPLY_ASYNC: &str = "gsm counter apply_async";
    pub const GSM_APPLY_ASYNC_REMOTE: &str = "gsm counter apply_async, worker 1 only";
    pub const GSM_APPLY_1: &str = "gsm counter apply 1 fiber/worker";
    pub const GSM_APPLY_64: &str = "gsm counter apply 64 fibers/worker";
    pub const GSM_APPLY_THEN_REMOTE: &str = "gsm counter apply_then, worker 1 only";
    pub const GSM_APPLY_1_REMOTE: &str = "gsm counter apply 1 fiber/worker, worker 1 only";
    pub const GSM_APPLY_64_REMOTE: &str = "gsm counter apply 64 fibers/worker, worker 1 only";
    pub const GSM_MAP_ONE: &str = "gsm map one trust";
    pub const GSM_MAP_SHARDED: &str = "gsm map sharded";
    pub const GSM_LATENCY: &str = "gsm apply latency";
}

impl Options {
    fn limit(&self) -> Limit {
        Limit {
            max_ops: self.ops,
            budget: self.budget,
        }
    }

    fn latency_limit(&self) -> Limit {
        Limit {
            max_ops: (self.ops / 10).max(1),
            budget: self.budget,
        }
    }
}

fn peers_once(opts: &Options, run: usize) -> Sample {
    let seed = opts.seed.wrapping_add(run as u64);
    let limit = opts.limit();
    vec![
        (names::STD_MUTEX, peers::counter_std_mutex(limit)),
        (names::PARKING_LOT, peers::counter_parking_lot(limit)),
        (names::FETCH_ADD, peers::counter_fetch_add(limit)),
        (names::CHANNEL, peers::counter_channel_server(limit)),
        (names::MAP_MUTEX, peers::map_mutex(limit, seed)),
        (names::MAP_DASHMAP, peers::map_dashmap(limit, seed)),
        (names::MAP_ONE_THREAD, peers::map_one_thread(limit, seed)),
        (names::PINGPONG, peers::pingpong(opts.latency_limit())),
    ]
}

#[cfg(feature = "gossamer")]
fn gsm_once(opts: &Options, run: usize) -> anyhow::Result<Sample> {
    let f = crate::gsm::measure_once(
        opts.limit(),
        opts.latency_limit(),
        opts.seed.wrapping_add(run as u64),
    )?;
    Ok(vec![
        (names::GSM_APPLY_THEN, f.apply_then.total),
        (names::GSM_APPLY_THEN_REMOTE, f.apply_then.remote),
        (names::GSM_APPLY_ASYNC, f.apply_async.total),
        (names::GSM_APPLY_ASYNC_REMOTE, f.apply_async.remote),
        (names::GSM_APPLY_1, f.apply_1.total),
        (names::GSM_APPLY_1_REMOTE, f.apply_1.remote),
        (names::GSM_APPLY_64, f.apply_64.total),
        (names::GSM_APPLY_64_REMOTE, f.apply_64.remote),
        (names::GSM_MAP_ONE, f.map_one),
        (names::GSM_MAP_SHARDED, f.map_sharded),
        (names::GSM_LATENCY, f.latency),
    ])
}

#[cfg(not(feature = "gossamer"))]
fn gsm_once(_opts: &Options, _run: usize) -> anyhow::Result<Sample> {
    Ok(Vec::new())
}

/// Runs every repetition and returns the cases, ready for [`crate::report::emit`].
pub fn run(opts: &Options) -> anyhow::Result<Vec<Case>> {
    let mut samples: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for run in 0..opts.runs {
        crate::report::run_progress("local", run, opts.runs);
        for (name, value) in gsm_once(opts, run)?
            .into_iter()
            .chain(peers_once(opts, run))
        {
            samples.entry(name).or_default().push(value);
        }
    }
    crate::report::progress_done();
    if !cfg!(feature = "gossamer") {
        eprintln!(
            "gsm-bench local: built without the `gossamer` feature, so only the peers were measured \
             (it is a default feature; this binary was built with --no-default-features)"
        );
    }
    let fig = |name: &str| Figure {
        name: name.to_string(),
        summary: samples.get(name).and_then(|s| summarize(s)),
    };
    let gsm = |name: &str| samples.get(name).and_then(|s| summarize(s));
    let counter_peers = || {
        [
            names::STD_MUTEX,
            names::PARKING_LOT,
            names::FETCH_ADD,
            names::CHANNEL,
        ]
        .map(fig)
        .to_vec()
    };
    let case = |case: &str, unit: &str, higher: bool, gsm_name: &str, peers: Vec<Figure>| Case {
        case: case.to_string(),
        unit: unit.to_string(),
        higher_is_better: higher,
        gsm: gsm(gsm_name),
        peers,
    };
    Ok(vec![
        case(
            "counter: apply_then (async)",
            "Mops/s",
            true,
            names::GSM_APPLY_THEN,
            counter_peers(),
        ),
        case(
            "counter: apply_then (async): worker 1's share (all remote)",
            "Mops/s",
            true,
            names::GSM_APPLY_THEN_REMOTE,
            vec![],
        ),
        case(
            "counter: apply_async (promises), beside apply_then",
            "Mops/s",
            true,
            names::GSM_APPLY_ASYNC,
            vec![fig(names::GSM_APPLY_THEN)],
        ),
        case(
            "counter: apply_async (promises): worker 1's share, beside apply_then's",
            "Mops/s",
            true,
            names::GSM_APPLY_ASYNC_REMOTE,
            vec![fig(names::GSM_APPLY_THEN_REMOTE)],
        ),
        case(
            "counter: apply, 1 fiber/worker",
            "Mops/s",
            true,
            names::GSM_APPLY_1,
            counter_peers(),
        ),
        case(
            "counter: apply, 1 fiber/worker: worker 1's share (all remote)",
            "Mops/s",
            true,
            names::GSM_APPLY_1_REMOTE,
            vec![],
        ),
        case(
            "counter: apply, 64 fibers/worker",
            "Mops/s",
            true,
            names::GSM_APPLY_64,
            counter_peers(),
        ),
        case(
            "counter: apply, 64 fibers/worker: worker 1's share (all remote)",
            "Mops/s",
            true,
            names::GSM_APPLY_64_REMOTE,
            vec![],
        ),
        case(
            "map 50/50: one trust (on worker 0)",
            "Mops/s",
            true,
            names::GSM_MAP_ONE,
            vec![
                fig(names::MAP_MUTEX),
                fig(names::MAP_DASHMAP),
                fig(names::MAP_ONE_THREAD),
            ],
        ),
        case(
            "map 50/50: sharded by key over 2 workers",
            "Mops/s",
            true,
            names::GSM_MAP_SHARDED,
            vec![fig(names::MAP_DASHMAP), fig(names::MAP_MUTEX)],
        ),
        case(
            "latency: blocking apply to the other worker",
            "ns",
            false,
            names::GSM_LATENCY,
            vec![fig(names::PINGPONG)],
        ),
    ])
}
