//! Delegation across ranks, end to end: `cluster_check` (an example of the `gossamer` crate that
//! runs every kind of cross-rank delegation and checks every result) launched through `gsmrun`
//! on one host with `shm` and `tcp`, on two simulated hosts (network namespaces) where `auto`
//! must pick tcp between hosts and shm within one, and in the ways a job can fail: a panic on a
//! worker, a rank killed with SIGKILL, a host that vanishes without closing its connections,
//! strangers connecting to a rank's tcp listener.
//!
//! Every test reads the results (each rank's `ok <check>` line for every check the example's
//! source runs, and its final `cluster_check: rank R of N passed C checks (W workers)`), not just
//! exit codes; runs under a hard time limit (a hang fails the test); and checks afterwards that
//! no process of the job and no `/dev/shm/{job}-r*` segment is left. The tests take a lock so
//! that they run one at a time: jobs of up to 4 oversubscribed ranks on a 2-core machine would
//! otherwise slow each other down past the "within a few seconds" bounds the failure tests assert.
//!
//! A killed rank is tested twice: through `gsmrun`, whose fate sharing ends the job at once (exit
//! 137), and through plain `mpirun --enable-recovery`, which leaves the other ranks running so
//! that the runtime itself must notice the loss (by watching the process on its host, by its tcp
//! connections across hosts). A host that vanishes without a word (its cable pulled, its
//! processes frozen: no FIN, no RST) can only be noticed by TCP keepalive; that test takes about
//! 30 s, most of it the keepalive's 25 s.
//!
//! `cargo test -p gsm-tests` does not build other packages' examples: run
//! `cargo build --release --workspace --all-targets` (`make test` does) with the same
//! `CARGO_TARGET_DIR` first.

use gsm_tests::bins::gsm_hello;
use gsm_tests::cluster::{
    assert_nothing_left, check_results, cluster_check, example_checks, frame, hello, job_prefix,
    job_processes, oks, poll, ranks, tcp_listeners, watch_ranks,
};
use gsm_tests::job::{assert_exit, assert_ranks, gsmrun, mpirun};
use gsm_tests::netns::TwoHosts;
use gsm_tests::process::{Finished, Line, PidGuard, Running, alive_as, run, spawn};
use gsm_tests::scratch::{RunId, Scratch};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The hard limit of one job; a healthy one takes 1–4 s here.
const LIMIT: Duration = Duration::from_secs(40);
/// Workers per rank (`cluster_check` asks for 2, and `-t 2` says the same).
const WORKERS: u32 = 2;
/// How long a failed job may take to end after the failure.
const FAIL_FAST: Duration = Duration::from_secs(5);

/// One job at a time (see the module docs).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// `gsmrun -np N -t 2 [--oversubscribe] [--fabric F] cluster_check [ARGS]`.
fn job_command(np: u32, fabric: Option<&str>, args: &[&str]) -> Command {
    let np_text = np.to_string();
    let mut cmd = gsmrun(["-np", np_text.as_str(), "-t", "2"]);
    if np > 2 {
        cmd.arg("--oversubscribe");
    }
    if let Some(fabric) = fabric {
        cmd.args(["--fabric", fabric]);
    }
    cmd.arg(cluster_check()).args(args);
    cmd
}

/// Runs a job that must pass on every rank, and checks its results and what it leaves.
fn passing_job(np: u32, fabric: Option<&str>, quick: bool) -> Finished {
    let _serial = serial();
    let guard = PidGuard::new();
    let args: &[&str] = if quick { &["--quick"] } else { &[] };
    let what = format!(
        "gsmrun -np {np} --fabric {} cluster_check{}",
        fabric.unwrap_or("(default)"),
        if quick { " --quick" } else { "" }
    );
    let job = spawn(&mut job_command(np, fabric, args));
    let prefix = job_prefix(job.pid() as u32);
    watch_ranks(&job, np, &guard);
    let done = job.wait(LIMIT);
    assert_exit(&done, 0, &what);
    if let Err(problem) = check_results(&done.stdout, np, WORKERS, &example_checks()) {
        panic!("{what}: {problem}\n{}", done.report());
    }
    assert_nothing_left(&prefix, &guard, &what, &done);
    eprintln!("{what}: passed in {:.2} s", done.elapsed.as_secs_f64());
    done
}

#[test]
fn two_ranks_shm_full_checks() {
    passing_job(2, None, false);
}

#[test]
fn two_ranks_tcp_full_checks() {
    passing_job(2, Some("tcp"), false);
}

#[test]
fn four_ranks_oversubscribed_shm() {
    passing_job(4, None, true);
}

#[test]
fn four_ranks_oversubscribed_tcp() {
    passing_job(4, Some("tcp"), true);
}

/// 2 hosts × 2 ranks: `auto` (the default) must connect ranks on different hosts (tcp) and on
/// the same host (shm); `--fabric shm` must refuse, naming a rank on another host, which shows
/// that the hosts really are apart and that the passing job could not have used shm between them.
#[test]
fn two_hosts_auto_uses_tcp_between_and_shm_within() {
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("cluster", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(2));
    let command = |fabric: &str| {
        let mut cmd = gsmrun(["-np", "4", "-t", "2", "--fabric", fabric, "-hostfile"]);
        cmd.arg(&hostfile)
            .arg("--launch-agent")
            .arg(TwoHosts::agent())
            .arg(cluster_check())
            .arg("--quick");
        cmd.envs(bed.mpi_env());
        cmd
    };

    let guard = PidGuard::new();
    let what = "gsmrun -np 4 over two namespaces, --fabric auto";
    let job = spawn(&mut command("auto"));
    let prefix = job_prefix(job.pid() as u32);
    watch_ranks(&job, 4, &guard);
    let done = job.wait(LIMIT);
    assert_exit(&done, 0, what);
    if let Err(problem) = check_results(&done.stdout, 4, WORKERS, &example_checks()) {
        panic!("{what}: {problem}\n{}", done.report());
    }
    assert_nothing_left(&prefix, &guard, what, &done);
    eprintln!("{what}: passed in {:.2} s", done.elapsed.as_secs_f64());

    let what = "gsmrun -np 4 over two namespaces, --fabric shm";
    let job = spawn(&mut command("shm"));
    let prefix = job_prefix(job.pid() as u32);
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(!done.timed_out, "{what}: must fail, not hang\n{report}");
    assert_ne!(done.code(), Some(0), "{what}: must fail\n{report}");
    assert!(
        done.stderr.contains("GSM_FABRIC=shm, but rank ")
            && done.stderr.contains("runs on another host"),
        "{what}: the error must name a rank on another host\n{report}"
    );
    assert!(
        !done.stdout.contains("ok entrust_on"),
        "{what}: no check may run\n{report}"
    );
    assert_nothing_left(&prefix, &guard, what, &done);
}

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

/// gsmrun's own last line in `stderr` (its report of how the job ended), or "".
fn gsmrun_line(stderr: &str) -> &str {
    stderr
        .lines()
        .rfind(|l| l.starts_with("gsmrun: "))
        .unwrap_or_default()
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
/// for rank 0, and rank 0 for it in its second run: 15 s into a timeout.)
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

/// A `--hang-rank V` job whose ranks all run, rank 0 having passed 3 checks.
struct Started {
    job: Running,
    /// Rank → pid of the job's ranks.
    pids: BTreeMap<u32, u32>,
    /// The prefix of the job's id.
    prefix: String,
}

/// Starts `cmd` (an `np`-rank `cluster_check --hang-rank V` job whose processes carry a job id
/// starting with `prefix_of(pid of the spawned process)`), records its ranks in `guard`, and
/// waits until rank 0 has passed 3 checks. Rank V then loops delegating to rank 0 forever and
/// the others wait for the job to end after their checks, so the job never ends by itself.
fn start_hanging(
    cmd: &mut Command,
    prefix_of: impl FnOnce(u32) -> String,
    np: usize,
    guard: &PidGuard,
    what: &str,
) -> Started {
    let mut job = spawn(cmd);
    let prefix = prefix_of(job.pid() as u32);
    let pids = poll(Duration::from_secs(30), || {
        let found = ranks(&prefix, "cluster_check");
        (found.len() == np).then_some(found)
    });
    for pid in pids.iter().flat_map(|r| r.values()) {
        guard.watch(*pid, "cluster_check");
    }
    let Some(pids) = pids else {
        let done = job.wait(Duration::ZERO);
        panic!(
            "{what}: the {np} rank processes never appeared\n{}",
            done.report()
        );
    };
    let started = job.wait_for_stdout(Duration::from_secs(30), |lines| {
        let text: String = lines.iter().map(|l| format!("{}\n", l.text)).collect();
        oks(&text).iter().filter(|(rank, _)| *rank == 0).count() >= 3
    });
    if !started {
        let done = job.wait(Duration::ZERO);
        panic!("{what}: rank 0 did not pass 3 checks\n{}", done.report());
    }
    Started { job, pids, prefix }
}

/// A `--hang-rank V` job started and then hit: rank V killed with SIGKILL.
struct Killed {
    job: Running,
    /// Rank → pid of the job's ranks.
    pids: BTreeMap<u32, u32>,
    /// When the kill was sent, measured like the job's output (from its spawn).
    at: Duration,
    /// The prefix of the job's id.
    prefix: String,
}

/// [`start_hanging`], then kills rank `victim` with SIGKILL.
fn start_then_kill(
    cmd: &mut Command,
    prefix_of: impl FnOnce(u32) -> String,
    (np, victim): (usize, u32),
    guard: &PidGuard,
    what: &str,
) -> Killed {
    let Started { job, pids, prefix } = start_hanging(cmd, prefix_of, np, guard, what);
    // SAFETY: kill(2) has no memory-safety preconditions; the pid is a rank of our job, found by
    // its environment a moment ago; it loops forever, so it cannot have exited and been reused.
    unsafe { libc::kill(pids[&victim] as i32, libc::SIGKILL) };
    let at = job.elapsed();
    Killed {
        job,
        pids,
        at,
        prefix,
    }
}

/// Through `gsmrun`: the job ends within a few seconds of the kill with 137 (gsmrun's fate
/// sharing: 128 + SIGKILL), naming rank 1 and the signal, leaving nothing behind.
fn killed_peer(fabric: Option<&str>) {
    let _serial = serial();
    let guard = PidGuard::new();
    let what = format!(
        "gsmrun -np 2 --fabric {} cluster_check --hang-rank 1, rank 1 SIGKILLed",
        fabric.unwrap_or("(default)")
    );
    let mut cmd = job_command(2, fabric, &["--hang-rank", "1", "--quick"]);
    let Killed {
        job, at, prefix, ..
    } = start_then_kill(&mut cmd, job_prefix, (2, 1), &guard, &what);
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(!done.timed_out, "{what}: the job hung\n{report}");
    let took = done.elapsed.saturating_sub(at);
    assert!(
        took < FAIL_FAST,
        "{what}: the job took {took:?} to end after the kill (expected < {FAIL_FAST:?})\n{report}"
    );
    assert_exit(&done, 137, &what);
    assert!(
        done.stderr.contains("rank 1") && done.stderr.contains("signal 9"),
        "{what}: stderr does not name rank 1 and signal 9\n{report}"
    );
    assert!(
        !done.stdout.contains(" passed "),
        "{what}: no rank may report success\n{report}"
    );
    assert_nothing_left(&prefix, &guard, &what, &done);
    eprintln!("{what}: ended {:.2} s after the kill", took.as_secs_f64());
}

#[test]
fn a_peer_killed_with_sigkill_ends_the_job_fast_shm() {
    killed_peer(None);
}

#[test]
fn a_peer_killed_with_sigkill_ends_the_job_fast_tcp() {
    killed_peer(Some("tcp"));
}

/// Two hosts of two ranks with per-host tcp connections (issue 33): rank 2 is the rank of the
/// second host that reads the first host's workers 0 and 1 for both ranks of its host. SIGKILLed
/// while the job runs, the job ends within a few seconds naming rank 2 and the signal, and no
/// rank reports success.
#[test]
fn a_reading_rank_killed_on_two_hosts_is_the_one_named() {
    let _serial = serial();
    let guard = PidGuard::new();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("killreader", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(2));
    let mut cmd = gsmrun(["-np", "4", "-t", "2", "-hostfile"]);
    cmd.arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .arg(cluster_check())
        .args(["--hang-rank", "2", "--quick"]);
    cmd.envs(bed.mpi_env());
    let what = "gsmrun -np 4 over two namespaces, cluster_check --hang-rank 2, rank 2 SIGKILLed";
    let Killed { job, at, .. } = start_then_kill(&mut cmd, job_prefix, (4, 2), &guard, what);
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(!done.timed_out, "{what}: the job hung\n{report}");
    let took = done.elapsed.saturating_sub(at);
    assert!(
        took < FAIL_FAST,
        "{what}: the job took {took:?} to end after the kill (expected < {FAIL_FAST:?})\n{report}"
    );
    assert!(
        done.stderr.contains("rank 2") && done.stderr.contains("signal 9"),
        "{what}: stderr does not name rank 2 and signal 9\n{report}"
    );
    assert!(
        !done.stdout.contains(" passed "),
        "{what}: no rank may report success\n{report}"
    );
    eprintln!(
        "{what}: ended {:.2} s after the kill\n{}",
        took.as_secs_f64(),
        done.stderr
    );
}

/// `mpirun` killed from outside while the ranks run: gsmrun's line names mpirun and the signal,
/// not a rank that mpirun's going ended (Open MPI ends such a rank with status 195, and gsmrun
/// named "rank 0 … exited with status 195" in 5 runs of 6), and nothing is left.
#[test]
fn a_launcher_killed_from_outside_is_named_not_the_ranks_it_took_along() {
    let _serial = serial();
    let guard = PidGuard::new();
    let what = "gsmrun -np 2 cluster_check --hang-rank 1, mpirun SIGKILLed";
    let mut cmd = job_command(2, None, &["--hang-rank", "1", "--quick"]);
    let Started { job, prefix, .. } = start_hanging(&mut cmd, job_prefix, 2, &guard, what);
    let mpirun = job_processes(&prefix)
        .into_iter()
        .find(|p| p.comm == "mpirun")
        .unwrap_or_else(|| panic!("{what}: no mpirun among the job's processes"));
    // SAFETY: kill(2) on the job's mpirun, found by its environment a moment ago; the job hangs,
    // so it cannot have exited and its pid been reused.
    unsafe { libc::kill(mpirun.pid as i32, libc::SIGKILL) };
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(!done.timed_out, "{what}: the job hung\n{report}");
    assert_exit(&done, 1, what);
    let last = gsmrun_line(&done.stderr);
    assert!(
        last.starts_with("gsmrun: mpirun was killed by signal 9 (SIGKILL) before "),
        "{what}: gsmrun's line should name mpirun: {last}\n{report}"
    );
    assert_nothing_left(&prefix, &guard, what, &done);
}

/// Without `gsmrun`'s fate sharing (which ends the job before the runtime can notice): plain
/// `mpirun --enable-recovery`, which keeps rank 0 running when rank 1 dies. Rank 0's runtime must
/// notice by itself that rank 1 vanished, return an error naming it, and exit within a few
/// seconds; no segment of the job may be left (nobody else removes them here).
fn vanished_peer_seen_by_the_runtime(fabric: &str) {
    let _serial = serial();
    let guard = PidGuard::new();
    let id = RunId::next();
    // Not of gsmrun's form `gsm-<pid>-`, so it cannot match a gsmrun job.
    let job_id = format!("gsm-test{}x{}-{fabric}", id.pid, id.n);
    let what = format!(
        "mpirun --enable-recovery -np 2 cluster_check --hang-rank 1 (GSM_FABRIC={fabric}), rank 1 SIGKILLed"
    );
    let mut cmd = mpirun([
        "--enable-recovery",
        "-x",
        "GSM_JOB_ID",
        "-x",
        "GSM_FABRIC",
        "-np",
        "2",
    ]);
    cmd.env("GSM_JOB_ID", &job_id)
        .env("GSM_FABRIC", fabric)
        .arg(cluster_check())
        .args(["--hang-rank", "1", "--quick"]);
    let Killed { job, pids, at, .. } =
        start_then_kill(&mut cmd, |_| job_id.clone(), (2, 1), &guard, &what);
    let rank0_ended = poll(FAIL_FAST, || {
        (!alive_as(pids[&0], "cluster_check")).then_some(())
    });
    let rank0_took = job.elapsed().saturating_sub(at);
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(
        rank0_ended.is_some(),
        "{what}: rank 0 still ran {FAIL_FAST:?} after rank 1 was killed\n{report}"
    );
    let line = done
        .stderr
        .lines()
        .find(|l| {
            l.starts_with("cluster_check: ") && l.contains("vanished while the job was running")
        })
        .unwrap_or_else(|| panic!("{what}: rank 0 reported no vanished peer\n{report}"));
    assert!(
        line.contains("rank 1 (host "),
        "{what}: the error does not name rank 1: {line}\n{report}"
    );
    assert!(
        !done.stdout.contains(" passed "),
        "{what}: no rank may report success\n{report}"
    );
    assert_nothing_left(&job_id, &guard, &what, &done);
    eprintln!(
        "{what}: rank 0 ended {:.2} s after the kill: {line}",
        rank0_took.as_secs_f64()
    );
}

#[test]
fn a_vanished_peer_is_reported_by_the_runtime_itself_shm() {
    vanished_peer_seen_by_the_runtime("shm");
}

#[test]
fn a_vanished_peer_is_reported_by_the_runtime_itself_tcp() {
    vanished_peer_seen_by_the_runtime("tcp");
}

/// `mpirun --enable-recovery -np 4 cluster_check --hang-rank 2 --quick` over the two hosts of
/// `bed` (a hostfile of 2 slots each, written in `scratch`), default fabric, and the job id it
/// sets as `GSM_JOB_ID` (unique, ending in `-{label}`). With `rank_stderr`, each rank writes its
/// stderr to `rank<R>.stderr` in `scratch` instead of through Open MPI, which does not keep the
/// ranks' lines whole.
///
/// Without `gsmrun` nothing sets `GSM_HOST_ADDR`, which the tcp fabric binds to; a shell sets it
/// per rank from Open MPI's by-slot placement (ranks 0, 1 on the first host; 2, 3 on the second),
/// which `two_hosts.rs` checks, and `exec`s the program.
fn two_hosts_hang_rank_2(
    bed: &TwoHosts,
    scratch: &Scratch,
    label: &str,
    rank_stderr: bool,
) -> (Command, String) {
    let hostfile = scratch.write("hosts", &bed.hostfile(2));
    let id = RunId::next();
    let job_id = format!("gsm-test{}x{}-{label}", id.pid, id.n);
    let redirect = if rank_stderr {
        format!(
            " 2>'{}/rank'$OMPI_COMM_WORLD_RANK.stderr",
            scratch.path().display()
        )
    } else {
        String::new()
    };
    let script = format!(
        "case $OMPI_COMM_WORLD_RANK in 0|1) GSM_HOST_ADDR={};; *) GSM_HOST_ADDR={};; esac; \
         export GSM_HOST_ADDR; exec {} --hang-rank 2 --quick{redirect}",
        bed.hosts[0].addr,
        bed.hosts[1].addr,
        cluster_check().display()
    );
    let mut cmd = mpirun([
        "--enable-recovery",
        "-x",
        "GSM_JOB_ID",
        "-np",
        "4",
        "--hostfile",
    ]);
    cmd.arg(hostfile)
        .arg("--mca")
        .arg("plm_rsh_agent")
        .arg(TwoHosts::agent())
        .args(["/bin/sh", "-c", &script, "rank"])
        .env("GSM_JOB_ID", &job_id)
        .envs(bed.mpi_env());
    (cmd, job_id)
}

/// Two hosts × 2 ranks under plain `mpirun --enable-recovery` (no fate sharing), default `auto`
/// fabric; rank 2 (on the second host) loops delegating to rank 0 and is killed with SIGKILL.
/// Ranks 0 and 1 can only learn it through their tcp connections to rank 2 (its pid is on
/// another host), rank 3 through its own watch of rank 2's process: all three must end within a
/// few seconds, each reporting a vanished peer, and the tcp fabric must have reported rank 2.
/// (The tcp fabric waits `LOSS_GRACE`, 1 s, before it reports a closed connection.)
#[test]
fn a_peer_on_another_host_that_vanishes_is_noticed_over_tcp() {
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("cluster", RunId::next());
    let guard = PidGuard::new();
    let what =
        "mpirun --enable-recovery -np 4 over two namespaces, --hang-rank 2, rank 2 SIGKILLed";
    let (mut cmd, job_id) = two_hosts_hang_rank_2(&bed, &scratch, "hosts", false);
    let Killed { job, pids, at, .. } =
        start_then_kill(&mut cmd, |_| job_id.clone(), (4, 2), &guard, what);
    let others = [0, 1, 3].map(|r| pids[&r]);
    let ended = poll(FAIL_FAST, || {
        others
            .iter()
            .all(|pid| !alive_as(*pid, "cluster_check"))
            .then_some(())
    });
    let took = job.elapsed().saturating_sub(at);
    // With recovery on and daemons on other hosts, Open MPI's mpirun and daemons stay after every
    // rank has ended (seen here with Open MPI 4.1.4); what matters is the ranks, so mpirun gets a
    // short grace and is then killed with its process group (the bed kills the daemons).
    let grace = job.elapsed() + Duration::from_secs(3);
    let done = job.wait(grace);
    let report = done.report();
    assert!(
        ended.is_some(),
        "{what}: ranks 0, 1, 3 did not all end within {FAIL_FAST:?} of the kill\n{report}"
    );
    // Each surviving rank reports the first loss it noticed: rank 2, or a rank of its own host
    // that ended (after noticing rank 2) a moment before. Open MPI forwards the ranks' stderr
    // without keeping lines whole, so the reports are counted, not parsed line by line.
    let vanished = done
        .stderr
        .matches("vanished while the job was running")
        .count();
    assert_eq!(
        vanished, 3,
        "{what}: expected ranks 0, 1 and 3 each to report one vanished peer\n{report}"
    );
    // Only the tcp fabric reports in this form (the process watch adds the pid), and only ranks
    // 0 and 1 reach rank 2 over tcp: the loss went over the network. (The program puts its own
    // name in front: `cluster_check: rank 2 …`.)
    let over_tcp = format!(
        ": rank 2 (host {}) vanished while the job was running: ",
        bed.hosts[1].hostname
    );
    assert!(
        done.stderr.contains(&over_tcp),
        "{what}: no rank on the first host noticed rank 2's loss over tcp (`{over_tcp}…`)\n{report}"
    );
    assert!(
        !done.stdout.contains(" passed "),
        "{what}: no rank may report success\n{report}"
    );
    assert_nothing_left(&job_id, &guard, what, &done);
    eprintln!(
        "{what}: the others ended {:.2} s after the kill; stderr:\n{}",
        took.as_secs_f64(),
        done.stderr
    );
}

/// How long ranks may take to end after a peer's host vanished without a word: the tcp fabric's
/// keepalive (silence before the first probe, then every unanswered probe; see
/// `gossamer::fabric::tcp::connect::keep_alive`), its `LOSS_GRACE` before it reports, and [`FAIL_FAST`]
/// for the job to end once the loss is reported, as the other failure tests allow.
fn silent_loss_bound() -> Duration {
    use gossamer::fabric::tcp::{KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES, LOSS_GRACE};
    KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_PROBES + LOSS_GRACE + FAIL_FAST
}

/// Host `host` of the bed, vanished: the job's processes on it frozen, its cable pulled.
/// [`Vanished::restore`], or dropping it whatever happened, kills those processes by pid and
/// plugs the cable back in, so that the tests after this one find the shared bed as it was.
struct Vanished<'a> {
    bed: &'a TwoHosts,
    host: usize,
    /// The frozen processes: pid, command name.
    frozen: Vec<(u32, String)>,
    unplugged: bool,
}

impl<'a> Vanished<'a> {
    /// Makes host `host` vanish as a host that loses power does: every process of job `job_id`
    /// on it stops (SIGSTOP), then its interface goes down. See
    /// `a_host_that_vanishes_without_a_word_is_noticed_over_tcp` for why both.
    fn now(bed: &'a TwoHosts, host: usize, job_id: &str) -> Self {
        let mut gone = Vanished {
            bed,
            host,
            frozen: Vec::new(),
            unplugged: false,
        };
        for p in job_processes(job_id) {
            if bed.hosts[host].holds(p.pid) {
                // SAFETY: kill(2) has no memory-safety preconditions; the pid was found a moment
                // ago by the job's id in its environment, and its process is not ours to reap,
                // so the pid names it until it is killed in `restore`.
                unsafe { libc::kill(p.pid as i32, libc::SIGSTOP) };
                gone.frozen.push((p.pid, p.comm));
            }
        }
        // Set first: a half-done `unplug` is undone too.
        gone.unplugged = true;
        if let Err(err) = bed.unplug(host) {
            panic!("pulling the cable of host {host}: {err}");
        }
        gone
    }

    fn restore(&mut self) -> Result<(), gsm_tests::TestbedError> {
        for (pid, comm) in self.frozen.drain(..) {
            if alive_as(pid, &comm) {
                // SAFETY: as in `now`; the name check keeps a recycled pid safe. SIGKILL ends a
                // stopped process too.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        // Open MPI's shared-memory segments of the killed ranks (`vader_segment.<host>.…`),
        // which they had no chance to remove; the host name is this test process's own.
        let prefix = format!("vader_segment.{}.", self.bed.hosts[self.host].hostname);
        if let Ok(entries) = std::fs::read_dir("/dev/shm") {
            for e in entries.flatten() {
                if e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&prefix))
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        if std::mem::take(&mut self.unplugged) {
            self.bed.plug(self.host)?;
        }
        Ok(())
    }
}

impl Drop for Vanished<'_> {
    fn drop(&mut self) {
        if let Err(err) = self.restore() {
            eprintln!("restoring the vanished host: {err}");
        }
    }
}

/// Two hosts × 2 ranks under plain `mpirun --enable-recovery`, rank 2 looping delegating to rank
/// 0 (as in `a_peer_on_another_host_that_vanishes_is_noticed_over_tcp`); then the second host
/// vanishes without a word, as a host that loses power or its cable does: nothing of it reaches
/// the first host again, no FIN, no RST. Ranks 0 and 1 can only notice by TCP keepalive on their
/// connections to ranks 2 and 3 (their only link to that host: no pid to watch, and Open MPI
/// neither reports nor kills anything that soon). Both must end within [`silent_loss_bound`] of
/// the cut, each reporting a vanished peer, and no rank may pass. The first to end must name
/// rank 2 or 3 of the second host; the other names one of those too, or, fate shared, the rank
/// of its own host that ended a moment before (see the assertion for why either happens).
///
/// How the host vanishes, and why that way:
/// - Killing its ranks would not do: their kernel closes their sockets, which sends a FIN (or an
///   RST); that is the SIGKILL test above.
/// - Freezing them (SIGSTOP) alone would not either: their kernel still acknowledges data and
///   answers keepalive probes. That is a live peer that reads nothing, which must *not* be
///   reported (the reason the fabric sets no `TCP_USER_TIMEOUT`).
/// - So the second host's interface goes down (`ip link set eth0 down` in its namespace: the
///   cable pulled). Nothing leaves it and nothing reaches it, its sockets stay open, and the
///   first host, untouched, sees what it would see of a powered-off neighbour: silence, then
///   failing address resolution. This machine has no nftables or iptables for a DROP rule, and a
///   DROP rule would also leave ARP answered, which no dead host does.
/// - Every process of the job on the second host is frozen first (ranks 2, 3 and Open MPI's
///   daemon), as power loss would stop them: nothing there notices the cut or acts on it, and
///   nothing is sent when the cable is plugged back in.
///
/// Afterwards, whatever happened, the frozen processes are killed by pid and the cable plugged
/// back in ([`Vanished`]), and mpirun, which may wait for the vanished daemon, gets a short grace
/// and is then killed with its process group, as in the SIGKILL test. Each rank's stderr goes to
/// a file of its own, so that each report can be told apart.
#[test]
fn a_host_that_vanishes_without_a_word_is_noticed_over_tcp() {
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("cluster", RunId::next());
    let guard = PidGuard::new();
    let what = "mpirun --enable-recovery -np 4 over two namespaces, --hang-rank 2, second host \
                frozen and unplugged";
    let (mut cmd, job_id) = two_hosts_hang_rank_2(&bed, &scratch, "silent", true);
    let Started { job, pids, .. } = start_hanging(&mut cmd, |_| job_id.clone(), 4, &guard, what);
    let mut gone = Vanished::now(&bed, 1, &job_id);
    let at = job.elapsed();
    let frozen: Vec<(u32, String)> = gone.frozen.clone();
    let bound = silent_loss_bound();
    // When each rank of the first host was seen gone, from the cut.
    let mut ended: BTreeMap<u32, Duration> = BTreeMap::new();
    poll(bound, || {
        for rank in [0, 1] {
            if !ended.contains_key(&rank) && !alive_as(pids[&rank], "cluster_check") {
                ended.insert(rank, job.elapsed().saturating_sub(at));
            }
        }
        (ended.len() == 2).then_some(())
    });
    let grace = job.elapsed() + Duration::from_secs(3);
    let done = job.wait(grace);
    let restored = gone.restore();
    let stderr_of = |rank: u32| {
        std::fs::read_to_string(scratch.join(&format!("rank{rank}.stderr"))).unwrap_or_default()
    };
    let report = format!(
        "{}\nfrozen on the second host: {frozen:?}\nranks gone after the cut: {ended:?}\n\
         --- rank 0's stderr ---\n{}--- rank 1's stderr ---\n{}---",
        done.report(),
        stderr_of(0),
        stderr_of(1)
    );
    if let Err(err) = restored {
        panic!("{what}: restoring the second host: {err}\n{report}");
    }
    assert!(
        [2, 3].iter().all(|r| frozen.iter().any(|f| f.0 == pids[r])),
        "{what}: ranks 2 and 3 (pids {}, {}) were not among the processes frozen on the second \
         host\n{report}",
        pids[&2],
        pids[&3]
    );
    assert!(
        ended.len() == 2,
        "{what}: ranks 0 and 1 did not both end within {bound:?} of the cut\n{report}"
    );
    // Each rank reports the first loss it noticed: rank 2 or 3, over tcp; or, fate shared, the
    // other rank of its host, whose process ended first (having noticed rank 2 or 3). Keepalive
    // expires on each connection by its own clock, and a rank reports `LOSS_GRACE` after that
    // while the other sees its process end at once: expiries 0.1 s apart make the later rank
    // report the earlier one (seen once in 16 runs). So one of the two, the first to end,
    // must name the second host.
    let far = &bed.hosts[1].hostname;
    let near = &bed.hosts[0].hostname;
    let mut lines = Vec::new();
    for rank in [0, 1] {
        let other = 1 - rank;
        let text = stderr_of(rank);
        let line = text
            .lines()
            .find(|l| {
                l.starts_with("cluster_check: ") && l.contains("vanished while the job was running")
            })
            .unwrap_or_else(|| panic!("{what}: rank {rank} reported no vanished peer\n{report}"))
            .to_string();
        let names = |peer: u32, host: &str| line.contains(&format!("rank {peer} (host {host}"));
        let second_host = names(2, far) || names(3, far);
        let other_first = names(other, near) && ended[&other] <= ended[&rank];
        assert!(
            second_host || other_first,
            "{what}: rank {rank} reported neither rank 2 or 3 of the second host nor rank \
             {other}, ended before it: {line}\n{report}"
        );
        lines.push((line, second_host));
    }
    assert!(
        lines.iter().any(|(_, second_host)| *second_host),
        "{what}: neither rank 0 nor rank 1 reported rank 2 or 3 of the second host\n{report}"
    );
    assert!(
        !done.stdout.contains(" passed "),
        "{what}: no rank may report success\n{report}"
    );
    assert_nothing_left(&job_id, &guard, what, &done);
    // The bed works again for the tests that share it: plain Open MPI across both hosts.
    let mut check = mpirun(["-np", "4", "--hostfile"]);
    check
        .arg(scratch.join("hosts"))
        .arg("--mca")
        .arg("plm_rsh_agent")
        .arg(TwoHosts::agent())
        .arg(gsm_hello())
        .envs(bed.mpi_env());
    let after = "plain mpirun across the two namespaces once the second host is back";
    let hellos = run(&mut check, LIMIT);
    assert_exit(&hellos, 0, after);
    assert_ranks(&hellos, 4, &guard, after);
    eprintln!(
        "{what}: rank 0 ended {:.2} s, rank 1 {:.2} s after the cut (bound {bound:?}); frozen on \
         the second host: {frozen:?}\n{}",
        ended[&0].as_secs_f64(),
        ended[&1].as_secs_f64(),
        lines
            .iter()
            .map(|(line, _)| line.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The gossamer listener of each rank: the listening sockets that are bound to an address
/// (Open MPI's TCP transport in the same process listens on the unspecified address; gossamer's
/// never does unless configured to), as rank → address.
fn gossamer_listeners(
    ranks: &std::collections::BTreeMap<u32, u32>,
) -> Option<Vec<(u32, SocketAddr)>> {
    let mut found = Vec::new();
    for (rank, pid) in ranks {
        let bound: Vec<SocketAddr> = tcp_listeners(*pid)
            .into_iter()
            .filter(|a| !a.ip().is_unspecified())
            .collect();
        match bound.as_slice() {
            [one] => found.push((*rank, *one)),
            [] => return None,
            many => panic!("rank {rank} (pid {pid}) listens on several bound addresses: {many:?}"),
        }
    }
    Some(found)
}

/// Sends `bytes` on a new connection to `to`, and keeps the connection open (returned) so the
/// listener, not our close, decides its fate.
fn send(to: SocketAddr, bytes: &[u8]) -> std::io::Result<TcpStream> {
    let mut sock = TcpStream::connect_timeout(&to, Duration::from_secs(2))?;
    sock.write_all(bytes)?;
    Ok(sock)
}

/// What happened to one attempt of the stranger test.
enum Attempt {
    /// The listeners were found and attacked; the job's result.
    Done(Finished),
    /// The listeners did not appear in time, or were gone when the strangers connected (timing,
    /// not a wrong result): worth another try, once the job's own results are checked.
    NoListener(Finished),
}

fn strangers_attempt() -> Attempt {
    let guard = PidGuard::new();
    let job = spawn(&mut job_command(2, Some("tcp"), &[]));
    let prefix = job_prefix(job.pid() as u32);
    let mut watched = false;
    let mut started = false;
    // Some(Some(listeners)) when found, Some(None) when the job ended first.
    let listeners = poll(Duration::from_secs(20), || {
        let found = ranks(&prefix, "cluster_check");
        if found.len() != 2 {
            let alive = !job_processes(&prefix).is_empty();
            started |= alive;
            return (started && !alive).then_some(None);
        }
        if !watched {
            for rank_pid in found.values() {
                guard.watch(*rank_pid, "cluster_check");
            }
            watched = true;
        }
        gossamer_listeners(&found).map(Some)
    });
    let Some(Some(listeners)) = listeners else {
        return Attempt::NoListener(job.wait(LIMIT));
    };
    // The job inherits this environment, so it uses the same ring geometry.
    let config = gossamer::Config::from_env().unwrap_or_default();
    let mut open = Vec::new();
    let mut missed = false;
    let mut garbage = b"GET / HTTP/1.0\r\n\r\n".to_vec();
    garbage.extend((0..200u32).map(|i| (i * 37 % 251) as u8));
    for (rank, addr) in &listeners {
        let other = 1 - rank;
        let mut forged = hello(
            &[0xA5; 32],
            other,
            0,
            *rank,
            config.slots_per_ring as u32,
            config.slot_size as u32,
            (other < *rank).then_some(0),
        )
        .to_vec();
        // A frame for the rank's first worker, as an authenticated peer would send it.
        forged.extend(frame(rank * WORKERS, 0, &[0x42; 64]));
        for bytes in [&garbage, &forged] {
            match send(*addr, bytes) {
                Ok(sock) => open.push(sock),
                Err(err) => {
                    // The run that owned the listener may have ended just now.
                    eprintln!("connecting to rank {rank}'s listener {addr}: {err}");
                    missed = true;
                }
            }
        }
    }
    let done = job.wait(LIMIT);
    drop(open);
    assert_nothing_left(&prefix, &guard, "the stranger test", &done);
    if missed {
        Attempt::NoListener(done)
    } else {
        Attempt::Done(done)
    }
}

/// Strangers connect to each rank's tcp listener while the job runs: one sends garbage, one a
/// hello that is well-formed except for the job key, followed by a frame. Both are dropped and
/// reported; the job completes with every result right.
#[test]
fn strangers_on_the_tcp_listener_are_dropped_and_the_job_completes() {
    let _serial = serial();
    let what = "gsmrun -np 2 --fabric tcp cluster_check with strangers connecting";
    let mut done = None;
    for attempt in 1..=3 {
        match strangers_attempt() {
            Attempt::Done(finished) => {
                done = Some(finished);
                break;
            }
            Attempt::NoListener(finished) => {
                // Never retry over a wrong result: the job itself must still have passed.
                assert_exit(&finished, 0, what);
                if let Err(problem) = check_results(&finished.stdout, 2, WORKERS, &example_checks())
                {
                    panic!("{what}: {problem}\n{}", finished.report());
                }
                eprintln!(
                    "{what}: attempt {attempt}: the listeners were not found in time\n{}",
                    finished.report()
                );
            }
        }
    }
    let done = done.unwrap_or_else(|| panic!("{what}: no listener found in 3 attempts"));
    let report = done.report();
    assert_exit(&done, 0, what);
    if let Err(problem) = check_results(&done.stdout, 2, WORKERS, &example_checks()) {
        panic!("{what}: {problem}\n{report}");
    }
    // Counted in the whole of stderr: forwarded output of two ranks need not keep lines whole.
    let dropped = done
        .stderr
        .matches("gossamer: tcp: dropped a connection from ")
        .count();
    assert_eq!(
        dropped, 4,
        "{what}: expected 4 `dropped a connection` reports (2 strangers × 2 ranks)\n{report}"
    );
    for reason in ["(wrong magic bytes)", "wrong job key"] {
        let count = done.stderr.matches(reason).count();
        assert_eq!(
            count, 2,
            "{what}: expected one `dropped a connection … {reason}` report per rank, got {count}\n{report}"
        );
    }
    eprintln!("{what}: the ranks reported:\n{}", done.stderr);
}
