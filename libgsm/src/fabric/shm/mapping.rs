//! A segment mapped into this process, and what is made from it: bounds- and alignment-checked
//! atomic words (header, table, doorbells), rings, doorbells and the host board, each keeping the
//! mapping alive through an `Arc`. It does not decide what is where (`layout`) or whether a
//! peer's segment is sound (`validate`).

use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::board::{BOARD_BYTES, Region};
use crate::fabric::Doorbell;
use crate::sys::shm::SharedMapping;
use crate::wire::doorbell::GATE_OFFSET;
use crate::wire::ring::{RingLayout, RingMemory};

/// A shared mapping of a whole segment; unmapped when the last ring end or doorbell using it is
/// dropped.
pub(in crate::fabric) struct Mapping {
    /// Owns the pages (unmapped when it drops); `base` and `len` are its.
    _pages: SharedMapping,
    base: NonNull<u8>,
    pub(in crate::fabric) len: usize,
}

// SAFETY: the mapping is plain shared memory that stays mapped until `Drop`; every access to it
// goes through atomics (header, table, doorbells, ring control words) or through ring payload
// pointers whose exclusive use the ring protocol hands over with Release/Acquire pairs.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: all shared access is atomic or ordered by the ring protocol.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("base", &self.base)
            .field("len", &self.len)
            .finish()
    }
}

impl Mapping {
    /// Maps the first `len` bytes of `fd` shared, readable and writable.
    pub(in crate::fabric) fn map(fd: &OwnedFd, len: usize) -> std::io::Result<Mapping> {
        let map = SharedMapping::new(fd.as_fd(), len)?;
        Ok(Mapping {
            base: map.base(),
            len: map.len(),
            _pages: map,
        })
    }

    /// Whether `len` bytes at `off` lie inside the mapping.
    pub(in crate::fabric) fn contains(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// The 32-bit word at `off`, if it lies inside the mapping and is aligned.
    pub(in crate::fabric) fn u32_at(&self, off: usize) -> Option<&AtomicU32> {
        if off % 4 != 0 || !self.contains(off, 4) {
            return None;
        }
        // SAFETY: in bounds (checked), aligned (the base is page-aligned, `off` a multiple of 4),
        // mapped for as long as `&self`; every process uses these words only atomically.
        Some(unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast::<u32>()) })
    }

    /// The 64-bit word at `off`, if it lies inside the mapping and is aligned.
    pub(in crate::fabric) fn u64_at(&self, off: usize) -> Option<&AtomicU64> {
        if off % 8 != 0 || !self.contains(off, 8) {
            return None;
        }
        // SAFETY: as in `u32_at`, for 8 bytes aligned to 8.
        Some(unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off).cast::<u64>()) })
    }

    pub(in crate::fabric) fn load32(&self, off: usize) -> Option<u32> {
        self.u32_at(off).map(|w| w.load(Ordering::Relaxed))
    }

    pub(in crate::fabric) fn load64(&self, off: usize) -> Option<u64> {
        self.u64_at(off).map(|w| w.load(Ordering::Relaxed))
    }

    pub(in crate::fabric) fn store32(&self, off: usize, v: u32) {
        self.u32_at(off)
            .expect("shm: a header word outside our own segment")
            .store(v, Ordering::Relaxed);
    }

    pub(in crate::fabric) fn store64(&self, off: usize, v: u64) {
        self.u64_at(off)
            .expect("shm: a header word outside our own segment")
            .store(v, Ordering::Relaxed);
    }
}

/// A ring made from `map` at `offset`.
///
/// # Safety
/// `offset` is aligned to [`RingLayout::align`], `offset + layout.bytes() <= map.len`, the ring's
/// memory was zeroed before any end of it was used, and over the whole life of the segment at most
/// one producer (in the producing rank) and one consumer (in the segment's rank) are taken from
/// rings at this offset.
pub(in crate::fabric) unsafe fn ring_at(
    map: &Arc<Mapping>,
    offset: usize,
    layout: RingLayout,
) -> Arc<RingMemory> {
    debug_assert!(map.contains(offset, layout.bytes()));
    // SAFETY: in bounds (caller), so `add` stays inside the mapping.
    let ptr = unsafe { map.base.as_ptr().add(offset) };
    let keep: Arc<dyn std::any::Any + Send + Sync> = map.clone();
    // SAFETY: the caller guarantees bounds, alignment, zeroed start and one end per role; `keep`
    // keeps the memory mapped for as long as the ring.
    Arc::new(unsafe { RingMemory::in_mapping(ptr, layout, keep) })
}

/// The host board at `off` in `map` (an offset that `Geometry` computed or `validate` checked:
/// 4096-aligned, with `BOARD_BYTES` inside the mapping).
pub(super) fn board_at(map: &Arc<Mapping>, off: usize) -> Region {
    assert!(
        off % 4096 == 0 && map.contains(off, BOARD_BYTES),
        "shm: a board outside its segment"
    );
    // SAFETY: in bounds (checked), so `add` stays inside the mapping, which is page-aligned.
    let ptr = unsafe { NonNull::new_unchecked(map.base.as_ptr().add(off)) };
    let keep: Arc<dyn std::any::Any + Send + Sync> = map.clone();
    // SAFETY: aligned and in bounds (checked), kept mapped by `keep`; the runtime itself never
    // touches the board, so all access is through the `Board` API.
    unsafe { Region::new(ptr, BOARD_BYTES, keep) }
}

/// The doorbell whose word is at `off` in `map`.
pub(super) fn bell_at(map: &Arc<Mapping>, off: usize) -> Option<Doorbell> {
    let word: *const AtomicU32 = map.u32_at(off)?;
    if off % 8 != 0 {
        return None;
    }
    map.u64_at(off + GATE_OFFSET)?;
    let keep: Arc<dyn std::any::Any + Send + Sync> = map.clone();
    // SAFETY: `u32_at` and `u64_at` checked bounds and alignment of the futex word and the gate
    // after it; `keep` keeps them mapped; they are a doorbell by the segment format and every
    // process uses them only through `Doorbell`.
    Some(unsafe { Doorbell::in_mapping(word, keep) })
}
