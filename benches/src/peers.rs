//! The peers of `gsm-bench local`: the same work as the Gossamer cases done with the usual shared-
//! memory tools, on two OS threads.
//!
//! Each function runs one timed repetition and returns its figure; repetition, medians and output
//! are `local.rs`'s business. Threads are not pinned (the machine is shared), so the figures include
//! whatever the scheduler does, as the Gossamer side's do.

use crossbeam_channel::{Receiver, Sender};
use dashmap::DashMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// Threads every peer runs on (the Gossamer side uses as many workers).
pub const THREADS: usize = 2;
/// Requests each client of the channel server keeps in flight.
pub const IN_FLIGHT: usize = 32;
/// Keys of the shared-map case are drawn from `0..KEY_RANGE`.
pub const KEY_RANGE: u64 = 1 << 16;

/// A tiny seeded generator (SplitMix64, Steele et al. 2014) so every run draws the same keys
/// without pulling a random-number crate into the timed loop.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator for thread `index` of a run seeded with `seed`.
    pub fn new(seed: u64, index: u64) -> Self {
        Self(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One step of the map workload: a key in range and whether it is an insert (else a lookup);
/// half the operations are inserts.
pub fn map_op(rng: &mut SplitMix) -> (u64, bool) {
    let bits = rng.next_u64();
    (bits % KEY_RANGE, bits >> 63 == 1)
}

/// How long one repetition of one figure may run: at most `max_ops` operations over all threads,
/// and no longer than `budget` once timing has started. The budget keeps a repetition short when
/// the shared machine is loaded (then threads take turns instead of running together, and a slow
/// case would otherwise take minutes); rates are computed from the operations actually done.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    pub max_ops: u64,
    pub budget: Duration,
}

impl Limit {
    /// Runs `step(n)` for n = 0, 1, … until `max` steps are done or `deadline` has passed (the
    /// clock is read every 256 steps); returns how many steps ran.
    #[inline]
    pub fn steps(max: u64, deadline: Instant, mut step: impl FnMut(u64)) -> u64 {
        let mut n = 0;
        while n < max {
            let end = (n + 256).min(max);
            while n < end {
                step(n);
                n += 1;
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        n
    }
}

/// Runs `body(thread_index, deadline)` on [`THREADS`] threads started together; returns the
/// operations they report in total and the seconds from the common start to the last one's end.
fn timed_threads<F>(limit: Limit, body: F) -> (u64, f64)
where
    F: Fn(usize, Instant) -> u64 + Sync,
{
    let barrier = Barrier::new(THREADS + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (barrier, body) = (&barrier, &body);
                scope.spawn(move || {
                    barrier.wait();
                    // Each thread's clock starts as it leaves the barrier, within microseconds of
                    // the others'.
                    body(i, Instant::now() + limit.budget)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let ops = handles
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .sum();
        (ops, start.elapsed().as_secs_f64())
    })
}

fn mops(ops: u64, seconds: f64) -> f64 {
    ops as f64 / seconds / 1e6
}

fn per_thread(limit: Limit) -> u64 {
    (limit.max_ops / THREADS as u64).max(1)
}

/// Counter behind `std::sync::Mutex`, in Mops/s.
pub fn counter_std_mutex(limit: Limit) -> f64 {
    let counter = Mutex::new(0u64);
    let (ops, secs) = timed_threads(limit, |_, deadline| {
        Limit::steps(per_thread(limit), deadline, |_| {
            *counter.lock().expect("poisoned") += 1
        })
    });
    assert_eq!(*counter.lock().expect("poisoned"), ops);
    mops(ops, secs)
}

/// Counter behind `parking_lot::Mutex`, in Mops/s.
pub fn counter_parking_lot(limit: Limit) -> f64 {
    let counter = parking_lot::Mutex::new(0u64);
    let (ops, secs) = timed_threads(limit, |_, deadline| {
        Limit::steps(per_thread(limit), deadline, |_| *counter.lock() += 1)
    });
    assert_eq!(*counter.lock(), ops);
    mops(ops, secs)
}

/// Counter as one `AtomicU64` incremented with `fetch_add`, in Mops/s.
pub fn counter_fetch_add(limit: Limit) -> f64 {
    let counter = AtomicU64::new(0);
    let (ops, secs) = timed_threads(limit, |_, deadline| {
        Limit::steps(per_thread(limit), deadline, |_| {
            std::hint::black_box(counter.fetch_add(1, Ordering::AcqRel));
        })
    });
    assert_eq!(counter.load(Ordering::Acquire), ops);
    mops(ops, secs)
}

/// Counter owned by a server thread that serves increments sent over a crossbeam channel and
/// replies with the new value; one client thread keeps [`IN_FLIGHT`] requests outstanding. Two
/// threads in all (server + client), like the other peers. In Mops/s.
pub fn counter_channel_server(limit: Limit) -> f64 {
    let (req_tx, req_rx): (Sender<()>, Receiver<()>) = crossbeam_channel::bounded(IN_FLIGHT);
    let (rep_tx, rep_rx): (Sender<u64>, Receiver<u64>) = crossbeam_channel::bounded(IN_FLIGHT);
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        let barrier = &barrier;
        scope.spawn(move || {
            let mut counter = 0u64;
            barrier.wait();
            while req_rx.recv().is_ok() {
                counter += 1;
                if rep_tx.send(counter).is_err() {
                    break;
                }
            }
        });
        barrier.wait();
        let start = Instant::now();
        let deadline = start + limit.budget;
        let max = limit.max_ops.max(1);
        let window = (IN_FLIGHT as u64).min(max);
        for _ in 0..window {
            req_tx.send(()).expect("server gone");
        }
        let mut sent = window;
        let mut received = 0;
        let mut last = 0;
        let mut stopped = false;
        while received < sent {
            last = rep_rx.recv().expect("server gone");
            received += 1;
            // Past the budget (checked every 256 replies): stop issuing, drain what is in flight.
            stopped = stopped || (received % 256 == 0 && Instant::now() >= deadline);
            if !stopped && sent < max {
                req_tx.send(()).expect("server gone");
                sent += 1;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        drop(req_tx);
        assert_eq!(last, received);
        mops(received, secs)
    })
}

/// The map of the map workload: room for every key, every even key present.
fn prefilled_hashmap() -> HashMap<u64, u64> {
    let mut map = HashMap::with_capacity(KEY_RANGE as usize);
    for k in (0..KEY_RANGE).step_by(2) {
        map.insert(k, k);
    }
    map
}

/// The shared-map workload on `Mutex<HashMap<u64, u64>>`, prefilled with every even key; in Mops/s.
pub fn map_mutex(limit: Limit, seed: u64) -> f64 {
    let map = Mutex::new(prefilled_hashmap());
    let (ops, secs) = timed_threads(limit, |i, deadline| {
        let mut rng = SplitMix::new(seed, i as u64);
        let mut found = 0u64;
        let n = Limit::steps(per_thread(limit), deadline, |n| {
            let (key, insert) = map_op(&mut rng);
            let mut m = map.lock().expect("poisoned");
            if insert {
                m.insert(key, n);
            } else if m.contains_key(&key) {
                found += 1;
            }
        });
        std::hint::black_box(found);
        n
    });
    mops(ops, secs)
}

/// The map workload of one thread on a `HashMap<u64, u64>` it alone uses, in Mops/s: no lock, no
/// sharing, no delegation. Whatever design keeps the map with one owner (one trust, one lock held
/// by one thread at a time) does every operation on one core at this cost at least, so this rate
/// bounds the one-trust case from above, and its ratio to the shared peers says how far above
/// them any such design can get on this machine at this moment. (The thread alone also draws its
/// keys, a small part of each operation, which the one-trust case draws on the client for the
/// half it serves: the bound holds within that margin.)
pub fn map_one_thread(limit: Limit, seed: u64) -> f64 {
    let mut map = prefilled_hashmap();
    let mut rng = SplitMix::new(seed, 0);
    let mut found = 0u64;
    let start = Instant::now();
    let n = Limit::steps(limit.max_ops, start + limit.budget, |n| {
        let (key, insert) = map_op(&mut rng);
        if insert {
            map.insert(key, n);
        } else if map.contains_key(&key) {
            found += 1;
        }
    });
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box((found, map));
    mops(n, secs)
}

/// The shared-map workload on `DashMap<u64, u64>` (sharded, locks per shard); in Mops/s.
pub fn map_dashmap(limit: Limit, seed: u64) -> f64 {
    let map = DashMap::with_capacity(KEY_RANGE as usize);
    for k in (0..KEY_RANGE).step_by(2) {
        map.insert(k, k);
    }
    let (ops, secs) = timed_threads(limit, |i, deadline| {
        let mut rng = SplitMix::new(seed, i as u64);
        let mut found = 0u64;
        let n = Limit::steps(per_thread(limit), deadline, |n| {
            let (key, insert) = map_op(&mut rng);
            if insert {
                map.insert(key, n);
            } else if map.contains_key(&key) {
                found += 1;
            }
        });
        std::hint::black_box(found);
        n
    });
    mops(ops, secs)
}

/// Spins until `cond` holds, yielding the thread now and then so that a ping-pong partner that
/// was descheduled on this shared 2-core machine gets to run.
fn spin_until(cond: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !cond() {
        spins += 1;
        if spins % 4096 == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Tells the ping-pong partner to stop.
const STOP: u64 = u64::MAX;

/// Cache-line round trip: two threads take turns writing one `AtomicU64` (one writes odd values,
/// the other answers with the next even one). At most `limit.max_ops` round trips. Returns
/// nanoseconds per round trip.
pub fn pingpong(limit: Limit) -> f64 {
    let line = AtomicU64::new(0);
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        let (line, barrier) = (&line, &barrier);
        scope.spawn(move || {
            barrier.wait();
            let mut t = 0u64;
            loop {
                spin_until(|| {
                    let v = line.load(Ordering::Acquire);
                    v == 2 * t + 1 || v == STOP
                });
                if line.load(Ordering::Acquire) == STOP {
                    break;
                }
                line.store(2 * t + 2, Ordering::Release);
                t += 1;
            }
        });
        barrier.wait();
        let start = Instant::now();
        let trips = Limit::steps(limit.max_ops.max(1), start + limit.budget, |t| {
            line.store(2 * t + 1, Ordering::Release);
            spin_until(|| line.load(Ordering::Acquire) == 2 * t + 2);
        });
        let nanos = start.elapsed().as_nanos() as f64;
        line.store(STOP, Ordering::Release);
        nanos / trips as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_counts_every_increment_and_reports_a_positive_rate() {
        // The counter peers assert their final count themselves.
        let limit = Limit {
            max_ops: 10_000,
            budget: Duration::from_secs(5),
        };
        for rate in [
            counter_std_mutex(limit),
            counter_parking_lot(limit),
            counter_fetch_add(limit),
            counter_channel_server(limit),
            map_mutex(limit, 1),
            map_one_thread(limit, 1),
            map_dashmap(limit, 1),
        ] {
            assert!(rate.is_finite() && rate > 0.0, "rate {rate}");
        }
        let ns = pingpong(Limit {
            max_ops: 1_000,
            ..limit
        });
        assert!(ns.is_finite() && ns > 0.0);
    }

    #[test]
    fn steps_stop_at_the_maximum_or_soon_after_the_deadline() {
        let far = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        assert_eq!(Limit::steps(1000, far, |n| seen.push(n)), 1000);
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
        // A deadline already past: one batch of 256 runs, then the clock says stop.
        assert_eq!(Limit::steps(u64::MAX, Instant::now(), |_| {}), 256);
    }

    #[test]
    fn map_ops_are_half_inserts_and_stay_in_range() {
        let mut rng = SplitMix::new(7, 0);
        let mut inserts = 0;
        for _ in 0..10_000 {
            let (k, insert) = map_op(&mut rng);
            assert!(k < KEY_RANGE);
            inserts += usize::from(insert);
        }
        assert!(
            (4_500..5_500).contains(&inserts),
            "{inserts} inserts of 10000"
        );
    }
}
