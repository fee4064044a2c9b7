//! `coll_check`: every collective of `gsm-collectives`, checked against a sequential reference,
//! on every worker of every rank; for the multi-process tests (`tests/ranks.rs`). Run it under
//! `gsmrun -np N [--fabric F] [--oversubscribe]` (any N ≥ 1); without a launcher it is a job of
//! one rank.
//!
//! Rounds, on the world team of every worker (`GSM_THREADS` workers per rank, default 2):
//! the default tuning (hierarchical; ranks on one host meet on the host board), the hierarchy
//! off (every worker its own group, so the algorithms across groups run on every member; on the
//! board when each rank has one worker), the board with single copies from 0 bytes in pieces of
//! 4 KiB, the board in steps only, messages only (the board off), and the hierarchy and
//! the board off with the switch points at 0 (ring allreduce, pipelined broadcast) and 4 KiB
//! pieces between ranks. Each round runs the plain-data
//! operations at sizes 0, 1, 7 and `--large N` elements (default 393 217, 3 MiB of `u64`),
//! then the serde-based ones, splits and argument errors (`tests/suite/mod.rs`).
//!
//! With `--misuse-rank R`, rank R calls an allreduce where the others call a barrier (a misuse
//! test: the job must end with a report naming both collectives).
//! With `--root-misuse-rank R`, rank R passes root 1 to a broadcast of 1 MiB where the others
//! pass root 0 (a misuse test: the job must end with a report naming both roots; on the host
//! board both would otherwise act as root and copy into each other's buffers).
//! With `--panic-rank R`, rank R panics after a first barrier while the others wait in a second
//! one (a failure test: the job must end with the panic's report).
//! With `--absent-rank R`, rank R returns after a first barrier while the others wait in a
//! second one (a deadlock test: the job must end as deadlocked, not hang).
//! With `--late-rank R`, rank R computes for 2.5 s between two barriers (no deadlock: the job
//! must pass).
//!
//! With `--ranks-team`, the suite runs instead from `gossamer::run`'s main, once per rank, on
//! [`Team::ranks`] (each rank's first worker) in the default and the messages-only tuning, while
//! the other workers only serve; the last line then counts that one member's checks.
//!
//! Output: `ok <round> (rank R, host board|messages)` per round (how the ranks' leaders met), then `coll_check: rank R of N passed C checks
//! (W workers)` on every rank; any difference panics with what differed, which ends the job.

#[path = "../tests/suite/mod.rs"]
mod suite;

use gossamer::Config;
use gsm_collectives::{Team, Tuning};

fn arg(name: &str) -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn main() {
    let large = arg("--large").unwrap_or(393_217);
    let panic_rank = arg("--panic-rank");
    let misuse_rank = arg("--misuse-rank");
    let root_misuse_rank = arg("--root-misuse-rank");
    let absent_rank = arg("--absent-rank");
    let late_rank = arg("--late-rank");
    let mut config = Config::from_env().expect("configuration");
    if std::env::var_os("GSM_THREADS").is_none() {
        config = config.workers(2);
    }
    if std::env::args().any(|a| a == "--ranks-team") {
        return ranks_team(config, large);
    }
    let r = gossamer::spmd(config, move |w| {
        let world = Team::world();
        if let Some(r) = panic_rank {
            // A failure test: rank r panics while the others wait in a barrier, which must end
            // the job with a report instead of leaving them waiting.
            world.barrier();
            if w.rank() == r {
                panic!("coll_check: rank {r} panics on purpose (--panic-rank)");
            }
            world.barrier();
            unreachable!("a barrier passed without every member");
        }
        if let Some(r) = absent_rank {
            // A deadlock test: rank r never calls the second barrier, and its run ends; the
            // others wait for it on the host board for ever, which must end the job.
            world.barrier();
            if w.rank() != r {
                world.barrier();
                unreachable!("a barrier passed without every member");
            }
            return (0, w.count(), w.rank(), gossamer::rank_count());
        }
        if let Some(r) = late_rank {
            // Rank r keeps its worker busy (not waiting: computing) for 2.5 s between two
            // barriers; the others wait for it, which is no deadlock.
            world.barrier();
            if w.rank() == r {
                let t = std::time::Instant::now();
                while t.elapsed() < std::time::Duration::from_millis(2500) {
                    std::hint::black_box(t);
                }
            }
            world.barrier();
            return (1, w.count(), w.rank(), gossamer::rank_count());
        }
        if let Some(r) = misuse_rank {
            // A misuse test: rank r calls an allreduce where the others call a barrier; the
            // members must report it (and end the job) instead of mixing the two.
            world.barrier();
            if w.rank() == r {
                let mut x = [1u64];
                world.allreduce_in_place(&mut x, gsm_collectives::op::Sum);
            } else {
                world.barrier();
            }
            unreachable!("different collectives completed together");
        }
        if let Some(r) = root_misuse_rank {
            // A misuse test: rank r passes another root than the others.
            world.barrier();
            let root = usize::from(w.rank() == r);
            let mut buf = vec![w.rank() as u8; 1 << 20];
            world.broadcast(&mut buf, root).unwrap();
            // Not a panic: the test must see the job end through the report, not this.
            return (0, w.count(), w.rank(), gossamer::rank_count());
        }
        let mut passed = 0;
        for (name, tuning) in rounds() {
            let team = world.dup().with_tuning(tuning);
            let mut t = suite::Tally {
                passed: 0,
                at: format!("worker {} (rank {}), round {name}", w.id(), w.rank()),
            };
            for len in [0, 1, 7, large] {
                suite::plain(&team, len, &mut t);
            }
            suite::values(&team, &mut t);
            suite::teams(&team, &mut t);
            suite::nonblocking(&team, &mut t);
            world.barrier();
            if w.id() == gossamer::workers_of_rank(w.rank()).start {
                let how = if team.on_host_board() {
                    "host board"
                } else {
                    "messages"
                };
                println!("ok {name} (rank {}, {how})", w.rank());
            }
            passed += t.passed;
        }
        (passed, w.count(), w.rank(), gossamer::rank_count())
    });
    match r {
        Ok(v) => {
            let checks: usize = v.iter().map(|x| x.0).sum();
            let workers = v.first().map_or(0, |x| x.1);
            let (rank, ranks) = v.first().map_or((0, 0), |x| (x.2, x.3));
            println!(
                "coll_check: rank {rank} of {ranks} passed {checks} checks ({workers} workers)"
            );
        }
        Err(e) => {
            gossamer::eprint_line(format_args!("coll_check: {e}"));
            std::process::exit(1);
        }
    }
}

/// The rounds of the suite on the world team: each tuning, by name (see the module docs).
fn rounds() -> [(&'static str, Tuning); 6] {
    [
        ("hierarchical", Tuning::default()),
        (
            "flat",
            Tuning {
                hierarchical: false,
                ..Tuning::default()
            },
        ),
        (
            "board copies",
            Tuning {
                copy_min: 0,
                copy_piece: 4096,
                ..Tuning::default()
            },
        ),
        (
            "board steps",
            Tuning {
                copy_min: usize::MAX,
                ..Tuning::default()
            },
        ),
        (
            "messages",
            Tuning {
                board: false,
                ..Tuning::default()
            },
        ),
        (
            "forced",
            Tuning {
                hierarchical: false,
                board: false,
                allreduce_ring_min: 0,
                bcast_pipeline_min: 0,
                bcast_chunk: 4096,
                piece: 4096,
                rendezvous_min: 0,
                ..Tuning::default()
            },
        ),
    ]
}

/// `--ranks-team`: the suite on [`Team::ranks`] from `run`'s main (one member per rank).
fn ranks_team(config: Config, large: usize) {
    let r = gossamer::run(config, move || {
        let ranks = Team::ranks();
        let rounds = [
            ("hierarchical", Tuning::default()),
            (
                "messages",
                Tuning {
                    board: false,
                    ..Tuning::default()
                },
            ),
        ];
        let rank = gossamer::rank();
        let mut passed = 0;
        for (name, tuning) in rounds {
            let team = ranks.dup().with_tuning(tuning);
            let mut t = suite::Tally {
                passed: 0,
                at: format!("rank {rank}'s first worker, team of ranks, round {name}"),
            };
            for len in [0, 1, 7, large] {
                suite::plain(&team, len, &mut t);
            }
            suite::values(&team, &mut t);
            suite::teams(&team, &mut t);
            suite::nonblocking(&team, &mut t);
            ranks.barrier();
            let how = if team.on_host_board() {
                "host board"
            } else {
                "messages"
            };
            println!("ok {name} (rank {rank}, {how})");
            passed += t.passed;
        }
        (
            passed,
            gossamer::worker_count(),
            rank,
            gossamer::rank_count(),
        )
    });
    match r {
        Ok((checks, workers, rank, ranks)) => println!(
            "coll_check: rank {rank} of {ranks} passed {checks} checks ({workers} workers)"
        ),
        Err(e) => {
            gossamer::eprint_line(format_args!("coll_check: {e}"));
            std::process::exit(1);
        }
    }
}
