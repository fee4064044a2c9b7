//! Another process's memory on this host: one `process_vm_readv` or `process_vm_writev` call
//! (`libc`: rustix has neither), and the consent that lets peers of this user read this process
//! (`PR_SET_PTRACER`, on rustix).
//!
//! Each function makes one call: partial transfers, and what a failure means for a record, are
//! for `wire::far`. Nothing here checks that the other process expects the transfer; the kernel
//! checks the permission and that the remote bytes are mapped.

use std::io;
use std::mem::MaybeUninit;

/// Lets every process of this user attach to this one, and so read it (Yama's `ptrace_scope = 1`
/// otherwise allows only descendants). Fails with `EINVAL` where Yama is absent, harmlessly.
pub(crate) fn allow_any_tracer() -> io::Result<()> {
    rustix::process::set_ptracer(rustix::process::PTracer::Any).map_err(io::Error::from)
}

/// Reads the bytes at `addr` in process `pid` into `local`, in one `process_vm_readv`; returns
/// how many were read (fewer than `local.len()` when the remote range ends early).
pub(crate) fn read_from(pid: u32, addr: u64, local: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    let here = libc::iovec {
        iov_base: local.as_mut_ptr().cast(),
        iov_len: local.len(),
    };
    let there = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: local.len(),
    };
    // SAFETY: `here` is memory of ours, borrowed mutably for the call, which the kernel only
    // writes (any byte is a valid `MaybeUninit<u8>`); `there` is read by the kernel in the other
    // process, which checks it.
    let r = unsafe { libc::process_vm_readv(pid as libc::pid_t, &here, 1, &there, 1, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// Writes `local` to the bytes at `addr` in process `pid`, in one `process_vm_writev`; returns
/// how many were written (fewer than `local.len()` when the remote range ends early).
///
/// # Safety
/// The bytes at `addr` in `pid` are for this process to write now (the caller's protocol with
/// that process): the kernel checks only that they are mapped and writable, and `pid` may be
/// this very process.
pub(crate) unsafe fn write_to(pid: u32, addr: u64, local: &[MaybeUninit<u8>]) -> io::Result<usize> {
    let here = libc::iovec {
        iov_base: local.as_ptr().cast_mut().cast(),
        iov_len: local.len(),
    };
    let there = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: local.len(),
    };
    // SAFETY: `here` is memory of ours that the kernel only reads; `there` is written by the
    // kernel in the other process, which checks that it is mapped, and the caller vouches that
    // the bytes are ours to write.
    let r = unsafe { libc::process_vm_writev(pid as libc::pid_t, &here, 1, &there, 1, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// Lowers this process's address-space limit (`RLIMIT_AS`, soft and hard) to `bytes`: a test
/// runs a child under it to see a failed allocation.
#[cfg(test)]
pub(crate) fn limit_address_space(bytes: u64) -> io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let limit = Rlimit {
        current: Some(bytes),
        maximum: Some(bytes),
    };
    setrlimit(Resource::As, limit).map_err(io::Error::from)
}

/// The signal a failed allocation ends a process with (`SIGABRT`), as a raw number.
#[cfg(test)]
pub(crate) const ABORT_SIGNAL: i32 = rustix::process::Signal::ABORT.as_raw();
