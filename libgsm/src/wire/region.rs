//! Where a ring's or an inbox's bytes live, behind one small facade with two implementations,
//! shared by the slot ring (`ring.rs`) and the multi-producer inbox (`inbox.rs`).
//!
//! Normally (`cfg(not(loom))`) a [`Region`] is a raw, position-independent block of memory laid
//! out as its [`Shape`] (`RingLayout`, `InboxLayout`) describes: the shared words are
//! `AtomicU64`s made in place at fixed offsets ([`AtomicU64::from_ptr`]) and the payloads are
//! plain bytes reached through raw pointers. Under `cfg(loom)` the same interface is a model of
//! that block: loom atomics for the control words and the slots' words, and one
//! `loom::cell::UnsafeCell` per slot payload, so that loom checks every payload access against
//! the happens-before order the atomics create.
//!
//! This module knows offsets and ownership of memory; it does not know the protocols. Which
//! side may touch which payload when is decided by the ring and the inbox, and every
//! `unsafe fn` here says what it needs from its caller.
//!
//! [`AtomicU64::from_ptr`]: std::sync::atomic::AtomicU64::from_ptr

use std::fmt;

pub(super) use imp::{PayloadMut, PayloadRef, Region};
pub(super) use std::sync::atomic::Ordering;

/// What a [`Region`] reads of its layout: the size, the offsets of its words and payloads.
pub(super) trait Shape: Copy + fmt::Debug {
    /// The type whose `from_raw` hands memory to a region, for its messages.
    #[cfg(not(loom))]
    const OWNER: &'static str;
    /// Offset of the consumer's release counter, alone in its 128-byte block.
    #[cfg(not(loom))]
    const RELEASED: usize;
    /// Offset of the producers' reservation counter, alone in its 128-byte block, if the
    /// protocol has one.
    const TAIL: Option<usize>;
    /// Words at the start of each slot: its header, and then (if 2) its source word.
    const SLOT_WORDS: usize;
    /// Total bytes of the region.
    #[cfg(not(loom))]
    fn bytes(&self) -> usize;
    /// Alignment the region needs.
    #[cfg(not(loom))]
    fn align() -> usize;
    /// Number of slots.
    fn slots(&self) -> usize;
    /// Payload bytes per slot.
    fn slot_size(&self) -> usize;
    /// Offset of `slot`'s header word; its other words follow it.
    #[cfg(not(loom))]
    fn header_offset(&self, slot: usize) -> usize;
    /// Offset of `slot`'s payload.
    #[cfg(not(loom))]
    fn payload_offset(&self, slot: usize) -> usize;
}

#[cfg(not(loom))]
mod imp {
    use std::alloc;
    use std::fmt;
    use std::ptr::NonNull;
    use std::sync::atomic::AtomicU64;

    use super::Shape;

    /// A ring's or an inbox's memory: either allocated here (and freed on drop) or borrowed
    /// from the caller.
    pub struct Region<S: Shape> {
        base: NonNull<u8>,
        layout: S,
        /// `Some` when this region allocated `base` itself and must free it.
        heap: Option<alloc::Layout>,
    }

    // SAFETY: the region is plain memory; all concurrent access to it goes through atomics (the
    // control words and the slots' words) or through payload pointers whose exclusive use the
    // protocol hands from one side to the other with Release/Acquire pairs.
    unsafe impl<S: Shape> Send for Region<S> {}
    // SAFETY: as for `Send`: shared access is atomic or protocol-ordered.
    unsafe impl<S: Shape> Sync for Region<S> {}

    impl<S: Shape> fmt::Debug for Region<S> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Region")
                .field("base", &self.base)
                .field("layout", &self.layout)
                .field("owned", &self.heap.is_some())
                .finish()
        }
    }

    impl<S: Shape> Region<S> {
        /// Allocates a zeroed, aligned region for `layout` (already validated).
        pub fn heap(layout: S) -> Self {
            let l = alloc::Layout::from_size_align(layout.bytes(), S::align())
                .expect("the layout's validate bounds the region size below isize::MAX");
            // SAFETY: `l` has a non-zero size: every region has a control block.
            let p = unsafe { alloc::alloc_zeroed(l) };
            let Some(base) = NonNull::new(p) else {
                alloc::handle_alloc_error(l)
            };
            Region {
                base,
                layout,
                heap: Some(l),
            }
        }

        /// Wraps caller memory.
        ///
        /// # Safety
        /// `ptr` is valid for reads and writes of `layout.bytes()` bytes for as long as the
        /// region lives, aligned to `S::align()`, and initialised as the owner's `from_raw`
        /// (`RingMemory::from_raw`, `InboxMemory::from_raw`) documents.
        pub unsafe fn from_raw(ptr: *mut u8, layout: S) -> Self {
            let Some(base) = NonNull::new(ptr) else {
                panic!("{}::from_raw: null region pointer", S::OWNER)
            };
            assert!(
                (ptr as usize) % S::align() == 0,
                "{}::from_raw: region at {ptr:p} is not aligned to {} bytes",
                S::OWNER,
                S::align()
            );
            Region {
                base,
                layout,
                heap: None,
            }
        }

        fn word(&self, offset: usize) -> &AtomicU64 {
            debug_assert!(offset % 8 == 0 && offset + 8 <= self.layout.bytes());
            // SAFETY: `offset` is one of the layout's word offsets: inside the region and a
            // multiple of 8 from a base aligned to 128, so aligned for `AtomicU64`. The region
            // outlives `&self`, and the protocol only ever accesses these words atomically.
            unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast::<u64>()) }
        }

        /// The producers' reservation counter (only a shape with one has it).
        pub fn tail(&self) -> &AtomicU64 {
            let Some(off) = S::TAIL else {
                unreachable!("{} has no reservation counter", S::OWNER)
            };
            self.word(off)
        }

        /// The consumer's release counter (consumer writes, producers read).
        pub fn released(&self) -> &AtomicU64 {
            self.word(S::RELEASED)
        }

        /// The header word of `slot` (its producer writes, the consumer reads).
        pub fn header(&self, slot: usize) -> &AtomicU64 {
            self.word(self.layout.header_offset(slot))
        }

        /// The source word of `slot`, beside its header (only a shape with two slot words).
        pub fn source(&self, slot: usize) -> &AtomicU64 {
            debug_assert!(S::SLOT_WORDS >= 2);
            self.word(self.layout.header_offset(slot) + 8)
        }

        /// Hints the CPU to fetch the first line of `slot`'s payload (no access, no ordering: a
        /// consumer issues it just before loading the slot's header, so that when a new batch
        /// has arrived the two cache misses overlap instead of following each other).
        #[inline]
        pub fn prefetch_payload(&self, slot: usize) {
            #[cfg(target_arch = "x86_64")]
            {
                let off = self
                    .layout
                    .payload_offset(slot.min(self.layout.slots() - 1));
                // SAFETY: `off` is inside the region (a valid slot's payload offset); a prefetch
                // reads nothing architecturally and cannot fault.
                unsafe {
                    let p = self.base.as_ptr().add(off);
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        p.cast::<i8>(),
                    );
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = slot;
        }

        /// Exclusive access to the whole payload area of `slot`.
        ///
        /// # Safety
        /// The caller owns `slot`'s payload under the protocol (a producer that observed the
        /// consumer's release of this slot with Acquire, and for the inbox reserved its
        /// position) until the returned value is dropped, and `slot < layout.slots()`.
        pub unsafe fn payload_mut(&self, slot: usize) -> PayloadMut {
            debug_assert!(slot < self.layout.slots());
            // SAFETY: the payload offset of a valid slot is inside the region.
            let ptr = unsafe { self.base.as_ptr().add(self.layout.payload_offset(slot)) };
            PayloadMut {
                ptr,
                len: self.layout.slot_size(),
            }
        }

        /// Shared access to the first `len` payload bytes of `slot`.
        ///
        /// # Safety
        /// The caller may read `slot`'s payload under the protocol (it is the consumer and has
        /// observed the slot's current header with Acquire) until the returned value is
        /// dropped; `slot < layout.slots()` and `len <= layout.slot_size()`.
        pub unsafe fn payload(&self, slot: usize, len: usize) -> PayloadRef {
            debug_assert!(slot < self.layout.slots());
            debug_assert!(len <= self.layout.slot_size());
            // SAFETY: the payload offset of a valid slot is inside the region.
            let ptr = unsafe { self.base.as_ptr().add(self.layout.payload_offset(slot)) };
            PayloadRef { ptr, len }
        }
    }

    impl<S: Shape> Drop for Region<S> {
        fn drop(&mut self) {
            if let Some(l) = self.heap {
                // SAFETY: `base` came from `alloc_zeroed(l)` in `heap` and is freed only here.
                unsafe { alloc::dealloc(self.base.as_ptr(), l) }
            }
        }
    }

    /// A slot's payload area, writable by the producer that obtained it.
    pub struct PayloadMut {
        ptr: *mut u8,
        len: usize,
    }

    impl PayloadMut {
        pub fn as_mut_slice(&mut self) -> &mut [u8] {
            // SAFETY: `Region::payload_mut`'s caller guarantees exclusive use of these `len`
            // bytes while `self` lives; the borrow of `self` bounds the slice.
            unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
        }

        pub fn as_mut_uninit(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
            // SAFETY: as in `as_mut_slice`; `MaybeUninit<u8>` has the layout of `u8` and any
            // byte, initialised or not, is a valid `MaybeUninit<u8>`.
            unsafe {
                std::slice::from_raw_parts_mut(
                    self.ptr.cast::<std::mem::MaybeUninit<u8>>(),
                    self.len,
                )
            }
        }
    }

    /// The published bytes of a slot, readable by the consumer that obtained them.
    pub struct PayloadRef {
        ptr: *const u8,
        len: usize,
    }

    impl PayloadRef {
        pub fn as_slice(&self) -> &[u8] {
            // SAFETY: `Region::payload`'s caller guarantees that no correct producer writes
            // these `len` bytes while `self` lives; the borrow of `self` bounds the slice.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        }

        pub fn as_uninit(&self) -> &[std::mem::MaybeUninit<u8>] {
            // SAFETY: as in `as_slice`; any byte is a valid `MaybeUninit<u8>`.
            unsafe {
                std::slice::from_raw_parts(self.ptr.cast::<std::mem::MaybeUninit<u8>>(), self.len)
            }
        }
    }
}

#[cfg(loom)]
mod imp {
    use std::fmt;

    use loom::cell::{ConstPtr, MutPtr, UnsafeCell};
    use loom::sync::atomic::AtomicU64;

    use super::Shape;

    /// The loom model of a region: same words, same ownership rules, tracked by loom.
    pub struct Region<S: Shape> {
        layout: S,
        tail: AtomicU64,
        released: AtomicU64,
        /// `S::SLOT_WORDS` per slot: the header, then the source word.
        words: Box<[AtomicU64]>,
        payloads: Box<[UnsafeCell<Box<[u8]>>]>,
    }

    // SAFETY: every payload cell is accessed through loom's checked pointers, and loom itself
    // verifies that the protocol's atomics order those accesses; that check is the point.
    unsafe impl<S: Shape> Sync for Region<S> {}

    impl<S: Shape> fmt::Debug for Region<S> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Region")
                .field("layout", &self.layout)
                .finish_non_exhaustive()
        }
    }

    impl<S: Shape> Region<S> {
        pub fn heap(layout: S) -> Self {
            let slots = layout.slots();
            Region {
                layout,
                tail: AtomicU64::new(0),
                released: AtomicU64::new(0),
                words: (0..slots * S::SLOT_WORDS)
                    .map(|_| AtomicU64::new(0))
                    .collect(),
                payloads: (0..slots)
                    .map(|_| UnsafeCell::new(vec![0u8; layout.slot_size()].into()))
                    .collect(),
            }
        }

        pub fn tail(&self) -> &AtomicU64 {
            debug_assert!(S::TAIL.is_some());
            &self.tail
        }

        pub fn released(&self) -> &AtomicU64 {
            &self.released
        }

        pub fn header(&self, slot: usize) -> &AtomicU64 {
            &self.words[slot * S::SLOT_WORDS]
        }

        pub fn source(&self, slot: usize) -> &AtomicU64 {
            debug_assert!(S::SLOT_WORDS >= 2);
            &self.words[slot * S::SLOT_WORDS + 1]
        }

        pub fn prefetch_payload(&self, _slot: usize) {}

        /// # Safety
        /// As the non-loom `Region::payload_mut`; loom checks it.
        pub unsafe fn payload_mut(&self, slot: usize) -> PayloadMut {
            PayloadMut(self.payloads[slot].get_mut())
        }

        /// # Safety
        /// As the non-loom `Region::payload`; loom checks it.
        pub unsafe fn payload(&self, slot: usize, len: usize) -> PayloadRef {
            PayloadRef(self.payloads[slot].get(), len)
        }
    }

    pub struct PayloadMut(MutPtr<Box<[u8]>>);

    impl PayloadMut {
        pub fn as_mut_slice(&mut self) -> &mut [u8] {
            // SAFETY: loom tracks this pointer's access for as long as `self` lives and panics
            // on any access that is not ordered after or before it.
            unsafe { self.0.deref() }
        }

        pub fn as_mut_uninit(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
            let s = self.as_mut_slice();
            // SAFETY: the same bytes as `as_mut_slice`, viewed as `MaybeUninit<u8>` (same layout).
            unsafe {
                std::slice::from_raw_parts_mut(
                    s.as_mut_ptr().cast::<std::mem::MaybeUninit<u8>>(),
                    s.len(),
                )
            }
        }
    }

    pub struct PayloadRef(ConstPtr<Box<[u8]>>, usize);

    impl PayloadRef {
        pub fn as_slice(&self) -> &[u8] {
            // SAFETY: as in `PayloadMut::as_mut_slice`, loom checks the access.
            unsafe { &(**self.0.deref())[..self.1] }
        }

        pub fn as_uninit(&self) -> &[std::mem::MaybeUninit<u8>] {
            let s = self.as_slice();
            // SAFETY: the same bytes as `as_slice`, viewed as `MaybeUninit<u8>` (same layout).
            unsafe {
                std::slice::from_raw_parts(s.as_ptr().cast::<std::mem::MaybeUninit<u8>>(), s.len())
            }
        }
    }
}
