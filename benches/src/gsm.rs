//! The Gossamer side of `gsm-bench local`: the same workloads as `peers.rs`, done by delegating
//! closures to trustees on a 2-worker `gossamer` runtime.
//!
//! One call of [`measure_once`] starts a runtime, measures every Gossamer figure once and stops
//! it. Each figure is timed on the main fiber (worker 0), from spawning the client fibers to
//! joining the last one. Where the data lives:
//! - counter: one `Trust<u64>` entrusted on worker 0; one client fiber (or 64) on each worker, so
//!   half the requests run inline on the trustee and half cross from worker 1 through the
//!   request slots;
//! - map, one trust: one `HashMap<u64, u64>` on worker 0 (the fair peer of one `Mutex<HashMap>`);
//! - map, sharded: one map per worker, key `k` lives on worker `k % 2`, each map sized for its half
//!   of the keys (the peer closest in spirit is `dashmap`, itself sharded, whose shards are sized
//!   the same way);
//! - latency: one fiber on worker 1 doing blocking `apply`s one after another to a trust on
//!   worker 0, so each is a full round trip; nanoseconds per apply.
//!
//! Every client loop yields every [`YIELD_EVERY`] operations, as the runtime asks of long loops.
//! Both map cases and the `apply_then` counter keep every request in flight that the runtime
//! accepts (no window of ours); completions are counted by the callbacks on the client's worker.
//!
//! `spawn_on` ships only `NoRef` closures, and a `Trust` is not `Copy`, so client fibers find
//! their trust in a per-worker stash (a thread-local of the worker thread), filled beforehand by a
//! delegated `apply_with` that moves a clone of the trust to that worker. This module does not
//! compare anything; `local.rs` pairs these figures with the peers'.

use crate::peers::{KEY_RANGE, Limit, SplitMix, THREADS, map_op};
use gossamer::{Config, Promise, Trust, WorkerId, entrust, entrust_on, spawn_on, yield_now};
use std::any::Any;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// Fibers per worker in the "64 fibers" case.
const FIBERS: usize = 64;

/// Client loops yield every this many operations. Requests to a property on the caller's own
/// worker run inline without polling, so a loop that never yields would keep its worker from
/// serving the other worker's requests (the runtime's rule: "yield in long loops").
const YIELD_EVERY: u64 = 64;

/// Yields when `n` is a multiple of [`YIELD_EVERY`].
#[inline]
fn maybe_yield(n: u64) {
    if n % YIELD_EVERY == YIELD_EVERY - 1 {
        yield_now();
    }
}

type Map = HashMap<u64, u64>;

thread_local! {
    /// The trust(s) client fibers of the current case use on this worker.
    static STASH: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Puts `value` (trusts, moved by `apply_with`) in `worker`'s stash.
fn stash_on<V: gossamer::Wire>(worker: usize, value: V) {
    let here = entrust_on(WorkerId::new(worker), || ());
    here.apply_with(value, |_: &mut (), v: V| {
        STASH.with(|s| *s.borrow_mut() = Some(Box::new(v)));
    });
}

/// Empties every worker's stash, dropping the trusts it held.
fn clear_stashes() {
    for w in 0..THREADS {
        let here = entrust_on(WorkerId::new(w), || ());
        here.apply(|_: &mut ()| {
            STASH.with(|s| s.borrow_mut().take());
        });
    }
}

/// A clone of what this worker's stash holds.
fn stashed<V: Clone + 'static>() -> V {
    STASH.with(|s| {
        s.borrow()
            .as_ref()
            .and_then(|b| b.downcast_ref::<V>())
            .cloned()
            .expect("gsm-bench: the worker's stash does not hold this case's trust")
    })
}

thread_local! {
    /// Completed `apply_then` callbacks of this worker. Callbacks run on the worker that issued
    /// the request, and `wait_done` runs there too, so a plain cell suffices (no atomic).
    static DONE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn reset_done() {
    for w in 0..THREADS {
        let here = entrust_on(WorkerId::new(w), || ());
        here.apply(|_: &mut ()| DONE.with(|d| d.set(0)));
    }
}

/// Yields until `expected` callbacks have run on this worker.
fn wait_done(expected: u64) {
    while DONE.with(|d| d.get()) < expected {
        yield_now();
    }
}

#[inline]
fn done() {
    DONE.with(|d| d.set(d.get() + 1));
}

fn mops(ops: u64, seconds: f64) -> f64 {
    ops as f64 / seconds / 1e6
}

/// Runs `body(worker, deadline)` on `fibers` fibers per worker; returns the operations they
/// report in total and the seconds until all have been joined.
fn timed<F>(fibers: usize, limit: Limit, body: F) -> Timed
where
    F: Fn(usize, Instant) -> u64 + Copy + Send + 'static,
{
    let start = Instant::now();
    let deadline = start + limit.budget;
    let handles: Vec<_> = (0..THREADS)
        .flat_map(|w| (0..fibers).map(move |_| w))
        .map(|w| spawn_on(WorkerId::new(w), move || body(w, deadline)))
        .collect();
    let mut per_worker = [0u64; THREADS];
    for (i, h) in handles.into_iter().enumerate() {
        per_worker[i / fibers] += h.join();
    }
    Timed {
        ops: per_worker.iter().sum(),
        remote_ops: per_worker[1],
        secs: start.elapsed().as_secs_f64(),
    }
}

/// What [`timed`] measured: operations in all, those issued on worker 1 (whose requests to a
/// trust on worker 0 all cross workers), and the seconds taken.
#[derive(Debug, Clone, Copy)]
struct Timed {
    ops: u64,
    remote_ops: u64,
    secs: f64,
}

/// A counter figure: the rate over both workers, and worker 1's (remote) part of it.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// Mops/s over both workers.
    pub total: f64,
    /// Mops/s of the clients on worker 1.
    pub remote: f64,
}

impl Timed {
    fn rates(self) -> Rates {
        Rates {
            total: mops(self.ops, self.secs),
            remote: mops(self.remote_ops, self.secs),
        }
    }
}

fn share<V: gossamer::Wire + Clone>(value: &V) {
    for w in 0..THREADS {
        stash_on(w, value.clone());
    }
}

fn per_fiber(limit: Limit, fibers: usize) -> u64 {
    (limit.max_ops / (THREADS * fibers) as u64).max(1)
}

fn counter_apply_then(limit: Limit) -> Rates {
    let counter: Trust<u64> = entrust(0);
    share(&counter);
    let per = per_fiber(limit, 1);
    reset_done();
    let timing = timed(1, limit, move |_, deadline| {
        let t: Trust<u64> = stashed();
        let issued = Limit::steps(per, deadline, |n| {
            maybe_yield(n);
            t.apply_then(
                |c: &mut u64| {
                    *c += 1;
                    *c
                },
                |_: u64| done(),
            );
        });
        wait_done(issued);
        issued
    });
    clear_stashes();
    assert_eq!(counter.apply(|c: &mut u64| *c), timing.ops);
    timing.rates()
}

/// The counter by `apply_async`, as [`counter_apply_then`] but each request's answer a promise:
/// the promises wait in issue order, and those at the front that are ready are taken as the loop
/// goes (as the callbacks run there), the rest at the end.
fn counter_apply_async(limit: Limit) -> Rates {
    let counter: Trust<u64> = entrust(0);
    share(&counter);
    let per = per_fiber(limit, 1);
    let timing = timed(1, limit, move |_, deadline| {
        let t: Trust<u64> = stashed();
        let mut waiting: VecDeque<Promise<u64>> = VecDeque::new();
        let issued = Limit::steps(per, deadline, |n| {
            maybe_yield(n);
            waiting.push_back(t.apply_async(|c: &mut u64| {
                *c += 1;
                *c
            }));
            while waiting.front().is_some_and(Promise::is_ready) {
                std::hint::black_box(waiting.pop_front().map(Promise::wait));
            }
        });
        for p in waiting {
            std::hint::black_box(p.wait());
        }
        issued
    });
    clear_stashes();
    assert_eq!(counter.apply(|c: &mut u64| *c), timing.ops);
    timing.rates()
}

fn counter_apply(limit: Limit, fibers: usize) -> Rates {
    let counter: Trust<u64> = entrust(0);
    share(&counter);
    let per = per_fiber(limit, fibers);
    let timing = timed(fibers, limit, move |_, deadline| {
        let t: Trust<u64> = stashed();
        Limit::steps(per, deadline, |n| {
            maybe_yield(n);
            std::hint::black_box(t.apply(|c: &mut u64| {
                *c += 1;
                *c
            }));
        })
    });
    clear_stashes();
    assert_eq!(counter.apply(|c: &mut u64| *c), timing.ops);
    timing.rates()
}

/// The map of the map cases, half its keys present: the whole key range (`shard` `None`), or the
/// keys of one shard. A shard is sized for its share of the keys, as `DashMap::with_capacity`
/// sizes its shards, so that all maps of every case and peer take the same memory in total.
fn prefilled_map(shard: Option<u64>) -> Map {
    let keys = KEY_RANGE as usize / if shard.is_some() { THREADS } else { 1 };
    let mut map = HashMap::with_capacity(keys);
    for k in (0..KEY_RANGE).step_by(2) {
        if shard.is_none_or(|s| k % THREADS as u64 == s) {
            map.insert(k, k);
        }
    }
    map
}

/// The map workload through `apply_then` to `shards` (one trust, or one per worker).
fn map_delegated(limit: Limit, seed: u64, shards: Vec<Trust<Map>>) -> f64 {
    share(&shards);
    let per = per_fiber(limit, 1);
    reset_done();
    let timing = timed(1, limit, move |w, deadline| {
        let shards: Vec<Trust<Map>> = stashed();
        let mut rng = SplitMix::new(seed, w as u64);
        let issued = Limit::steps(per, deadline, |n| {
            maybe_yield(n);
            let (key, insert) = map_op(&mut rng);
            let shard = &shards[(key % shards.len() as u64) as usize];
            if insert {
                shard.apply_then(
                    move |m: &mut Map| {
                        m.insert(key, n);
                        true
                    },
                    |_: bool| done(),
                );
            } else {
                shard.apply_then(move |m: &mut Map| m.contains_key(&key), |_: bool| done());
            }
        });
        wait_done(issued);
        issued
    });
    clear_stashes();
    timing.rates().total
}

fn latency(limit: Limit) -> f64 {
    let cell: Trust<u64> = entrust(0);
    stash_on(1, cell.clone());
    let (trips, nanos) = spawn_on(WorkerId::new(1), move || {
        let t: Trust<u64> = stashed();
        let start = Instant::now();
        let trips = Limit::steps(limit.max_ops, start + limit.budget, |_| {
            std::hint::black_box(t.apply(|c: &mut u64| {
                *c += 1;
                *c
            }));
        });
        (trips, start.elapsed().as_nanos() as u64)
    })
    .join();
    clear_stashes();
    assert_eq!(cell.apply(|c: &mut u64| *c), trips);
    nanos as f64 / trips as f64
}

/// Every Gossamer figure of one repetition.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// The counter by `apply_then`, every request in flight the runtime accepts.
    pub apply_then: Rates,
    /// The counter by `apply_async`, every request in flight the runtime accepts.
    pub apply_async: Rates,
    /// The counter by blocking `apply`, one client fiber per worker.
    pub apply_1: Rates,
    /// The counter by blocking `apply`, 64 client fibers per worker.
    pub apply_64: Rates,
    /// The map in one trust, Mops/s.
    pub map_one: f64,
    /// The map sharded over the workers, Mops/s.
    pub map_sharded: f64,
    /// Nanoseconds per blocking `apply` from worker 1 to worker 0.
    pub latency: f64,
}

/// Measures every Gossamer figure once on a fresh 2-worker runtime.
pub fn measure_once(limit: Limit, latency_limit: Limit, seed: u64) -> anyhow::Result<Figures> {
    let config = Config::default().workers(THREADS);
    gossamer::run(config, move || {
        let one = vec![entrust(prefilled_map(None))];
        let sharded: Vec<Trust<Map>> = (0..THREADS)
            .map(|w| entrust_on(WorkerId::new(w), move || prefilled_map(Some(w as u64))))
            .collect();
        Figures {
            apply_then: counter_apply_then(limit),
            apply_async: counter_apply_async(limit),
            apply_1: counter_apply(limit, 1),
            apply_64: counter_apply(limit, FIBERS),
            map_one: map_delegated(limit, seed, one),
            map_sharded: map_delegated(limit, seed, sharded),
            latency: latency(latency_limit),
        }
    })
    .map_err(|e| anyhow::anyhow!("the gossamer runtime failed: {e}"))
}
