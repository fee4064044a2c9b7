//! The memory one rank registers for its RMA rings: zeroed, page-aligned, freed when the last
//! holder (the fabric's ring state, a ring end) drops it. The adapter's registration of it ends
//! before: the ring state holds the transport, which it drops first.

use std::alloc;
use std::ptr::NonNull;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Region {
    ptr: NonNull<u8>,
    layout: alloc::Layout,
}

// SAFETY: plain memory; who writes which bytes when is the ring protocol's and the turns'
// business, through atomics and completions.
unsafe impl Send for Region {}
// SAFETY: as for Send.
unsafe impl Sync for Region {}

impl Region {
    /// `bytes` zeroed bytes (at least one page: the plan's total).
    pub(crate) fn new(bytes: usize) -> Region {
        let layout =
            alloc::Layout::from_size_align(bytes.max(4096), 4096).expect("region size checked");
        // SAFETY: a non-zero size (at least one page).
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(p) else {
            alloc::handle_alloc_error(layout)
        };
        Region { ptr, layout }
    }

    /// Address of byte `offset`.
    pub(crate) fn at(&self, offset: usize) -> *mut u8 {
        assert!(
            offset < self.layout.size(),
            "offset {offset} outside the region"
        );
        // SAFETY: inside the allocation (checked).
        unsafe { self.ptr.as_ptr().add(offset) }
    }

    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}
