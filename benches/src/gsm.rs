//! The Gossamer side of `gsm-bench local`: the same workloads as `peers.rs`, done by delegating
//! closures to trustees on a 2-worker `gossamer` runtime.
//!
//! One call of [`measure_once`] starts a runtime, measures every Gossamer figure once and shuts it
//! down. Each figure times, on the main fiber (worker 0), from spawning the client fibers to
//! joining the last one. Where the data lives:
//! - counter: one `Trust<u64>` entrusted on worker 0; clients on both workers, so half the
//!   requests run inline (same worker) and half cross to worker 0 through the request slots;
//! - map, one trust: one `HashMap<u64, u64>` entrusted on worker 0 (the fair peer of one
//!   `Mutex<HashMap>`), requests with `apply_then`;
//! - map, sharded: one map per worker, a key goes to the map on worker `key % 2` (the peer closest
//!   in spirit is `dashmap`, itself sharded);
//! - latency: one fiber on worker 1 doing blocking `apply`s one after another to a trust on
//!   worker 0, so each one is a full round trip; nanoseconds per apply.
//!
//! This module does not compare anything; `local.rs` pairs these figures with the peers'.

use crate::local::names;
use crate::peers::{KEY_RANGE, SplitMix, THREADS, map_op};
use gossamer::{Config, Trust, entrust, entrust_on, spawn_on, yield_now};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Fibers per worker in the "64 fibers" case.
const FIBERS: usize = 64;

/// Completion counters for `apply_then` callbacks, one cache line per worker. Callbacks must not
/// capture references (`NoRef`), so they find their counter through this static by worker index.
#[repr(align(128))]
struct Padded(AtomicU64);
static DONE: [Padded; THREADS] = [const { Padded(AtomicU64::new(0)) }; THREADS];

fn reset_done() {
    for d in &DONE {
        d.0.store(0, Ordering::Relaxed);
    }
}

/// Yields until this worker's callbacks have all run.
fn wait_done(worker: usize, expected: u64) {
    while DONE[worker].0.load(Ordering::Acquire) < expected {
        yield_now();
    }
}

fn mops(ops: u64, seconds: f64) -> f64 {
    ops as f64 / seconds / 1e6
}

/// Runs `body(worker)` on one fiber per worker (`fibers` per worker when > 1, each with its
/// index) and returns the seconds until all have been joined.
fn timed<F>(fibers: usize, body: F) -> f64
where
    F: Fn(usize, usize) + Clone + Send + 'static,
{
    let start = Instant::now();
    let handles: Vec<_> = (0..THREADS)
        .flat_map(|w| (0..fibers).map(move |f| (w, f)))
        .map(|(w, f)| {
            let body = body.clone();
            spawn_on(w, move || body(w, f))
        })
        .collect();
    for h in handles {
        h.join().expect("a benchmark fiber failed");
    }
    start.elapsed().as_secs_f64()
}

fn counter_apply_then(ops: u64) -> f64 {
    let counter: Trust<u64> = entrust(0u64);
    let per = ops / THREADS as u64;
    reset_done();
    let t = counter.clone();
    let secs = timed(1, move |w, _| {
        for _ in 0..per {
            t.apply_then(
                |c: &mut u64| {
                    *c += 1;
                    *c
                },
                move |_u: u64| {
                    DONE[w].0.fetch_add(1, Ordering::Release);
                },
            );
        }
        wait_done(w, per);
    });
    assert_eq!(counter.apply(|c: &mut u64| *c), per * THREADS as u64);
    mops(per * THREADS as u64, secs)
}

fn counter_apply(ops: u64, fibers: usize) -> f64 {
    let counter: Trust<u64> = entrust(0u64);
    let per = ops / (THREADS * fibers) as u64;
    let t = counter.clone();
    let secs = timed(fibers, move |_, _| {
        for _ in 0..per {
            std::hint::black_box(t.apply(|c: &mut u64| {
                *c += 1;
                *c
            }));
        }
    });
    let total = per * (THREADS * fibers) as u64;
    assert_eq!(counter.apply(|c: &mut u64| *c), total);
    mops(total, secs)
}

fn prefilled_map(shard: Option<u64>) -> HashMap<u64, u64> {
    let mut map = HashMap::with_capacity(KEY_RANGE as usize);
    for k in (0..KEY_RANGE).step_by(2) {
        if shard.is_none_or(|s| k % THREADS as u64 == s) {
            map.insert(k, k);
        }
    }
    map
}

/// The map workload through `apply_then` on `shards` (one trust, or one per worker).
fn map_delegated(ops: u64, seed: u64, shards: Vec<Trust<HashMap<u64, u64>>>) -> f64 {
    let per = ops / THREADS as u64;
    reset_done();
    let secs = timed(1, move |w, _| {
        let mut rng = SplitMix::new(seed, w as u64);
        for n in 0..per {
            let (key, insert) = map_op(&mut rng);
            let shard = &shards[(key % shards.len() as u64) as usize];
            let done = move |_found: bool| {
                DONE[w].0.fetch_add(1, Ordering::Release);
            };
            if insert {
                shard.apply_then(
                    move |m: &mut HashMap<u64, u64>| {
                        m.insert(key, n);
                        true
                    },
                    done,
                );
            } else {
                shard.apply_then(move |m: &mut HashMap<u64, u64>| m.contains_key(&key), done);
            }
        }
        wait_done(w, per);
    });
    mops(per * THREADS as u64, secs)
}

fn latency(trips: u64) -> f64 {
    let cell: Trust<u64> = entrust(0u64);
    let start = Instant::now();
    let h = spawn_on(1, move || {
        let start = Instant::now();
        for _ in 0..trips {
            std::hint::black_box(cell.apply(|c: &mut u64| {
                *c += 1;
                *c
            }));
        }
        start.elapsed()
    });
    let inner = h.join().expect("the latency fiber failed");
    debug_assert!(inner <= start.elapsed());
    inner.as_nanos() as f64 / trips as f64
}

/// Measures every Gossamer figure once on a fresh 2-worker runtime.
pub fn measure_once(ops: u64, seed: u64) -> anyhow::Result<Vec<(&'static str, f64)>> {
    let config = Config::default().workers(THREADS);
    let figures = gossamer::run(config, move || {
        let one = vec![entrust(prefilled_map(None))];
        let sharded: Vec<_> = (0..THREADS)
            .map(|w| entrust_on(w, move || prefilled_map(Some(w as u64))))
            .collect();
        vec![
            (names::GSM_APPLY_THEN, counter_apply_then(ops)),
            (
                names::GSM_APPLY_1,
                counter_apply((ops / 10).max(THREADS as u64), 1),
            ),
            (names::GSM_APPLY_64, counter_apply(ops, FIBERS)),
            (names::GSM_MAP_ONE, map_delegated(ops, seed, one)),
            (names::GSM_MAP_SHARDED, map_delegated(ops, seed, sharded)),
            (names::GSM_LATENCY, latency((ops / 10).max(1))),
        ]
    })
    .map_err(|e| anyhow::anyhow!("the gossamer runtime failed: {e}"))?;
    Ok(figures)
}
