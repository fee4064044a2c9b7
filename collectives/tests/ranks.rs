//! Every collective across ranks: the `coll_check` example (`examples/coll_check.rs`, the
//! suite of `tests/suite/mod.rs` in six rounds: hierarchical, flat, board copies, board steps,
//! messages only, forced switch points) run through `gsmrun` with 1, 2 and 3 ranks of 2 workers
//! (and 2 ranks of 1 worker, with and without single copies), oversubscribed, over the `shm`
//! fabric (the default on one host, where the ranks meet on the host board) and over `tcp`.
//!
//! Each job must exit 0 with a `coll_check: rank R of N passed C checks (W workers)` line from
//! every rank (the suite panics, ending the job, on any difference from its reference), under a
//! hard time limit, and leave no process or `/dev/shm` segment behind. Jobs run one at a time:
//! oversubscribed ranks on a 2-core machine would otherwise slow each other down.
//!
//! `cargo test -p gsm-collectives` builds the example but not `gsmrun`: build it first with the
//! same profile and `CARGO_TARGET_DIR` (`cargo build -p gsmrun`, or `--release` for
//! `cargo test --release`).

use gsm_tests::cluster::{job_prefix, leftovers};
use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::process::{Finished, spawn};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The hard limit of one job, well above a healthy job's time even in a debug build.
const LIMIT: Duration = Duration::from_secs(60);

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poison| poison.into_inner())
}

fn coll_check() -> PathBuf {
    let path = gsm_tests::bins::profile_dir()
        .join("examples")
        .join("coll_check");
    assert!(
        path.is_file(),
        "the example `coll_check` is missing at {}: `cargo test -p gsm-collectives` builds it",
        path.display()
    );
    path
}

/// A rank's final line `coll_check: rank R of N passed C checks (W workers)`, as (R, N, C, W).
type RankLine = (usize, usize, usize, usize);

/// Runs `cmd` (a `coll_check` job, `what`), which must exit 0 within [`LIMIT`]; returns how it
/// ended, its job-id prefix and its ranks' final lines, sorted.
fn passing(cmd: &mut std::process::Command, what: &str) -> (Finished, String, Vec<RankLine>) {
    let running = spawn(cmd);
    let prefix = job_prefix(running.pid() as u32);
    let done = running.wait(LIMIT);
    assert_exit(&done, 0, what);
    let mut found = results(&done.stdout);
    found.sort_unstable();
    (done, prefix, found)
}

/// Fails `what` if a process or `/dev/shm` segment of the job with id prefix `prefix` is left.
fn assert_nothing_left(prefix: &str, what: &str) {
    let (processes, segments) = leftovers(prefix, Duration::from_secs(3));
    assert!(
        processes.is_empty() && segments.is_empty(),
        "{what}: left behind: {processes:?} {segments:?}"
    );
}

/// Final lines `coll_check: rank R of N passed C checks (W workers)`, as (R, N, C, W).
fn results(stdout: &str) -> Vec<(usize, usize, usize, usize)> {
    stdout
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("coll_check: rank ")?;
            let (r, rest) = rest.split_once(" of ")?;
            let (n, rest) = rest.split_once(" passed ")?;
            let (c, rest) = rest.split_once(" checks (")?;
            let w = rest.strip_suffix(" workers)")?;
            Some((
                r.parse().ok()?,
                n.parse().ok()?,
                c.parse().ok()?,
                w.parse().ok()?,
            ))
        })
        .collect()
}

/// Rounds of `coll_check`.
const ROUNDS: usize = 6;

fn job(np: usize, fabric: &str, large: usize) {
    job_with(np, 2, fabric, large, None);
}

/// `coll_check` under `gsmrun -np {np} -t {threads} --fabric {fabric}`, with `env` (a `GSM_*`
/// variable and its value) exported to the ranks.
fn job_with(np: usize, threads: usize, fabric: &str, large: usize, env: Option<(&str, &str)>) {
    let _serial = serial();
    let np_text = np.to_string();
    let t_text = threads.to_string();
    let large_text = large.to_string();
    let mut cmd = gsmrun([
        "-np",
        &np_text,
        "-t",
        &t_text,
        "--oversubscribe",
        "--fabric",
        fabric,
    ]);
    if let Some((k, v)) = env {
        cmd.env(k, v).args(["-x", k]);
    }
    cmd.arg(coll_check()).args(["--large", &large_text]);
    let what = format!(
        "{}gsmrun -np {np} -t {threads} --fabric {fabric} coll_check --large {large}",
        env.map(|(k, v)| format!("{k}={v} ")).unwrap_or_default()
    );
    let (done, prefix, found) = passing(&mut cmd, &what);
    let ranks: Vec<usize> = found.iter().map(|r| r.0).collect();
    assert_eq!(
        ranks,
        (0..np).collect::<Vec<_>>(),
        "{what}: every rank reports once\n{}",
        done.report()
    );
    for &(r, n, c, w) in &found {
        assert_eq!(
            (n, w),
            (np, threads * np),
            "{what}: rank {r}'s job size\n{}",
            done.report()
        );
        // Rounds × workers × (4 sizes × ≥ 19 plain checks + values + teams): 80 or more per
        // worker and round.
        assert!(
            c >= ROUNDS * threads * 80,
            "{what}: rank {r} passed only {c} checks\n{}",
            done.report()
        );
    }
    // Ranks on one host over shm meet on the host board (the default round); otherwise, and
    // with the board turned off, by messages.
    let board = np > 1 && fabric == "shm";
    for (round, on) in [("hierarchical", board), ("messages", false)] {
        let how = if on { "host board" } else { "messages" };
        let line = format!("ok {round} (rank 0, {how})");
        assert!(
            done.stdout.lines().any(|l| l == line),
            "{what}: expected `{line}`\n{}",
            done.report()
        );
    }
    assert_nothing_left(&prefix, &what);
    eprintln!("{what}: passed in {:.2} s", done.elapsed.as_secs_f64());
}

/// 3 MiB of `u64` per contribution ("several MiB").
const LARGE: usize = 393_217;
/// A smaller odd size (800 KB) for the other combinations, to keep the whole file well under a
/// minute in a debug build.
const MEDIUM: usize = 100_001;

/// Runs `coll_check` with `args` on 2 ranks of 1 worker (on the host board) and expects the job
/// to fail, without hanging, with every one of `reports` in its stderr and nothing left behind.
fn failing_job(args: &[&str], reports: &[&str]) {
    let _serial = serial();
    let mut cmd = gsmrun(["-np", "2", "-t", "1", "--oversubscribe"]);
    cmd.arg(coll_check()).args(args);
    let what = format!("gsmrun -np 2 coll_check {}", args.join(" "));
    let running = spawn(&mut cmd);
    let prefix = job_prefix(running.pid() as u32);
    let done = running.wait(LIMIT);
    assert!(
        !done.timed_out && done.code() != Some(0) && done.elapsed < Duration::from_secs(20),
        "{what}: the job should fail fast\n{}",
        done.report()
    );
    for r in reports {
        assert!(
            done.stderr.contains(r),
            "{what}: the report should say `{r}`\n{}",
            done.report()
        );
    }
    assert_nothing_left(&prefix, &what);
}

/// A rank that panics while the others wait in a barrier on the host board ends the job with
/// the panic's report, quickly, leaving nothing behind.
#[test]
fn a_panic_ends_a_job_waiting_on_the_board() {
    failing_job(&["--panic-rank", "1"], &["panics on purpose"]);
}

/// A rank that never calls a barrier the others wait in on the host board (its run ends) no
/// longer leaves them waiting for ever: the job ends as deadlocked within seconds, and the
/// waiting rank's report counts its fiber waiting on the board.
#[test]
fn a_member_that_never_calls_a_board_step_ends_the_job_as_deadlocked() {
    failing_job(
        &["--absent-rank", "1"],
        &[
            "the job is deadlocked: every worker of every rank is idle",
            "on rank 0: worker 0: 1 fiber waits in gossamer::wait_for (a collective's step on \
             the host board, say)",
        ],
    );
}

/// A member that computes for 2.5 s before a barrier on the host board, while the others wait
/// there, is no deadlock: the job passes.
#[test]
fn a_member_late_for_a_board_step_is_no_deadlock() {
    let _serial = serial();
    let mut cmd = gsmrun(["-np", "2", "-t", "1", "--oversubscribe"]);
    cmd.arg(coll_check()).args(["--late-rank", "1"]);
    let what = "gsmrun -np 2 -t 1 coll_check --late-rank 1";
    let done = spawn(&mut cmd).wait(LIMIT);
    assert_exit(&done, 0, what);
    assert_eq!(results(&done.stdout).len(), 2, "{what}\n{}", done.report());
}

/// Members in different collectives on the board are reported (in every build), naming both
/// operations, and the job ends.
#[test]
fn different_collectives_on_the_board_are_reported() {
    failing_job(
        &["--misuse-rank", "1"],
        &["is in allreduce", "is in barrier"],
    );
}

/// Members passing different roots to a broadcast are reported (in every build), naming both
/// roots, and the job ends: on the host board both took themselves for the root and copied into
/// each other's buffers (1 MiB: single copies), and the job exited 0.
#[test]
fn different_roots_on_the_board_are_reported() {
    failing_job(
        &["--root-misuse-rank", "1"],
        &["root 0", "root 1", "every member must pass the same root"],
    );
}

#[test]
fn one_rank() {
    job(1, "shm", MEDIUM);
}

#[test]
fn two_ranks_shm() {
    job(2, "shm", LARGE);
}

#[test]
fn two_ranks_tcp() {
    job(2, "tcp", LARGE);
}

/// One worker per rank: every member leads its rank, so allgather and all-to-all go over the
/// board too.
#[test]
fn two_ranks_one_worker_each_shm() {
    job_with(2, 1, "shm", LARGE, None);
}

/// Three ranks of one worker: allgather and all-to-all over the board with three leaders, and the
/// reductions combining three vectors in leader order (leaders 1 and 2 through a scratch copy).
#[test]
fn three_ranks_one_worker_each_shm() {
    job_with(3, 1, "shm", MEDIUM, None);
}

/// Without single copies between processes (`GSM_SINGLE_COPY=0`), large broadcasts and
/// allreduces go through the board in steps.
#[test]
fn two_ranks_shm_without_single_copies() {
    job_with(2, 1, "shm", LARGE, Some(("GSM_SINGLE_COPY", "0")));
}

#[test]
fn three_ranks_shm() {
    job(3, "shm", MEDIUM);
}

#[test]
fn three_ranks_tcp() {
    job(3, "tcp", MEDIUM);
}

/// `gossamer::run`'s main, once per rank, runs every collective on `Team::ranks` (each rank's
/// first worker) while the ranks' other workers only serve: 2 ranks of 2 workers, over the host
/// board and by messages, and over `tcp`.
#[test]
fn the_team_of_ranks_from_runs_main() {
    for fabric in ["shm", "tcp"] {
        let _serial = serial();
        let mut cmd = gsmrun(["-np", "2", "-t", "2", "--oversubscribe", "--fabric", fabric]);
        cmd.arg(coll_check())
            .args(["--ranks-team", "--large", &MEDIUM.to_string()]);
        let what = format!("gsmrun -np 2 -t 2 --fabric {fabric} coll_check --ranks-team");
        let (done, prefix, found) = passing(&mut cmd, &what);
        assert_eq!(
            found.iter().map(|r| (r.0, r.1, r.3)).collect::<Vec<_>>(),
            [(0, 2, 4), (1, 2, 4)],
            "{what}: every rank reports once\n{}",
            done.report()
        );
        // Two rounds × (4 sizes × ≥ 19 plain checks + values + teams) on one member.
        assert!(
            found.iter().all(|r| r.2 >= 2 * 80),
            "{what}: too few checks\n{}",
            done.report()
        );
        let board = if fabric == "shm" {
            "host board"
        } else {
            "messages"
        };
        for line in [
            format!("ok hierarchical (rank 0, {board})"),
            "ok messages (rank 1, messages)".to_string(),
        ] {
            assert!(
                done.stdout.lines().any(|l| l == line),
                "{what}: expected `{line}`\n{}",
                done.report()
            );
        }
        assert_nothing_left(&prefix, &what);
    }
}
