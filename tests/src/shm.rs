//! What other programs than Gossamer leave in `/dev/shm`: libfabric's `shm` provider regions,
//! named `{pid}:{domain}:{endpoint}` after the process that made them, and Open MPI's segment
//! files (`vader_segment.*`, `sm_segment.*`) when they are not in its job's own directory.
//!
//! [`baseline`] records once per test process what is there before its first job, so that only
//! files made since are blamed on its tests; [`orphans`] lists those files whose maker is gone
//! (a libfabric region whose pid is not running) or which no process maps or holds open (an Open
//! MPI file). Gossamer's own segments are checked by job id in [`crate::cluster`]. This module
//! deletes nothing.

use std::collections::HashSet;
use std::sync::OnceLock;

const SHM: &str = "/dev/shm";

fn names() -> HashSet<String> {
    std::fs::read_dir(SHM)
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn before() -> &'static HashSet<String> {
    static BEFORE: OnceLock<HashSet<String>> = OnceLock::new();
    BEFORE.get_or_init(names)
}

/// Records what `/dev/shm` holds now, the first time it is called in this process (the job
/// helpers call it before they start a job).
pub fn baseline() {
    let _ = before();
}

/// The pid a libfabric `shm` region is named after, if `name` is one.
pub fn fabric_region_pid(name: &str) -> Option<u32> {
    let mut parts = name.split(':');
    let pid = parts.next()?.parse().ok()?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (parts.next().is_some_and(digits) && parts.next().is_some_and(digits) && parts.next().is_none())
        .then_some(pid)
}

fn is_mpi_file(name: &str) -> bool {
    ["vader_segment.", "sm_segment."]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Whether any process maps `/dev/shm/name` or holds it open.
fn in_use(name: &str) -> bool {
    let path = format!("{SHM}/{name}");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return true;
    };
    for entry in procs.filter_map(Result::ok) {
        let pid = entry.file_name();
        let Some(pid) = pid
            .to_str()
            .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        if maps.lines().any(|l| l.ends_with(&path)) {
            return true;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        if fds
            .filter_map(Result::ok)
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|target| target.as_os_str() == path.as_str())
        {
            return true;
        }
    }
    false
}

/// libfabric regions and Open MPI files made since [`baseline`] whose maker is gone.
pub fn orphans() -> Vec<String> {
    let before = before();
    let mut found: Vec<String> = names()
        .into_iter()
        .filter(|name| !before.contains(name))
        .filter(|name| match fabric_region_pid(name) {
            Some(pid) => crate::scratch::owner_gone(pid),
            None => is_mpi_file(name) && !in_use(name),
        })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libfabric_regions_are_told_by_their_names() {
        assert_eq!(fabric_region_pid("4242:0:1"), Some(4242));
        for other in ["4242:0", "4242:0:1:2", "gsm-1-r0", "a:0:0", "4242::0"] {
            assert_eq!(fabric_region_pid(other), None, "{other}");
        }
    }
}
