use super::{CONTROL_REGISTER, CONTROL_RELEASE};
use crate::wire::record::{Byte, CONT, CONTROL, HEADER};
use crate::{Config, Error, entrust, yield_now};
use std::mem::MaybeUninit;

/// Workers spin while the awake ones have a CPU each, whatever number were started; and the
/// workers of other ranks on the host take their CPUs first.
#[test]
fn idle_workers_spin_while_the_awake_ones_have_a_cpu_each() {
    use super::{Place, SPIN, SPIN_OVERSUBSCRIBED, Shared};
    use crate::fabric::Doorbell;
    use std::sync::atomic::Ordering;
    let cpus = crate::available_cpus();
    let shared = |place: Place| {
        let n = place.local;
        let doors = (0..n).map(|_| Doorbell::heap()).collect();
        let bells = (0..place.total).map(|_| None).collect();
        Shared::new(place, doors, bells, 1, false, test_layout())
    };
    let sh = shared(Place::single(cpus + 6));
    assert!(sh.oversubscribed());
    assert_eq!(sh.spin(), SPIN_OVERSUBSCRIBED, "{} workers awake", cpus + 6);
    sh.awake.store(cpus, Ordering::Relaxed);
    assert_eq!(sh.spin(), SPIN, "{cpus} workers awake on {cpus} CPUs");
    sh.awake.store(cpus + 1, Ordering::Relaxed);
    assert_eq!(sh.spin(), SPIN_OVERSUBSCRIBED);
    // This rank's worker alone, another rank's on this host holding every online CPU.
    let mut place = Place::single(1);
    let online = crate::sys::proc::cpus_online() as u32;
    place.rank_workers.push(online);
    place.hosts.push(place.hosts[0].clone());
    assert_eq!(place.cpu_room(), 0);
    let sh = shared(place);
    assert!(sh.oversubscribed());
    assert_eq!(sh.spin(), SPIN_OVERSUBSCRIBED);
    // The same other rank on another host leaves this one the CPUs.
    let mut place = Place::single(1);
    place.rank_workers.push(online);
    place.hosts.push(format!("not-{}", place.hosts[0]));
    assert_eq!(place.cpu_room(), cpus.min(online as usize));
    assert_eq!(shared(place).spin(), SPIN);
}

/// The host's runnable threads are read from the kernel's count, and a worker only spins past
/// the rank's count when that count fits the CPUs, this rank's awake workers fit the CPUs it
/// may use, and the look is not turned off; lingering without the look is as before.
#[test]
fn idle_workers_spin_past_the_rank_count_only_while_the_host_has_cpus_to_spare() {
    use super::{Place, Shared};
    use crate::fabric::Doorbell;
    use crate::sys::proc::{parse_runnable, runnable_threads};
    use std::sync::atomic::Ordering;
    assert_eq!(parse_runnable("0.52 0.58 0.59 3/134 29052\n"), Some(3));
    assert_eq!(parse_runnable("0.52 0.58 0.59 x/134 29052"), None);
    assert_eq!(parse_runnable("0.52 0.58"), None);
    let n = runnable_threads().expect("/proc/loadavg");
    assert!(n >= 1, "the reading thread itself runs");
    let place = Place::single(1);
    let doors = vec![Doorbell::heap()];
    let bells = vec![None];
    let mut sh = Shared::new(place, doors, bells, 1, false, test_layout());
    sh.awake.store(sh.cpus + 1, Ordering::Relaxed);
    assert!(
        !sh.host_fits(usize::MAX / 2),
        "more awake workers than the rank's CPUs"
    );
    sh.awake.store(1, Ordering::Relaxed);
    sh.online = usize::MAX / 2;
    assert!(
        sh.may_spin() && sh.may_linger(),
        "one awake worker, CPUs for any count"
    );
    sh.online = 0;
    assert!(!sh.host_fits(0) && !sh.may_linger(), "no CPU to spare");
    assert!(sh.host_fits(usize::MAX / 2), "spare CPUs for any count");
    sh.host_aware = false;
    sh.online = usize::MAX / 2;
    assert!(!sh.may_spin(), "the look turned off");
    assert!(sh.may_linger(), "lingering as before without the look");
}

#[test]
fn a_capture_of_the_wrong_length_is_refused_not_read_past() {
    use crate::wire::record::{OutQueue, RequestReader, Sink, Src};
    let mut q = OutQueue::new(256, Sink::Loopback, false);
    let three = [1u8, 2, 3];
    q.push_request(Some(0x100), 1, 1, 1, Src::of(&three), None, 0);
    q.seal();
    let b = q.queued.pop_front().expect("a sealed batch");
    // SAFETY: written by our encoder, read once.
    let rec = unsafe { RequestReader::new(&b, true) }
        .and_then(|mut r| r.next())
        .expect("one record");
    // SAFETY: the captured bytes are one `[u8; 3]`; a `u64` is refused by its length.
    unsafe {
        assert_eq!(crate::trust::captured::<[u8; 3]>(&rec).ok(), Some(three));
        match crate::trust::captured::<u64>(&rec) {
            Err(crate::DelegationError::Wire(m)) => assert!(m.contains("do not fit"), "{m}"),
            other => panic!("expected a Wire error, got {other:?}"),
        }
    }
}

#[test]
#[cfg(not(loom))]
fn a_ring_whose_consumer_broke_the_protocol_ends_the_job() {
    use std::time::Duration;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(broken_ring_job());
    });
    // Waiting on the broken ring instead would hang: fail the test after a minute.
    let r = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the job hung on a ring whose consumer broke the protocol");
    match r {
        Err(Error::Protocol { detail, .. }) => {
            assert!(detail.contains("takes no more slots"), "{detail}")
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

/// A 2-worker job whose worker 1 breaks the protocol of the ring from worker 0 to it.
#[cfg(not(loom))]
fn broken_ring_job() -> Result<(), Error> {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    crate::run(Config::default().workers(2), || {
        let t = crate::entrust_on(crate::WorkerId::new(1), || 0u64);
        // Worker 1 consumes nothing for a while, so the word written below stays.
        let busy = crate::spawn_on(crate::WorkerId::new(1), || {
            let until = Instant::now() + Duration::from_millis(300);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        });
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(20) {
            yield_now();
        }
        // Worker 1 "releases" slots never published on the ring from worker 0 to it.
        let core = super::core().expect("on a worker");
        core.outbox()
            .queue_for_tests(1, true)
            .borrow()
            .release_word()
            .expect("a ring to worker 1")
            .store(1 << 40, Ordering::Release);
        // More requests than the ring holds: it must be found broken, not waited on.
        for _ in 0..50_000 {
            t.apply_then(|c| *c += 1, |()| {});
        }
        drop(busy);
    })
}

/// A batch of `records` (header, no code table).
fn batch(records: &[u8]) -> Vec<Byte> {
    let end = ((HEADER + records.len()) as u32).to_le_bytes();
    [&end[..], &[0, 0, 0, 0], records]
        .concat()
        .into_iter()
        .map(MaybeUninit::new)
        .collect()
}

/// A reference-counting request record (`kind`: `CONTROL_REGISTER` or `CONTROL_RELEASE`)
/// for trust `id` of property `(idx, gn)`, with `word` (the parent, or the trusts made).
fn control(kind: u32, idx: u32, gn: u32, id: u64, word: u64) -> Vec<u8> {
    let head = [CONTROL, 0, 16, 0];
    [
        &head[..],
        &kind.to_le_bytes(),
        &idx.to_le_bytes(),
        &gn.to_le_bytes(),
        &id.to_le_bytes(),
        &word.to_le_bytes(),
    ]
    .concat()
}

/// Runs a 1-worker job that hands `bytes` to its worker as a request batch (`requests`) or a
/// response batch from itself; returns the job's error.
fn feed(bytes: Vec<Byte>, requests: bool) -> Error {
    let out = crate::run(Config::default().workers(1), move || {
        let core = super::core().expect("on a worker");
        if requests {
            core.inbox.serve_batch(core, 0, &bytes, true);
        } else {
            core.inbox.complete_batch(core, 0, &bytes, true);
        }
    });
    out.expect_err("a malformed batch must end the job")
}

/// A malformed record or a response that no request waits for ends the job with a report
/// that names the peer and the fault; the records behind it are never dropped unseen (their
/// fibers would wait forever).
#[test]
fn a_malformed_batch_ends_the_job_with_a_report() {
    let cases = [
        // A request continuation with no plain record before it.
        (
            batch(&[CONT, 1, 0, 0, 0, 9]),
            true,
            "a continuation that follows no plain record",
        ),
        // A request header cut short.
        (batch(&[1, 0, 8, 0]), true, "a record runs past the end"),
        // A request batch whose header says it is longer than its bytes.
        (
            {
                let mut b = batch(&[]);
                b[0] = MaybeUninit::new(200);
                b
            },
            true,
            "a request batch whose header is malformed",
        ),
        // A response whose body runs past the batch.
        (batch(&[1, 0, 0, 0, 0, 8, 0, 0, 1]), false, "past the end"),
        // A response continuation with no inline response before it.
        (
            batch(&[1, 0, 0, 0x80, 5]),
            false,
            "a continuation that follows no inline response",
        ),
        // A well-formed response to a request nobody made.
        (
            batch(&[0x39, 0x30, 0, 0, 0, 1, 0, 0, 7]),
            false,
            "a response to request 12345, which is not waiting for one",
        ),
    ];
    for (bytes, requests, want) in cases {
        match feed(bytes, requests) {
            Error::Protocol { rank, detail, .. } => {
                assert_eq!(rank, 0);
                assert!(
                    detail.starts_with("worker 0 -> worker 0: ") && detail.contains(want),
                    "{detail:?} should name the workers and say {want:?}"
                );
            }
            e => panic!("expected a protocol error saying {want:?}, got {e}"),
        }
    }
}

/// A well-formed registration or release of a trust of a property that is not alive is no
/// broken ring but a broken count: the report says so, names both workers, and gives the
/// likely misuse (it read "rank 0 sent a batch that breaks the wire protocol").
#[test]
fn a_count_for_a_property_that_is_not_alive_ends_the_job_naming_the_misuse() {
    let cases = [
        (
            control(CONTROL_RELEASE, 7, 3, 42, 0),
            "a reference-counting record releases trust 42 of property 7 (generation 3), \
             which is not alive",
        ),
        (
            control(CONTROL_REGISTER, 0, 9, 43, 42),
            "a reference-counting record registers trust 43 of property 0 (generation 9), \
             which is not alive",
        ),
    ];
    for (record, want) in cases {
        let e = feed(batch(&record), true);
        assert!(
            matches!(&e, Error::TrustCount { worker: 0, rank: 0, from: 0, from_rank: 0, detail } if detail == want),
            "expected a broken count saying {want:?}, got {e:?}"
        );
        assert!(
            e.to_string()
                .ends_with("the bytes of a serialised Trust were deserialised more than once, or bytes that are no serialised Trust of this job were read as one"),
            "{e}"
        );
    }
}

/// An apply that takes about `d`.
fn busy(c: &mut u64, d: std::time::Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        *c = std::hint::black_box(*c + 1);
    }
}

/// A share is counted in applies but also ends with time: after a poll that served many
/// cheap requests, a fiber whose inline applies are slow must not keep the worker's
/// clients waiting until all of them have run (10 000 here, 50 µs each: half a second).
#[test]
fn a_share_of_slow_inline_applies_ends_with_time() {
    crate::run(Config::default().workers(1), || {
        let core = super::core().expect("on a worker");
        let mine = entrust(0u64);
        core.grant_share(10_000);
        let active = || core.share_left.get() > 0 || core.inline_runs.get() < 0;
        let mut applies = 0;
        while active() && applies < 10_000 {
            mine.apply(|c| busy(c, std::time::Duration::from_micros(50)));
            applies += 1;
        }
        // The first chunk outlasts `SHARE_TIME`, so the share ends at its end.
        assert_eq!(applies, super::SHARE_CHUNK);
    })
    .unwrap();
}

/// Inline applies that find the rings empty for a step of looks stop looking and counting
/// (the worker watches its gate); a request they stage, or one that arrives, brings the
/// looks back, as often as before; applies too slow to gain from a wider spacing keep
/// looking every 16 or 32 while they look.
#[test]
fn looks_at_empty_rings_give_way_to_the_gate_until_something_arrives() {
    crate::run(Config::default().workers(2), || {
        let core = super::core().expect("on a worker");
        let mine = entrust(0u64);
        // Cheap applies, nothing arriving: after a step of 8 empty looks (16 applies apart)
        // the worker watches its gate, and its applies stop counting towards a look (being
        // descheduled in the middle of a step only starts it again, so over 200 000
        // applies it gets there however loaded the machine is).
        for _ in 0..200_000 {
            mine.apply(|c| *c += 1);
        }
        assert_eq!(core.gate(), core.home, "the worker does not watch its gate");
        let runs = core.inline_runs.get();
        for _ in 0..1_000 {
            mine.apply(|c| *c += 1);
        }
        assert_eq!(
            core.inline_runs.get(),
            runs,
            "applies under an open gate counted"
        );
        // Watching is no share: a loop of inline applies and yields still polls every
        // `POLL_EVERY` yields.
        core.quick_yields.set(0);
        for _ in 0..super::POLL_EVERY {
            mine.apply(|c| *c += 1);
            yield_now();
        }
        assert_eq!(core.quick_yields.get(), 0, "the last yield did not poll");
        // A request to another worker closes the gate: the looks of inline applies publish
        // it.
        let far = crate::entrust_on(crate::WorkerId::new(1), || 0u64);
        for _ in 0..200_000 {
            mine.apply(|c| *c += 1);
        }
        assert_eq!(core.gate(), core.home);
        far.apply_then(|c| *c += 1, |()| ());
        assert_eq!(core.gate(), crate::wire::doorbell::CLOSED);
        assert_eq!(far.apply(|c| *c), 1);
        for _ in 0..200_000 {
            mine.apply(|c| *c += 1);
        }
        assert_eq!(core.gate(), core.home, "the gate did not open again");
        // A request from the other worker: the next look that finds it serves it, and the
        // looks close up again.
        let other = crate::spawn_on(crate::WorkerId::new(1), || {
            let t = crate::entrust_on(crate::WorkerId::new(0), || 5u64);
            t.apply(|c| *c)
        });
        let mut applies = 0;
        while !other.is_finished() {
            mine.apply(|c| *c += 1);
            applies += 1;
            assert!(
                applies < 10_000_000,
                "the other worker's requests were never served"
            );
        }
        assert_eq!(other.join(), 5);
        assert!(core.empty_looks.get() < 8, "{}", core.empty_looks.get());

        // Applies of ~2 µs each: a step of 8 looks 32 applies apart takes ~0.5 ms, far more
        // than 8 × `LOOK_GAP`, so the looks never come more than 32 applies apart.
        let mut widest = 0;
        for _ in 0..2_000 {
            mine.apply(|c| busy(c, std::time::Duration::from_micros(2)));
            widest = widest.max(super::INLINE_POLL - core.inline_runs.get());
        }
        assert!(widest <= 32, "looks {widest} applies apart");
    })
    .unwrap();
}

/// The share a poll grants the fibers is spent by inline applies only: a loop of inline
/// applies and yields does not poll within it, while a fiber that yields without inline
/// applies (between remote requests, say) keeps the cadence of a poll every `POLL_EVERY`
/// yields, however large the share.
#[test]
fn only_inline_applies_hold_back_the_polls_of_yields() {
    crate::run(Config::default().workers(1), || {
        let core = super::core().expect("on a worker");
        let mine = entrust(0u64);
        // As a poll that served 1000 requests leaves it, just before a yield.
        let grant = |core: &super::WorkerCore| {
            core.inline_runs.set(-1000);
            core.runs_at_yield.set(-1000);
            core.quick_yields.set(0);
        };
        grant(core);
        for _ in 0..20 {
            for _ in 0..40 {
                mine.apply(|c| *c += 1);
            }
            yield_now();
        }
        // 800 inline applies, 20 yields, no poll (a poll would have reset the count).
        assert_eq!(core.inline_runs.get(), -200);
        grant(core);
        for _ in 0..(super::POLL_EVERY + 1) {
            yield_now();
        }
        // A poll, which served nothing: the count starts afresh.
        assert_eq!(core.inline_runs.get(), 0);
    })
    .unwrap();
}

#[test]
fn apply_then_waits_while_too_many_are_unanswered() {
    use super::pending::MAX_THEN_IN_FLIGHT;
    use std::cell::Cell;
    use std::rc::Rc;
    crate::run(Config::default().workers(2), || {
        let far = crate::entrust_on(crate::WorkerId::new(1), || 0u64);
        let answered = Rc::new(Cell::new(0u64));
        // Yielding every 4096: the client then polls for answers only every 16 yields,
        // and without the bound ~127 000 of these 131 072 were unanswered at once.
        let total = 8 * MAX_THEN_IN_FLIGHT as u64;
        let mut widest = 0;
        for i in 0..total {
            let a = answered.clone();
            far.apply_then(
                |c| {
                    *c += 1;
                    *c
                },
                // Answers come in the order the requests were issued.
                move |n| {
                    assert_eq!(n, a.get() + 1);
                    a.set(n);
                },
            );
            widest = widest.max(i + 1 - answered.get());
            if i % 4096 == 4095 {
                yield_now();
            }
        }
        assert!(
            widest <= MAX_THEN_IN_FLIGHT as u64,
            "{widest} apply_thens were unanswered at once (bound {MAX_THEN_IN_FLIGHT})"
        );
        while answered.get() < total {
            yield_now();
        }
        assert_eq!(far.apply(|c| *c), total);
        // In a callback the caller cannot wait: apply_thens issued there go past the
        // bound instead of blocking, and are all answered.
        let extra = MAX_THEN_IN_FLIGHT as u64 + 100;
        let far2 = far.clone();
        let more = answered.clone();
        far.apply_then(
            |c| *c,
            move |_| {
                for _ in 0..extra {
                    let m = more.clone();
                    far2.apply_then(|c| *c += 1, move |()| m.set(m.get() + 1));
                }
            },
        );
        while answered.get() < total + extra {
            yield_now();
        }
        assert_eq!(far.apply(|c| *c), total + extra);
    })
    .unwrap();
}

/// A ring geometry for the tests that build a rank's shared state by hand.
fn test_layout() -> crate::wire::ring::RingLayout {
    crate::wire::ring::RingLayout::new(16, 4096).expect("a valid layout")
}
