//! Ranks that are lost while a job runs: killed with SIGKILL (through `gsmrun`, and through plain
//! `mpirun --enable-recovery`, where the runtime itself must notice), on another host, a launcher
//! killed from outside, and a host that vanishes without a word.

use super::*;

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

/// Two hosts of two ranks with per-host tcp connections: rank 2 is the rank of the
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
/// not a rank that mpirun's going ended (Open MPI ends such a rank with status 195, which gsmrun
/// must not report as the cause), and nothing is left.
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
