//! The `verbs` fabric's start-up through `gsmrun`, on a machine with no RDMA device: `--fabric
//! verbs` (and `GSM_FABRIC=verbs`) fails at start with one line naming what was looked for, the
//! RDMA device in a build with the `rdma` feature, the feature in a build without it; and
//! `auto` between two namespace hosts picks `tcp` in a build without `ofi`, said once per rank
//! and run with `RUST_LOG=info` (the `ofi` build's case is in `ofi.rs`).
//!
//! The data path itself needs RDMA hardware; it is compile-checked only (see
//! `libgsm/src/fabric/verbs`). `make test` runs this file in both builds: without features in
//! `target/`, and with `--features ofi,rdma` in `target/ofi` (gossamer's examples built there
//! with the same features).
//!
//! `cargo test -p gsm-tests` does not build other packages' examples: run
//! `cargo build --release --workspace --all-targets` first (`make test` does).

use gsm_tests::cluster::{assert_nothing_left, cluster_check, job_prefix};
use gsm_tests::job::gsmrun;
use gsm_tests::process::{PidGuard, spawn};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The hard limit of one job.
const LIMIT: Duration = Duration::from_secs(40);

/// One job at a time (2-core machine; Open MPI launches at once race on a host's session
/// directory).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// What every rank of a verbs job says when it cannot start, in this build.
#[cfg(feature = "rdma")]
const SAYS: &str = "GSM_FABRIC=verbs: no RDMA device with an active port: ibv_get_device_list \
                    found none (/sys/class/infiniband is empty or missing";
#[cfg(not(feature = "rdma"))]
const SAYS: &str = "GSM_FABRIC=verbs: this build of Gossamer has no verbs fabric (cargo feature \
                    `rdma` of the gossamer crate";

/// A job that must stop at start, saying `says` on one line, run no check, and leave nothing.
fn refused_at_start(mut cmd: Command, says: &str, what: &str) {
    let _serial = serial();
    let guard = PidGuard::new();
    let job = spawn(&mut cmd);
    let prefix = job_prefix(job.pid() as u32);
    let done = job.wait(LIMIT);
    let report = done.report();
    assert!(!done.timed_out, "{what}: hung\n{report}");
    assert_ne!(done.code(), Some(0), "{what}: must fail\n{report}");
    let lines: Vec<&str> = done.stderr.lines().filter(|l| l.contains(says)).collect();
    assert!(!lines.is_empty(), "{what}: no line says {says:?}\n{report}");
    assert!(
        !done.stdout.contains("ok entrust_on"),
        "{what}: no check may run\n{report}"
    );
    assert_nothing_left(&prefix, &guard, what, &done);
    eprintln!(
        "{what}: refused in {:.2} s: {}",
        done.elapsed.as_secs_f64(),
        lines[0]
    );
}

#[test]
fn fabric_verbs_without_a_device_or_the_feature_stops_at_start_in_one_line() {
    let mut cmd = gsmrun(["-np", "2", "-t", "1", "--fabric", "verbs"]);
    cmd.arg(cluster_check()).arg("--quick");
    refused_at_start(cmd, SAYS, "gsmrun -np 2 --fabric verbs");
}

/// `GSM_FABRIC=verbs` in gsmrun's environment, and a device named by `GSM_VERBS_DEVICE`, which
/// the message names (with the feature).
#[test]
fn gsm_fabric_verbs_with_a_named_device_names_it() {
    let mut cmd = gsmrun(["-np", "2", "-t", "1"]);
    cmd.arg(cluster_check())
        .arg("--quick")
        .env("GSM_FABRIC", "verbs")
        .env("GSM_VERBS_DEVICE", "mlx5_7");
    let says = if cfg!(feature = "rdma") {
        "GSM_FABRIC=verbs: no RDMA device mlx5_7 (GSM_VERBS_DEVICE): ibv_get_device_list found none"
    } else {
        SAYS
    };
    refused_at_start(
        cmd,
        says,
        "GSM_FABRIC=verbs GSM_VERBS_DEVICE=mlx5_7 gsmrun -np 2",
    );
}

/// `auto` between hosts in a build without `ofi`: `tcp`, said once per rank and run at info
/// level through `RUST_LOG`, which gsmrun passes to the ranks of both hosts.
#[cfg(not(feature = "ofi"))]
#[test]
fn auto_between_hosts_picks_tcp_and_says_why_with_rust_log() {
    use gsm_tests::job::assert_exit;
    use gsm_tests::netns::TwoHosts;
    use gsm_tests::scratch::{RunId, Scratch};
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("verbs", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(1));
    let mut cmd = gsmrun(["-np", "2", "-t", "1", "-hostfile"]);
    cmd.arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .arg(cluster_check())
        .arg("--quick")
        .env("RUST_LOG", "gossamer::fabric=info")
        .env_remove("GSM_LOG")
        .envs(bed.mpi_env());
    let what = "gsmrun -np 2 over two namespaces, --fabric auto, RUST_LOG=info";
    let done = spawn(&mut cmd).wait(LIMIT);
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
        said.iter().all(|l| l.contains("fabric=tcp")
            && l.contains("this build has no fabric that serves hosts better than tcp")),
        "{what}: tcp, because this build has no fabric that serves hosts better\n{}",
        done.report()
    );
}
