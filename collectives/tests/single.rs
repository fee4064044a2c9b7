//! Every collective within one process (no launcher: a job of one rank), on teams of 3, 5 and 6
//! workers, with the default tuning (one group: the hierarchy's group phase only), with the
//! hierarchy off (every member its own group, so the algorithms across groups run on odd
//! member counts) and with the switch points at 0 (ring allreduce and pipelined broadcast
//! forced), at sizes 0, 1, 7 (odd) and 393 217 elements (3 MiB of `u64`, odd too), each
//! against a sequential reference (`suite/mod.rs`).

mod suite;

use gossamer::Config;
use gsm_collectives::{Team, Tuning};

const LARGE: usize = 393_217;

fn run(workers: usize, tuning: Tuning, sizes: &'static [usize]) {
    let passed = gossamer::spmd(Config::default().workers(workers), move |w| {
        let team = Team::world().with_tuning(tuning);
        let mut t = suite::Tally {
            passed: 0,
            at: format!("worker {} of {workers} ({tuning:?})", w.id()),
        };
        for &len in sizes {
            suite::plain(&team, len, &mut t);
        }
        suite::values(&team, &mut t);
        suite::teams(&team, &mut t);
        suite::nonblocking(&team, &mut t);
        t.passed
    })
    .expect("the job runs");
    assert_eq!(passed.len(), workers);
    assert!(passed.iter().all(|&p| p > 20), "{passed:?}");
}

fn flat() -> Tuning {
    Tuning {
        hierarchical: false,
        ..Tuning::default()
    }
}

fn forced() -> Tuning {
    Tuning {
        hierarchical: false,
        allreduce_ring_min: 0,
        bcast_pipeline_min: 0,
        bcast_chunk: 40,
        piece: 40,
        rendezvous_min: 0,
        ..Tuning::default()
    }
}

#[test]
fn three_workers() {
    run(3, Tuning::default(), &[0, 1, 7, LARGE]);
    run(3, flat(), &[0, 1, 7, LARGE]);
    run(3, forced(), &[0, 1, 7, 1001]);
}

#[test]
fn five_workers() {
    run(5, Tuning::default(), &[0, 1, 7]);
    run(5, flat(), &[0, 1, 7, LARGE]);
    run(5, forced(), &[1, 7, 1001]);
}

#[test]
fn six_workers() {
    run(6, Tuning::default(), &[0, 1, 7, LARGE]);
    run(6, flat(), &[0, 1, 7]);
    run(6, forced(), &[0, 1, 7, 1001, LARGE]);
}

/// The team of ranks in a job of one rank: `run`'s main alone (the other workers only serve)
/// runs every collective on it and gets its own contribution back; on another worker
/// `Team::ranks` panics, naming the worker to call it on.
#[test]
fn the_team_of_ranks_serves_runs_main_alone() {
    let (checks, refused) = gossamer::run(Config::default().workers(3), || {
        let team = Team::ranks();
        assert_eq!((team.size(), team.index()), (1, 0));
        assert_eq!(team.members(), &[gossamer::current_worker()]);
        let mut t = suite::Tally {
            passed: 0,
            at: "run's main, team of ranks".into(),
        };
        for len in [0, 1, 7] {
            suite::plain(&team, len, &mut t);
        }
        suite::values(&team, &mut t);
        let refused = gossamer::spawn_on(gossamer::WorkerId::new(2), || {
            std::panic::catch_unwind(|| Team::ranks().size())
                .unwrap_err()
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_default()
        })
        .join();
        (t.passed, refused)
    })
    .expect("the job runs");
    assert!(checks > 40, "only {checks} checks ran");
    assert!(
        refused.contains("Team::ranks was called on worker 2 of rank 0")
            && refused.contains("(here worker 0,"),
        "{refused}"
    );
}

/// `Team::world` in `run`'s main is refused at one worker as at two (at two it would wait for
/// the other worker for ever), with a message that names `Team::ranks`; a fiber that main
/// spawns may build it.
#[test]
fn the_world_team_is_refused_in_runs_main_at_any_worker_count() {
    for workers in [1, 2] {
        let r = gossamer::run(Config::default().workers(workers), || Team::world().size());
        match r {
            Err(gossamer::Error::Panicked { message, .. }) => assert!(
                message.contains("Team::world was called in gossamer::run's main")
                    && message.contains("Team::ranks()"),
                "{workers} workers: {message}"
            ),
            other => panic!("{workers} workers: Team::world in run's main gave {other:?}"),
        }
    }
    let size = gossamer::run(Config::default().workers(1), || {
        gossamer::spawn(|| Team::world().size()).join()
    })
    .expect("a spawned fiber may build the world team");
    assert_eq!(size, 1);
}
