//! Where an inbox's bytes live, behind one small facade with two implementations.
//!
//! Normally (`cfg(not(loom))`) a [`Region`] is a raw, position-independent block laid out as
//! [`InboxLayout`] describes: the shared words are `AtomicU64`s made in place at fixed offsets
//! and the payloads are plain bytes reached through raw pointers. Under `cfg(loom)` the same
//! interface is a model of that block: loom atomics for the words and one
//! `loom::cell::UnsafeCell` per slot payload, so that loom checks every payload access against
//! the happens-before order the atomics create.
//!
//! This module knows offsets and ownership of memory, not the protocol: which side may touch
//! which payload when is decided in the parent module, and every `unsafe fn` here says what it
//! needs from its caller.
//!
//! [`InboxLayout`]: super::InboxLayout

pub(super) use imp::{PayloadMut, PayloadRef, Region};
pub(super) use std::sync::atomic::Ordering;

#[cfg(not(loom))]
mod imp {
    use std::alloc;
    use std::fmt;
    use std::ptr::NonNull;
    use std::sync::atomic::AtomicU64;

    use crate::wire::inbox::{InboxLayout, RELEASED_OFFSET, TAIL_OFFSET};

    /// An inbox's memory: allocated here (and freed on drop) or borrowed from the caller.
    pub struct Region {
        base: NonNull<u8>,
        layout: InboxLayout,
        /// `Some` when this region allocated `base` itself and must free it.
        heap: Option<alloc::Layout>,
    }

    // SAFETY: the region is plain memory; all concurrent access to it goes through atomics (the
    // reservation and release words, the slot headers and source words) or through payload
    // pointers whose exclusive use the protocol hands from side to side with Release/Acquire.
    unsafe impl Send for Region {}
    // SAFETY: as for `Send`: shared access is atomic or protocol-ordered.
    unsafe impl Sync for Region {}

    impl fmt::Debug for Region {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Region")
                .field("base", &self.base)
                .field("layout", &self.layout)
                .field("owned", &self.heap.is_some())
                .finish()
        }
    }

    impl Region {
        /// Allocates a zeroed, aligned region for `layout` (already validated).
        pub fn heap(layout: InboxLayout) -> Self {
            let l = alloc::Layout::from_size_align(layout.bytes(), InboxLayout::align())
                .expect("InboxLayout::validate bounds the inbox size below isize::MAX");
            // SAFETY: `l` has a non-zero size: every inbox has its control blocks.
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
        /// region lives, aligned to [`InboxLayout::align`], and initialised as
        /// [`super::super::InboxMemory::from_raw`] documents.
        pub unsafe fn from_raw(ptr: *mut u8, layout: InboxLayout) -> Self {
            let base = NonNull::new(ptr).expect("InboxMemory::from_raw: null region pointer");
            assert!(
                (ptr as usize) % InboxLayout::align() == 0,
                "InboxMemory::from_raw: region at {ptr:p} is not aligned to {} bytes",
                InboxLayout::align()
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

        /// The reservation counter (every producer's read-modify-write).
        pub fn tail(&self) -> &AtomicU64 {
            self.word(TAIL_OFFSET)
        }

        /// The consumer's release counter (consumer writes, producers read).
        pub fn released(&self) -> &AtomicU64 {
            self.word(RELEASED_OFFSET)
        }

        /// The header word of `slot` (its producer writes, the consumer reads).
        pub fn header(&self, slot: usize) -> &AtomicU64 {
            self.word(self.layout.header_offset(slot))
        }

        /// The source word of `slot`, beside its header.
        pub fn source(&self, slot: usize) -> &AtomicU64 {
            self.word(self.layout.header_offset(slot) + 8)
        }

        /// Exclusive access to the whole payload area of `slot`.
        ///
        /// # Safety
        /// The caller owns `slot`'s payload under the inbox protocol (it reserved the slot's
        /// position after observing its release with Acquire) until the returned value is
        /// dropped, and `slot < layout.slots`.
        pub unsafe fn payload_mut(&self, slot: usize) -> PayloadMut {
            debug_assert!(slot < self.layout.slots as usize);
            // SAFETY: the payload offset of a valid slot is inside the region.
            let ptr = unsafe { self.base.as_ptr().add(self.layout.payload_offset(slot)) };
            PayloadMut {
                ptr,
                len: self.layout.slot_size as usize,
            }
        }

        /// Shared access to the first `len` payload bytes of `slot`.
        ///
        /// # Safety
        /// The caller may read `slot`'s payload under the inbox protocol (it is the consumer and
        /// has observed the slot's current header with Acquire) until the returned value is
        /// dropped; `slot < layout.slots` and `len <= layout.slot_size`.
        pub unsafe fn payload(&self, slot: usize, len: usize) -> PayloadRef {
            debug_assert!(slot < self.layout.slots as usize);
            debug_assert!(len <= self.layout.slot_size as usize);
            // SAFETY: the payload offset of a valid slot is inside the region.
            let ptr = unsafe { self.base.as_ptr().add(self.layout.payload_offset(slot)) };
            PayloadRef { ptr, len }
        }
    }

    impl Drop for Region {
        fn drop(&mut self) {
            if let Some(l) = self.heap {
                // SAFETY: `base` came from `alloc_zeroed(l)` in `heap` and is freed only here.
                unsafe { alloc::dealloc(self.base.as_ptr(), l) }
            }
        }
    }

    /// A slot's payload area, writable by the producer that reserved it.
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
    }

    /// The published bytes of a slot, readable by the consumer.
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
    }
}

#[cfg(loom)]
mod imp {
    use std::fmt;

    use loom::cell::{ConstPtr, MutPtr, UnsafeCell};
    use loom::sync::atomic::AtomicU64;

    use crate::wire::inbox::InboxLayout;

    /// The loom model of an inbox region: same words, same ownership rules, tracked by loom.
    pub struct Region {
        layout: InboxLayout,
        tail: AtomicU64,
        released: AtomicU64,
        headers: Box<[AtomicU64]>,
        sources: Box<[AtomicU64]>,
        payloads: Box<[UnsafeCell<Box<[u8]>>]>,
    }

    // SAFETY: every payload cell is accessed through loom's checked pointers, and loom itself
    // verifies that the protocol's atomics order those accesses; that check is the point.
    unsafe impl Sync for Region {}

    impl fmt::Debug for Region {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Region")
                .field("layout", &self.layout)
                .finish_non_exhaustive()
        }
    }

    impl Region {
        pub fn heap(layout: InboxLayout) -> Self {
            let slots = layout.slots as usize;
            Region {
                layout,
                tail: AtomicU64::new(0),
                released: AtomicU64::new(0),
                headers: (0..slots).map(|_| AtomicU64::new(0)).collect(),
                sources: (0..slots).map(|_| AtomicU64::new(0)).collect(),
                payloads: (0..slots)
                    .map(|_| UnsafeCell::new(vec![0u8; layout.slot_size as usize].into()))
                    .collect(),
            }
        }

        pub fn tail(&self) -> &AtomicU64 {
            &self.tail
        }

        pub fn released(&self) -> &AtomicU64 {
            &self.released
        }

        pub fn header(&self, slot: usize) -> &AtomicU64 {
            &self.headers[slot]
        }

        pub fn source(&self, slot: usize) -> &AtomicU64 {
            &self.sources[slot]
        }

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
    }

    pub struct PayloadRef(ConstPtr<Box<[u8]>>, usize);

    impl PayloadRef {
        pub fn as_slice(&self) -> &[u8] {
            // SAFETY: as in `PayloadMut::as_mut_slice`, loom checks the access.
            unsafe { &(**self.0.deref())[..self.1] }
        }
    }
}
