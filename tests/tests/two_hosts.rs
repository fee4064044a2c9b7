//! Two simulated hosts (network namespaces with their own host names) and a hostfile naming both:
//! ranks land where the placement says. The first test checks the test bed itself with plain
//! `mpirun`, so a failure of the `gsmrun` tests can be told apart from a broken bed.

use gsm_tests::bins::gsm_hello;
use gsm_tests::hello::Hello;
use gsm_tests::job::{assert_exit, assert_ranks, gsmrun, mpirun};
use gsm_tests::netns::TwoHosts;
use gsm_tests::process::{PidGuard, run};
use gsm_tests::scratch::{RunId, Scratch};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// The tests share one pair of namespaces, and the test harness runs them on parallel threads:
/// two Open MPI launches at once race to create the same session directory on a host (`mkdir
/// /tmp/ompi.<host>.0: File exists`, then "ORTE was unable to reliably start one or more
/// daemons", seen once in CI), so they take turns.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Which host each rank said hello from, as `[(rank, host)]` sorted by rank.
fn placement(found: &[Hello]) -> Vec<(u32, String)> {
    let mut placed: Vec<(u32, String)> = found.iter().map(|h| (h.rank, h.host.clone())).collect();
    placed.sort();
    placed
}

#[test]
fn testbed_plain_mpirun_reaches_both_namespaces_through_the_agent() {
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("twohosts", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(2));
    let guard = PidGuard::new();
    let mut cmd = mpirun(["-np", "4", "--hostfile"]);
    cmd.arg(&hostfile)
        .arg("--mca")
        .arg("plm_rsh_agent")
        .arg(TwoHosts::agent())
        .arg(gsm_hello());
    cmd.envs(bed.mpi_env());
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "plain mpirun across the two namespaces");
    let found = assert_ranks(&done, 4, &guard, "plain mpirun across the two namespaces");
    let (h1, h2) = (&bed.hosts[0].hostname, &bed.hosts[1].hostname);
    let expected = vec![
        (0, h1.clone()),
        (1, h1.clone()),
        (2, h2.clone()),
        (3, h2.clone()),
    ];
    assert_eq!(
        placement(&found),
        expected,
        "Open MPI's by-slot placement\n{}",
        done.report()
    );
}

fn two_host_job(map_by: &str, expected_hosts: [usize; 4]) {
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("twohosts", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(2));
    let guard = PidGuard::new();
    let mut cmd = gsmrun(["-np", "4", "-hostfile"]);
    cmd.arg(&hostfile)
        .args(["--map-by", map_by, "--launch-agent"])
        .arg(TwoHosts::agent())
        .arg(gsm_hello());
    cmd.envs(bed.mpi_env());
    let done = run(&mut cmd, LIMIT);
    let what = format!("gsmrun -np 4 --map-by {map_by} over two namespaces");
    assert_exit(&done, 0, &what);
    let found = assert_ranks(&done, 4, &guard, &what);
    let expected: Vec<(u32, String)> = (0..4)
        .map(|rank| {
            (
                rank,
                bed.hosts[expected_hosts[rank as usize]].hostname.clone(),
            )
        })
        .collect();
    assert_eq!(
        placement(&found),
        expected,
        "{what}: ranks are not where the placement says\n{}",
        done.report()
    );
}

#[test]
fn map_by_slot_fills_the_first_host_first() {
    two_host_job("slot", [0, 0, 1, 1]);
}

#[test]
fn map_by_node_alternates_hosts() {
    two_host_job("node", [0, 1, 0, 1]);
}
