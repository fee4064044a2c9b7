use super::*;
use crate::{Config, WorkerId, entrust_on, spawn, spawn_on};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// CPU time of the calling thread so far, from `/proc/thread-self/stat` (clock ticks of 10 ms).
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("/proc/thread-self/stat");
    let after = &stat[stat.rfind(')').expect("the command's end") + 2..];
    let f: Vec<u64> = after
        .split(' ')
        .skip(11)
        .take(2)
        .map(|x| x.parse().expect("a tick count"))
        .collect();
    Duration::from_millis((f[0] + f[1]) * 10)
}

fn pair() -> (UnixStream, UnixStream) {
    let (a, b) = UnixStream::pair().expect("a socket pair");
    a.set_nonblocking(true).expect("non-blocking");
    (a, b)
}

/// A fiber waits for its socket for longer than a stall takes to be reported: the job is not
/// taken for deadlocked, the worker sleeps meanwhile (it spends a small part of the wait on
/// the CPU, where spinning would spend all of its share), and the bytes arrive.
#[test]
fn a_fiber_waits_for_its_socket_while_its_worker_sleeps() {
    let wait = crate::worker::STALL_CONFIRM + Duration::from_millis(300);
    let (got, cpu) = crate::run(Config::default().workers(1), move || {
        let (a, mut b) = pair();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(wait);
            b.write_all(b"hello").expect("write");
            b
        });
        let mut reg = Registered::new(a).expect("register");
        let cpu = thread_cpu();
        let mut buf = [0u8; 16];
        let n = reg.retry(|s| s.read(&mut buf)).expect("read");
        let cpu = thread_cpu() - cpu;
        drop(writer.join());
        (buf[..n].to_vec(), cpu)
    })
    .expect("the run ends normally");
    assert_eq!(got, b"hello");
    assert!(
        cpu < Duration::from_millis(150),
        "the idle worker spent {cpu:?} of a {wait:?} wait on the CPU"
    );
}

/// A worker asleep in `epoll_wait` is woken by a request from another worker through its
/// doorbell's alarm, not at the end of its sleep (20 ms).
#[test]
fn a_request_wakes_a_worker_asleep_on_its_sockets() {
    let times = crate::run(Config::default().workers(2), || {
        let one = WorkerId::new(1);
        let listening = spawn_on(one, || {
            let (a, b) = pair();
            let reg = Registered::new(a).expect("register");
            // The first waits return at once: registration sets the flag, and an idle socket
            // reports itself writable once.
            let ended = (0..4).any(|_| reg.wait().is_err());
            drop(b);
            ended
        });
        let counter = entrust_on(one, || 0u64);
        let mut times = Vec::new();
        for _ in 0..15 {
            // Long enough for worker 1 to spin, yield and fall asleep.
            crate::sleep(Duration::from_millis(4));
            let t = Instant::now();
            counter.apply(|c| *c += 1);
            times.push(t.elapsed());
        }
        spawn_on(one, close).join();
        assert!(listening.join(), "close() ends the wait with an error");
        times
    })
    .expect("the run ends normally");
    let mut sorted = times.clone();
    sorted.sort();
    assert!(
        sorted[sorted.len() / 2] < Duration::from_millis(6),
        "round trips to a worker asleep on a socket: {times:?}"
    );
}

/// `close` wakes a fiber waiting for a socket with `ConnectionAborted`, and later waits fail
/// at once; a registration dropped before its descriptor is closed leaves nothing behind.
#[test]
fn close_ends_every_wait_of_the_worker() {
    let kinds = crate::run(Config::default().workers(1), || {
        let waiter = spawn(|| {
            let (a, _b) = pair();
            let reg = Registered::new(a).expect("register");
            let first = (0..4)
                .map(|_| reg.wait().map_err(|e| e.kind()))
                .find(Result::is_err)
                .unwrap_or(Ok(()));
            let second = reg.wait().map_err(|e| e.kind());
            (first, second)
        });
        crate::sleep(Duration::from_millis(20));
        let core = crate::worker::core_or_panic("test");
        assert_eq!(core.reactor.waiting(), 1);
        close();
        let r = waiter.join();
        assert_eq!(core.reactor.waiting(), 0);
        assert!(!core.reactor.active(), "the registration was dropped");
        r
    })
    .expect("the run ends normally");
    let aborted = Err(std::io::ErrorKind::ConnectionAborted);
    assert_eq!(kinds, (aborted, aborted));
}

/// An interval's ticks come no earlier than its period, the worker sleeps between them, and a
/// zero period is refused.
#[test]
fn an_interval_ticks_at_its_period_while_its_worker_sleeps() {
    let period = Duration::from_millis(20);
    let (elapsed, ticks, cpu, zero) = crate::run(Config::default().workers(1), move || {
        let zero = Interval::new(Duration::ZERO)
            .map(|_| ())
            .map_err(|e| e.kind());
        let mut t = Interval::new(period).expect("a timerfd");
        let (start, cpu) = (Instant::now(), thread_cpu());
        let mut ticks = 0;
        while ticks < 5 {
            ticks += t.tick().expect("a tick");
        }
        (start.elapsed(), ticks, thread_cpu() - cpu, zero)
    })
    .expect("the run ends normally");
    assert_eq!(zero, Err(std::io::ErrorKind::InvalidInput));
    assert!(ticks >= 5);
    assert!(
        elapsed >= 5 * period,
        "5 ticks of {period:?} in {elapsed:?}"
    );
    assert!(
        cpu < Duration::from_millis(50),
        "the worker spent {cpu:?} of {elapsed:?} on the CPU between ticks"
    );
}

/// With `look_every(4)`, an idle turn looks at the sockets every fourth time only: bytes that
/// arrived are seen at the fourth turn, not before; with the default, at the first.
#[test]
fn look_every_spaces_the_looks_of_idle_turns() {
    let seen_at = crate::run(Config::default().workers(1), || {
        let core = crate::worker::core_or_panic("test");
        let mut seen_at = Vec::new();
        for every in [4, 1] {
            look_every(every);
            let (a, mut b) = pair();
            let reg = Registered::new(a).expect("register");
            // Take the registration's first event, then count afresh.
            core.reactor.every.set(1);
            core.reactor.turn(core);
            look_every(every);
            core.reactor.turns.set(0);
            reg.clear();
            b.write_all(b"x").expect("write");
            let mut turns = 0;
            while !reg.is_ready() && turns < 16 {
                core.reactor.turn(core);
                turns += 1;
            }
            seen_at.push(turns);
        }
        seen_at
    })
    .expect("the run ends normally");
    assert_eq!(seen_at, [4, 1]);
}
