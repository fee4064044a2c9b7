//! A fiber that applies to a local property in a loop (never suspending) must not starve the
//! requests other workers send to its worker.

use std::sync::atomic::{AtomicBool, Ordering};

use gossamer::{Config, WorkerId, entrust, entrust_on};

/// Applies to a property on this worker in a loop that never suspends, until `flag` is set
/// (`true`) or a bound is reached (`false`).
fn applies_locally_until(flag: &AtomicBool) -> bool {
    let mine = entrust(0u64);
    for _ in 0..200_000_000u64 {
        mine.apply(|c| *c += 1);
        if flag.load(Ordering::Relaxed) {
            return true;
        }
    }
    false
}

#[test]
fn a_local_apply_loop_still_serves_other_workers() {
    static REMOTE_DONE: AtomicBool = AtomicBool::new(false);
    let served_during_loop = gossamer::spmd(Config::default().workers(2), |w| {
        if w.id() == 1 {
            let t = entrust_on(WorkerId::new(0), || 0u64);
            t.apply(|c| *c += 1);
            REMOTE_DONE.store(true, Ordering::SeqCst);
            return true;
        }
        // Bounded: without polling from the loop, worker 1's requests wait for its end.
        applies_locally_until(&REMOTE_DONE)
    })
    .unwrap();
    assert!(
        served_during_loop[0],
        "worker 1's request was not served while worker 0 ran local applies"
    );
}

/// The polls such a loop makes also publish, now and then, the requests it issued to other
/// workers (they are batched, not published at every poll): its `apply_then` to worker 1 is
/// answered while it still loops.
#[test]
fn a_local_apply_loop_still_publishes_its_own_requests() {
    static ANSWERED: AtomicBool = AtomicBool::new(false);
    let answered_during_loop = gossamer::spmd(Config::default().workers(2), |w| {
        if w.id() == 1 {
            // Keeps a request to worker 0 waiting, so that worker 0's loop polls.
            let t = entrust_on(WorkerId::new(0), || 0u64);
            for _ in 0..10_000_000u64 {
                t.apply(|c| *c += 1);
                if ANSWERED.load(Ordering::SeqCst) {
                    break;
                }
            }
            return true;
        }
        let theirs = entrust_on(WorkerId::new(1), || 0u64);
        theirs.apply_then(|c| *c + 1, |_| ANSWERED.store(true, Ordering::SeqCst));
        applies_locally_until(&ANSWERED)
    })
    .unwrap();
    assert!(
        answered_during_loop[0],
        "worker 0's request to worker 1 was not published while worker 0 ran local applies"
    );
}
