//! The `ofi` fabric (one-sided RMA over libfabric) end to end, through `gsmrun --fabric ofi`:
//! `cluster_check` over libfabric's `tcp;ofi_rxm` provider on one host and between two network
//! namespace hosts, and over its `shm` provider; with the completion queue's wait descriptor
//! (`GSM_OFI_CQ_WAIT=fd`); a provider that cannot serve refused at start
//! with one line naming it; a peer killed with SIGKILL ending the job within a few seconds.
//!
//! Every test reads the ranks' results, runs under a hard time limit, and checks that no process
//! of the job is left. They take a lock so that they run one at a time (2-core machine).
//!
//! Compiled with `--features ofi` only (the fabric is an opt-in feature of `gossamer`):
//! `make test` runs it in its own target dir, `target/ofi`.
//!
//! `cargo test -p gsm-tests` does not build other packages' examples: run
//! `cargo build --release --workspace --all-targets` first (`make test` does).

#![cfg(feature = "ofi")]

use gsm_tests::cluster::{
    assert_nothing_left, check_results, cluster_check, example_checks, job_prefix, oks, poll,
    ranks, watch_ranks,
};
use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::netns::TwoHosts;
use gsm_tests::process::{PidGuard, spawn};
use gsm_tests::scratch::{RunId, Scratch};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The hard limit of one job.
const LIMIT: Duration = Duration::from_secs(40);
/// Workers per rank.
const WORKERS: u32 = 2;
/// How long a failed job may take to end after the failure.
const FAIL_FAST: Duration = Duration::from_secs(5);

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// `gsmrun -np N -t 2 --fabric ofi cluster_check ARGS`, with `GSM_OFI_PROVIDER=provider`.
fn ofi_job(np: u32, provider: &str, args: &[&str]) -> Command {
    let np_text = np.to_string();
    let mut cmd = gsmrun(["-np", np_text.as_str(), "-t", "2", "--fabric", "ofi"]);
    if np > 2 {
        cmd.arg("--oversubscribe");
    }
    cmd.env("GSM_OFI_PROVIDER", provider);
    cmd.arg(cluster_check()).args(args);
    cmd
}

/// A job that must pass every check on every rank; what it wrote.
fn passing(mut cmd: Command, np: u32, what: &str) -> gsm_tests::process::Finished {
    let guard = PidGuard::new();
    let job = spawn(&mut cmd);
    let prefix = job_prefix(job.pid() as u32);
    watch_ranks(&job, np, &guard);
    let done = job.wait(LIMIT);
    assert_exit(&done, 0, what);
    if let Err(problem) = check_results(&done.stdout, np, WORKERS, &example_checks()) {
        panic!("{what}: {problem}\n{}", done.report());
    }
    assert_nothing_left(&prefix, &guard, what, &done);
    eprintln!("{what}: passed in {:.2} s", done.elapsed.as_secs_f64());
    done
}

#[test]
fn two_ranks_over_tcp_rxm_full_checks() {
    let _serial = serial();
    let what = "gsmrun -np 2 --fabric ofi (tcp;ofi_rxm) cluster_check";
    let mut cmd = ofi_job(2, "tcp;ofi_rxm", &[]);
    cmd.env("RUST_LOG", "gossamer::fabric=debug");
    let done = passing(cmd, 2, what);
    // The 64 MiB argument (its bytes checked by the trustee) went by the rendezvous, an RMA
    // read from the client's registered buffer, both ways, not through the rings.
    for rank in [0, 1] {
        let read = format!("ofi rendezvous read rank={rank} len=67108884");
        assert!(
            done.stderr.contains(&read),
            "{what}: no {read:?}\n{}",
            done.report()
        );
    }
}

/// `GSM_OFI_CQ_WAIT=fd`: each rank opens its completion queue with a wait descriptor (its
/// endpoint's log line says so), its progress thread may sleep on it while the workers park, and
/// the checks pass; a descriptor that never woke the thread would leave the job hanging.
#[test]
fn cq_wait_fd_opens_the_queue_with_a_descriptor_and_passes() {
    let _serial = serial();
    let what = "gsmrun -np 2 --fabric ofi (tcp;ofi_rxm) GSM_OFI_CQ_WAIT=fd cluster_check --quick";
    let mut cmd = ofi_job(2, "tcp;ofi_rxm", &["--quick"]);
    cmd.env("GSM_OFI_CQ_WAIT", "fd")
        .env("GSM_LOG", "gossamer::fabric=info");
    let done = passing(cmd, 2, what);
    let opened: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.contains("ofi endpoint opened"))
        .collect();
    // Once per rank and run (cluster_check makes two runs).
    assert_eq!(
        opened.len(),
        4,
        "{what}: endpoints opened\n{}",
        done.report()
    );
    assert!(
        opened.iter().all(|l| l.contains("cq_wait=fd")),
        "{what}: a queue opened without its wait descriptor\n{}",
        done.report()
    );
}

#[test]
fn three_ranks_over_the_shm_provider() {
    let _serial = serial();
    let what = "gsmrun -np 3 --fabric ofi (shm) cluster_check --quick";
    passing(ofi_job(3, "shm", &["--quick"]), 3, what);
}

/// One rank on each of two namespace hosts: the RMA writes cross a real (virtual) link.
#[test]
fn two_hosts_over_tcp_rxm() {
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("ofi", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(1));
    let mut cmd = gsmrun(["-np", "2", "-t", "2", "--fabric", "ofi", "-hostfile"]);
    cmd.arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .arg(cluster_check())
        .arg("--quick")
        .env("GSM_OFI_PROVIDER", "tcp;ofi_rxm")
        .envs(bed.mpi_env());
    passing(cmd, 2, "gsmrun -np 2 --fabric ofi over two namespaces");
}

/// `auto` between hosts: `tcp` here (libfabric's first RMA provider is `tcp;ofi_rxm`, software),
/// said once per rank and run at info level.
#[test]
fn auto_between_hosts_says_which_fabric_and_why() {
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("ofi", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(1));
    let mut cmd = gsmrun(["-np", "2", "-t", "2", "-hostfile"]);
    cmd.arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .arg(cluster_check())
        .arg("--quick")
        .env("GSM_LOG", "gossamer::fabric=info")
        .envs(bed.mpi_env());
    let what = "gsmrun -np 2 over two namespaces, --fabric auto, GSM_LOG=info";
    let job = spawn(&mut cmd);
    let done = job.wait(LIMIT);
    assert_exit(&done, 0, what);
    let said: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.contains("GSM_FABRIC=auto: the fabric between hosts"))
        .collect();
    // Once per rank and run (cluster_check makes two runs).
    assert_eq!(
        said.len(),
        4,
        "{what}: once per rank and run\n{}",
        done.report()
    );
    for rank in ["rank=0", "rank=1"] {
        assert!(
            said.iter().any(|l| l.contains(rank)),
            "{what}: {rank} did not say\n{}",
            done.report()
        );
    }
    assert!(
        said.iter()
            .all(|l| l.contains("fabric=tcp") && l.contains("tcp;ofi_rxm")),
        "{what}: tcp, because the first RMA provider emulates RMA\n{}",
        done.report()
    );
}

#[test]
fn a_provider_that_cannot_serve_is_refused_at_start_naming_it() {
    let _serial = serial();
    let what = "gsmrun --fabric ofi with GSM_OFI_PROVIDER=no-such-provider";
    let guard = PidGuard::new();
    let job = spawn(&mut ofi_job(2, "no-such-provider", &["--quick"]));
    let prefix = job_prefix(job.pid() as u32);
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(!done.timed_out, "{what}: hung\n{report}");
    assert_ne!(done.code(), Some(0), "{what}: must fail\n{report}");
    assert!(
        done.stderr
            .contains("ofi fabric: provider no-such-provider lacks any answer at all"),
        "{what}: the error must name the provider and what it lacks\n{report}"
    );
    assert!(
        !done.stdout.contains("ok entrust_on"),
        "{what}: no check may run\n{report}"
    );
    assert_nothing_left(&prefix, &guard, what, &done);
}

#[test]
fn a_peer_killed_with_sigkill_ends_the_job_fast() {
    let _serial = serial();
    let guard = PidGuard::new();
    let what = "gsmrun -np 2 --fabric ofi cluster_check --hang-rank 1, rank 1 SIGKILLed";
    let mut job = spawn(&mut ofi_job(
        2,
        "tcp;ofi_rxm",
        &["--hang-rank", "1", "--quick"],
    ));
    let prefix = job_prefix(job.pid() as u32);
    let pids = poll(Duration::from_secs(30), || {
        let found = ranks(&prefix, "cluster_check");
        (found.len() == 2).then_some(found)
    })
    .unwrap_or_else(|| panic!("{what}: the ranks never appeared"));
    for pid in pids.values() {
        guard.watch(*pid, "cluster_check");
    }
    let started = job.wait_for_stdout(Duration::from_secs(30), |lines| {
        let text: String = lines.iter().map(|l| format!("{}\n", l.text)).collect();
        oks(&text).iter().filter(|(rank, _)| *rank == 0).count() >= 3
    });
    assert!(started, "{what}: rank 0 did not pass 3 checks");
    // SAFETY: kill(2) has no memory-safety preconditions; the pid is a rank of this job, which
    // loops forever, so it cannot have exited and been reused.
    unsafe { libc::kill(pids[&1] as i32, libc::SIGKILL) };
    let at = job.elapsed();
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(!done.timed_out, "{what}: the job hung\n{report}");
    let took = done.elapsed.saturating_sub(at);
    assert!(
        took < FAIL_FAST,
        "{what}: took {took:?} to end after the kill\n{report}"
    );
    assert_exit(&done, 137, what);
    assert!(
        done.stderr.contains("rank 1") && done.stderr.contains("signal 9"),
        "{what}: stderr does not name rank 1 and signal 9\n{report}"
    );
    assert_nothing_left(&prefix, &guard, what, &done);
    eprintln!("{what}: ended {:.2} s after the kill", took.as_secs_f64());
}
