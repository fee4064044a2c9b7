//! The reaper: when the job is over, every process still descending from `gsmrun` is ended.
//! A launcher may start helpers in sessions of their own, out of reach of its process group, and
//! leave them behind when it is ended; `gsmrun` is their "child subreaper" (see
//! [`crate::sys::become_child_subreaper`]), so they stay its descendants. This module only finds
//! and ends them ([`crate::proctree`]); it does not end the launcher (`launcher.rs`).

use std::time::Duration;

/// How long what is left has between SIGTERM and SIGKILL: an Open MPI daemon already shutting
/// down gets to remove its session directory (one killed outright leaves it). Short, because a
/// daemon whose `mpirun` is gone does not end on SIGTERM, and gsmrun's exit waits for this.
const GRACE: Duration = Duration::from_millis(300);

/// Ends (SIGTERM, SIGKILL [`GRACE`] later) every process that descends from `root` (gsmrun)
/// when the job is over: the launcher's helpers that it left in sessions of their own, adopted
/// by `root` as their subreaper (see the module docs); nothing in the normal case. Returns their
/// pids. They are not reaped: gsmrun exits next, and init reaps them.
pub(super) fn end_leftovers(root: u32) -> Vec<u32> {
    let left = crate::proctree::descendants(root, &crate::proctree::process_parents());
    crate::proctree::end_gently(&left, GRACE);
    left
}
