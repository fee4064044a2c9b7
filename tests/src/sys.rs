//! The operating-system calls of the harness, each in a safe function.

pub(crate) use libc::{SIGKILL, SIGTERM};

/// Sends `signal` to process `pid`, or to the process group `-pid` when `pid` is negative. A
/// process already gone is no error: the harness only signals to stop or clean up. Which pid is
/// safe to signal (not reaped, so not reused) is the caller's to know.
pub(crate) fn kill(pid: i32, signal: i32) {
    // SAFETY: kill(2) takes no pointers and has no memory-safety preconditions.
    unsafe { libc::kill(pid, signal) };
}
