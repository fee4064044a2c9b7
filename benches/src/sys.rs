//! The operating-system calls of the benchmarks, each in a safe function.

pub use libc::{SIGKILL, SIGSTOP};

/// Sends `signal` to process `pid`, or to the process group `-pid` when `pid` is negative. A
/// process already gone is no error: the benchmarks signal their own jobs to fault or end them.
pub fn kill(pid: i32, signal: i32) {
    // SAFETY: kill(2) takes no pointers and has no memory-safety preconditions.
    unsafe { libc::kill(pid, signal) };
}

/// What `getrusage` or `wait4` report of a process or thread: CPU time (user and system) and
/// peak resident set size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// User plus system CPU time.
    pub cpu: std::time::Duration,
    /// Peak resident set size in KiB (`ru_maxrss`).
    pub max_rss_kib: u64,
}

fn usage_of(ru: &libc::rusage) -> Usage {
    let t = |tv: libc::timeval| {
        std::time::Duration::from_secs(tv.tv_sec.max(0) as u64)
            + std::time::Duration::from_micros(tv.tv_usec.max(0) as u64)
    };
    Usage {
        cpu: t(ru.ru_utime) + t(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss.max(0) as u64,
    }
}

/// Which resource usage [`usage`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// Every thread of this process.
    Process,
    /// The calling thread alone.
    Thread,
}

/// The resource usage of this process or of the calling thread.
pub fn usage(who: Who) -> std::io::Result<Usage> {
    let which = match who {
        Who::Process => libc::RUSAGE_SELF,
        Who::Thread => libc::RUSAGE_THREAD,
    };
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage` for the duration of the call.
    if unsafe { libc::getrusage(which, &mut ru) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(usage_of(&ru))
}

/// Reaps child `pid` if it has ended (or waits until it does, when `block`): its exit status
/// and its resource usage, `None` if it still runs.
pub fn wait_child(
    pid: i32,
    block: bool,
) -> std::io::Result<Option<(std::process::ExitStatus, Usage)>> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: `status` and `ru` are valid, writable and live for the duration of the call.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
        if r == pid {
            return Ok(Some((
                std::process::ExitStatus::from_raw(status),
                usage_of(&ru),
            )));
        }
        if r == 0 {
            return Ok(None);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
