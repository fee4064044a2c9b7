//! A job whose fibers wait for something that can never come ends with a report naming what
//! they wait for, instead of hanging; a job that is only slow does not.

use gossamer::{Config, Error, WorkerId, recv, send};
use std::time::{Duration, Instant};

/// Runs `f` on another thread and fails the test if it takes longer than a minute (the job
/// hung) rather than hang the test suite.
fn within_a_minute<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> (R, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    let r = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the job hung instead of ending with a report");
    (r, start.elapsed())
}

/// Computes without a system call or a yield until `deadline` (the worker is busy, not idle);
/// returns the result, which callers fold into theirs so the work is not optimised away.
fn compute_until(deadline: Instant, seed: u64) -> u64 {
    let mut x = seed;
    while Instant::now() < deadline {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x
}

#[test]
fn a_recv_whose_send_never_comes_ends_the_job_naming_it() {
    let (r, took) = within_a_minute(|| {
        gossamer::spmd(Config::default().workers(2), |w| {
            if w.id() == 0 {
                let _: u64 = recv(WorkerId::new(1), 7);
            }
        })
    });
    match r {
        Err(Error::Deadlock { rank: 0, waits }) => assert_eq!(
            waits,
            ["worker 0: a fiber waits for a message from worker 1 under tag 0x7"],
        ),
        other => panic!("expected a deadlock, got {other:?}"),
    }
    assert!(took < Duration::from_secs(10), "the report took {took:?}");
}

#[test]
fn fibers_joining_each_other_in_a_cycle_end_the_job() {
    let (r, _) = within_a_minute(|| {
        gossamer::run(Config::default().workers(2), || {
            // The main fiber waits for a message its own worker's other fiber would send after
            // receiving one from the main fiber: each waits for the other.
            let h = gossamer::spawn_on(WorkerId::new(1), || {
                let v: u64 = recv(WorkerId::new(0), 1);
                send(WorkerId::new(0), 2, v);
            });
            let _: u64 = recv(WorkerId::new(1), 2);
            h.join();
        })
    });
    let e = r.expect_err("a deadlock");
    let text = e.to_string();
    assert!(
        text.starts_with("the job is deadlocked: every worker of every rank is idle")
            && text.contains("worker 0: a fiber waits for a message from worker 1 under tag 0x2")
            && text.contains("worker 1: a fiber waits for a message from worker 0 under tag 0x1"),
        "{text}"
    );
}

/// A fiber that waits seconds for a worker busy in a long computation is no deadlock: that
/// worker is not idle.
#[test]
fn a_long_wait_for_a_busy_worker_is_no_deadlock() {
    let (r, took) = within_a_minute(|| {
        gossamer::spmd(Config::default().workers(2), |w| {
            if w.id() == 0 {
                recv::<u64>(WorkerId::new(1), 3)
            } else {
                std::thread::sleep(Duration::from_millis(2500));
                send(WorkerId::new(0), 3, 42u64);
                0
            }
        })
    });
    assert_eq!(r.expect("no deadlock"), vec![42, 0]);
    assert!(took >= Duration::from_millis(2500));
}

/// A worker that a message wakes and that then computes for 1.5 s without a system call, while
/// the other worker sleeps waiting for its answer, is no deadlock (its quiet report from before
/// the message must not stand while it computes).
#[test]
fn computing_after_a_message_is_no_deadlock() {
    let (r, _) = within_a_minute(|| {
        gossamer::spmd(Config::default().workers(2), |w| {
            if w.id() == 0 {
                send(WorkerId::new(1), 1, 7u64);
                recv::<u64>(WorkerId::new(1), 2)
            } else {
                let v: u64 = recv(WorkerId::new(0), 1);
                let x = compute_until(Instant::now() + Duration::from_millis(1500), v);
                send(WorkerId::new(0), 2, v + u64::from(x == 0));
                0
            }
        })
    });
    assert_eq!(r.expect("no deadlock"), vec![7, 0]);
}

/// Fibers waiting in `wait_for` for conditions nobody will make true are seen like any other
/// wait: the job ends as deadlocked, the report counting them.
#[test]
fn a_wait_for_that_nothing_can_satisfy_ends_the_job_naming_it() {
    let (r, took) = within_a_minute(|| {
        gossamer::spmd(Config::default().workers(2), |w| {
            let flag = std::sync::atomic::AtomicBool::new(false);
            if w.id() == 1 {
                gossamer::wait_for(|| flag.load(std::sync::atomic::Ordering::Acquire));
            }
        })
    });
    match r {
        Err(Error::Deadlock { rank: 0, waits }) => assert_eq!(
            waits,
            [
                "worker 1: 1 fiber waits in gossamer::wait_for (a collective's step on the host \
                 board, say)"
            ],
        ),
        other => panic!("expected a deadlock, got {other:?}"),
    }
    assert!(took < Duration::from_secs(10), "the report took {took:?}");
}

/// A `wait_for` whose condition another worker makes true only after computing for 1.5 s (and
/// one waiting for a value from a spawned fiber of its own worker) ends when it holds, with the
/// value, and is no deadlock; a panic in a condition reaches the waiting fiber's joiner.
#[test]
fn a_wait_for_ends_when_its_condition_holds_and_raises_its_panics() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let (r, _) = within_a_minute(|| {
        let word = Arc::new(AtomicU64::new(0));
        let mine = Arc::clone(&word);
        gossamer::spmd(Config::default().workers(2), move |w| {
            if w.id() == 0 {
                gossamer::wait_for(|| mine.load(Ordering::Acquire) >= 1);
                let local = Arc::new(AtomicU64::new(0));
                let setter = Arc::clone(&local);
                let h = gossamer::spawn(move || {
                    gossamer::yield_now();
                    setter.store(5, Ordering::Release);
                });
                gossamer::wait_for(|| local.load(Ordering::Acquire) == 5);
                h.join();
                let calls = std::cell::Cell::new(0u32);
                let panicked = gossamer::spawn(move || {
                    gossamer::wait_for(|| {
                        calls.set(calls.get() + 1);
                        assert!(calls.get() < 3, "the condition panics on its third test");
                        false
                    })
                })
                .try_join();
                let text = panicked.expect_err("a panic in the condition").to_string();
                assert!(text.contains("the condition panics"), "{text}");
                mine.load(Ordering::Acquire) + local.load(Ordering::Acquire)
            } else {
                let x = compute_until(Instant::now() + Duration::from_millis(1500), 1);
                mine.store(1 + u64::from(x == 0), Ordering::Release);
                0
            }
        })
    });
    assert_eq!(r.expect("no deadlock"), vec![6, 0]);
}

/// A `wait_for` condition may not block, and is told so the same way in every test of it: on
/// the fiber (its first test) and on the worker between fibers (the later ones). `try_apply`
/// answers `BlockingInDelegatedContext` in both; before, the fiber's test ran the apply and the
/// worker's panicked with "called outside a fiber", though the caller was in one. A blocking
/// `apply` there reaches the waiting fiber's joiner as that refusal.
#[test]
fn a_blocking_call_in_a_wait_for_condition_is_refused_in_every_test_of_it() {
    use gossamer::DelegationError;
    use std::cell::RefCell;
    use std::rc::Rc;
    let (r, _) = within_a_minute(|| {
        gossamer::run(Config::default().workers(2), || {
            let t = gossamer::entrust_on(WorkerId::new(1), || 7u64);
            let seen: Rc<RefCell<Vec<Result<u64, DelegationError>>>> = Rc::default();
            let tests = Rc::clone(&seen);
            gossamer::wait_for(|| {
                let mut s = tests.borrow_mut();
                s.push(t.try_apply(|v| *v));
                s.len() >= 3
            });
            // The worker may test a condition more than once before it wakes the fiber.
            let answers = seen.take();
            let blocking = gossamer::spawn(move || {
                gossamer::wait_for(|| t.apply(|v| *v) == 7);
            })
            .try_join();
            (
                answers,
                blocking.expect_err("apply in a condition").to_string(),
            )
        })
    });
    let (answers, blocking) = r.expect("the run ends well");
    assert!(
        answers.len() >= 3
            && answers
                .iter()
                .all(|a| *a == Err(DelegationError::BlockingInDelegatedContext)),
        "every test of the condition must be refused alike: {answers:?}"
    );
    assert!(
        blocking.contains(gossamer::BLOCKING_IN_DELEGATED)
            && blocking.contains("wait_for condition"),
        "{blocking}"
    );
}

/// A fiber that a `wait_for` lets go on and that then computes for 2.5 s, while the other
/// worker waits for its message, is no deadlock: the worker's quiet report from before must not
/// stand while the fiber runs. (The condition comes true while the worker sleeps between looks,
/// so this does not reach the narrow window of a condition coming true between the turn's test
/// and the quiet report's; that one is closed by construction, see `WorkerCore::try_finish`.)
#[test]
fn computing_after_a_wait_for_is_no_deadlock() {
    let (r, _) = within_a_minute(|| {
        gossamer::spmd(Config::default().workers(2), |w| {
            if w.id() == 0 {
                recv::<u64>(WorkerId::new(1), 4)
            } else {
                let start = Instant::now();
                gossamer::wait_for(|| start.elapsed() >= Duration::from_millis(300));
                let x = compute_until(start + Duration::from_millis(2800), 1);
                send(WorkerId::new(0), 4, 9 + u64::from(x == 0));
                0
            }
        })
    });
    assert_eq!(r.expect("no deadlock"), vec![9, 0]);
}

/// Many fibers on both workers in `wait_for` at once, each waiting for its turn in a chain that
/// the fibers before it make (through an atomic shared by both workers): every one gets its
/// turn, in order, and the job is no deadlock while the chain moves.
#[test]
fn a_chain_of_fibers_in_wait_for_on_both_workers_takes_its_turns_in_order() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};
    const FIBERS: u64 = 200;
    // Statics: closures sent to another worker capture plain data only. This test alone uses them.
    static TURN: AtomicU64 = AtomicU64::new(0);
    static LOG: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    let (r, _) = within_a_minute(|| {
        gossamer::run(Config::default().workers(2), || {
            // Spawned in reverse so that no fiber finds its turn already come.
            let handles: Vec<_> = (0..FIBERS)
                .rev()
                .map(|i| {
                    gossamer::spawn_on(WorkerId::new((i % 2) as usize), move || {
                        gossamer::wait_for(|| TURN.load(Ordering::Acquire) == i);
                        LOG.lock().unwrap().push(i);
                        TURN.store(i + 1, Ordering::Release);
                    })
                })
                .collect();
            for h in handles {
                h.join();
            }
        })
    });
    r.expect("no deadlock");
    assert_eq!(TURN.load(Ordering::Relaxed), FIBERS);
    assert_eq!(*LOG.lock().unwrap(), (0..FIBERS).collect::<Vec<_>>());
}

/// What a fiber's destructor does with its trust when the run drops that fiber unfinished.
struct ApplyOnDrop(
    gossamer::Trust<u64>,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
);

impl Drop for ApplyOnDrop {
    fn drop(&mut self) {
        let r = self.0.try_apply(|x: &mut u64| *x);
        self.1.lock().unwrap().push(format!("{r:?}"));
    }
}

/// A run that ends with fibers unfinished drops them, running their destructors; a `try_apply`
/// or `try_join` there answers `Stopped`. It panicked ("called outside a fiber"), and a panic
/// while the fiber's stack unwinds aborted the whole process instead of returning the run's
/// result (found by an API walkthrough).
#[test]
fn destructors_of_fibers_a_failed_run_drops_get_stopped_not_an_abort() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let (r, _) = within_a_minute(move || {
        gossamer::run(Config::default().workers(2), move || {
            let _guard = ApplyOnDrop(gossamer::entrust_on(WorkerId::new(1), || 7u64), log);
            struct JoinOnDrop(Option<gossamer::JoinHandle<u64>>);
            impl Drop for JoinOnDrop {
                fn drop(&mut self) {
                    let r = self.0.take().map(|h| h.try_join());
                    assert!(matches!(r, Some(Err(Error::Stopped))), "{r:?}");
                }
            }
            let _join = JoinOnDrop(Some(gossamer::spawn_on(WorkerId::new(1), || {
                recv::<u64>(WorkerId::new(0), 9)
            })));
            // A yield there has nothing to yield to, and returns (it aborted the process).
            struct YieldOnDrop;
            impl Drop for YieldOnDrop {
                fn drop(&mut self) {
                    gossamer::yield_now();
                }
            }
            let _yield = YieldOnDrop;
            let _: u8 = recv(WorkerId::new(1), 42);
        })
    });
    assert!(matches!(r, Err(Error::Deadlock { .. })), "{r:?}");
    assert_eq!(*seen.lock().unwrap(), ["Err(Stopped)"]);
}

/// A call that can only wait (`recv` here) in such a destructor cannot answer at all, and its
/// panic aborts the process, as any panic while a stack unwinds does; its message then says
/// where the call was and what to use instead. It said "outside a fiber", though the code was
/// written in one. Runs itself as a child process.
#[test]
fn a_recv_in_the_destructor_of_a_dropped_fiber_says_what_to_use_instead() {
    if std::env::var_os("GSM_DEADLOCK_CHILD").is_some() {
        struct RecvOnDrop;
        impl Drop for RecvOnDrop {
            fn drop(&mut self) {
                let _: u64 = recv(WorkerId::new(1), 5);
            }
        }
        let _ = gossamer::run(Config::default().workers(2), || {
            let _guard = RecvOnDrop;
            let _: u8 = recv(WorkerId::new(1), 42);
        });
        unreachable!("the recv in the destructor must abort the process");
    }
    let name = "a_recv_in_the_destructor_of_a_dropped_fiber_says_what_to_use_instead";
    let (out, _) = within_a_minute(move || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env("GSM_DEADLOCK_CHILD", "1")
            .output()
            .unwrap()
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "gossamer: a blocking call (recv, wait_for, apply, join, a collective) in a \
             destructor that runs because the run ended with its fiber unfinished"
        ) && stderr.contains("use try_apply or try_join"),
        "{stderr}"
    );
    assert!(!stderr.contains("outside a fiber"), "{stderr}");
}

/// A fiber in `gossamer::sleep` ends its wait by itself: a job whose other fibers wait for it is
/// no deadlock, its worker's other fibers and requests go on meanwhile, and it wakes up on time.
/// (A `wait_for` on the clock, the way to sleep before `sleep` existed, was reported deadlocked
/// after a second.)
#[test]
fn a_sleeping_fiber_is_no_deadlock_and_stops_only_itself() {
    let (r, took) = within_a_minute(|| {
        gossamer::spmd(Config::default().workers(2), |w| {
            if w.id() == 0 {
                recv::<u64>(WorkerId::new(1), 4)
            } else {
                // Worker 1: one fiber sleeps 2.5 s, another counts yields meanwhile.
                let counted = std::rc::Rc::new(std::cell::Cell::new(0u64));
                let c = counted.clone();
                let counter = gossamer::spawn(move || {
                    for _ in 0..1000 {
                        c.set(c.get() + 1);
                        gossamer::yield_now();
                    }
                });
                let start = Instant::now();
                gossamer::sleep(Duration::from_millis(2500));
                let slept = start.elapsed();
                assert!(
                    slept >= Duration::from_millis(2500) && slept < Duration::from_secs(4),
                    "slept {slept:?}"
                );
                assert_eq!(counted.get(), 1000, "the other fiber stood still");
                counter.join();
                send(WorkerId::new(0), 4, 42u64);
                0
            }
        })
    });
    assert_eq!(r.expect("no deadlock"), vec![42, 0]);
    assert!(took >= Duration::from_millis(2500));
}

/// Short sleeps on an idle worker end close to their time (the worker sleeps until the
/// deadline rather than in fixed spells), and a sleep of zero returns at once.
#[test]
fn short_sleeps_end_close_to_their_time() {
    let late = gossamer::run(Config::default().workers(1), || {
        gossamer::sleep(Duration::ZERO);
        let mut late = Vec::new();
        for ms in [1u64, 5, 20, 50] {
            let d = Duration::from_millis(ms);
            let start = Instant::now();
            gossamer::sleep(d);
            let took = start.elapsed();
            assert!(took >= d, "sleep({d:?}) returned after {took:?}");
            late.push(took - d);
        }
        late
    })
    .unwrap();
    // Generous for a shared machine: a wake-up within 20 ms past the deadline.
    assert!(
        late.iter().all(|l| *l < Duration::from_millis(20)),
        "late by {late:?}"
    );
}

/// A detached fiber in `sleep` when the main fiber returns keeps the run going until it wakes
/// and ends, as a running fiber does (a sleep ends by itself; a fiber waiting in `recv` would be
/// dropped instead).
#[test]
fn a_run_ends_after_its_detached_sleeping_fiber() {
    static WOKE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let (r, took) = within_a_minute(|| {
        gossamer::run(Config::default().workers(2), || {
            drop(gossamer::spawn_on(WorkerId::new(1), || {
                gossamer::sleep(Duration::from_millis(300));
                WOKE.store(true, std::sync::atomic::Ordering::SeqCst);
            }));
        })
    });
    r.expect("the run ends well");
    assert!(
        WOKE.load(std::sync::atomic::Ordering::SeqCst),
        "the sleeper was dropped"
    );
    assert!(took >= Duration::from_millis(300), "{took:?}");
}
