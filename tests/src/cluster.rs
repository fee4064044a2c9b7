//! Reading and watching `cluster_check` jobs (the runtime's end-to-end example, run under
//! `gsmrun`): the per-rank result lines, the processes and `/dev/shm` segments of one job, a
//! rank's TCP listeners, and a crafted `tcp` fabric hello.
//!
//! A job is identified by a prefix of its `GSM_JOB_ID`: `gsmrun` names the job
//! `gsm-<pid of gsmrun>-<hex>` ([`job_prefix`]) and passes it to every process it starts
//! (launcher, rank wrappers, programs); a test that launches with plain `mpirun` sets it itself.
//! The `shm` fabric names its segments `/dev/shm/{GSM_JOB_ID}-r{rank}`. So the job's processes
//! are found by their environment in `/proc`, and its segments by their name. This module does not start or stop anything; [`crate::process`] does.

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::process::{Finished, PidGuard, Running};

/// Checks that `cluster_check` must run (what the runtime's issue asks to be shown across
/// ranks); it may run more (see [`example_checks`]).
pub const REQUIRED_CHECKS: [&str; 8] = [
    "entrust_on",
    "apply_then",
    "fibers",
    "spawn_on",
    "large",
    "trust_passing",
    "errors",
    "second_run",
];

/// The checks the `cluster_check` source prints `ok <name> (rank R)` for, in order: every
/// `ok("<name>", …)` call, then `second_run`. Read from the source so that a check added to the
/// example is expected too; [`REQUIRED_CHECKS`] guards against checks disappearing.
///
/// # Panics
/// If the source cannot be read or lacks one of [`REQUIRED_CHECKS`].
pub fn example_checks() -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../libgsm/examples/cluster_check.rs");
    let source = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
    let mut checks: Vec<String> = source
        .split("ok(\"")
        .skip(1)
        .filter_map(|rest| Some(rest.split_once('"')?.0.to_string()))
        .collect();
    if source.contains("println!(\"ok second_run (rank {})\"") {
        checks.push("second_run".into());
    }
    for required in REQUIRED_CHECKS {
        assert!(
            checks.iter().any(|c| c == required),
            "{} no longer runs the check `{required}` (found {checks:?})",
            path.display()
        );
    }
    checks
}

/// The `cluster_check` example of the `gossamer` crate, built in this test's profile.
///
/// # Panics
/// If it has not been built, with the command that builds it.
pub fn cluster_check() -> PathBuf {
    let path = crate::bins::profile_dir()
        .join("examples")
        .join("cluster_check");
    assert!(
        path.is_file(),
        "the example `cluster_check` is missing at {}: build it with \
         `cargo build --release --workspace --all-targets` (`make test` does this) using the \
         same CARGO_TARGET_DIR as `cargo test`",
        path.display()
    );
    path
}

/// One rank's final line, `cluster_check: rank R of N passed C checks (W workers)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankResult {
    /// The rank.
    pub rank: u32,
    /// The job size it reported.
    pub size: u32,
    /// How many checks it passed.
    pub passed: u32,
    /// How many workers the job had, as it saw them.
    pub workers: u32,
}

fn parse_result(line: &str) -> Option<RankResult> {
    const HEAD: &str = "cluster_check: rank ";
    let rest = &line[line.find(HEAD)? + HEAD.len()..];
    let (rank, rest) = rest.split_once(" of ")?;
    let (size, rest) = rest.split_once(" passed ")?;
    let (passed, rest) = rest.split_once(" checks (")?;
    let workers = rest.strip_suffix(" workers)")?;
    Some(RankResult {
        rank: rank.trim().parse().ok()?,
        size: size.trim().parse().ok()?,
        passed: passed.trim().parse().ok()?,
        workers: workers.trim().parse().ok()?,
    })
}

/// Every final result line in `stdout`, in order.
pub fn results(stdout: &str) -> Vec<RankResult> {
    stdout.lines().filter_map(parse_result).collect()
}

/// The `ok <check> (rank R)` lines in `stdout`, as `(rank, check)`.
pub fn oks(stdout: &str) -> Vec<(u32, String)> {
    stdout
        .lines()
        .filter_map(|line| {
            let rest = &line[line.find("ok ")? + 3..];
            let (name, rest) = rest.split_once(" (rank ")?;
            let rank = rest.strip_suffix(')')?.trim().parse().ok()?;
            Some((rank, name.trim().to_string()))
        })
        .collect()
}

/// Checks that ranks `0..size` each printed the `ok` line of every one of `checks` once and one
/// final line reporting `size` ranks, every check passed, and `size × workers_per_rank` workers.
/// Returns what is wrong, if anything.
pub fn check_results(
    stdout: &str,
    size: u32,
    workers_per_rank: u32,
    checks: &[String],
) -> Result<(), String> {
    let mut problems = Vec::new();
    let found = results(stdout);
    let mut by_rank: BTreeMap<u32, Vec<RankResult>> = BTreeMap::new();
    for r in &found {
        by_rank.entry(r.rank).or_default().push(*r);
    }
    let oks = oks(stdout);
    for rank in 0..size {
        match by_rank.get(&rank).map(Vec::as_slice) {
            Some([r]) => {
                let expected = RankResult {
                    rank,
                    size,
                    passed: checks.len() as u32,
                    workers: size * workers_per_rank,
                };
                if *r != expected {
                    problems.push(format!("rank {rank} reported {r:?}, expected {expected:?}"));
                }
            }
            Some(many) => problems.push(format!(
                "rank {rank} printed {} final lines (expected one)",
                many.len()
            )),
            None => problems.push(format!("rank {rank} printed no final line")),
        }
        for check in checks {
            let count = oks
                .iter()
                .filter(|(r, name)| *r == rank && name == check)
                .count();
            if count != 1 {
                problems.push(format!(
                    "rank {rank} printed `ok {check}` {count} times (expected once)"
                ));
            }
        }
    }
    for r in by_rank.keys().filter(|r| **r >= size) {
        problems.push(format!("unexpected rank {r} in a job of {size}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// The prefix of the job id of the job launched by the `gsmrun` with pid `gsmrun`
/// (`GSM_JOB_ID=gsm-<pid>-<hex>`).
pub fn job_prefix(gsmrun: u32) -> String {
    crate::shm::baseline();
    format!("gsm-{gsmrun}-")
}

/// A process of a job, found in `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobProcess {
    /// Its pid.
    pub pid: u32,
    /// Its command name (`comm`).
    pub comm: String,
    /// Its rank, from `GSM_RANK` (set by the rank wrapper for the program) or else
    /// `OMPI_COMM_WORLD_RANK` (set by Open MPI); `None` for the launcher and the wrappers.
    pub rank: Option<u32>,
}

fn comm(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let state = stat[close + 1..].trim_start().chars().next()?;
    // A zombie has ended; only its parent's wait is missing.
    (state != 'Z' && state != 'X').then(|| stat[open + 1..close].to_string())
}

fn env_value<'a>(vars: &[&'a [u8]], name: &str) -> Option<&'a str> {
    vars.iter()
        .find_map(|v| v.strip_prefix(name.as_bytes())?.strip_prefix(b"="))
        .and_then(|v| std::str::from_utf8(v).ok())
}

/// The living processes whose environment has a `GSM_JOB_ID` starting with `prefix`.
pub fn job_processes(prefix: &str) -> Vec<JobProcess> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in dir.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        if !env_value(&vars, "GSM_JOB_ID").is_some_and(|id| id.starts_with(prefix)) {
            continue;
        }
        let rank = env_value(&vars, "GSM_RANK")
            .or_else(|| env_value(&vars, "OMPI_COMM_WORLD_RANK"))
            .and_then(|v| v.parse().ok());
        if let Some(comm) = comm(pid) {
            found.push(JobProcess { pid, comm, rank });
        }
    }
    found.sort_by_key(|p| p.pid);
    found
}

/// The job's program processes (`comm` = `program`), as rank → pid.
pub fn ranks(prefix: &str, program: &str) -> BTreeMap<u32, u32> {
    let name = &program[..program.len().min(15)];
    job_processes(prefix)
        .into_iter()
        .filter(|p| p.comm == name)
        .filter_map(|p| Some((p.rank?, p.pid)))
        .collect()
}

/// The files in `/dev/shm` whose name starts with the job-id `prefix`.
pub fn segments(prefix: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.starts_with(prefix))
        .collect()
}

/// Waits up to `grace` until the job has no process and no segment left; returns what is left.
/// The segments include what libfabric and Open MPI left in `/dev/shm` since this process's
/// first job whose maker is gone ([`crate::shm::orphans`]).
pub fn leftovers(prefix: &str, grace: std::time::Duration) -> (Vec<JobProcess>, Vec<String>) {
    let deadline = std::time::Instant::now() + grace;
    loop {
        let mut files = segments(prefix);
        files.extend(crate::shm::orphans());
        let left = (job_processes(prefix), files);
        if (left.0.is_empty() && left.1.is_empty()) || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn socket_inodes(pid: u32) -> HashSet<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return HashSet::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|target| {
            let t = target.to_str()?;
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// `/proc/net/tcp*` address `HEX:PORT`: the address words as the kernel holds them in memory.
fn parse_proc_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(&ip[8 * i..8 * i + 8], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let ip: IpAddr = match bytes.len() {
        4 => Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?).into(),
        16 => Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?).into(),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The TCP sockets process `pid` listens on (read from `/proc`, in its network namespace).
pub fn tcp_listeners(pid: u32) -> Vec<SocketAddr> {
    let inodes = socket_inodes(pid);
    if inodes.is_empty() {
        return Vec::new();
    }
    let mut found = Vec::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let listening = *state == "0A";
            let ours = inode.parse().is_ok_and(|i: u64| inodes.contains(&i));
            if listening && ours {
                found.extend(parse_proc_addr(local));
            }
        }
    }
    found.sort();
    found
}

/// A `tcp` fabric hello (version 3, 72 bytes, see `gossamer::fabric::tcp`) that is well-formed
/// in every field but carries `key`; `back` is the destination's worker that writes back on a
/// two-way connection (the lower rank's worker `l` pairs with the higher rank's worker `l`). It
/// says per-rank connections: what `--fabric tcp` on one host makes.
pub fn hello(
    key: &[u8; 32],
    src_rank: u32,
    src_local: u32,
    dst_rank: u32,
    slots: u32,
    slot_size: u32,
    back: Option<u32>,
) -> [u8; 72] {
    let mut b = [0u8; 72];
    b[0..8].copy_from_slice(b"GSMTCP\0\0");
    b[8..12].copy_from_slice(&3u32.to_le_bytes());
    b[12..44].copy_from_slice(key);
    let back = back.unwrap_or(u32::MAX);
    for (i, v) in [src_rank, src_local, dst_rank, slots, slot_size, back]
        .into_iter()
        .enumerate()
    {
        b[44 + 4 * i..48 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    b
}

/// A `tcp` fabric frame: destination global worker, `lane << 31 | length`, payload.
pub fn frame(dst_worker: u32, lane: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + payload.len());
    b.extend_from_slice(&dst_worker.to_le_bytes());
    b.extend_from_slice(&((lane << 31) | payload.len() as u32).to_le_bytes());
    b.extend_from_slice(payload);
    b
}

/// Waits up to `limit` until `found` returns something, polling every few milliseconds.
pub fn poll<T>(limit: Duration, mut found: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = found() {
            return Some(t);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(3));
    }
}

/// Watches the job's rank processes while it runs, so the guard can kill them if the test fails.
/// Returns once every rank has been seen, or the job's processes are gone (a job that ends
/// early is judged by its output), or after 20 s.
pub fn watch_ranks(job: &Running, np: u32, guard: &PidGuard) {
    let prefix = job_prefix(job.pid() as u32);
    let mut seen = BTreeMap::new();
    let mut started = false;
    poll(Duration::from_secs(20), || {
        for (rank, pid) in ranks(&prefix, "cluster_check") {
            if seen.insert(rank, pid).is_none() {
                guard.watch(pid, "cluster_check");
            }
        }
        let alive = !job_processes(&prefix).is_empty();
        started |= alive;
        (seen.len() == np as usize || (started && !alive)).then_some(())
    });
}

/// Asserts that nothing of the job whose id starts with `prefix` is left: no process, no segment.
#[track_caller]
pub fn assert_nothing_left(prefix: &str, guard: &PidGuard, what: &str, done: &Finished) {
    let (processes, segments) = leftovers(prefix, Duration::from_secs(3));
    assert!(
        processes.is_empty(),
        "{what}: processes of the job still running after gsmrun exited: {processes:?}\n{}",
        done.report()
    );
    assert!(
        segments.is_empty(),
        "{what}: segments of the job left in /dev/shm: {segments:?}\n{}",
        done.report()
    );
    let survivors = guard.survivors(Duration::from_millis(200));
    assert!(
        survivors.is_empty(),
        "{what}: ranks {survivors:?} survived\n{}",
        done.report()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_result_and_ok_lines() {
        let out = "ok large (rank 1)\ncluster_check: rank 1 of 4 passed 8 checks (8 workers)\n";
        assert_eq!(
            results(out),
            vec![RankResult {
                rank: 1,
                size: 4,
                passed: 8,
                workers: 8
            }]
        );
        assert_eq!(oks(out), vec![(1, "large".to_string())]);
    }

    #[test]
    fn check_results_finds_a_missing_rank_and_a_wrong_count() {
        let checks: Vec<String> = REQUIRED_CHECKS.map(String::from).to_vec();
        let mut out = String::new();
        for check in &checks {
            out.push_str(&format!("ok {check} (rank 0)\n"));
        }
        out.push_str("cluster_check: rank 0 of 2 passed 8 checks (3 workers)\n");
        let err = check_results(&out, 2, 2, &checks).unwrap_err();
        assert!(err.contains("rank 0 reported"), "{err}");
        assert!(err.contains("rank 1 printed no final line"), "{err}");
        assert!(
            err.contains("rank 1 printed `ok entrust_on` 0 times"),
            "{err}"
        );
    }

    #[test]
    fn the_example_runs_every_required_check() {
        let checks = example_checks();
        assert_eq!(checks.last().map(String::as_str), Some("second_run"));
    }

    #[test]
    fn parses_proc_net_addresses() {
        let v4 = parse_proc_addr("0100007F:1F90").unwrap();
        let v6 = parse_proc_addr("00000000000000000000000001000000:0050").unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(v4, "127.0.0.1:8080".parse().unwrap());
            assert_eq!(v6, "[::1]:80".parse().unwrap());
        }
    }

    #[test]
    fn hello_layout() {
        let b = hello(&[7; 32], 1, 0, 0, 16, 4096, None);
        assert_eq!(&b[0..8], b"GSMTCP\0\0");
        assert_eq!(&b[8..12], &3u32.to_le_bytes());
        assert_eq!(&b[68..72], &0u32.to_le_bytes());
        assert_eq!(b[12], 7);
        assert_eq!(&b[44..48], &1u32.to_le_bytes());
        assert_eq!(&b[60..64], &4096u32.to_le_bytes());
        assert_eq!(&b[64..68], &u32::MAX.to_le_bytes());
        let b = hello(&[7; 32], 0, 1, 1, 16, 4096, Some(1));
        assert_eq!(&b[64..68], &1u32.to_le_bytes());
    }
}
