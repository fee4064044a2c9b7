//! Tests of completion scopes within one process (several workers); the cross-rank tests are
//! `tests/tests/finish.rs`.

use std::cell::Cell;
use std::rc::Rc;

use crate::{
    Config, Trust, WorkerId, entrust_on, finish, finish_all, finish_all_min, run, spawn, spawn_on,
    spawn_on_with, spmd,
};

/// A chain of `depth` requests, each started by the previous one's closure on the next worker.
fn hop(counters: Vec<Trust<u64>>, at: usize, depth: u32) {
    if depth == 0 {
        return;
    }
    let next = (at + 1) % counters.len();
    let t = counters[at].clone();
    // The closure runs on the trustee and starts the next hop from there: `spawn` inside a
    // delegated closure is a task of the scope too.
    t.apply_then(
        move |n| {
            *n += 1;
            let _ = spawn(move || ());
        },
        move |()| hop(counters, next, depth - 1),
    );
}

#[test]
fn finish_waits_for_work_started_in_callbacks_and_closures() {
    let total = run(Config::default().workers(3), || {
        let counters: Vec<Trust<u64>> = (0..3)
            .map(|w| entrust_on(WorkerId::new(w), || 0u64))
            .collect();
        finish(|| {
            for _ in 0..20 {
                hop(counters.clone(), 0, 50);
            }
        });
        // Without the scope these reads could run before the last hops.
        counters.iter().map(|c| c.apply(|n| *n)).sum::<u64>()
    })
    .unwrap();
    assert_eq!(total, 20 * 50);
}

#[test]
fn nested_scopes_each_wait_for_their_own_tasks() {
    run(Config::default().workers(2), || {
        let t = entrust_on(WorkerId::new(1), || 0u64);
        let inner_done = Rc::new(Cell::new(0u32));
        let outer_done = Rc::new(Cell::new(0u32));
        let (i2, o2) = (inner_done.clone(), outer_done.clone());
        finish(|| {
            for _ in 0..10 {
                let o = o2.clone();
                t.apply_then(|n| *n += 1, move |()| o.set(o.get() + 1));
            }
            finish(|| {
                for _ in 0..10 {
                    let i = i2.clone();
                    t.apply_then(|n| *n += 1, move |()| i.set(i.get() + 1));
                }
            });
            assert_eq!(
                i2.get(),
                10,
                "the inner scope returned before its callbacks"
            );
            // A fiber of the outer scope that opens a scope of its own.
            let _ = spawn_on_with(WorkerId::new(1), t.clone(), |t2| {
                finish(|| {
                    for _ in 0..5 {
                        t2.apply_then(|n| *n += 100, |()| ());
                    }
                });
            });
        });
        assert_eq!(outer_done.get(), 10);
        assert_eq!(t.apply(|n| *n), 20 + 500);
    })
    .unwrap();
}

#[test]
fn a_panic_in_a_delegated_closure_reaches_the_caller() {
    run(Config::default().workers(2), || {
        let t = entrust_on(WorkerId::new(1), || 0u64);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            finish(|| {
                t.apply_then(|n| *n += 1, |()| ());
                let _ = spawn_on(WorkerId::new(1), || {
                    let u = crate::entrust(0u32);
                    u.apply_then(|_| panic!("relaxation went wrong"), |()| ());
                });
            })
        }));
        let message = crate::worker::panic_message(&*r.expect_err("finish must panic"));
        assert!(
            message.contains("relaxation went wrong"),
            "the task's panic is not in {message:?}"
        );
        // The run goes on: the scope reported the failure, nobody else does.
        assert_eq!(t.apply(|n| *n), 1);
    })
    .unwrap();
}

#[test]
fn a_panic_of_the_body_reaches_the_caller_after_its_tasks() {
    run(Config::default().workers(2), || {
        let t = entrust_on(WorkerId::new(1), || 0u64);
        let answered = Rc::new(Cell::new(0u32));
        let a = answered.clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            finish(|| {
                for _ in 0..100 {
                    let a = a.clone();
                    t.apply_then(|n| *n += 1, move |()| a.set(a.get() + 1));
                }
                panic!("body failed");
            })
        }));
        let message = crate::worker::panic_message(&*r.expect_err("finish must panic"));
        assert_eq!(message, "body failed");
        assert_eq!(
            answered.get(),
            100,
            "finish panicked before its tasks finished"
        );
    })
    .unwrap();
}

#[test]
fn every_spmd_worker_finishes_its_own_scope() {
    let seen = spmd(Config::default().workers(2), |w| {
        let count = Rc::new(Cell::new(0u32));
        let c = count.clone();
        let peer = WorkerId::new((w.id() + 1) % w.count());
        let there = entrust_on(peer, || 0u8);
        finish(move || {
            for _ in 0..1000 {
                let c = c.clone();
                let _ = spawn_on(peer, || 1u32);
                there.apply_then(|_| (), move |()| c.set(c.get() + 1));
            }
        });
        count.get()
    })
    .unwrap();
    assert_eq!(seen, vec![1000, 1000]);
}

#[test]
fn work_started_by_a_blocking_apply_s_closure_is_waited_for() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static ANSWERED: AtomicBool = AtomicBool::new(false);
    run(Config::default().workers(3), || {
        let relay = entrust_on(WorkerId::new(1), || 0u64);
        let slow = entrust_on(WorkerId::new(2), || 0u64);
        finish(|| {
            // The body itself starts nothing asynchronous: the closure on worker 1 does, and its
            // callback there runs some 50 ms later.
            relay.apply_with(slow.clone(), |_, slow| {
                slow.apply_then(
                    |n| {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        *n += 1;
                    },
                    |()| ANSWERED.store(true, Ordering::SeqCst),
                );
            });
        });
        assert!(
            ANSWERED.load(Ordering::SeqCst),
            "finish returned before the relayed request's callback ran"
        );
    })
    .unwrap();
}

thread_local! {
    static LANDED: Cell<u64> = const { Cell::new(0) };
}

/// A chain of visits from worker `at` over the next `left` workers (`to`: a trust on each),
/// each counted where it lands.
fn visit(to: Vec<Trust<()>>, at: usize, left: usize) {
    if left == 0 {
        return;
    }
    to[at].clone().apply_with_then(
        to,
        move |(), to| {
            LANDED.with(|c| c.set(c.get() + 1));
            visit(to, (at + 1) % crate::worker_count(), left - 1);
        },
        |()| (),
    );
}

#[test]
fn a_collective_scope_waits_for_every_worker_s_work_and_takes_a_minimum() {
    let seen = spmd(Config::default().workers(3), |w| {
        let to: Vec<Trust<()>> = (0..3)
            .map(|x| entrust_on(WorkerId::new(x), || ()))
            .collect();
        let mut rounds = Vec::new();
        for round in 1..=5u64 {
            // Every worker's chains land 4 times on every worker per round; worker 2's start
            // late, so the others' scopes must wait for work not yet started when theirs ended.
            if w.id() == 2 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            // The samples of the last wave are read once the round's work is done everywhere:
            // their minimum is exactly the round's count (worker 2's exceed it by 1).
            let ((), least) = finish_all_min(
                || (0..4).for_each(|c| visit(to.clone(), (w.id() + c) % 3, 3)),
                || LANDED.with(Cell::get) + u64::from(w.id() == 2),
            );
            // Another worker may already be in the next round, whose visits can land here.
            rounds.push((LANDED.with(Cell::get).min(round * 12), least, round * 12));
        }
        finish_all(|| ());
        rounds
    })
    .unwrap();
    for rounds in seen {
        for (landed, least, expected) in rounds {
            assert_eq!(landed, expected, "visits here when the scope returned");
            assert_eq!(least, expected, "the minimum of the samples");
        }
    }
}

#[test]
fn a_panic_in_a_collective_scope_reaches_every_worker() {
    let seen = spmd(Config::default().workers(2), |w| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            finish_all(|| {
                if w.id() == 0 {
                    entrust_on(WorkerId::new(1), || ())
                        .apply_then(|()| panic!("bad bucket"), |()| ());
                }
            })
        }));
        crate::worker::panic_message(&*r.expect_err("finish_all must panic"))
    })
    .unwrap();
    assert!(seen.iter().all(|m| m.contains("bad bucket")), "{seen:?}");
}

#[test]
fn a_collective_scope_sends_its_last_wave_before_returning() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};
    static DONE: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
    // After each scope every worker computes without polling until the other is out of it too: a
    // last wave message left staged here would keep the other in the scope, and both time out.
    let seen = spmd(Config::default().workers(2), |w| {
        let peer = entrust_on(WorkerId::new(1 - w.id()), || ());
        let mut late = Vec::new();
        for round in 1..=20u32 {
            finish_all(|| peer.apply_then(|()| (), |()| ()));
            DONE[w.id()].store(round, Ordering::SeqCst);
            let start = Instant::now();
            while DONE[1 - w.id()].load(Ordering::SeqCst) < round {
                if start.elapsed() > Duration::from_millis(500) {
                    // Failed; polling now lets the staged message go, so the test ends.
                    late.push(round);
                    while DONE[1 - w.id()].load(Ordering::SeqCst) < round {
                        crate::yield_now();
                    }
                }
                std::hint::spin_loop();
            }
        }
        late
    })
    .unwrap();
    assert!(
        seen.iter().all(Vec::is_empty),
        "rounds that timed out: {seen:?}"
    );
}
