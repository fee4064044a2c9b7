//! End-to-end behaviour of one process: run/spmd, spawn/join, local and remote apply,
//! apply_then, apply_with, errors, poisoning, blocking in delegated context.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gossamer::{
    Config, DelegationError, Trust, WorkerId, entrust, entrust_on, spawn, spawn_on, spawn_on_with,
    yield_now,
};

fn cfg(n: usize) -> Config {
    Config::default().workers(n).stack_size(64 * 1024)
}

#[test]
fn run_returns_main_result() {
    assert_eq!(gossamer::run(cfg(2), || 40 + 2).unwrap(), 42);
}

#[test]
fn spmd_results_by_worker() {
    let v = gossamer::spmd(cfg(3), |w| {
        (w.id(), w.count(), gossamer::current_worker().index())
    })
    .unwrap();
    assert_eq!(v, vec![(0, 3, 0), (1, 3, 1), (2, 3, 2)]);
}

#[test]
fn remote_apply_and_apply_with_and_then() {
    let r = gossamer::run(cfg(2), || {
        let t = entrust_on(WorkerId::new(1), || 0u64);
        assert_eq!(t.trustee(), WorkerId::new(1));
        for i in 0..1000u64 {
            assert_eq!(
                t.apply(move |n| {
                    *n += 1;
                    *n
                }),
                i + 1
            );
        }
        let got = Rc::new(Cell::new(0u64));
        for _ in 0..1000 {
            let g = got.clone();
            t.apply_then(
                |n| {
                    *n += 1;
                    *n
                },
                move |v| g.set(g.get().max(v)),
            );
        }
        let s = t.apply_with(vec![1u64, 2, 3], |n, v| {
            *n += v.iter().sum::<u64>();
            format!("{n}")
        });
        assert_eq!(s, "2006");
        assert_eq!(
            got.get(),
            2000,
            "callbacks of earlier apply_then ran before the later apply's answer"
        );
        let worker = t.apply(|_| gossamer::current_worker());
        worker.index()
    })
    .unwrap();
    assert_eq!(r, 1);
}

/// `apply_with_then` moves owned batches to trustees on this worker and the other, in issue
/// order, and answers each on this worker.
#[test]
fn apply_with_then_moves_owned_batches_without_waiting() {
    let lens = gossamer::run(cfg(2), || {
        let mut lens = Vec::new();
        for w in 0..2 {
            let t = entrust_on(WorkerId::new(w), Vec::<String>::new);
            let got = Rc::new(std::cell::RefCell::new(Vec::new()));
            for b in 0..100usize {
                let batch: Vec<String> = (0..b % 7).map(|i| format!("{b}.{i}")).collect();
                let g = got.clone();
                t.apply_with_then(
                    batch,
                    |v, batch: Vec<String>| {
                        v.extend(batch);
                        v.len()
                    },
                    move |len| g.borrow_mut().push(len),
                );
            }
            // The answers come back in issue order, each the length after its batch.
            let all = t.apply(|v| v.clone());
            let want: Vec<usize> = (0..100usize)
                .scan(0, |n, b| {
                    *n += b % 7;
                    Some(*n)
                })
                .collect();
            assert_eq!(*got.borrow(), want, "worker {w}");
            assert_eq!(all.len(), *want.last().unwrap());
            assert_eq!(all[0], "1.0");
            lens.push(all.len());
        }
        lens
    })
    .unwrap();
    assert_eq!(lens, [295, 295]);
}

#[test]
fn requests_from_one_fiber_run_in_order() {
    gossamer::run(cfg(2), || {
        let t = entrust_on(WorkerId::new(1), Vec::<u32>::new);
        for i in 0..5000u32 {
            t.apply_then(move |v| v.push(i), |_| {});
        }
        let v = t.apply(|v| v.clone());
        assert_eq!(v, (0..5000).collect::<Vec<_>>());
    })
    .unwrap();
}

#[test]
fn requests_deferred_to_self_run_before_the_next_inline_apply() {
    gossamer::run(cfg(1), || {
        let log = entrust(Vec::<u32>::new());
        let host = entrust(());
        for round in 0..50u32 {
            // Inside a delegated closure on this worker, a request to this worker's own property
            // is deferred to the loopback queue; the fiber's next apply to it runs inline and
            // must come after it.
            host.apply_with(log.clone(), move |_, log| {
                log.apply_then(move |v| v.push(2 * round), |_| {});
            });
            let seen = log.apply(move |v| {
                v.push(2 * round + 1);
                v.clone()
            });
            assert_eq!(
                seen,
                (0..2 * round + 2).collect::<Vec<_>>(),
                "round {round}"
            );
        }
        // More deferred requests than a poll serves (it takes a bounded number of batches), and
        // polls in between (the worker polls once every few fiber resumptions): what they leave
        // still runs before the next inline apply.
        let before = log.apply(|v| v.len()) as u32;
        let n = 20_000u32;
        host.apply_with(log.clone(), move |_, log| {
            for i in 0..n {
                log.apply_then(move |v| v.push(before + i), |_| {});
            }
        });
        for _ in 0..32 {
            yield_now();
        }
        let seen = log.apply(move |v| {
            v.push(before + n);
            v.clone()
        });
        assert_eq!(seen, (0..before + n + 1).collect::<Vec<_>>());
    })
    .unwrap();
}

#[test]
fn deferred_requests_past_the_drain_bound_still_run_before_the_next_inline_apply() {
    // Small slots, so that the deferred requests fill more batches than one drain of the
    // loopback queue takes (1024): the inline apply that finds some left must queue behind them,
    // not overtake them.
    let n = 100_000u64;
    let (marker, len) = gossamer::run(cfg(1).slot_size(256), move || {
        let log = entrust(Vec::<u64>::new());
        let host = entrust(());
        host.apply_with(log.clone(), move |_, log| {
            for i in 0..n {
                log.apply_then(move |v| v.push(i), |_| {});
            }
        });
        log.apply(|v| v.push(u64::MAX));
        log.apply(|v| (v.iter().position(|&x| x == u64::MAX), v.len()))
    })
    .unwrap();
    assert_eq!(marker, Some(n as usize), "of {len}");
}

#[test]
fn spawn_join_and_spawn_on() {
    gossamer::run(cfg(3), || {
        let hs: Vec<_> = (0..50)
            .map(|i| {
                spawn(move || {
                    yield_now();
                    i * 2
                })
            })
            .collect();
        let s: i32 = hs.into_iter().map(|h| h.join()).sum();
        assert_eq!(s, 2450);
        let remote: Vec<_> = (0..30usize)
            .map(|i| {
                spawn_on(WorkerId::new(i % 3), move || {
                    (i, gossamer::current_worker().index())
                })
            })
            .collect();
        for (i, h) in remote.into_iter().enumerate() {
            assert_eq!(h.join(), (i, i % 3));
        }
        let bad = spawn_on(WorkerId::new(1), || -> u8 { panic!("fiber says no") });
        match bad.try_join() {
            Err(gossamer::Error::FiberPanicked(m)) => assert!(m.contains("fiber says no"), "{m}"),
            other => panic!("{other:?}"),
        }
    })
    .unwrap();
}

#[test]
fn panics_poison_and_errors_reach_the_caller() {
    gossamer::run(cfg(2), || {
        for w in 0..2 {
            let t = entrust_on(WorkerId::new(w), || 1u32);
            let e = t
                .try_apply(|_| -> u32 { panic!("boom {}", 7) })
                .unwrap_err();
            assert_eq!(e, DelegationError::Panicked("boom 7".into()));
            assert_eq!(t.try_apply(|n| *n).unwrap_err(), DelegationError::Poisoned);
            let h = spawn(move || {
                let t2 = t;
                t2.apply(|n| *n)
            });
            let e = h.try_join().unwrap_err();
            assert!(e.to_string().contains("poisoned"), "{e}");
        }
    })
    .unwrap();
}

/// Requests of one closure type from one fiber to another worker travel as a run (one full
/// record, then continuations) and are served by one loop. A closure that panics (or blocks)
/// inside the run is answered with its error after the results of those before it, and every
/// request after it finds the property poisoned, in issue order, wherever in the run it is:
/// the first record, the first continuation, right after a group of results was staged, the
/// last one.
#[test]
fn a_panic_inside_a_run_of_requests_poisons_the_rest_of_the_run() {
    const N: u32 = 40;
    for (bad, blocks) in [(1, false), (2, false), (17, false), (N, false), (5, true)] {
        gossamer::run(cfg(2), move || {
            let t = entrust_on(WorkerId::new(1), || 0u32);
            let got = Rc::new(std::cell::RefCell::new(Vec::new()));
            // No yield in between: all of them go in one batch.
            for _ in 0..N {
                let got = got.clone();
                t.try_apply_then(
                    move |n| {
                        *n += 1;
                        if *n == bad {
                            if blocks {
                                yield_now();
                            }
                            panic!("request {bad} fails");
                        }
                        *n
                    },
                    move |r| got.borrow_mut().push(r),
                );
            }
            let start = std::time::Instant::now();
            while got.borrow().len() < N as usize {
                assert!(
                    start.elapsed().as_secs() < 30,
                    "answers missing: {:?}",
                    got.borrow()
                );
                yield_now();
            }
            let got = got.borrow();
            for (i, r) in got.iter().enumerate() {
                let i = i as u32 + 1;
                match r {
                    Ok(v) => assert!(i < bad && *v == i, "request {i}: Ok({v}) ({bad}, {blocks})"),
                    Err(DelegationError::Panicked(m)) if i == bad && !blocks => {
                        assert_eq!(m, &format!("request {bad} fails"))
                    }
                    Err(DelegationError::BlockingInDelegatedContext) if i == bad && blocks => {}
                    Err(DelegationError::Poisoned) if i > bad => {}
                    other => panic!("request {i}: {other:?} (failing: {bad}, blocking: {blocks})"),
                }
            }
        })
        .unwrap();
    }
}

/// A trust kept past the end of its runtime names nothing in a later runtime of the same
/// process, even where that runtime has a property of the same type at the same index and
/// generation: its applies fail with `DeadProperty` (blocking, `apply_with`, `apply_then`,
/// `apply_with_then`, to
/// this worker and to another), so do those of its clones and serialised copies, and dropping
/// them all tells no trustee (the later runtime's properties live on and the job ends cleanly).
#[test]
fn a_trust_kept_past_its_runtime_names_nothing_in_the_next() {
    let make = |a: u64, b: u64| {
        (
            entrust_on(WorkerId::new(0), move || a),
            entrust_on(WorkerId::new(1), move || b),
        )
    };
    let old = gossamer::run(cfg(2), move || make(5, 6)).unwrap();
    gossamer::run(cfg(2), move || {
        let fresh = make(100, 200);
        // The same names: without a check, the old trusts would reach the new properties.
        assert_eq!(format!("{:?}", old.0), format!("{:?}", fresh.0));
        assert_eq!(format!("{:?}", old.1), format!("{:?}", fresh.1));
        for stale in [&old.0, &old.1] {
            let copy: Trust<u64> = postcard::from_bytes(&postcard::to_allocvec(stale).unwrap())
                .expect("a trust's bytes read back");
            for t in [stale, &stale.clone(), &copy] {
                assert_eq!(t.try_apply(|v| *v), Err(DelegationError::DeadProperty));
                assert_eq!(
                    t.try_apply_with(1u64, |v, x| *v + x),
                    Err(DelegationError::DeadProperty)
                );
                let got = Rc::new(Cell::new(None));
                let g = got.clone();
                t.try_apply_then(|v| *v, move |r| g.set(Some(r)));
                assert_eq!(got.take(), Some(Err(DelegationError::DeadProperty)));
                let g = got.clone();
                t.try_apply_with_then(vec![1u64], |v, x| *v + x[0], move |r| g.set(Some(r)));
                assert_eq!(got.take(), Some(Err(DelegationError::DeadProperty)));
            }
        }
        drop(old);
        for _ in 0..100 {
            yield_now();
        }
        assert_eq!(fresh.0.apply(|v| *v), 100);
        assert_eq!(fresh.1.apply(|v| *v), 200);
    })
    .unwrap();
}

#[test]
fn blocking_inside_a_delegated_closure_fails_at_once() {
    gossamer::run(cfg(2), || {
        for w in 0..2 {
            let inner = entrust_on(WorkerId::new(w), || 5u32);
            let outer = entrust_on(WorkerId::new(w), || 0u32);
            let e = outer
                .try_apply_with(inner.clone(), |_, inner| inner.apply(|n| *n))
                .unwrap_err();
            match e {
                DelegationError::BlockingInDelegatedContext => {}
                DelegationError::Panicked(m) => assert!(m.contains("apply_then"), "{m}"),
                other => panic!("{other:?}"),
            }
        }
    })
    .unwrap();
}

/// An `apply` whose closure makes a blocking call on its trustee panics saying that the closure
/// did (the caller itself may block: it was told, as if it had made the call, to use
/// `apply_then` instead).
#[test]
fn an_apply_whose_closure_blocks_says_the_closure_did() {
    let messages = gossamer::run(cfg(2), || {
        (0..2)
            .map(|w| {
                let t = entrust_on(WorkerId::new(w), || 0u32);
                let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    t.apply(|n| {
                        *n += 1;
                        yield_now();
                    })
                }))
                .unwrap_err();
                p.downcast_ref::<String>().cloned().unwrap_or_default()
            })
            .collect::<Vec<_>>()
    })
    .unwrap();
    for m in messages {
        assert!(
            m.starts_with(
                "gossamer: Trust::apply failed: the delegated closure made a blocking call on its \
                 trustee"
            ) && m.contains(gossamer::BLOCKING_IN_DELEGATED),
            "{m}"
        );
    }
}

#[test]
fn a_blocking_call_in_an_apply_then_callback_is_refused_wherever_the_answer_comes_from() {
    let refused = gossamer::run(cfg(2), || {
        let out: Rc<Cell<Option<bool>>> = Rc::new(Cell::new(None));
        let other = entrust_on(WorkerId::new(1), || 7u64);
        // The trustee is this worker (the callback runs at once, on this fiber) and the other.
        for w in 0..2 {
            let t = entrust_on(WorkerId::new(w), || 0u64);
            let (o, other) = (out.clone(), other.clone());
            t.apply_then(
                |c| *c,
                move |_| {
                    let r = other.try_apply(|c| *c);
                    o.set(Some(matches!(
                        r,
                        Err(DelegationError::BlockingInDelegatedContext)
                    )));
                },
            );
            while out.get().is_none() {
                yield_now();
            }
        }
        out.take()
    })
    .unwrap();
    assert_eq!(refused, Some(true));
}

/// Asserts that `r` is the job's end by a panic on `worker` (any, if `None`) whose message
/// holds every one of `words`.
fn job_ended_by_a_panic<R: std::fmt::Debug>(
    r: Result<R, gossamer::Error>,
    worker: Option<usize>,
    words: &[&str],
) {
    match r {
        Err(gossamer::Error::Panicked {
            worker: w, message, ..
        }) => {
            assert!(worker.is_none_or(|x| x == w), "worker {w}: {message}");
            assert!(words.iter().all(|x| message.contains(x)), "{message}");
        }
        other => panic!("expected a panic to end the job, got {other:?}"),
    }
}

/// Runs `job` on a thread of its own; fails the test if it has not ended within 60 s.
fn ends_within_a_minute<R: Send + 'static>(job: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(job());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the job did not end within 60 s")
}

#[test]
fn a_panicking_callback_run_by_a_poll_on_another_fibers_stack_ends_the_job() {
    // A fiber that only yields: with no other fiber ready, its yields poll on its own stack, so
    // the answers below are completed there. The failed callback's panic must end the job (not
    // be taken for the yielding fiber's, losing the answers behind it in their batch).
    let r = ends_within_a_minute(|| {
        gossamer::run(cfg(2), || {
            let t = entrust_on(WorkerId::new(1), || 0u64);
            let stop = Rc::new(Cell::new(false));
            let s = stop.clone();
            let spinner = spawn(move || {
                while !s.get() {
                    yield_now();
                }
            });
            t.apply_then(|_| -> u64 { panic!("boom") }, |_| {});
            t.apply_then(|c| *c += 1, |()| {});
            let v = t.apply(|c| *c);
            stop.set(true);
            let _ = spinner.try_join();
            v
        })
    });
    job_ended_by_a_panic(r, Some(0), &["apply_then failed", "boom"]);
}

#[test]
fn a_failed_apply_then_ends_the_job_when_its_trustee_is_the_callers_worker_too() {
    // The failure reaches the callback at once, on the calling fiber: it must end the job as
    // it does when the answer comes from another worker, not become that fiber's own panic
    // (which its joiner could swallow).
    let r = ends_within_a_minute(|| {
        gossamer::run(cfg(1), || {
            let t = entrust(0u64);
            let joined = spawn(move || t.apply_then(|_| -> u64 { panic!("boom") }, |_| {}))
                .try_join()
                .is_ok();
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_secs(30) {
                yield_now();
            }
            joined
        })
    });
    job_ended_by_a_panic(r, None, &["apply_then failed", "boom"]);
}

/// An argument whose destructor makes a blocking apply (fine in a fiber, refused in a poll).
struct BlockingDrop(Trust<u64>);
impl Drop for BlockingDrop {
    fn drop(&mut self) {
        self.0.apply(|n| *n += 1);
    }
}
impl serde::Serialize for BlockingDrop {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}
impl<'de> serde::Deserialize<'de> for BlockingDrop {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Trust::deserialize(d).map(BlockingDrop)
    }
}

#[test]
fn a_value_dropped_by_a_poll_on_a_fibers_stack_cannot_block_there() {
    // The argument of an apply_with to a poisoned property is dropped by the trustee's poll,
    // which here runs on a yielding fiber's stack: its blocking apply must be refused (and end
    // the job with the reason), not suspend that fiber in the middle of the poll.
    let r = ends_within_a_minute(|| {
        gossamer::run(cfg(3), || {
            let p = entrust_on(WorkerId::new(1), || 0u64);
            let q = entrust_on(WorkerId::new(2), || 0u64);
            assert!(p.try_apply(|_| -> () { panic!("poison it") }).is_err());
            static YIELDING: AtomicBool = AtomicBool::new(false);
            let yielder = spawn_on(WorkerId::new(1), || {
                YIELDING.store(true, Ordering::SeqCst);
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_secs(30) {
                    yield_now();
                }
            });
            // Sent once the yielder runs, so that its polls serve it.
            while !YIELDING.load(Ordering::SeqCst) {
                yield_now();
            }
            let r = p.try_apply_with(BlockingDrop(q.clone()), |_, _g| ());
            drop(yielder);
            r
        })
    });
    job_ended_by_a_panic(r, Some(1), &["blocking call"]);
}

#[test]
fn apply_then_clone_and_drop_work_inside_delegated_closures() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Counted(u64);
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    gossamer::run(cfg(2), || {
        let a = entrust_on(WorkerId::new(1), || Counted(1));
        let b = entrust_on(WorkerId::new(0), || Counted(2));
        // On worker 1, clone b, send an apply_then to it, and drop the clone.
        a.apply_with(b.clone(), |x, b| {
            let b2 = b.clone();
            b2.apply_then(|c| c.0 += 10, |_| {});
            drop(b);
            x.0 += 1;
        });
        // Same on the trustee itself (worker 0 owns b).
        b.apply_with(b.clone(), |x, me| {
            me.apply_then(|c| c.0 += 100, |_| {});
            x.0 += 1000;
        });
        // The +10 was issued by worker 1's closure (another issuer than this fiber), so it may
        // land just after this fiber's next request; wait for it, bounded.
        let start = std::time::Instant::now();
        while b.apply(|c| c.0) != 1112 {
            assert!(
                start.elapsed().as_secs() < 10,
                "value stuck at {}",
                b.apply(|c| c.0)
            );
            yield_now();
        }
        drop(a);
        drop(b);
        let start = std::time::Instant::now();
        while DROPS.load(Ordering::SeqCst) != 2 {
            assert!(
                start.elapsed().as_secs() < 10,
                "drops stuck at {}",
                DROPS.load(Ordering::SeqCst)
            );
            yield_now();
        }
        for _ in 0..1000 {
            yield_now();
        }
        assert_eq!(
            DROPS.load(Ordering::SeqCst),
            2,
            "a property was dropped twice"
        );
    })
    .unwrap();
}

#[test]
fn main_panic_is_an_error() {
    let e = gossamer::run(cfg(2), || -> u8 { panic!("main failed") }).unwrap_err();
    assert!(e.to_string().contains("main failed"), "{e}");
}

/// A panic in a fiber nobody joins is not lost: it ends the job with a report naming the fiber's
/// worker, whether its handle went before the panic (local and `spawn_on`) or after it. Handles
/// of fibers that end normally may be dropped; those fibers run on, detached.
#[test]
fn a_panic_in_a_fiber_whose_handle_was_dropped_ends_the_job() {
    let panicked = |worker: usize, f: fn()| {
        let e = gossamer::run(cfg(2), move || {
            f();
            // Long enough for the fiber to run and its outcome to come back, on a loaded
            // machine too; the job ends on the failure first, and this fiber with it.
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_secs(30) {
                yield_now();
            }
        })
        .expect_err("the fiber's panic must end the job");
        match e {
            gossamer::Error::Panicked {
                rank,
                worker: w,
                message,
            } => {
                assert_eq!((rank, w), (0, worker), "{message}");
                assert!(
                    message.contains("fiber lost") && message.contains("dropped unjoined"),
                    "{message}"
                );
            }
            e => panic!("expected Error::Panicked, got {e}"),
        }
    };
    // The handle goes before the fiber runs.
    panicked(0, || drop(spawn(|| -> u8 { panic!("fiber lost") })));
    panicked(1, || {
        drop(spawn_on(WorkerId::new(1), || -> u8 {
            panic!("fiber lost")
        }))
    });
    // The handle outlives the panic but is dropped without a join.
    panicked(1, || {
        let h = spawn_on(WorkerId::new(1), || -> u8 { panic!("fiber lost") });
        while !h.is_finished() {
            yield_now();
        }
        drop(h);
    });

    let ran = gossamer::run(cfg(2), || {
        let t = entrust(0u32);
        for w in 0..2 {
            let t = t.clone();
            drop(spawn_on_with(WorkerId::new(w), t, |t| t.apply(|c| *c += 1)));
        }
        // A joined panic is the joiner's to handle.
        let h = spawn(|| -> u8 { panic!("caught") });
        assert!(matches!(
            h.try_join(),
            Err(gossamer::Error::FiberPanicked(_))
        ));
        while t.apply(|c| *c) < 2 {
            yield_now();
        }
        t.apply(|c| *c)
    });
    assert_eq!(ran.unwrap(), 2);
}

/// A joined fiber's panic, raised again by `join`, ends the run as that panic, even when the
/// unwinding drops the handle of another fiber that failed too: the run named the second fiber
/// ("... whose JoinHandle was dropped unjoined"), recorded by its handle's drop before main's
/// panic reached the run.
#[test]
fn the_panic_that_unwinds_main_is_the_runs_failure_not_a_handle_it_drops() {
    for remote in [false, true] {
        let e = gossamer::run(cfg(2), move || {
            let start = |text: &'static str| {
                if remote {
                    spawn_on(WorkerId::new(1), move || -> u32 { panic!("{text}") })
                } else {
                    spawn(move || -> u32 { panic!("{text}") })
                }
            };
            let first = start("first fiber fails");
            let second = start("second fiber fails");
            while !(first.is_finished() && second.is_finished()) {
                yield_now();
            }
            first.join() + second.join()
        })
        .expect_err("the joined panic must end the run");
        match e {
            gossamer::Error::Panicked {
                worker, message, ..
            } => {
                assert_eq!(worker, 0, "remote {remote}: {message}");
                assert!(
                    message.contains("first fiber fails") && !message.contains("unjoined"),
                    "remote {remote}: {message}"
                );
            }
            e => panic!("remote {remote}: expected Error::Panicked, got {e}"),
        }
    }
}

#[test]
fn large_arguments_and_results_are_not_truncated() {
    gossamer::run(cfg(2).slot_size(256), || {
        let t = entrust_on(WorkerId::new(1), || 0usize);
        #[derive(Clone, Copy)]
        struct Big([u64; 64]);
        let big = Big(std::array::from_fn(|i| i as u64));
        let s = t.apply(move |_| big.0.iter().sum::<u64>());
        assert_eq!(s, (0..64).sum());
        let v: Vec<u8> = (0..1_000_000).map(|i| (i % 251) as u8).collect();
        let back = t.apply_with(v.clone(), |n, v| {
            *n = v.len();
            v
        });
        assert_eq!(back, v);
        let arr = t.apply(|_| (([7u32; 32], [7u32; 32]), ([7u32; 32], [7u32; 32])));
        assert!(
            [arr.0.0, arr.0.1, arr.1.0, arr.1.1]
                .iter()
                .flatten()
                .all(|&x| x == 7)
        );
    })
    .unwrap();
}

#[test]
fn eight_workers_on_two_cores_finish_quickly() {
    let start = std::time::Instant::now();
    let v = gossamer::spmd(cfg(8), |w| {
        let mine = entrust(0u64);
        let mut sum = 0;
        for k in 0..200 {
            let t = entrust_on(WorkerId::new((w.id() + k) % w.count()), || 1u64);
            sum += t.apply(|n| *n);
        }
        sum + mine.apply(|n| *n)
    })
    .unwrap();
    assert_eq!(v, vec![200; 8]);
    assert!(start.elapsed().as_secs() < 10, "took {:?}", start.elapsed());
}

#[test]
fn pinned_workers_run_on_distinct_allowed_cpus() {
    let cpus = gossamer::available_cpus();
    let n = cpus.min(2);
    let v = gossamer::spmd(cfg(n).pin(true), |_| {
        // SAFETY: sched_getcpu has no preconditions.
        unsafe { libc::sched_getcpu() }
    })
    .unwrap();
    if n == 2 {
        assert_ne!(v[0], v[1], "pinned workers share a CPU: {v:?}");
    }
    // More workers than CPUs: pinning is skipped, and the run still works.
    let v = gossamer::spmd(cfg(cpus + 2).pin(true), |w| w.id()).unwrap();
    assert_eq!(v, (0..cpus + 2).collect::<Vec<_>>());
}

#[test]
fn blocking_calls_outside_a_runtime_panic_with_what_to_do() {
    // A trust handed out of `run` names a property of a runtime that has ended.
    let t = gossamer::run(cfg(1), || entrust(1u32)).unwrap();
    for (call, attempt) in [
        (
            "Trust::apply",
            Box::new(|| {
                let _ = t.apply(|n| *n);
            }) as Box<dyn Fn()>,
        ),
        (
            "Trust::apply_with",
            Box::new(|| t.apply_with(2u32, |n, a| *n += a)),
        ),
        // The `try_` forms panic too (misuse, not a failed request), under their own names.
        (
            "Trust::try_apply",
            Box::new(|| {
                let _ = t.try_apply(|n| *n);
            }),
        ),
        (
            "Trust::try_apply_with",
            Box::new(|| {
                let _ = t.try_apply_with(2u32, |n, a| *n += a);
            }),
        ),
        (
            "Trust::apply_then",
            Box::new(|| t.apply_then(|n| *n, |_| ())),
        ),
        (
            "Trust::try_apply_then",
            Box::new(|| t.try_apply_then(|n| *n, |_| ())),
        ),
    ] {
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(attempt)).unwrap_err();
        let m = p.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            m.starts_with(&format!(
                "gossamer: {call} was called outside a gossamer worker"
            )),
            "{call}: {m}"
        );
    }
}

#[test]
fn ring_sizes_past_32_bits_are_refused_not_wrapped() {
    // 2^32 + 256 would wrap to a 256-byte slot while batches were sized for the full value.
    for config in [
        cfg(2).slot_size((1 << 32) + 256),
        cfg(2).slots_per_ring((1 << 32) + 2),
    ] {
        match gossamer::run(config, || ()) {
            Err(gossamer::Error::Config(m)) => {
                assert!(m.contains("below 2^32") || m.contains("to 64 MiB"), "{m}")
            }
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }
}

#[test]
fn a_recv_woken_for_a_message_another_fiber_took_still_gets_the_next_one() {
    // A deposit wakes the key's waiters; here the root takes the message before the woken
    // receiver runs, so the receiver must wait again, registered, for the next one.
    let got = ends_within_a_minute(|| {
        gossamer::run(cfg(1), || {
            let me = WorkerId::new(0);
            let receiver = spawn(move || gossamer::recv::<u32>(me, 9));
            yield_now();
            gossamer::send(me, 9, 1u32);
            assert_eq!(gossamer::try_recv::<u32>(me, 9), Some(1));
            yield_now();
            gossamer::send(me, 9, 2u32);
            receiver.join()
        })
    });
    assert_eq!(got.expect("the job failed"), 2);
}

#[test]
fn a_fiber_panic_whose_payload_is_not_a_string_reaches_its_joiner() {
    // `panic_any` with a number: the joiner gets the fiber's panic, here and across workers,
    // and the job goes on (it was taken for the coroutine library's own unwind and ended the job).
    let r = ends_within_a_minute(|| {
        gossamer::run(cfg(2), || {
            let here = spawn(|| -> u8 { std::panic::panic_any(7u32) }).try_join();
            let there =
                spawn_on(WorkerId::new(1), || -> u8 { std::panic::panic_any(7u32) }).try_join();
            let joined = |r: Result<u8, gossamer::Error>| match r {
                Err(gossamer::Error::FiberPanicked(m)) => m,
                other => panic!("expected the fiber's panic, got {other:?}"),
            };
            (joined(here), joined(there), spawn(|| 5u8).join())
        })
    });
    let (here, there, next) = r.expect("the job failed");
    assert!(here.contains("non-string"), "{here}");
    assert!(there.contains("non-string"), "{there}");
    assert_eq!(next, 5);
}

/// A fiber's closure may capture any amount: `corosensei` takes an entry closure of at most
/// 1 KiB by value, and a larger capture ended the whole job ("type is too big to transfer").
#[test]
fn fibers_whose_closures_capture_kilobytes_start() {
    let r = gossamer::run(cfg(2), || {
        let big = [3u64; 512];
        let here = spawn(move || big.iter().sum::<u64>()).join();
        let there = spawn_on(WorkerId::new(1), move || big.iter().sum::<u64>()).join();
        let with = spawn_on_with(WorkerId::new(1), vec![1u64; 10], move |v: Vec<u64>| {
            big.iter().sum::<u64>() + v.iter().sum::<u64>()
        })
        .join();
        (here, there, with)
    });
    assert_eq!(r.unwrap(), (1536, 1536, 1546));
}

/// A property alive when the run ends is dropped in delegated context, as during the run: a
/// blocking call in its destructor gets `BlockingInDelegatedContext` and the run its result.
/// (It panicked with "called outside a fiber" and turned a good run into `Err`.)
#[test]
fn a_destructor_blocking_at_the_end_of_a_run_is_refused_as_during_it() {
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    struct Holder(Trust<u64>);
    impl Drop for Holder {
        fn drop(&mut self) {
            if let Err(DelegationError::BlockingInDelegatedContext) = self.0.try_apply(|n| *n) {
                SEEN.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let r = gossamer::run(cfg(2), || {
        let other = entrust_on(WorkerId::new(1), || 7u64);
        let holder = entrust(Holder(other.clone()));
        // Leaked, so that the property outlives the run and teardown drops it.
        std::mem::forget(holder);
        other.apply(|n| *n)
    });
    assert_eq!(r.unwrap(), 7);
    assert_eq!(
        SEEN.load(Ordering::SeqCst),
        1,
        "the destructor ran once, refused"
    );
}

/// A run inside a run is refused with a reason, as it is in a launched job; alone it ran and
/// kept the outer worker from serving for as long as it lasted.
#[test]
fn a_run_inside_a_run_is_refused() {
    let inner = gossamer::run(cfg(2), || {
        gossamer::run(cfg(1), || 42)
            .map_err(|e| e.to_string())
            .unwrap_err()
    })
    .unwrap();
    assert!(inner.contains("runs cannot nest"), "{inner}");
}

/// A worker id past 32 bits is refused instead of being cut to another worker's (a `send` to
/// worker 2^32 + 1 reached worker 1), and `try_recv` from a worker that does not exist panics as
/// `recv` does instead of answering `None` for ever.
#[test]
fn worker_ids_that_do_not_exist_are_refused() {
    let big = std::panic::catch_unwind(|| WorkerId::new((1usize << 32) + 1));
    let message = big.expect_err("a 33-bit worker id was accepted");
    let text = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(text.contains("does not exist"), "{text}");
    let r = gossamer::run(cfg(2), || {
        std::panic::catch_unwind(|| gossamer::try_recv::<u64>(WorkerId::new(5), 1))
            .map_err(|p| p.downcast_ref::<String>().cloned().unwrap_or_default())
    })
    .unwrap();
    let text = r.expect_err("try_recv from worker 5 of 2 did not panic");
    assert!(text.contains("worker 5 does not exist"), "{text}");
}

/// A ring geometry whose rings cannot fit in this machine's memory is a configuration error, not
/// an aborted allocation (`slots_per_ring(1 << 30)` aborted the process) or minutes of swapping
/// (4096 workers keep gigabytes for each other before any ring is made); one that fits still
/// runs.
#[test]
fn rings_larger_than_the_machine_are_refused_up_front() {
    for config in [
        cfg(2).slots_per_ring(1 << 30),
        Config::default().workers(4096).slots_per_ring(1 << 24),
    ] {
        match gossamer::run(config, || ()) {
            Err(gossamer::Error::Config(m)) => {
                assert!(m.contains("more than this machine's"), "{m}")
            }
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }
    assert!(gossamer::run(cfg(2).slots_per_ring(64), || ()).is_ok());
}
