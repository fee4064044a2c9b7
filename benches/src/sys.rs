//! The operating-system calls of the benchmarks, each in a safe function.

pub use libc::{SIGKILL, SIGSTOP};

/// Sends `signal` to process `pid`, or to the process group `-pid` when `pid` is negative. A
/// process already gone is no error: the benchmarks signal their own jobs to fault or end them.
pub fn kill(pid: i32, signal: i32) {
    // SAFETY: kill(2) takes no pointers and has no memory-safety preconditions.
    unsafe { libc::kill(pid, signal) };
}
