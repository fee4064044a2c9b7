//! The only code of `gsmrun` that calls the operating system: each call a safe function, on
//! `rustix` where it covers the call and on `libc` where it does not (`personality`, `_exit`, the
//! signal numbers and their names). Errors come back as `std::io::Result`, with the errno the
//! call set; callers decide what a failure means. Nothing here knows about jobs, ranks or hosts.

use rustix::process::{Pid, Signal};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, RawFd};
use std::process::Command;

/// Signal numbers `gsmrun` names (they are `i32`s on the wire and in exit statuses).
pub use libc::{SIGCONT, SIGKILL, SIGPIPE, SIGSTOP, SIGTERM, SIGUSR1, SIGUSR2};

/// This machine's hostname (`uname`'s node name, which is what `gethostname` returns).
pub fn hostname() -> String {
    let uts = rustix::system::uname();
    String::from_utf8_lossy(uts.nodename().to_bytes()).into_owned()
}

/// CPUs this process may run on (its affinity mask), at least 1.
pub fn usable_cpus() -> u32 {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => set.count().max(1),
        Err(_) => std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
    }
}

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// This process's real user id.
pub fn real_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// This process's id.
pub fn pid() -> i32 {
    rustix::process::getpid().as_raw_pid()
}

/// Takes `file`'s exclusive `flock` without waiting: `Ok(false)` when another holds it.
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Whether no process has pid `pid` here (`kill(pid, 0)` says ESRCH; never a group).
pub fn pid_is_free(pid: i32) -> bool {
    let Some(pid) = Pid::from_raw(pid).filter(|_| pid > 0) else {
        return false;
    };
    rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
}

fn signal(sig: i32) -> io::Result<Signal> {
    Signal::from_named_raw(sig).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

fn positive(pid: i32) -> io::Result<Pid> {
    Pid::from_raw(pid)
        .filter(|_| pid > 0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

/// Sends `sig` to process `pid` (> 0).
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    Ok(rustix::process::kill_process(positive(pid)?, signal(sig)?)?)
}

/// Sends `sig` to the process group `pgid` (> 0), as `kill(-pgid, sig)`.
pub fn kill_group(pgid: i32, sig: i32) -> io::Result<()> {
    Ok(rustix::process::kill_process_group(
        positive(pgid)?,
        signal(sig)?,
    )?)
}

/// Makes this process the "child subreaper" of its descendants (`prctl`): an orphan among them
/// becomes its child instead of init's.
pub fn become_child_subreaper() -> io::Result<()> {
    Ok(rustix::process::set_child_subreaper(Some(
        rustix::process::getpid(),
    ))?)
}

/// Waits until child `pid` has exited, without reaping it (`waitid` with `WNOWAIT`, again when
/// interrupted); `false` if that cannot be learnt.
pub fn wait_exited(pid: i32) -> bool {
    use rustix::process::{WaitId, WaitIdOptions};
    let Ok(pid) = positive(pid) else {
        return false;
    };
    loop {
        match rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(_) => return true,
            Err(e) if e == rustix::io::Errno::INTR => continue,
            Err(_) => return false,
        }
    }
}

/// Turns off address-space randomisation for this process and its future children
/// (`personality(ADDR_NO_RANDOMIZE)`, the other persona flags kept).
pub fn disable_aslr() -> io::Result<()> {
    // SAFETY: personality(0xffffffff) only queries the current persona.
    let current = unsafe { libc::personality(0xffff_ffff) };
    if current == -1 {
        return Err(io::Error::last_os_error());
    }
    let wanted = (current as libc::c_ulong) | libc::ADDR_NO_RANDOMIZE as libc::c_ulong;
    // SAFETY: setting a persona flag for this process has no memory-safety effect.
    if unsafe { libc::personality(wanted) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The inode number of an open descriptor (`fstat`).
pub fn inode(fd: impl AsFd) -> io::Result<u64> {
    Ok(rustix::fs::fstat(fd)?.st_ino)
}

/// Sets up `cmd` so that its program dies with this process (the parent-death signal SIGKILL,
/// set between fork and exec, and an exit if this process died before it was set) and inherits
/// `keep_fd` (its close-on-exec flag cleared in the child only). The parent-death signal fires
/// when the thread that forked ends, so `cmd` must be spawned from a thread that lives as long as
/// this process.
pub fn die_with_parent(cmd: &mut Command, keep_fd: RawFd) {
    use std::os::unix::process::CommandExt as _;
    let parent = rustix::process::getpid();
    let in_child = move || {
        // SAFETY: `keep_fd` is open in the forked child (inherited from the parent, which keeps
        // it open until after the spawn); the borrow lasts only for this call.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(keep_fd) };
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        // The parent may have died before the flag was set, and then no signal comes.
        if rustix::process::getppid() != Some(parent) {
            // SAFETY: _exit is async-signal-safe and has no preconditions.
            unsafe { libc::_exit(1) };
        }
        Ok(())
    };
    // SAFETY: `in_child` only makes async-signal-safe system calls (fcntl, prctl, getppid,
    // _exit) and touches no memory shared with the parent, as a pre_exec closure must.
    unsafe { cmd.pre_exec(in_child) };
}

/// Makes a connection fail (reads and writes return `ETIMEDOUT`) once its peer's host has not
/// answered for `after`: TCP keepalive probes every second from one second of silence, and a
/// user timeout for data sent and not acknowledged. A peer whose process is stopped still
/// answers (its kernel does), so only a lost host or network trips it.
pub fn fail_when_unanswered(sock: impl AsFd, after: std::time::Duration) -> io::Result<()> {
    use rustix::net::sockopt;
    let secs = after.as_secs().max(1);
    sockopt::set_socket_keepalive(&sock, true)?;
    sockopt::set_tcp_keepidle(&sock, std::time::Duration::from_secs(1))?;
    sockopt::set_tcp_keepintvl(&sock, std::time::Duration::from_secs(1))?;
    sockopt::set_tcp_keepcnt(&sock, secs.min(127) as u32)?;
    let ms = after.as_millis().clamp(1000, u128::from(u32::MAX)) as u32;
    Ok(sockopt::set_tcp_user_timeout(&sock, ms)?)
}

/// Whether the peer's host owes this connection an answer now: a keepalive probe or data sent
/// and not acknowledged (`TCP_INFO`'s `tcpi_probes`, `tcpi_retransmits`). A host that is there
/// answers both even while its process is stopped; `false` also when it cannot be learnt.
pub fn peer_host_silent(sock: impl AsFd) -> bool {
    use std::os::fd::AsRawFd as _;
    let fd = sock.as_fd().as_raw_fd();
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes, and the kernel writes at most `len` bytes and
    // says how many in `len`; `fd` is open for the duration of the call (borrowed from `sock`).
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < 8 {
        return false;
    }
    // SAFETY: zero-initialised, then (partly) written by the kernel; every bit pattern of its
    // integer fields is valid.
    let info = unsafe { info.assume_init() };
    info.tcpi_probes > 0 || info.tcpi_retransmits > 0
}

/// The limit on open descriptors (`RLIMIT_NOFILE`): (soft, hard), `None` for unlimited.
pub fn open_files_limit() -> (Option<u64>, Option<u64>) {
    let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    (l.current, l.maximum)
}

/// Raises the soft limit on open descriptors to `to` (at most the hard limit); children inherit it.
pub fn raise_open_files_limit(to: u64) -> io::Result<()> {
    let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let to = l.maximum.map_or(to, |max| to.min(max));
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(to),
            maximum: l.maximum,
        },
    )?;
    Ok(())
}

/// Name of a signal number (`SIGSEGV`), or `SIG?` when unknown.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGCONT => "SIGCONT",
        libc::SIGTSTP => "SIGTSTP",
        _ => "SIG?",
    }
}

/// Whether this process's standard input is a terminal (`isatty(0)`).
pub fn stdin_is_terminal() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdin().is_terminal()
}
