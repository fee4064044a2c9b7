//! This machine's process tree, read from `/proc`: the processes that descend from one, and
//! ending a set of them the way Slurm ends a step (SIGTERM, then SIGKILL for those still there
//! after a grace period). Used by the reaper (`supervise/reaper.rs`) when a job is over and by
//! the janitor (`janitor.rs`) after a SIGKILLed `gsmrun`. It decides nothing about which
//! processes should end.

use std::time::{Duration, Instant};

/// Every process's `(pid, parent pid)`, from /proc (those that end while it is read are left
/// out).
pub fn process_parents() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Some((pid, parent_in_stat(&stat)?))
    })
    .collect()
}

/// The text of `/proc/PID/stat` after the command name, which is in parentheses and may itself
/// hold spaces and parentheses: the state, then the parent pid, ...
fn after_name(stat: &str) -> Option<&str> {
    Some(&stat[stat.rfind(')')? + 1..])
}

/// The parent pid in the text of `/proc/PID/stat`.
pub fn parent_in_stat(stat: &str) -> Option<u32> {
    after_name(stat)?.split_whitespace().nth(1)?.parse().ok()
}

/// The pids descending from `root` in `parents` (`(pid, parent pid)` pairs), `root` left out.
pub fn descendants(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut found: Vec<u32> = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in parents {
            if pp == p && c != root && !found.contains(&c) {
                found.push(c);
                frontier.push(c);
            }
        }
    }
    found
}

/// Whether process `pid` has ended: gone from /proc, or a zombie waiting to be reaped.
pub fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| after_name(&stat)?.trim_start().chars().next())
        .is_none_or(|state| state == 'Z')
}

/// Ends `pids`: SIGTERM, then SIGKILL for those still running `grace` later. A daemon asked
/// with SIGTERM cleans up after itself (Open MPI's `orted` removes its session directory); one
/// killed outright cannot. Returns at once when every one has ended.
pub fn end_gently(pids: &[u32], grace: Duration) {
    for &p in pids {
        // Pids read from /proc just now: at worst one is gone (ESRCH).
        let _ = crate::sys::kill(p as i32, crate::sys::SIGTERM);
    }
    let until = Instant::now() + grace;
    while Instant::now() < until && !pids.iter().all(|&p| ended(p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in pids.iter().filter(|&&p| !ended(p)) {
        let _ = crate::sys::kill(p as i32, crate::sys::SIGKILL);
    }
}
