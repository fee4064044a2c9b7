//! The summary: one bit per inbox (or ring) with work, set by producers after they publish and
//! taken by the consumer's poll, so that a poll visits only what has work instead of every
//! ring of the job.
//!
//! It lives in a caller-provided region of 64-bit words (heap or shared memory), so producers of
//! other processes can set bits. It knows nothing of what a bit names; `inbox.rs` and the ring
//! are what the bits point at. Protocol (written with the inbox's in `wire/README.md`):
//!
//! 1. A producer first publishes (the slot's header, with Release), then sets bit `i` with a
//!    **Release** `fetch_or`. It must set the bit even when it reads it already set: only its
//!    own Release orders its publish before the consumer's Acquire.
//! 2. The consumer takes a word with an **Acquire** swap to zero, then visits the inbox of every
//!    bit it took and reads it until empty. A producer whose `fetch_or` came before the swap
//!    published before it, so the visit sees the slot; one whose `fetch_or` came after leaves its
//!    bit set for the next take. Either way no work is left unseen.
//! 3. A consumer that stops early (a budget) marks the bit again itself, so the rest is seen.
//!
//! Bits at or past the summary's `bits` are never reported (a correct producer sets none; one
//! in another process may): [`Summary::take`] counts them instead, for the caller to refuse.

use std::alloc;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A bitmap of `bits` bits in 64-bit words.
pub struct Summary {
    base: NonNull<AtomicU64>,
    bits: u32,
    /// `Some` when this value allocated `base` and must free it.
    heap: Option<alloc::Layout>,
    /// What keeps a borrowed region mapped, if anything.
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: the summary is a block of atomics; every access to it is atomic.
unsafe impl Send for Summary {}
// SAFETY: as for `Send`.
unsafe impl Sync for Summary {}

impl fmt::Debug for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Summary")
            .field("bits", &self.bits)
            .field("owned", &self.heap.is_some())
            .finish()
    }
}

impl Summary {
    /// Bytes of the region a summary of `bits` bits needs: whole cache lines of words.
    pub const fn bytes(bits: u32) -> usize {
        let lines = (bits as usize).div_ceil(512);
        if lines == 0 { 64 } else { lines * 64 }
    }

    /// Alignment the region needs.
    pub const fn align() -> usize {
        64
    }

    fn words(&self) -> usize {
        Self::bytes(self.bits) / 8
    }

    /// A zeroed summary of `bits` bits on the heap.
    pub fn new_heap(bits: u32) -> Self {
        let l = alloc::Layout::from_size_align(Self::bytes(bits), Self::align())
            .expect("a summary of at most 2^32 bits fits the address space");
        // SAFETY: `l` has a non-zero size (at least one cache line).
        let p = unsafe { alloc::alloc_zeroed(l) };
        let Some(base) = NonNull::new(p.cast::<AtomicU64>()) else {
            alloc::handle_alloc_error(l)
        };
        Summary {
            base,
            bits,
            heap: Some(l),
            _keep: None,
        }
    }

    /// A summary in caller memory (a shared-memory segment), kept mapped by `keep`.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of [`Summary::bytes`]`(bits)` bytes, aligned to
    /// [`Summary::align`], zeroed before first use, accessed by every process only as atomic
    /// 64-bit words, and stays valid while `keep` (or, without it, the returned value) lives.
    ///
    /// # Panics
    /// If `ptr` is null or misaligned.
    pub unsafe fn from_raw(
        ptr: *mut u8,
        bits: u32,
        keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
    ) -> Self {
        assert!(
            (ptr as usize) % Self::align() == 0,
            "Summary::from_raw: region at {ptr:p} is not aligned to {} bytes",
            Self::align()
        );
        let base = NonNull::new(ptr.cast::<AtomicU64>()).expect("Summary::from_raw: null region");
        Summary {
            base,
            bits,
            heap: None,
            _keep: keep,
        }
    }

    fn word(&self, w: usize) -> &AtomicU64 {
        debug_assert!(w < self.words());
        // SAFETY: `w` is below the region's word count, the base is aligned for `AtomicU64`, the
        // region outlives `&self`, and every access to it is atomic.
        unsafe { &*self.base.as_ptr().add(w) }
    }

    /// The number of bits.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Sets bit `i` (after publishing to inbox `i`), with Release; whether it was clear before
    /// (the caller may ring the consumer's doorbell only then: a bit already set was set by a
    /// producer that rang, or that the consumer has not yet taken).
    ///
    /// # Panics
    /// If `i` is not below [`Summary::bits`].
    pub fn mark(&self, i: u32) -> bool {
        assert!(i < self.bits, "Summary::mark: bit {i} of {}", self.bits);
        let bit = 1u64 << (i % 64);
        self.word(i as usize / 64).fetch_or(bit, Ordering::Release) & bit == 0
    }

    /// Whether any bit is set (a cheap look, no ordering: take before reading any inbox).
    pub fn any(&self) -> bool {
        (0..self.words()).any(|w| self.word(w).load(Ordering::Relaxed) != 0)
    }

    /// Takes every set bit (an Acquire swap to zero per non-zero word) and calls `visit` with
    /// each index below [`Summary::bits`], in increasing order. Returns how many bits were set at
    /// or past `bits`: none from a correct producer.
    pub fn take(&self, mut visit: impl FnMut(u32)) -> u32 {
        let mut stray = 0;
        for w in 0..self.words() {
            let word = self.word(w);
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut taken = word.swap(0, Ordering::Acquire);
            while taken != 0 {
                let i = w as u64 * 64 + taken.trailing_zeros() as u64;
                taken &= taken - 1;
                if i < self.bits as u64 {
                    visit(i as u32);
                } else {
                    stray += 1;
                }
            }
        }
        stray
    }
}

impl Drop for Summary {
    fn drop(&mut self) {
        if let Some(l) = self.heap {
            // SAFETY: `base` came from `alloc_zeroed(l)` in `new_heap` and is freed only here.
            unsafe { alloc::dealloc(self.base.as_ptr().cast::<u8>(), l) }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
