//! A two-node Slurm started by the test bed (slurmctld on the bridge, a slurmd in each of two
//! namespace hosts, see `gsm_tests::slurm`): gsmrun with no hostfile under `salloc -N 2`,
//! `sbatch -N 2` and `srun -N 2 -n 4`, with ranks on both nodes each naming its host; `--map-by
//! node` over the node list Slurm gives as a range; a two-node job suspended and resumed, which
//! finishes; a node cut off mid-job, named within `--lost-timeout` and a second, with both nodes
//! left clean; `scancel`, after which no rank runs on either node within 2 s.
//!
//! One cluster serves every test (its start-up is most of the cost), and the tests take a lock:
//! two CPUs a node, and one test cuts a node off. Each prints how long its scenario took.

use gsm_tests::bins::{gsm_hello, gsmrun};
use gsm_tests::hello::{Hello, hellos};
use gsm_tests::job::{assert_exit, assert_ranks};
use gsm_tests::process::{PidGuard, run, spawn};
use gsm_tests::slurm::Slurm;
use std::collections::BTreeSet;
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The hard limit of one job.
const LIMIT: Duration = Duration::from_secs(60);

/// The cluster, then the lock: a test waiting for the lock holds the cluster, so it is not
/// stopped and started again between tests.
fn serial() -> (MutexGuard<'static, ()>, Arc<Slurm>) {
    static LOCK: Mutex<()> = Mutex::new(());
    let slurm = Slurm::shared_two_nodes();
    let guard = LOCK.lock().unwrap_or_else(|poison| poison.into_inner());
    (guard, slurm)
}

/// The root-only Open MPI permission is gsmrun's to give, not the test's.
fn without_root_permission(cmd: &mut Command) -> &mut Command {
    cmd.env_remove("OMPI_ALLOW_RUN_AS_ROOT")
        .env_remove("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
}

/// Asserts every rank ran on a node of the cluster and both nodes got ranks.
#[track_caller]
fn assert_on_both_nodes(found: &[Hello], slurm: &Slurm, what: &str, report: &str) {
    let nodes: BTreeSet<&str> = slurm.nodes.iter().map(String::as_str).collect();
    for hello in found {
        assert!(
            nodes.contains(hello.host.as_str()),
            "{what}: rank {} ran on host {}, not a node of {nodes:?}\n{report}",
            hello.rank,
            hello.host
        );
    }
    let used: BTreeSet<&str> = found.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(used, nodes, "{what}: not both nodes got ranks\n{report}");
}

/// The processes left in each node's namespace other than the daemons, after waiting up to
/// `grace` for them to go.
fn left_on_nodes(slurm: &Slurm, grace: Duration) -> Vec<(String, Vec<u32>)> {
    let daemons = slurm.daemon_pids();
    let hosts = slurm.hosts().expect("a two-node cluster");
    let deadline = Instant::now() + grace;
    loop {
        let left: Vec<(String, Vec<u32>)> = (hosts.hosts.iter())
            .map(|h| {
                let pids = h.pids().into_iter().filter(|p| !daemons.contains(p));
                (h.hostname.clone(), pids.collect::<Vec<_>>())
            })
            .filter(|(_, pids)| !pids.is_empty())
            .collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[track_caller]
fn assert_nodes_clean(slurm: &Slurm, grace: Duration, what: &str) {
    let left = left_on_nodes(slurm, grace);
    let described: Vec<String> = (left.iter())
        .flat_map(|(node, pids)| {
            pids.iter().map(move |pid| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!(
                    "{node}: {pid} {}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                )
            })
        })
        .collect();
    assert!(
        described.is_empty(),
        "{what}: processes left on the nodes {grace:?} after the job: {described:#?}"
    );
}

/// The bed itself, without gsmrun: `srun --mpi=pmix` starts an MPI program's ranks on both
/// nodes (and is the peer of gsmrun's timings).
#[test]
fn testbed_srun_pmix_runs_plain_mpi_on_both_nodes() {
    let (_serial, slurm) = serial();
    let guard = PidGuard::new();
    let mut cmd = slurm.command("srun");
    cmd.args(["-N", "2", "-n", "4", "--mpi=pmix"])
        .arg(gsm_hello())
        .env("OMPI_MCA_pml", "ob1");
    let what = "srun -N 2 -n 4 --mpi=pmix gsm-hello";
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, what);
    let found = assert_ranks(&done, 4, &guard, what);
    assert_on_both_nodes(&found, &slurm, what, &done.report());
    eprintln!("{what}: {:.2} s", done.elapsed.as_secs_f64());
    assert_nodes_clean(&slurm, Duration::from_secs(5), what);
}

#[test]
fn salloc_two_nodes_runs_gsmrun_on_both_without_a_hostfile() {
    let (_serial, slurm) = serial();
    for (alloc, np) in [(&["-N", "2"][..], 2), (&["-N", "2", "-n", "4"], 4)] {
        let guard = PidGuard::new();
        let mut cmd = slurm.command("salloc");
        cmd.args(alloc).arg(gsmrun()).arg(gsm_hello());
        let what = format!("salloc {} gsmrun gsm-hello", alloc.join(" "));
        let done = run(without_root_permission(&mut cmd), LIMIT);
        assert_exit(&done, 0, &what);
        let found = assert_ranks(&done, np, &guard, &what);
        assert_on_both_nodes(&found, &slurm, &what, &done.report());
        eprintln!("{what}: {:.2} s", done.elapsed.as_secs_f64());
    }
    assert_nodes_clean(&slurm, Duration::from_secs(5), "salloc -N 2");
}

#[test]
fn sbatch_two_nodes_runs_gsmrun_on_both_without_a_hostfile() {
    let (_serial, slurm) = serial();
    let guard = PidGuard::new();
    let out = slurm.dir().join("sbatch-2n.out");
    let script = slurm.dir().join("sbatch-2n.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#SBATCH -N 2\n#SBATCH -n 3\n#SBATCH -o {out}\n#SBATCH -e {out}\n\
             echo nodelist $SLURM_JOB_NODELIST\n\
             exec env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM {gsmrun} {hello}\n",
            out = out.display(),
            gsmrun = gsmrun().display(),
            hello = gsm_hello().display(),
        ),
    )
    .expect("writing the batch script");
    let what = "sbatch -N 2 -n 3 of a script running `gsmrun gsm-hello`";
    let start = Instant::now();
    let job = slurm.sbatch(&script);
    let record = slurm.wait_job_end(&job, LIMIT);
    let took = start.elapsed();
    let output = std::fs::read_to_string(&out).unwrap_or_else(|e| format!("(no output: {e})"));
    let record = record.unwrap_or_else(|| panic!("{what}: job {job} did not end\n{output}"));
    assert!(
        record.contains("JobState=COMPLETED ") && record.contains(" ExitCode=0:0 "),
        "{what}: job {job} did not complete\n{record}\n--- output ---\n{output}"
    );
    let found = hellos(&output);
    for hello in &found {
        guard.watch(hello.pid, "gsm-hello");
    }
    gsm_tests::hello::check_ranks(&found, 3)
        .unwrap_or_else(|problem| panic!("{what}: {problem}\n{output}"));
    assert_on_both_nodes(&found, &slurm, what, &output);
    // The node list as Slurm gives it, a range.
    let prefix = slurm.node.trim_end_matches("h1");
    assert!(
        output.contains(&format!("nodelist {prefix}h[1-2]")),
        "{what}: SLURM_JOB_NODELIST is not a range\n{output}"
    );
    eprintln!("{what}: {:.2} s from sbatch to the end", took.as_secs_f64());
    assert_nodes_clean(&slurm, Duration::from_secs(5), what);
}

/// gsmrun as a step of four tasks: the first launches the job over the allocation, the others
/// end at once (each would otherwise start a whole job of its own).
#[test]
fn srun_two_nodes_four_tasks_of_gsmrun_run_one_job() {
    let (_serial, slurm) = serial();
    let guard = PidGuard::new();
    let mut cmd = slurm.command("srun");
    cmd.args(["-N", "2", "-n", "4"])
        .arg(gsmrun())
        .arg(gsm_hello());
    let what = "srun -N 2 -n 4 gsmrun gsm-hello";
    let done = run(without_root_permission(&mut cmd), LIMIT);
    assert_exit(&done, 0, what);
    let found = assert_ranks(&done, 4, &guard, what);
    assert_on_both_nodes(&found, &slurm, what, &done.report());
    eprintln!("{what}: {:.2} s", done.elapsed.as_secs_f64());
    assert_nodes_clean(&slurm, Duration::from_secs(5), what);
}

/// `--map-by node` deals the ranks round the nodes of the allocation, which gsmrun reads from
/// `SLURM_JOB_NODELIST` (a range, `…h[1-2]`).
#[test]
fn map_by_node_deals_ranks_round_the_slurm_node_list() {
    let (_serial, slurm) = serial();
    let guard = PidGuard::new();
    let mut cmd = slurm.command("salloc");
    cmd.args(["-N", "2", "-n", "4"])
        .arg(gsmrun())
        .args(["--map-by", "node"])
        .arg(gsm_hello());
    let what = "salloc -N 2 -n 4 gsmrun --map-by node gsm-hello";
    let done = run(without_root_permission(&mut cmd), LIMIT);
    assert_exit(&done, 0, what);
    let found = assert_ranks(&done, 4, &guard, what);
    for hello in &found {
        let node = &slurm.nodes[hello.rank as usize % 2];
        assert_eq!(
            &hello.host,
            node,
            "{what}: rank {} not on the node --map-by node gives it\n{}",
            hello.rank,
            done.report()
        );
    }
    eprintln!("{what}: {:.2} s", done.elapsed.as_secs_f64());
    // The dry run shows the node list read from Slurm: both nodes, two slots each.
    let mut dry = slurm.command("salloc");
    dry.args(["-N", "2", "-n", "4"])
        .arg(gsmrun())
        .args(["--dry-run", "--map-by", "node", "app"]);
    let shown = run(without_root_permission(&mut dry), LIMIT);
    assert_exit(&shown, 0, "the dry run inside salloc -N 2 -n 4");
    for node in &slurm.nodes {
        assert!(
            shown.stdout.contains(node.as_str()),
            "the dry run does not show node {node}\n{}",
            shown.report()
        );
    }
}

/// Writes a batch script whose ranks say `ready RANK PID` and then sleep `secs`, on both nodes.
fn sleeping_job(
    slurm: &Slurm,
    name: &str,
    secs: u32,
    gsmrun_args: &str,
) -> (String, std::path::PathBuf) {
    let out = slurm.dir().join(format!("{name}.out"));
    let script = slurm.dir().join(format!("{name}.sh"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#SBATCH -N 2\n#SBATCH -n 2\n#SBATCH -o {out}\n#SBATCH -e {out}\n\
             exec env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM {gsmrun} \
             {gsmrun_args} sh -c 'echo ready $GSM_RANK $$ $(hostname); sleep {secs}; echo done $GSM_RANK'\n",
            out = out.display(),
            gsmrun = gsmrun().display(),
        ),
    )
    .expect("writing the batch script");
    (slurm.sbatch(&script), out)
}

/// The `ready RANK PID HOST` lines of a job's output, once there are `n` (bounded wait).
fn ready_ranks(out: &std::path::Path, n: usize, limit: Duration) -> Vec<(u32, u32, String)> {
    let deadline = Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        let ready: Vec<(u32, u32, String)> = (text.lines())
            .filter_map(|l| {
                let mut w = l.strip_prefix("ready ")?.split_whitespace();
                Some((
                    w.next()?.parse().ok()?,
                    w.next()?.parse().ok()?,
                    w.next()?.to_string(),
                ))
            })
            .collect();
        if ready.len() >= n {
            return ready;
        }
        assert!(
            Instant::now() < deadline,
            "the ranks did not all say ready within {limit:?}: {} has\n{text}",
            out.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_two_node_job_suspended_and_resumed_finishes() {
    let (_serial, slurm) = serial();
    let (job, out) = sleeping_job(&slurm, "suspend", 3, "");
    let ready = ready_ranks(&out, 2, LIMIT);
    let scontrol = |verb: &str| {
        let mut cmd = slurm.command("scontrol");
        cmd.args([verb, &job]);
        let done = run(&mut cmd, Duration::from_secs(10));
        assert_exit(&done, 0, &format!("scontrol {verb} {job}"));
    };
    let start = Instant::now();
    scontrol("suspend");
    // Suspended for longer than the ranks' own sleep: they must not have run on.
    std::thread::sleep(Duration::from_secs(4));
    let record = slurm.show_job(&job);
    assert!(record.contains("JobState=SUSPENDED "), "{record}");
    for (rank, pid, _) in &ready {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .map(|(_, r)| r.trim_start().chars().next());
        assert_eq!(
            state.flatten(),
            Some('T'),
            "rank {rank} (pid {pid}) is not stopped: {stat}"
        );
    }
    scontrol("resume");
    let record = slurm
        .wait_job_end(&job, LIMIT)
        .unwrap_or_else(|| panic!("job {job} did not end after its resume"));
    let took = start.elapsed();
    let output = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        record.contains("JobState=COMPLETED ") && record.contains(" ExitCode=0:0 "),
        "job {job} did not complete after suspend and resume\n{record}\n{output}"
    );
    for rank in 0..2 {
        assert!(
            output.contains(&format!("done {rank}")),
            "rank {rank} did not finish\n{output}"
        );
    }
    eprintln!(
        "two-node job suspended 4 s and resumed: ended {:.2} s after the suspend",
        took.as_secs_f64()
    );
    assert_nodes_clean(&slurm, Duration::from_secs(5), "suspend and resume");
}

/// Whether `pid` is gone (a zombie counts as gone).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// The children of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let list = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
    list.unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// `scancel` of a running two-node job: no rank runs on either node 2 s later.
#[test]
fn scancel_leaves_no_rank_on_either_node_within_2_s() {
    let (_serial, slurm) = serial();
    let (job, out) = sleeping_job(&slurm, "scancel", 60, "");
    let ready = ready_ranks(&out, 2, LIMIT);
    let hosts: BTreeSet<&str> = ready.iter().map(|(_, _, h)| h.as_str()).collect();
    assert_eq!(hosts.len(), 2, "the ranks are not on both nodes: {ready:?}");
    // The ranks' shells and their `sleep`s, found before the cancel.
    let shells: Vec<u32> = ready.iter().map(|(_, pid, _)| *pid).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    let pids = loop {
        let mut pids = shells.clone();
        pids.extend(shells.iter().flat_map(|&pid| children(pid)));
        if pids.len() >= 4 || Instant::now() >= deadline {
            break pids;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        pids.len() >= 4,
        "the ranks' sleeps were not found: {pids:?}"
    );
    let start = Instant::now();
    let mut cancel = slurm.command("scancel");
    cancel.arg(&job);
    assert_exit(&run(&mut cancel, Duration::from_secs(10)), 0, "scancel");
    while !pids.iter().all(|&pid| gone(pid)) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = start.elapsed();
    let alive: Vec<_> = pids.iter().filter(|&&pid| !gone(pid)).collect();
    assert!(
        alive.is_empty() && took <= Duration::from_secs(2),
        "processes {alive:?} of the ranks still ran {took:?} after scancel"
    );
    eprintln!(
        "scancel of a two-node job: every rank gone after {:.2} s",
        took.as_secs_f64()
    );
    assert_nodes_clean(&slurm, Duration::from_secs(5), "scancel");
}

/// A node cut off mid-job (its link down): gsmrun, on the other side, names it within
/// `--lost-timeout` and a second and ends the job; once the link is back nothing of the job is
/// left on either node.
#[test]
fn a_node_lost_mid_job_is_named_within_the_lost_timeout() {
    let (_serial, slurm) = serial();
    let lost_timeout = 3;
    let mut cmd = slurm.command("salloc");
    cmd.args(["-N", "2", "-n", "2"])
        .arg(gsmrun())
        .args(["--lost-timeout", &lost_timeout.to_string()])
        .args([
            "sh",
            "-c",
            "echo ready $GSM_RANK $$ $(hostname); exec sleep 60",
        ]);
    let what = "salloc -N 2 gsmrun --lost-timeout 3, node 2 cut off";
    let mut job = spawn(without_root_permission(&mut cmd));
    let ready = job.wait_for_stdout(LIMIT, |lines| {
        lines
            .iter()
            .filter(|l| l.text.starts_with("ready "))
            .count()
            >= 2
    });
    assert!(ready, "{what}: the ranks did not start");
    let hosts = slurm.hosts().expect("a two-node cluster");
    hosts.unplug(1).expect("cutting node 2 off");
    let cut_at = job.elapsed();
    let done = job.wait(LIMIT);
    hosts.plug(1).expect("plugging node 2 back");
    assert_exit(&done, 1, what);
    let node = &slurm.nodes[1];
    let line = (done.stderr_lines.iter())
        .find(|l| l.text.starts_with("gsmrun: ") && l.text.contains(&format!("host {node}")))
        .unwrap_or_else(|| {
            panic!(
                "{what}: no line of gsmrun's names {node}\n{}",
                done.report()
            )
        });
    let took = line.at.saturating_sub(cut_at);
    eprintln!(
        "{what}: named after {:.2} s: {}",
        took.as_secs_f64(),
        line.text
    );
    assert!(
        took <= Duration::from_secs(lost_timeout + 1),
        "{what}: named {took:?} after the cut\n{}",
        done.report()
    );
    let replugged = Instant::now();
    assert_nodes_clean(&slurm, Duration::from_secs(15), what);
    eprintln!(
        "{what}: both nodes clean {:.2} s after the link came back",
        replugged.elapsed().as_secs_f64()
    );
}
