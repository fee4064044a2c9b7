//! The reaper: when the job is over, every process still descending from `gsmrun` is killed.
//! A launcher may start helpers in sessions of their own, out of reach of its process group, and
//! leave them behind when it is ended; `gsmrun` is their "child subreaper" (see
//! [`crate::sys::become_child_subreaper`]), so they stay its descendants. This module only finds
//! and kills them; it does not end the launcher (`launcher.rs`).

/// Kills (SIGKILL) every process that descends from `root` (gsmrun) when the job is over: the
/// launcher's helpers that it left in sessions of their own, adopted by `root` as their
/// subreaper (see the module docs); nothing in the normal case. Returns their pids. They are
/// not reaped: gsmrun exits next, and init reaps them.
pub(super) fn end_leftovers(root: u32) -> Vec<u32> {
    let left = descendants(root, &process_parents());
    for &p in &left {
        // A pid read from /proc just now: at worst it is gone (ESRCH).
        let _ = crate::sys::kill(p as i32, crate::sys::SIGKILL);
    }
    left
}

/// Every process's `(pid, parent pid)`, from /proc (those that end while it is read are left
/// out).
fn process_parents() -> Vec<(u32, u32)> {
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

/// The parent pid in the text of `/proc/PID/stat`: the second field after the command name,
/// which is in parentheses and may itself hold spaces and parentheses.
pub(super) fn parent_in_stat(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The pids descending from `root` in `parents` (`(pid, parent pid)` pairs), `root` left out.
pub(super) fn descendants(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
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
