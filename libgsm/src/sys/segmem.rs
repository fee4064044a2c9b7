//! Memory that other processes of this host map by descriptor: an anonymous memory file
//! (`memfd_create`), the same file opened from another process through `/proc/<pid>/fd/<fd>`, and
//! whether a process still lives (`kill(pid, 0)`). For `gossamer::segment` and `gossamer::stream`.
//!
//! Each function is one call. It does not lay out, size or check what the memory holds (the
//! callers do, from the file's size and a header the owner wrote); the kernel checks that this
//! process may open the other's descriptor (same user, ptrace read access).

use std::ffi::CStr;
use std::io;
use std::os::fd::OwnedFd;

/// `memfd_create(name, MFD_CLOEXEC)`: a file in memory with no name in any directory, so that a
/// crash leaves nothing behind; peers reach it through this process's descriptor table.
pub(crate) fn memfd(name: &CStr) -> io::Result<OwnedFd> {
    Ok(rustix::fs::memfd_create(
        name,
        rustix::fs::MemfdFlags::CLOEXEC,
    )?)
}

/// Opens descriptor `fd` of process `pid` for reading and writing (`open("/proc/pid/fd/fd",
/// O_RDWR | O_CLOEXEC)`): the same open file, a new descriptor of ours.
pub(crate) fn open_of_process(pid: u32, fd: u32) -> io::Result<OwnedFd> {
    let path = format!("/proc/{pid}/fd/{fd}");
    Ok(rustix::fs::open(
        path.as_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// Whether process `pid` is gone (`kill(pid, 0)` says `ESRCH`). A process of another user, or
/// one we may not signal, counts as alive.
pub(crate) fn process_gone(pid: u32) -> bool {
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    rustix::process::test_kill_process(p) == Err(rustix::io::Errno::SRCH)
}
