//! A memory file mapped shared: created by its owner (`memfd_create`, sized, mapped), or opened
//! by another process of the host through the owner's descriptor and mapped in full. Segments
//! and stream rings live in one each.
//!
//! It hands out the base address and the mapped length only; what the bytes mean, and checking
//! what another process wrote in them, is for `segment::layout` and `stream::ring`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::ptr::NonNull;

use crate::sys;

/// A mapped memory file; unmapped and closed on drop (peers' mappings stay valid).
#[derive(Debug)]
pub(crate) struct MemFile {
    fd: OwnedFd,
    map: sys::shm::SharedMapping,
}

// SAFETY: the mapping is plain shared memory; every access through `base` is by raw pointers
// with atomics or copies whose races the callers' protocols allow (one writer per word, or
// atomic read-modify-writes), never through Rust references to the bytes.
unsafe impl Send for MemFile {}
// SAFETY: as above.
unsafe impl Sync for MemFile {}

impl MemFile {
    /// A new file of `len` bytes (zeroed) named `name` (for `/proc/<pid>/fd` listings only).
    pub(crate) fn create(name: &CStr, len: usize) -> io::Result<MemFile> {
        let fd = sys::segmem::memfd(name)?;
        sys::shm::set_len(fd.as_fd(), len as u64)?;
        let map = sys::shm::SharedMapping::new(fd.as_fd(), len)?;
        Ok(MemFile { fd, map })
    }

    /// Descriptor `fd` of process `pid` on this host, mapped whole (its size as the kernel says,
    /// never as the owner's header says). `min` is the least size the caller will touch.
    pub(crate) fn open(pid: u32, fd: u32, min: usize) -> io::Result<MemFile> {
        let fd = sys::segmem::open_of_process(pid, fd)?;
        let size = sys::shm::status(fd.as_fd())?.size;
        if size < 0 || (size as u64) < min as u64 {
            return Err(io::Error::other(format!(
                "the file is {size} bytes, smaller than the {min} its header needs"
            )));
        }
        let map = sys::shm::SharedMapping::new(fd.as_fd(), size as usize)?;
        Ok(MemFile { fd, map })
    }

    /// The first byte (page-aligned).
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.map.base()
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// This process's descriptor number, for peers to open.
    pub(crate) fn raw_fd(&self) -> u32 {
        self.fd.as_raw_fd() as u32
    }

    /// The 64-bit word at byte `off` (8-aligned, inside the mapping) as an atomic.
    pub(crate) fn word(&self, off: usize) -> &std::sync::atomic::AtomicU64 {
        assert!(
            off % 8 == 0 && off + 8 <= self.len(),
            "word {off} outside the file"
        );
        // SAFETY: in bounds and aligned (asserted); the mapping lives as long as `self`, and
        // every process touches these bytes only atomically or by raw copies.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(self.base().as_ptr().add(off).cast()) }
    }
}
