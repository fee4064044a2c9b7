//! Misuse between members ends the job with a message that names it: buffers of different
//! lengths where equal ones are needed (any build), and a member calling another collective
//! than its peers when a message of one reaches the other (debug builds, through the check
//! message that precedes every message there).
//! Mistakes in a member's own arguments are `Err`s (see `suite::teams`).

use std::time::Duration;

use gossamer::Config;
use gsm_collectives::{Team, Tuning, op::Sum};

/// How long a job that should fail may take (it takes well under a second).
const LIMIT: Duration = Duration::from_secs(30);

/// Runs `body` on the world team of 3 workers and returns the job's failure. The job runs on a
/// thread of its own, so that a hang fails the test after [`LIMIT`] instead of blocking it.
fn failure(body: impl Fn(&Team) + Send + Sync + 'static) -> String {
    failure_with(Tuning::default(), body)
}

/// [`failure`] on the world team with `tuning`.
fn failure_with(tuning: Tuning, body: impl Fn(&Team) + Send + Sync + 'static) -> String {
    failure_of(move |world| body(&world.with_tuning(tuning)))
}

/// Runs `body` with the world team on 3 workers and returns the job's failure.
fn failure_of(body: impl Fn(Team) + Send + Sync + 'static) -> String {
    match bounded(body) {
        Ok(_) => panic!("the job should have failed"),
        Err(e) => e,
    }
}

/// Runs `body` with the world team on 3 workers, on a thread of its own, so that a hang fails the
/// test after [`LIMIT`] instead of blocking it; returns the workers' results or the failure.
fn bounded<R: Send + 'static>(
    body: impl Fn(Team) -> R + Send + Sync + 'static,
) -> Result<Vec<R>, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = gossamer::spmd(Config::default().workers(3), move |_| body(Team::world()));
        let _ = tx.send(r.map_err(|e| e.to_string()));
    });
    rx.recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("the job did not end within {LIMIT:?}: it hung"))
}

/// Every member its own group, on messages: the leaders' algorithms across groups run on every
/// member.
fn flat() -> Tuning {
    Tuning {
        hierarchical: false,
        board: false,
        ..Tuning::default()
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
    let msg = failure(|team| {
        let team = team.dup();
        let h = gossamer::spawn(move || {
            let len = if team.index() == 1 { 5 } else { 4 };
            let mut out = vec![0u64; len];
            team.allreduce(&vec![1u64; len], &mut out, Sum).unwrap();
        });
        // Ignored on purpose: the member that saw the mismatch carries on.
        let _ = h.try_join();
    });
    assert!(msg.contains("equal lengths"), "{msg}");
}

/// Leaders choose their algorithm by their own length: 40,000 `u64` is a ring allreduce (at
/// least `allreduce_ring_min`), 100 recursive doubling; each side used to wait for a message
/// the other never sends.
#[test]
fn leaders_with_lengths_on_either_side_of_the_ring_switch_are_reported() {
    let msg = failure_with(flat(), |team| {
        let len = if team.index() == 0 { 40_000 } else { 100 };
        let mut out = vec![0u64; len];
        team.allreduce(&vec![1u64; len], &mut out, Sum).unwrap();
    });
    assert!(
        msg.contains("equal lengths") && msg.contains("allreduce"),
        "{msg}"
    );
    assert!(msg.contains("40000") && msg.contains("100"), "{msg}");
}

/// With 3 groups, 16,384 `u64` (128 KiB) at the root is a pipelined chain, 100 elsewhere a
/// binomial tree.
#[test]
fn leaders_with_lengths_on_either_side_of_the_chain_switch_are_reported() {
    let msg = failure_with(flat(), |team| {
        let mut buf = vec![0u64; if team.index() == 1 { 100 } else { 16_384 }];
        team.broadcast(&mut buf, 0).unwrap();
    });
    assert!(
        msg.contains("equal lengths") && msg.contains("broadcast"),
        "{msg}"
    );
    assert!(msg.contains("16384") && msg.contains("100"), "{msg}");
}

/// The root of a small broadcast between ranks returns without waiting for the other leaders:
/// here it then sends to a member that receives that message before it enters the broadcast.
/// (The leaders' length agreement ran in a ring, and the root waited for the last leader's
/// word: a deadlock.)
#[test]
fn the_root_of_a_small_broadcast_waits_for_no_other_leader() {
    let got = bounded(|world| {
        let team = world.with_tuning(flat());
        let mut buf = vec![team.index() as u64 + 1; 4];
        let (root, last) = (gossamer::WorkerId::new(0), gossamer::WorkerId::new(2));
        match team.index() {
            0 => {
                team.broadcast(&mut buf, 0).unwrap();
                gossamer::send(last, 7, 1u32);
            }
            2 => {
                let _: u32 = gossamer::recv(root, 7);
                team.broadcast(&mut buf, 0).unwrap();
            }
            _ => team.broadcast(&mut buf, 0).unwrap(),
        }
        buf
    })
    .expect("the job failed");
    assert_eq!(got, vec![vec![1u64; 4]; 3]);
}

/// Leaders whose tuning differs choose different algorithms for equal lengths (here member 0
/// takes the ring allreduce for 8 KiB, the others recursive doubling): reported, not left
/// waiting for each other.
#[test]
fn leaders_whose_tuning_makes_them_choose_differently_are_reported() {
    let msg = failure_of(|world| {
        let tuning = if world.index() == 0 {
            Tuning {
                allreduce_ring_min: 0,
                ..flat()
            }
        } else {
            flat()
        };
        let team = world.with_tuning(tuning);
        let mut out = vec![0u64; 1024];
        team.allreduce(&vec![1u64; 1024], &mut out, Sum).unwrap();
    });
    assert!(
        msg.contains("tuning differs") && msg.contains("allreduce"),
        "{msg}"
    );
}

/// A member that never calls, and members that pass different roots to a reduce, leave the
/// others' fibers waiting for messages that never come: the job ends as deadlocked once every
/// worker is idle, naming what the fibers wait for. (Both hung before; the roots are checked on
/// the board and in a broadcast, not in a reduce on messages.)
#[test]
fn a_member_that_never_calls_and_different_roots_end_the_job_as_deadlocked() {
    let msg = failure_with(flat(), |team| {
        if team.index() != 2 {
            team.barrier();
        }
    });
    // The report names the collective each fiber waits in, not only its tag.
    assert!(
        msg.starts_with("the job is deadlocked")
            && msg.contains("a fiber waits for a message from worker")
            && msg.contains(
                "(gsm-collectives: barrier of the world team (3 members), its call 0, step "
            )
            && msg.contains("Team::ranks"),
        "{msg}"
    );
    let msg = failure_with(flat(), |team| {
        let root = if team.index() == 0 { 0 } else { 1 };
        let mut out = [0u64; 4];
        team.reduce(&[1u64; 4], &mut out, Sum, root)
            .expect("valid arguments");
    });
    assert!(
        msg.starts_with("the job is deadlocked")
            && msg.contains("(gsm-collectives: reduce to root 1 of the world team "),
        "{msg}"
    );
}
