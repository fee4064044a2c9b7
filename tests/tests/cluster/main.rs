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
//! processes frozen: no FIN, no RST) can only be noticed by TCP keepalive, so that test waits
//! for the keepalive's probes to fail.
//!
//! `cargo test -p gsm-tests` does not build other packages' examples: run
//! `cargo build --release --workspace --all-targets` (`make test` does) with the same
//! `CARGO_TARGET_DIR` first.

mod failing;
mod lost;
mod strangers;

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

/// The hard limit of one job, well above a healthy job's time.
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

/// gsmrun's own last line in `stderr` (its report of how the job ended), or "".
fn gsmrun_line(stderr: &str) -> &str {
    stderr
        .lines()
        .rfind(|l| l.starts_with("gsmrun: "))
        .unwrap_or_default()
}
