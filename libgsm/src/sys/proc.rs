//! Processes: this process's CPUs (its affinity mask, the CPUs online, pinning a thread, the
//! host's runnable threads), a
//! handler for its exit that is told the status, the lives of other processes (a pidfd, or
//! `kill(pid, 0)`), the host's name, and a descriptor handed down by the parent process (the
//! rank wrapper's stage channel). It decides nothing: what to do when a peer ends, or which CPU
//! a worker takes, is the runtime's.

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::OnceLock;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, PidfdFlags};

/// The CPUs this process may run on (its affinity mask), in increasing order; empty when the
/// system does not say.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Pins the calling thread to `cpu`; a refusal leaves it where it was (pinning is a hint).
pub(crate) fn pin_to(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

/// The CPUs online on this host (`sysconf(_SC_NPROCESSORS_ONLN)`), at least 1.
pub(crate) fn cpus_online() -> usize {
    // SAFETY: sysconf has no preconditions. (rustix has no sysconf.)
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// Threads runnable on this host right now, the calling one included (the kernel's
/// `nr_running`, the fourth field of `/proc/loadavg`), or `None` where it cannot be read. One
/// `pread` of a descriptor opened once per process, cheap enough for once per idle spell.
pub(crate) fn runnable_threads() -> Option<usize> {
    use std::os::unix::fs::FileExt;
    static LOADAVG: OnceLock<Option<std::fs::File>> = OnceLock::new();
    let f = LOADAVG
        .get_or_init(|| std::fs::File::open("/proc/loadavg").ok())
        .as_ref()?;
    let mut buf = [0u8; 128];
    let n = f.read_at(&mut buf, 0).ok()?;
    parse_runnable(std::str::from_utf8(&buf[..n]).ok()?)
}

/// The runnable count of a `/proc/loadavg` line ("0.52 0.58 0.59 3/134 29052" gives 3).
pub(crate) fn parse_runnable(line: &str) -> Option<usize> {
    let field = line.split_ascii_whitespace().nth(3)?;
    field.split_once('/')?.0.parse().ok()
}

/// The handler [`on_exit`] registered.
static AT_EXIT: OnceLock<fn(i32)> = OnceLock::new();

extern "C" fn at_exit(status: libc::c_int, _: *mut libc::c_void) {
    if let Some(f) = AT_EXIT.get() {
        f(status);
    }
}

// SAFETY: the declaration matches glibc's `int on_exit(void (*)(int, void *), void *)`.
unsafe extern "C" {
    /// glibc's `atexit` that also hands the handler the exit status (not in `libc` nor `rustix`).
    #[link_name = "on_exit"]
    fn glibc_on_exit(
        f: extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
}

/// Runs `f` with the exit status when the process exits (glibc's `on_exit`). One handler per
/// process: a second is refused.
pub(crate) fn on_exit(f: fn(i32)) -> io::Result<()> {
    if AT_EXIT.set(f).is_err() {
        return Err(io::Error::other("an exit handler is registered already"));
    }
    // SAFETY: registers a plain `extern "C" fn` with the C library, which calls it at exit with
    // the status and the (unused, null) argument.
    let rc = unsafe { glibc_on_exit(at_exit, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::other("on_exit refused the handler"));
    }
    Ok(())
}

/// Another process of this host, watched for its end: through a pidfd when the kernel gives
/// one, by `kill(pid, 0)` otherwise.
#[derive(Debug)]
pub(crate) struct ProcessWatch {
    pid: u32,
    fd: Option<OwnedFd>,
}

impl ProcessWatch {
    /// Starts watching process `pid` (`pidfd_open`).
    pub(crate) fn new(pid: u32) -> ProcessWatch {
        let fd = Pid::from_raw(pid as i32)
            .and_then(|p| rustix::process::pidfd_open(p, PidfdFlags::empty()).ok());
        ProcessWatch { pid, fd }
    }

    /// The process id watched.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process is gone by `kill(pid, 0)` (ESRCH); for a watch without a pidfd.
    fn gone_by_kill(&self) -> bool {
        let Some(pid) = Pid::from_raw(self.pid as i32) else {
            return false;
        };
        rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
    }
}

/// Waits up to `t` (whole milliseconds) for any of `watches` to end; says for each whether it
/// has ended. Without a pidfd to wait on, it sleeps `t` and then asks with `kill`.
pub(crate) fn wait_for_exit(watches: &[&ProcessWatch], t: Duration) -> Vec<bool> {
    let mut fds: Vec<PollFd<'_>> = watches
        .iter()
        .filter_map(|w| w.fd.as_ref())
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    if fds.is_empty() {
        std::thread::sleep(t);
    } else {
        let ms = t.as_millis() as i64;
        let timeout = Timespec {
            tv_sec: ms / 1000,
            tv_nsec: (ms % 1000) * 1_000_000,
        };
        // An interrupted wait is a shorter one: the caller asks again.
        let _ = rustix::event::poll(&mut fds, Some(&timeout));
    }
    let mut polled = fds.iter().map(|p| !p.revents().is_empty());
    watches
        .iter()
        .map(|w| match &w.fd {
            Some(_) => polled.next().unwrap_or(false),
            None => w.gone_by_kill(),
        })
        .collect()
}

/// This host's name (the kernel's node name, as `gethostname` gives it).
pub(crate) fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// The descriptor `fd`, handed down by the parent process, if it is open, a socket, and of
/// inode `inode`; it is then made close-on-exec (processes this one starts must not inherit it).
///
/// libc rather than rustix: `fd` is a number from the environment that may not be open, and
/// rustix's calls take only descriptors known to be open.
pub(crate) fn inherited_socket(fd: RawFd, inode: u64) -> Option<RawFd> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat writes at most one `stat` into the buffer; the descriptor may be any number
    // (a closed one fails with EBADF).
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded, so it filled the buffer.
    let st = unsafe { st.assume_init() };
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK || st.st_ino != inode {
        return None;
    }
    // SAFETY: sets a descriptor flag of a descriptor just checked to be open.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    Some(fd)
}

/// Sends `byte` on the socket `fd` without blocking and without `SIGPIPE`, again when
/// interrupted; any other failure is returned.
pub(crate) fn send_byte_nowait(fd: RawFd, byte: u8) -> io::Result<()> {
    let buf = [byte];
    loop {
        // SAFETY: sends one byte from a live buffer; `fd` was checked to be a socket
        // ([`inherited_socket`]), and a descriptor closed since fails with EBADF.
        let sent = unsafe {
            libc::send(
                fd,
                buf.as_ptr().cast(),
                1,
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if sent == -1 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(());
    }
}

/// Whether `fd` is close-on-exec (tests of inherited descriptors).
#[cfg(test)]
pub(crate) fn is_cloexec(fd: RawFd) -> bool {
    // SAFETY: reads the descriptor's flags only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    flags >= 0 && flags & libc::FD_CLOEXEC != 0
}

/// Clears the descriptor flags of `fd`, so that it would be inherited (tests).
#[cfg(test)]
pub(crate) fn clear_fd_flags(fd: RawFd) {
    // SAFETY: clears the flags of a descriptor the caller owns.
    unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
}
