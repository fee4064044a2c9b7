//! The byte copy of segment `get`/`put` and of stream rings: `copy_nonoverlapping` in blocks of
//! [`BLOCK`] bytes.
//!
//! Why blocks: glibc's `memcpy` picks its method by size, and from a size near the L2 cache
//! (`rep_movsb_stop_threshold`) it leaves `rep movsb` for a
//! vector loop that is slower when the destination stays cached, as a segment's words do. Open
//! MPI's datatype engine copies a contiguous `MPI_Put` in blocks of 128 KiB
//! (`opal_datatype_memcpy_block_size`), which keeps every call below that switch; so does this.
//! Non-temporal stores, software prefetching and other block sizes lose or tie against it:
//! non-temporal stores send the bytes to DRAM, slower than the cache path, and out of the cache
//! the target reads them from.
//! It does not check bounds or order anything: callers check, and fence where they publish.

/// Bytes per `memcpy` call.
pub(crate) const BLOCK: usize = 128 * 1024;

/// Copies `len` bytes from `src` to `dst` in blocks of [`BLOCK`].
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping`: both ranges valid for `len` bytes and disjoint.
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    let mut done = 0;
    while done < len {
        let n = BLOCK.min(len - done);
        // SAFETY: `[done, done + n)` lies within both ranges (the caller's promise for `len`).
        unsafe { std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), n) };
        done += n;
    }
}
