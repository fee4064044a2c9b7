//! Measurements of the tcp fabric for docs/performance.md, ignored by default: slots per second
//! through one link, and round trips through the I/O threads and the workers' own path. They
//! check nothing beyond their own progress; the behaviour is tested in `tests`.

use std::time::{Duration, Instant};

use crate::fabric::Lane;
use crate::fabric::conformance::{Rank, job};
use crate::fabric::tcp::Tcp;
use crate::sys::net;
use crate::wire::doorbell::Doorbell;
use crate::wire::ring::{Consumer, RingLayout};

fn layout(slots: u32, slot_size: u32) -> RingLayout {
    RingLayout::new(slots, slot_size).unwrap()
}

/// Slots per second through one link over loopback. Run with
/// `cargo test -p gossamer --release --lib fabric::tcp::tests::measure::throughput -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn throughput() {
    for (slots, size, count) in [
        (64u32, 4096u32, 400_000u64),
        (64, 64, 4_000_000),
        (256, 64, 4_000_000),
    ] {
        let mut ranks = job::<Tcp>(&[1, 1], layout(slots, size));
        let (a, b) = ranks.split_at_mut(1);
        let mut p = a[0].take_out(0, 1, Lane::Request);
        let mut c = b[0].take_in(0, 0, Lane::Request);
        let bell = a[0].bell(1);
        let sleeper = b[0].sleeper(0);
        let start = Instant::now();
        let cpu0 = cpu_seconds();
        std::thread::scope(|s| {
            s.spawn(|| {
                let t = Instant::now();
                for i in 0..count {
                    let mut spins = 0u32;
                    loop {
                        if let Some(mut w) = p.try_reserve() {
                            w.buf()[..8].copy_from_slice(&i.to_le_bytes());
                            w.publish(size);
                            bell.ring();
                            break;
                        }
                        // As a worker would: poll a little, then give the core away.
                        spins += 1;
                        if spins % 64 == 0 {
                            assert!(t.elapsed() < Duration::from_secs(120));
                            std::thread::yield_now();
                        }
                        std::hint::spin_loop();
                    }
                }
            });
            let t = Instant::now();
            let mut i = 0u64;
            let mut spins = 0u32;
            while i < count {
                if let Some(r) = c.try_poll().unwrap() {
                    assert_eq!(r.bytes().len(), size as usize);
                    assert_eq!(r.bytes()[..8], i.to_le_bytes());
                    i += 1;
                    spins = 0;
                } else {
                    // As a worker would: poll a little, then sleep on its doorbell.
                    spins += 1;
                    if spins % 64 == 0 {
                        assert!(t.elapsed() < Duration::from_secs(120));
                        sleeper.sleep(Duration::from_millis(10), || !c.has_data());
                    }
                    std::hint::spin_loop();
                }
            }
        });
        let secs = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        println!(
            "tcp loopback, {slots} slots of {size} B: {count} slots in {secs:.2} s = {:.0} slots/s, \
             {:.0} MB/s; {:.2} CPU-µs per slot (all threads)",
            count as f64 / secs,
            count as f64 * f64::from(size) / secs / 1e6,
            cpu * 1e6 / count as f64
        );
    }
}

/// User + system CPU time of this process so far.
fn cpu_seconds() -> f64 {
    net::process_cpu_time().as_secs_f64()
}

/// Round trips of a 4-byte slot between two simulated ranks over loopback, each side a thread
/// that spins a little and then sleeps on its doorbell, as a worker does: through the I/O
/// threads (the rank's bells, no hooks: four thread hand-offs) and the workers' own path (their
/// bells write the socket, their `Turn::Poll` reads it, `Turn::Park` before sleeping),
/// alternated in one process, 3 rounds of each. A measurement for docs/performance.md:
/// `cargo test -p gossamer --release --lib fabric::tcp::tests::measure::round_trip -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn round_trip() {
    for round in 0..3 {
        for direct in [false, true] {
            let mut times = round_trips(direct, 5_000);
            times.sort();
            let q = |f: f64| times[((times.len() - 1) as f64 * f) as usize];
            println!(
                "round {round}, {}: tcp loopback round trip of a 4-byte slot: median {:?}, q1 \
                 {:?}, q3 {:?}, p99 {:?}",
                if direct {
                    "workers' own sockets"
                } else {
                    "through the I/O threads"
                },
                q(0.5),
                q(0.25),
                q(0.75),
                q(0.99)
            );
        }
    }
}

/// `rounds` timed round trips (see [`round_trip`]).
fn round_trips(direct: bool, rounds: u32) -> Vec<Duration> {
    use crate::fabric::{Progress, Turn};
    let mut ranks = job::<Tcp>(&[1, 1], layout(16, 256));
    let (a, b) = ranks.split_at_mut(1);
    let mut ping = a[0].take_out(0, 1, Lane::Request);
    let mut ping_in = b[0].take_in(0, 0, Lane::Request);
    let mut pong = b[0].take_out(0, 0, Lane::Response);
    let mut pong_in = a[0].take_in(0, 1, Lane::Response);
    let own = |r: &Rank<Tcp>, g: u32| {
        r.links
            .worker_bells
            .iter()
            .find(|(l, to, _)| *l == 0 && *to == g)
            .map(|(_, _, b)| b.clone())
            .unwrap()
    };
    let hook = |r: &Rank<Tcp>| r.links.progress[0].1.clone();
    let (bell_a, bell_b) = if direct {
        (own(&a[0], 1), own(&b[0], 0))
    } else {
        (a[0].bell(1), b[0].bell(0))
    };
    let (hook_a, hook_b) = (hook(&a[0]), hook(&b[0]));
    let (sleep_a, sleep_b) = (a[0].sleeper(0), b[0].sleeper(0));
    let wait = |c: &mut Consumer, d: &Doorbell, h: &Progress| {
        let t = Instant::now();
        let mut spins = 0u32;
        loop {
            if direct {
                h.turn(Turn::Poll);
            }
            if let Some(r) = c.try_poll().unwrap() {
                return u32::from_le_bytes(r.bytes()[..4].try_into().unwrap());
            }
            spins += 1;
            if spins % 256 == 0 {
                assert!(t.elapsed() < Duration::from_secs(10));
                if !direct || !h.turn(Turn::Park) {
                    d.sleep(Duration::from_millis(10), || !c.has_data());
                }
            }
            std::hint::spin_loop();
        }
    };
    let mut times = Vec::with_capacity(rounds as usize);
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..rounds {
                let v = wait(&mut ping_in, &sleep_b, &hook_b);
                let mut w = pong.try_reserve().unwrap();
                w.buf()[..4].copy_from_slice(&v.to_le_bytes());
                w.publish(4);
                bell_b.ring();
            }
        });
        for i in 0..rounds {
            let t = Instant::now();
            let mut w = ping.try_reserve().unwrap();
            w.buf()[..4].copy_from_slice(&i.to_le_bytes());
            w.publish(4);
            bell_a.ring();
            assert_eq!(wait(&mut pong_in, &sleep_a, &hook_a), i);
            times.push(t.elapsed());
        }
    });
    times
}
