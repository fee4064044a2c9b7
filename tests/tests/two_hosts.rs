//! Two simulated hosts (network namespaces with their own host names) and a hostfile naming both:
//! ranks land where the placement says, and the tcp fabric makes the connections it should. The first test checks the test bed itself with plain
//! `mpirun`, so a failure of the `gsmrun` tests can be told apart from a broken bed.

use gsm_tests::bins::gsm_hello;
use gsm_tests::cluster::cluster_check;
use gsm_tests::hello::Hello;
use gsm_tests::job::{assert_exit, assert_ranks, gsmrun, mpirun};
use gsm_tests::netns::TwoHosts;
use gsm_tests::process::{PidGuard, run, spawn};
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

/// The sockets of a 2-host × 2-rank × 2-worker job, counted by the kernel of the first
/// host while the job runs (`ss` in its namespace, every 50 ms, the most seen): the connections
/// of the first run's tcp fabrics (their listeners' ports, from the `gossamer::fabric` log; Open
/// MPI's own connections between the hosts are not counted). Ranks on one host talk over shm;
/// each worker of a host has one connection to the other host, two-way with the worker of the
/// same index there (the lower rank's worker connects, its partner writes back on it): 4, the
/// design's count. `GSM_TCP_PER_HOST=0` keeps one per pair of workers of each pair of ranks:
/// 4 pairs × 2 = 8 (16 with one-way connections). `--slow-send` keeps the first run up for
/// 2.5 s after its fabrics attached.
#[test]
fn two_hosts_of_two_ranks_of_two_workers_have_one_connection_per_worker_and_host() {
    assert_eq!(tcp_connections_between_hosts(None), 4);
}

#[test]
fn per_rank_connections_stay_selectable() {
    assert_eq!(tcp_connections_between_hosts(Some("0")), 8);
}

/// Runs the 2 × 2 × 2 job (`GSM_TCP_PER_HOST` = `per_host` if given) and returns the most tcp
/// connections seen between the hosts.
fn tcp_connections_between_hosts(per_host: Option<&str>) -> usize {
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("twohosts", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(2));
    let _guard = PidGuard::new();
    let mut cmd = gsmrun(["-np", "4", "-hostfile"]);
    cmd.arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .arg(cluster_check())
        .args(["--slow-send", "--quick"])
        .env("GSM_LOG", "gossamer::fabric=info");
    if let Some(v) = per_host {
        cmd.env("GSM_TCP_PER_HOST", v);
    }
    cmd.envs(bed.mpi_env());
    let what = "gsmrun -np 4 (2 workers each) over two namespaces";
    let job = spawn(&mut cmd);
    let (a, b) = (&bed.hosts[0], &bed.hosts[1]);
    let (mut most, mut seen) = (0, String::new());
    let start = std::time::Instant::now();
    while start.elapsed() < LIMIT {
        // The first run's listeners: the first four tcp fabrics created.
        let ports: Vec<String> = job
            .stderr_lines()
            .iter()
            .filter(|l| l.text.contains("fabric created") && l.text.contains("fabric=\"tcp\""))
            .filter_map(|l| l.text.split("listening=").nth(1)?.rsplit_once(':'))
            .map(|(_, port)| port.trim().to_string())
            .take(4)
            .collect();
        let ss = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &a.netns,
                "ss",
                "-Htn",
                "state",
                "established",
            ])
            .output()
            .expect("ss in the first host's namespace");
        let text = String::from_utf8_lossy(&ss.stdout).to_string();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                let end = |i: usize| cols.get(i).and_then(|c| c.rsplit_once(':'));
                let (Some(here), Some(there)) = (end(2), end(3)) else {
                    return false;
                };
                here.0 == a.addr
                    && there.0 == b.addr
                    && (ports.iter().any(|p| p == here.1) || ports.iter().any(|p| p == there.1))
            })
            .collect();
        if ports.len() == 4 && lines.len() > most {
            most = lines.len();
            seen = format!("listeners {ports:?}:\n{}", lines.join("\n"));
        }
        let ended = job
            .stdout_lines()
            .iter()
            .filter(|l| l.text.contains("ok slow_send"))
            .count();
        if ended >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let done = job.wait(LIMIT);
    assert_exit(&done, 0, what);
    eprintln!(
        "{what}, GSM_TCP_PER_HOST={per_host:?}: {most} tcp connections between the hosts\n{seen}"
    );
    most
}
