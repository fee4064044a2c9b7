//! POSIX shared memory, for the shm fabric: creating, opening and unlinking a named segment,
//! setting its mode and size, reserving its pages, reading its owner, mode and size, and mapping
//! it shared (unmapped on drop).
//!
//! Each function is one system call on `rustix`, except [`reserve`] (`posix_fallocate`, whose
//! glibc fallback for file systems without `fallocate` rustix does not have). It does not choose
//! names, lay out a segment or trust what a segment holds: the fabric does. A name is passed as
//! the `CStr` the caller built (`/name`), so a name with a NUL byte is refused before any call.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::Mode;
use rustix::shm::OFlags;

/// The flags glibc's `shm_open` adds to the caller's (`O_CLOEXEC` rustix adds itself).
fn nofollow() -> OFlags {
    OFlags::from_bits_retain(rustix::fs::OFlags::NOFOLLOW.bits())
}

/// `shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, mode)`: a new segment, never an
/// existing one (`AlreadyExists` then). The umask may narrow `mode`; see [`set_mode`].
pub(crate) fn create_exclusive(name: &CStr, mode: u32) -> io::Result<OwnedFd> {
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | nofollow();
    Ok(rustix::shm::open(name, flags, Mode::from_raw_mode(mode))?)
}

/// `shm_open(name, O_RDWR | O_CLOEXEC, 0)`: an existing segment (`NotFound` if there is none).
pub(crate) fn open_read_write(name: &CStr) -> io::Result<OwnedFd> {
    Ok(rustix::shm::open(
        name,
        OFlags::RDWR | nofollow(),
        Mode::empty(),
    )?)
}

/// `shm_unlink(name)`: removes the name; mappings stay valid. `NotFound` if it is gone already.
pub(crate) fn unlink(name: &CStr) -> io::Result<()> {
    Ok(rustix::shm::unlink(name)?)
}

/// `fchmod(fd, mode)`.
pub(crate) fn set_mode(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    Ok(rustix::fs::fchmod(fd, Mode::from_raw_mode(mode))?)
}

/// `ftruncate(fd, len)`: the segment's size; new bytes read as zero.
pub(crate) fn set_len(fd: BorrowedFd<'_>, len: u64) -> io::Result<()> {
    Ok(rustix::fs::ftruncate(fd, len)?)
}

/// `posix_fallocate(fd, 0, len)`: reserves every page now, so that a full `/dev/shm` is this
/// error (`ENOSPC`) rather than a `SIGBUS` when a page is first touched.
pub(crate) fn reserve(fd: BorrowedFd<'_>, len: i64) -> io::Result<()> {
    // SAFETY: `fd` is an open descriptor; posix_fallocate takes no pointers and returns an error
    // number.
    let rc = unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, len) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Bytes free to an unprivileged user on the file system that holds `fd` (`fstatvfs`), to say
/// how short `/dev/shm` is.
pub(crate) fn free_bytes(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let st = rustix::fs::fstatvfs(fd)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// What `fstat` says of a segment that matters before mapping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Status {
    /// Owner's user id.
    pub(crate) uid: u32,
    /// Mode bits (type and permissions, as `st_mode`).
    pub(crate) mode: u32,
    /// Size in bytes.
    pub(crate) size: i64,
}

/// `fstat(fd)`, reduced to a [`Status`].
pub(crate) fn status(fd: BorrowedFd<'_>) -> io::Result<Status> {
    let st = rustix::fs::fstat(fd)?;
    Ok(Status {
        uid: st.st_uid,
        mode: st.st_mode,
        size: st.st_size,
    })
}

/// `geteuid()`: the user this process acts as (whom a job's segments must belong to).
pub(crate) fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// A shared, readable and writable mapping of a file's first `len` bytes; unmapped on drop.
///
/// It hands out only its base address: reading or writing through it is the caller's
/// responsibility (and `unsafe` there).
#[derive(Debug)]
pub(crate) struct SharedMapping {
    base: NonNull<u8>,
    len: usize,
}

impl SharedMapping {
    /// `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)`. `len` must not be 0.
    pub(crate) fn new(fd: BorrowedFd<'_>, len: usize) -> io::Result<SharedMapping> {
        if len == 0 {
            return Err(io::Error::other("cannot map an empty segment"));
        }
        use rustix::mm::{MapFlags, ProtFlags};
        // SAFETY: a fresh shared mapping chosen by the kernel (null hint) of a file the caller
        // holds open; it aliases no Rust object.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("null map"))?;
        Ok(SharedMapping { base, len })
    }

    /// The first byte (page-aligned).
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what `mmap` returned, unmapped once; whoever used the
        // memory through `base` must have stopped before dropping its owner.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
