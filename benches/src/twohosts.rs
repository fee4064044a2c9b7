//! `--two-hosts`: runs `remote`, `collectives`, `streams` or `rma-rate` across the two simulated hosts of the
//! project's test bed (`gsm_tests::netns`: two network namespaces on a bridge, each seen by its
//! ranks as a host of its own), so that the figures cross a veth link, not the loopback device.
//!
//! Started without a job (no `GSM_RANK`), `gsm-bench SUB --two-hosts ARGS` makes the test bed,
//! writes a hostfile with one slot per host, and runs `gsmrun -np 2 -hostfile FILE
//! --launch-agent nsagent gsm-bench SUB ARGS` with Open MPI's traffic kept on the bridge and its
//! BTLs `self,tcp` unless `OMPI_MCA_btl` says otherwise; Gossamer's `auto` fabric is then `tcp`
//! between the two ranks. The test bed is removed when the job ends. It needs root (namespaces),
//! as the tests that use the bed do. It does not measure anything itself.

use anyhow::Context;
use gsm_tests::netns::TwoHosts;
use std::process::Command;

/// The flag, removed from the arguments passed on to the ranks.
pub const FLAG: &str = "--two-hosts";

/// The variable that tells the ranks the second host's address (for a peer such as iperf3).
pub const PEER_HOST: &str = "GSM_BENCH_PEER_HOST";

/// The variable that puts this many ranks on each of the two hosts (default 1), so that
/// per-host tcp connections (several ranks sharing one host's connections) can be measured.
pub const RANKS_PER_HOST: &str = "GSM_BENCH_RANKS_PER_HOST";

/// Whether this process should launch the job over the test bed: the flag is given and this is
/// not already a rank of a job.
pub fn wanted() -> bool {
    std::env::var_os(gsm_contract::table::RANK.name).is_none()
        && std::env::args().any(|a| a == FLAG)
}

/// Runs this command as a job of 2 ranks (or 2 × [`RANKS_PER_HOST`]) over the two hosts; returns
/// the job's exit status.
pub fn relaunch() -> anyhow::Result<i32> {
    let bed = TwoHosts::start().map_err(|e| anyhow::anyhow!("setting up the two hosts: {e}"))?;
    let dir = std::env::temp_dir().join(format!("gsm-bench-two-hosts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let hostfile = dir.join("hosts");
    let per_host: u32 = match std::env::var(RANKS_PER_HOST) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .with_context(|| format!("{RANKS_PER_HOST}={v}: expected a number of ranks >= 1"))?,
        _ => 1,
    };
    std::fs::write(&hostfile, bed.hostfile(per_host))
        .with_context(|| format!("writing {}", hostfile.display()))?;
    let exe = std::env::current_exe().context("finding gsm-bench's own path")?;
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != FLAG).collect();
    let mut cmd = Command::new(gsm_tests::bins::gsmrun());
    cmd.args(["-np", &(2 * per_host).to_string(), "-hostfile"])
        .arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .arg(exe)
        .args(args)
        .envs(bed.mpi_env())
        .env(PEER_HOST, &bed.hosts[1].addr);
    if std::env::var_os("OMPI_MCA_btl").is_none() {
        cmd.env("OMPI_MCA_btl", "self,tcp");
    }
    eprintln!(
        "gsm-bench: two hosts {} and {} on {}",
        bed.hosts[0].addr,
        bed.hosts[1].addr,
        bed.subnet()
    );
    let status = cmd.status().context("running gsmrun")?;
    let _ = std::fs::remove_dir_all(&dir);
    drop(bed);
    Ok(status.code().unwrap_or(1))
}
