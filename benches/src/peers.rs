//! The peers of `gsm-bench local`: the same work as the Gossamer cases done with the usual shared-
//! memory tools, on two OS threads.
//!
//! Each function runs one timed repetition and returns its figure; repetition, medians and output
//! are `local.rs`'s business. Threads are not pinned (the machine is shared), so the figures include
//! whatever the scheduler does, as the Gossamer side's do.

use crossbeam_channel::{Receiver, Sender};
use dashmap::DashMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Instant;

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

/// Runs `body(thread_index)` on [`THREADS`] threads started together and returns the seconds from
/// the common start to the last one's end.
fn timed_threads<F>(body: F) -> f64
where
    F: Fn(usize) + Sync,
{
    let barrier = Barrier::new(THREADS + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (barrier, body) = (&barrier, &body);
                scope.spawn(move || {
                    barrier.wait();
                    body(i);
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for h in handles {
            h.join().expect("a benchmark thread panicked");
        }
        start.elapsed().as_secs_f64()
    })
}

fn mops(ops: u64, seconds: f64) -> f64 {
    ops as f64 / seconds / 1e6
}

/// Counter behind `std::sync::Mutex`: `ops` increments in total, in Mops/s.
pub fn counter_std_mutex(ops: u64) -> f64 {
    let counter = Mutex::new(0u64);
    let per = ops / THREADS as u64;
    let secs = timed_threads(|_| {
        for _ in 0..per {
            *counter.lock().expect("poisoned") += 1;
        }
    });
    assert_eq!(*counter.lock().expect("poisoned"), per * THREADS as u64);
    mops(per * THREADS as u64, secs)
}

/// Counter behind `parking_lot::Mutex`, in Mops/s.
pub fn counter_parking_lot(ops: u64) -> f64 {
    let counter = parking_lot::Mutex::new(0u64);
    let per = ops / THREADS as u64;
    let secs = timed_threads(|_| {
        for _ in 0..per {
            *counter.lock() += 1;
        }
    });
    assert_eq!(*counter.lock(), per * THREADS as u64);
    mops(per * THREADS as u64, secs)
}

/// Counter as one `AtomicU64` incremented with `fetch_add`, in Mops/s.
pub fn counter_fetch_add(ops: u64) -> f64 {
    let counter = AtomicU64::new(0);
    let per = ops / THREADS as u64;
    let secs = timed_threads(|_| {
        for _ in 0..per {
            std::hint::black_box(counter.fetch_add(1, Ordering::AcqRel));
        }
    });
    assert_eq!(counter.load(Ordering::Acquire), per * THREADS as u64);
    mops(per * THREADS as u64, secs)
}

/// Counter owned by a server thread that serves increments sent over a crossbeam channel and
/// replies with the new value; one client thread keeps [`IN_FLIGHT`] requests outstanding. Two
/// threads in all (server + client), like the other peers. In Mops/s.
pub fn counter_channel_server(ops: u64) -> f64 {
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
        let window = (IN_FLIGHT as u64).min(ops);
        for _ in 0..window {
            req_tx.send(()).expect("server gone");
        }
        let mut sent = window;
        let mut last = 0;
        for _ in 0..ops {
            last = rep_rx.recv().expect("server gone");
            if sent < ops {
                req_tx.send(()).expect("server gone");
                sent += 1;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        drop(req_tx);
        assert_eq!(last, ops);
        mops(ops, secs)
    })
}

/// The shared-map workload on `Mutex<HashMap<u64, u64>>`, prefilled with every even key; in Mops/s.
pub fn map_mutex(ops: u64, seed: u64) -> f64 {
    let mut map = HashMap::with_capacity(KEY_RANGE as usize);
    for k in (0..KEY_RANGE).step_by(2) {
        map.insert(k, k);
    }
    let map = Mutex::new(map);
    let per = ops / THREADS as u64;
    let secs = timed_threads(|i| {
        let mut rng = SplitMix::new(seed, i as u64);
        let mut found = 0u64;
        for n in 0..per {
            let (key, insert) = map_op(&mut rng);
            let mut m = map.lock().expect("poisoned");
            if insert {
                m.insert(key, n);
            } else if m.get(&key).is_some() {
                found += 1;
            }
        }
        std::hint::black_box(found);
    });
    mops(per * THREADS as u64, secs)
}

/// The shared-map workload on `DashMap<u64, u64>` (sharded, locks per shard); in Mops/s.
pub fn map_dashmap(ops: u64, seed: u64) -> f64 {
    let map = DashMap::with_capacity(KEY_RANGE as usize);
    for k in (0..KEY_RANGE).step_by(2) {
        map.insert(k, k);
    }
    let per = ops / THREADS as u64;
    let secs = timed_threads(|i| {
        let mut rng = SplitMix::new(seed, i as u64);
        let mut found = 0u64;
        for n in 0..per {
            let (key, insert) = map_op(&mut rng);
            if insert {
                map.insert(key, n);
            } else if map.get(&key).is_some() {
                found += 1;
            }
        }
        std::hint::black_box(found);
    });
    mops(per * THREADS as u64, secs)
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

/// Cache-line round trip: two threads take turns writing one `AtomicU64` (one writes odd values,
/// the other answers with the next even one). Returns nanoseconds per round trip, over `trips`.
pub fn pingpong(trips: u64) -> f64 {
    let line = AtomicU64::new(0);
    let ready = AtomicBool::new(false);
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        let (line, ready, barrier) = (&line, &ready, &barrier);
        scope.spawn(move || {
            barrier.wait();
            ready.store(true, Ordering::Release);
            for t in 0..trips {
                spin_until(|| line.load(Ordering::Acquire) == 2 * t + 1);
                line.store(2 * t + 2, Ordering::Release);
            }
        });
        barrier.wait();
        spin_until(|| ready.load(Ordering::Acquire));
        let start = Instant::now();
        for t in 0..trips {
            line.store(2 * t + 1, Ordering::Release);
            spin_until(|| line.load(Ordering::Acquire) == 2 * t + 2);
        }
        start.elapsed().as_nanos() as f64 / trips as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_counts_every_increment_and_reports_a_positive_rate() {
        // The counter peers assert their final count themselves.
        for rate in [
            counter_std_mutex(10_000),
            counter_parking_lot(10_000),
            counter_fetch_add(10_000),
            counter_channel_server(10_000),
            map_mutex(10_000, 1),
            map_dashmap(10_000, 1),
        ] {
            assert!(rate.is_finite() && rate > 0.0, "rate {rate}");
        }
        let ns = pingpong(1_000);
        assert!(ns.is_finite() && ns > 0.0);
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
