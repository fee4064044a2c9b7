//! Misuse between members ends the job with a message that names it: buffers of different
//! lengths where equal ones are needed (any build), and a member calling another collective
//! than its peers when a message of one reaches the other (debug builds, through the check
//! message that precedes every message there).
//! Mistakes in a member's own arguments are `Err`s (see `suite::teams`).

use gossamer::Config;
use gsm_collectives::{Team, op::Sum};

fn failure(body: impl Fn(&Team) + Send + Sync + 'static) -> String {
    // The panic ends the job; keep the expected message out of the test output.
    let r = gossamer::spmd(Config::default().workers(3), move |_| {
        let team = Team::world();
        body(&team);
    });
    match r {
        Ok(_) => panic!("the job should have failed"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn different_lengths_are_reported_with_both_members() {
    let msg = failure(|team| {
        let len = if team.index() == 1 { 5 } else { 4 };
        let mut out = vec![0u64; len];
        team.allreduce(&vec![1u64; len], &mut out, Sum).unwrap();
    });
    assert!(msg.contains("equal lengths"), "{msg}");
    assert!(msg.contains("allreduce"), "{msg}");
}

#[test]
fn a_broadcast_into_a_buffer_of_another_length_is_reported() {
    let msg = failure(|team| {
        let mut buf = vec![0u32; if team.index() == 2 { 3 } else { 8 }];
        team.broadcast(&mut buf, 0).unwrap();
    });
    assert!(msg.contains("broadcast"), "{msg}");
    assert!(msg.contains("passed 8 elements"), "{msg}");
}

#[cfg(debug_assertions)]
#[test]
fn a_member_in_another_collective_is_named() {
    let msg = failure(|team| {
        // Member 0 leads the group: it waits for the others' contributions to its allreduce
        // and receives their barrier arrivals instead. (Protocols that only wait on each other,
        // such as a barrier against a broadcast from the leader, cannot be told apart from
        // slowness without a timeout: those hang.)
        if team.index() == 0 {
            let mut out = [0u8; 4];
            team.allreduce(&[1u8; 4], &mut out, Sum).unwrap();
        } else {
            team.barrier();
        }
    });
    assert!(
        msg.contains("every member must call the same collectives"),
        "{msg}"
    );
    assert!(
        msg.contains("barrier") && msg.contains("allreduce"),
        "{msg}"
    );
}

/// A disagreement in a spawned fiber ends the job even when the joiner carries on: `try_join`
/// would hand a plain panic back to it, and the other members would wait for ever.
#[test]
fn a_mismatch_in_a_spawned_fiber_ends_the_job() {
    let (tx, rx) = std::sync::mpsc::channel();
    // The job runs on a thread of its own, so that a hang fails the test instead of blocking it.
    std::thread::spawn(move || {
        let r = gossamer::spmd(Config::default().workers(3), |_| {
            let team = Team::world().dup();
            let h = gossamer::spawn(move || {
                let len = if team.index() == 1 { 5 } else { 4 };
                let mut out = vec![0u64; len];
                team.allreduce(&vec![1u64; len], &mut out, Sum).unwrap();
            });
            // Ignored on purpose: the member that saw the mismatch carries on.
            let _ = h.try_join();
        });
        let _ = tx.send(r.map_err(|e| e.to_string()));
    });
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the job should end within 30 s, not hang");
    let msg = r.expect_err("the job should have failed");
    assert!(msg.contains("equal lengths"), "{msg}");
}
