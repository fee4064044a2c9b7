//! Jobs in which a rank fails while the others go on: a panic, a failed run, an exit inside a run,
//! a rank that never joins or runs another program, fewer runs on one rank, a deadlock. Each must
//! end promptly, name the rank and why, and leave nothing behind.

use super::*;

/// A 2-rank job of `cluster_check --panic-rank 1 ARGS --quick` that has ended, as it must:
/// not hanging, not with status 0, within 20 s. Holds the tests' serial lock and the guard of
/// its ranks, for the caller's own checks and `assert_nothing_left`.
struct Failed {
    _serial: MutexGuard<'static, ()>,
    guard: PidGuard,
    what: String,
    prefix: String,
    done: Finished,
    report: String,
}

impl Failed {
    /// The job left no process and no shared segment behind.
    fn assert_nothing_left(&self) {
        assert_nothing_left(&self.prefix, &self.guard, &self.what, &self.done);
    }
}

fn rank_1_panics(fabric: Option<&str>, args: &[&str]) -> Failed {
    let serial = serial();
    let guard = PidGuard::new();
    let what = format!(
        "gsmrun -np 2 --fabric {} cluster_check --panic-rank 1 {}",
        fabric.unwrap_or("(default)"),
        args.join(" ")
    );
    let all: Vec<&str> = ["--panic-rank", "1"]
        .into_iter()
        .chain(args.iter().copied())
        .chain(["--quick"])
        .collect();
    let job = spawn(&mut job_command(2, fabric, &all));
    let prefix = job_prefix(job.pid() as u32);
    watch_ranks(&job, 2, &guard);
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(!done.timed_out, "{what}: must fail, not hang\n{report}");
    assert_ne!(done.code(), Some(0), "{what}: must fail\n{report}");
    assert!(
        done.elapsed < Duration::from_secs(20),
        "{what}: took {:?} to end\n{report}",
        done.elapsed
    );
    Failed {
        _serial: serial,
        guard,
        what,
        prefix,
        done,
        report,
    }
}

/// A panic in a callback on rank 1 ends the job fast, naming rank, worker and the panic.
fn panic_on_rank_1(fabric: Option<&str>) {
    let failed = rank_1_panics(fabric, &[]);
    let (what, done, report) = (&failed.what, &failed.done, &failed.report);
    let output = format!("{}{}", done.stdout, done.stderr);
    let line = output
        .lines()
        .find(|l| l.contains("panic on rank 1, worker "))
        .unwrap_or_else(|| panic!("{what}: no message names rank 1 and a worker\n{report}"));
    assert!(
        line.contains("deliberate panic in a callback on rank 1"),
        "{what}: the message lacks the panic's text: {line}\n{report}"
    );
    // Rank 1's workers have global ids 2 and 3.
    let worker: usize = line
        .split("panic on rank 1, worker ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|w| w.trim().parse().ok())
        .unwrap_or_else(|| panic!("{what}: no worker number in `{line}`\n{report}"));
    assert!(
        (2..4).contains(&worker),
        "{what}: worker {worker} is not one of rank 1's (2, 3)\n{report}"
    );
    // gsmrun's own line names rank 1 too, not rank 0, whose run rank 1's failure ended (rank 0
    // exits first, while rank 1 still tells it why: gsmrun named rank 0 in half the runs).
    let last = gsmrun_line(&done.stderr);
    assert!(
        last.starts_with("gsmrun: rank 1 on host "),
        "{what}: gsmrun's line does not name rank 1: {last}\n{report}"
    );
    failed.assert_nothing_left();
}

#[test]
fn a_panic_on_a_worker_ends_the_job_naming_rank_worker_and_message_shm() {
    panic_on_rank_1(None);
}

#[test]
fn a_panic_on_a_worker_ends_the_job_naming_rank_worker_and_message_tcp() {
    panic_on_rank_1(Some("tcp"));
}

/// A rank whose run fails while its program goes on (it handles the error and stays alive, for
/// 120 s here) tells the others why, and their runs end at once with its reason: `rank 1 (host
/// …) failed, which ends the run on every rank: panic on rank 1, worker …`. Before, they ran on
/// until rank 1's process ended, and then reported it as vanished.
fn failure_told_by_a_rank_that_stays(fabric: Option<&str>) {
    let failed = rank_1_panics(fabric, &["--stay-rank", "1"]);
    let (what, done, report) = (&failed.what, &failed.done, &failed.report);
    let line = done
        .stderr
        .lines()
        .find(|l| l.starts_with("cluster_check: rank 1 (host "))
        .unwrap_or_else(|| panic!("{what}: rank 0 did not name rank 1's failure\n{report}"));
    assert!(
        line.contains(") failed, which ends the run on every rank: panic on rank 1, worker ")
            && line.ends_with("deliberate panic in a callback on rank 1"),
        "{what}: rank 0's error does not carry rank 1's: {line}\n{report}"
    );
    // Rank 1 never exits (it stays for 120 s), so gsmrun reports rank 0, saying that another
    // rank's failure ended its run.
    let last = gsmrun_line(&done.stderr);
    assert!(
        last.starts_with("gsmrun: rank 0 on host ")
            && last.contains(", its run ended by another rank's failure "),
        "{what}: gsmrun's line: {last}\n{report}"
    );
    failed.assert_nothing_left();
}

#[test]
fn a_failed_rank_that_stays_alive_ends_the_others_with_its_reason_shm() {
    failure_told_by_a_rank_that_stays(None);
}

#[test]
fn a_failed_rank_that_stays_alive_ends_the_others_with_its_reason_tcp() {
    failure_told_by_a_rank_that_stays(Some("tcp"));
}

/// Every rank's program goes on past its failed run and exits 0: the job still failed (MPI was
/// given up, not finalised), and `gsmrun` says so itself with status 1. Before, Open MPI's page
/// on processes "exiting improperly" came out, then `every rank exited 0 but mpirun exited with
/// status 1`.
#[test]
fn a_program_that_exits_0_after_its_run_failed_ends_the_job_as_failed() {
    let failed = rank_1_panics(None, &["--stay-all", "--stay-secs", "0"]);
    let (what, done, report) = (&failed.what, &failed.done, &failed.report);
    assert_eq!(done.code(), Some(1), "{what}: status\n{report}");
    let last = gsmrun_line(&done.stderr);
    assert!(
        last.contains(" exited with status 0 after its gossamer run failed ")
            && last.ends_with("ending the job"),
        "{what}: gsmrun's last line does not say a rank exited 0 after a failed run: {last}\n{report}"
    );
    assert!(
        !done.stderr.contains("exiting improperly"),
        "{what}: the launcher's page on an improper exit came out\n{report}"
    );
    failed.assert_nothing_left();
}

/// The same between two hosts, two ranks on each, every rank staying alive after its run
/// failed (so that no exit ends the job): rank 3's note reaches every other rank, over MPI's
/// tcp transport to ranks 0 and 1, and each of their runs ends with rank 3's reason.
#[test]
fn a_failure_on_one_host_is_told_to_every_rank_of_both() {
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("cluster", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(2));
    let mut cmd = gsmrun(["-np", "4", "-t", "2", "-hostfile"]);
    cmd.arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .arg(cluster_check())
        .args(["--panic-rank", "3", "--stay-all", "--quick"]);
    cmd.envs(bed.mpi_env());
    let guard = PidGuard::new();
    let what = "gsmrun -np 4 over two namespaces, cluster_check --panic-rank 3 --stay-all";
    let mut job = spawn(&mut cmd);
    let prefix = job_prefix(job.pid() as u32);
    watch_ranks(&job, 4, &guard);
    let stays = |lines: &[Line]| {
        lines
            .iter()
            .filter(|l| l.text.contains(" stays after: "))
            .count()
    };
    let told = job.wait_for_stdout(Duration::from_secs(15), |lines| stays(lines) == 4);
    let lines = job.stdout_lines();
    // Every rank has said why its run ended; the job would stay for 120 s.
    job.signal(libc::SIGTERM);
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(
        told,
        "{what}: only {} of 4 ranks ended their run within 15 s\n{report}",
        stays(&lines)
    );
    for r in 0..3 {
        let line = lines
            .iter()
            .find(|l| {
                l.text
                    .starts_with(&format!("cluster_check: rank {r} stays after: "))
            })
            .map(|l| l.text.as_str())
            .unwrap_or_default();
        assert!(
            line.contains(": rank 3 (host ")
                && line.contains(") failed, which ends the run on every rank: panic on rank 3, ")
                && line.ends_with("deliberate panic in a callback on rank 3"),
            "{what}: rank {r}'s run did not end with rank 3's reason: {line}\n{report}"
        );
    }
    assert_nothing_left(&prefix, &guard, what, &done);
}

/// A rank whose main fiber calls `std::process::exit(3)` in the middle of a run ends, and the
/// job with it, with that status. (The exit handler waited for the job state the run held, so
/// the process never ended and neither did the job.)
#[test]
fn a_rank_calling_exit_inside_a_run_ends_the_job_with_its_status() {
    ends_promptly(&["--exit-rank", "1"], 3, "rank 1 on host");
}

/// The same with status 0: MPI counts an exit without `MPI_Finalize` as a failure only on some
/// launchers, so `gsmrun` must know from the runtime that the rank was inside its job.
#[test]
fn a_rank_calling_exit_0_inside_a_run_ends_the_job_naming_it() {
    ends_promptly(
        &["--exit-rank", "1", "--exit-status", "0"],
        1,
        &format!(
            "rank 1 on host {} exited with status 0 in the middle of its gossamer job",
            this_host()
        ),
    );
}

/// A rank that exits 0 without joining the job ends it at once, whichever rank it is. (The other
/// ranks waited for it in the bootstrap for ever, and the launcher counted its exit a success.)
#[test]
fn a_rank_that_never_joins_ends_the_job_naming_it() {
    for rank in ["1", "0"] {
        let other = if rank == "1" { "0" } else { "1" };
        ends_promptly(
            &["--skip-rank", rank],
            1,
            &format!(
                "rank {rank} on host {} exited with status 0 without joining the gossamer job, \
                 but rank {other} is in the gossamer job and waits for it",
                this_host()
            ),
        );
    }
}

/// A rank whose program is no gossamer program (a script that exits 0) ends the job. (The other
/// rank waited for it in the bootstrap for ever: the launcher saw nothing wrong.)
#[test]
fn a_rank_running_another_program_ends_the_job_naming_it() {
    let mut cmd = gsmrun(["-np", "2", "-t", "2"]);
    cmd.args([
        "sh",
        "-c",
        r#"if [ "$GSM_RANK" = 1 ]; then exit 0; fi; exec "$0" --quick"#,
    ])
    .arg(cluster_check());
    ends_promptly_cmd(
        cmd,
        "gsmrun -np 2 sh -c '…exit 0 on rank 1…' cluster_check",
        1,
        &format!(
            "rank 1 on host {} exited with status 0 without joining the gossamer job, but rank 0 \
             is in the gossamer job and waits for it",
            this_host()
        ),
    );
}

/// A rank that runs another program and keeps running (it may as well be a rank that is slow to
/// join) leaves the other waiting in the bootstrap: the job is not ended for it, but after 30 s
/// gsmrun says which rank waits for which and what to do. (Nothing was said: the job hung in
/// silence.) Ended here by `--timeout`.
#[test]
fn a_rank_running_another_program_that_keeps_running_is_named_after_30_s() {
    let _serial = serial();
    let guard = PidGuard::new();
    let what = "gsmrun -np 2 --timeout 36 sh -c '…sleep on rank 1…' cluster_check";
    let mut cmd = gsmrun(["-np", "2", "-t", "2", "--timeout", "36"]);
    cmd.args([
        "sh",
        "-c",
        r#"if [ "$GSM_RANK" = 1 ]; then exec sleep 60; fi; exec "$0" --quick"#,
    ])
    .arg(cluster_check());
    let job = spawn(&mut cmd);
    let prefix = job_prefix(job.pid() as u32);
    watch_ranks(&job, 1, &guard);
    let done = job.wait(Duration::from_secs(60));
    let report = done.report();
    assert!(!done.timed_out, "{what}: must end, not hang\n{report}");
    assert_eq!(done.code(), Some(124), "{what}\n{report}");
    let host = this_host();
    assert!(
        done.stderr.contains(&format!(
            "gsmrun: note: rank 0 on host {host} has waited 3"
        )) && done.stderr.contains(&format!(
            "s in the gossamer bootstrap for rank 1 on host {host}, which is running but has not \
             joined the gossamer job. If it runs another program"
        )) && done.stderr.contains("gossamer program. --timeout 36 s ends it\n"),
        "{what}: no note of the wait\n{report}"
    );
    assert_nothing_left(&prefix, &guard, what, &done);
}

/// A rank that runs once while the others run twice ends the job. (It waited in `MPI_Finalize`
/// for the others, and they for it in their second run: nobody ever exited.)
#[test]
fn a_rank_with_fewer_runs_ends_the_job_naming_it() {
    ends_promptly(&["--one-run-rank", "1"], 1, &fewer_runs_line());
}

/// The same in a program that initialised MPI itself and finalises it: its `MPI_Finalize` says
/// the rank is leaving before it waits for the others. (The program's own `MPI_Finalize` waited
/// for rank 0, and rank 0 for it in its second run, until a timeout.)
#[test]
fn a_rank_with_fewer_runs_in_a_program_owning_mpi_ends_the_job_naming_it() {
    ends_promptly(&["--own-mpi", "--one-run-rank", "1"], 1, &fewer_runs_line());
}

/// A program that owns MPI and runs as many runs on every rank ends well.
#[test]
fn a_program_owning_mpi_ends_with_status_0() {
    ends_promptly(&["--own-mpi"], 0, "passed");
}

/// What gsmrun says of rank 1 leaving after one run while rank 0 is in its second.
fn fewer_runs_line() -> String {
    format!(
        "rank 1 on host {} is leaving the gossamer job (finalising MPI) after 1 gossamer run, but \
         rank 0 is in gossamer run 2 and waits for it",
        this_host()
    )
}

/// This machine's hostname, as the rank wrappers report it.
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the hostname is readable")
        .trim()
        .to_string()
}

/// Every rank's main fiber waits for a message nobody sends: the job ends as deadlocked on every
/// rank, each naming what its fibers wait for, over either fabric. (It hung: every worker idle,
/// nothing in flight, and nothing to wake the fibers.) Every rank's report is shown: gsmrun
/// lets the others end by themselves once one says the job is deadlocked (it used to end them
/// at the first report, so only that rank's line came out).
#[test]
fn a_job_whose_fibers_wait_for_ever_ends_as_deadlocked() {
    for fabric in ["shm", "tcp"] {
        let what = format!("gsmrun -np 2 --fabric {fabric} cluster_check --recv-forever");
        let done = ends_promptly_cmd(
            job_command(2, Some(fabric), &["--recv-forever", "--quick"]),
            &what,
            1,
            "the job is deadlocked: every worker of every rank is idle",
        );
        for line in [
            "on rank 0: worker 0: a fiber waits for a message from worker 3 under tag 0xd1",
            "on rank 1: worker 2: a fiber waits for a message from worker 3 under tag 0xd1",
        ] {
            assert!(
                done.stderr.contains(line),
                "{what}: every rank's report should come out, this one says `{line}`\n{}",
                done.report()
            );
        }
    }
}

/// A rank waiting 2.5 s for a message from a rank busy sleeping is no deadlock.
#[test]
fn a_rank_waiting_for_a_busy_rank_is_no_deadlock() {
    ends_promptly(&["--slow-send"], 0, "ok slow_send (rank 0)");
}

/// Nor is one waiting for a fiber in `gossamer::sleep` on another rank, whose workers are idle
/// meanwhile (a sleep in a `wait_for` on the clock was reported deadlocked after a second).
#[test]
fn a_rank_waiting_for_a_sleeping_fiber_is_no_deadlock() {
    ends_promptly(&["--fiber-sleep-send"], 0, "ok slow_send (rank 0)");
}

/// Runs `gsmrun -np 2 cluster_check --quick ARGS` and asserts that it ends with `code` within
/// 30 s (not hanging into the limit), that its output contains `says`, and that nothing is left.
fn ends_promptly(args: &[&str], code: i32, says: &str) {
    let what = &format!("gsmrun -np 2 cluster_check {}", args.join(" "));
    let mut all = args.to_vec();
    all.push("--quick");
    ends_promptly_cmd(job_command(2, None, &all), what, code, says);
}

/// [`ends_promptly`] for any 2-rank job command; returns what the job did.
fn ends_promptly_cmd(mut cmd: Command, what: &str, code: i32, says: &str) -> Finished {
    let _serial = serial();
    let guard = PidGuard::new();
    let job = spawn(&mut cmd);
    let prefix = job_prefix(job.pid() as u32);
    watch_ranks(&job, 2, &guard);
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(!done.timed_out, "{what}: must end, not hang\n{report}");
    assert_eq!(done.code(), Some(code), "{what}\n{report}");
    assert!(
        done.elapsed < Duration::from_secs(30),
        "{what}: took {:?} to end\n{report}",
        done.elapsed
    );
    assert!(
        done.stdout.contains(says) || done.stderr.contains(says),
        "{what}: the output does not say `{says}`\n{report}"
    );
    assert_nothing_left(&prefix, &guard, what, &done);
    done
}

/// A job whose runs are on a thread other than main ends well: MPI is finalised at exit (by the
/// main thread) and nobody reports the ranks as ending improperly.
#[test]
fn a_job_run_from_a_spawned_thread_ends_with_status_0() {
    ends_promptly(&["--run-on-thread"], 0, "passed");
}

/// A rank that panics between two runs ends the job with its status, though the other rank is
/// already waiting for it in the second run. (Its exit finalised MPI, which waits for every
/// rank: both waited for ever.)
#[test]
fn a_rank_panicking_between_runs_ends_the_job() {
    ends_promptly(&["--panic-between-runs", "1"], 101, "rank 1 on host");
}

/// A rank whose second run has a configuration it refuses fails that run on every rank. (It
/// returned alone, before any collective call, and the others waited for it.)
#[test]
fn a_configuration_one_rank_refuses_fails_the_run_on_every_rank() {
    ends_promptly(
        &["--bad-config-rank", "1"],
        1,
        "another rank failed while checking its configuration",
    );
}
