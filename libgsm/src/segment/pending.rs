//! Non-blocking segment operations: each runs in a fiber of its own on the calling worker, so
//! the caller goes on while it waits; a [`Pending`] gives its result, and [`wait_all`] waits for
//! every operation the calling fiber started. Within a host the operation is done before the
//! call returns (it is a memory copy or an atomic) and no fiber is started. The `_async` forms
//! do the same and return a [`Promise`](crate::Promise), which any executor can await (see
//! `future.rs`); [`wait_all`] does not count them.
//!
//! It does not batch operations or bound how many are outstanding (each holds a fiber stack; keep
//! a window of a few hundred).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use super::{SegmentError, SegmentRef};
use crate::Promise;

thread_local! {
    /// Outstanding operations by the fiber that started them.
    static OUTSTANDING: RefCell<HashMap<u32, Rc<Cell<usize>>>> = RefCell::new(HashMap::new());
}

fn counter() -> Rc<Cell<usize>> {
    let fiber = crate::worker::core_or_panic("a segment operation")
        .current_fiber()
        .unwrap_or(u32::MAX);
    OUTSTANDING.with(|m| m.borrow_mut().entry(fiber).or_default().clone())
}

/// The result of a non-blocking operation, once it is complete.
#[derive(Debug)]
pub struct Pending<T> {
    slot: Rc<RefCell<Option<Result<T, SegmentError>>>>,
}

impl<T: 'static> Pending<T> {
    fn start(f: impl FnOnce() -> Result<T, SegmentError> + 'static, here: bool) -> Pending<T> {
        let slot = Rc::new(RefCell::new(None));
        if here {
            *slot.borrow_mut() = Some(f());
            return Pending { slot };
        }
        let n = counter();
        n.set(n.get() + 1);
        let s = slot.clone();
        drop(crate::spawn(move || {
            let r = f();
            *s.borrow_mut() = Some(r);
            n.set(n.get() - 1);
        }));
        Pending { slot }
    }

    /// Whether the operation is complete.
    pub fn is_done(&self) -> bool {
        self.slot.borrow().is_some()
    }

    /// Waits (this fiber only) for the operation and returns its result.
    pub fn wait(self) -> Result<T, SegmentError> {
        if !self.is_done() {
            crate::wait_for(|| self.slot.borrow().is_some());
        }
        self.slot.borrow_mut().take().expect("completed")
    }
}

/// Waits (this fiber only) until every non-blocking operation this fiber started is complete.
/// Their results stay in their [`Pending`]s.
pub fn wait_all() {
    let n = counter();
    if n.get() > 0 {
        crate::wait_for(|| n.get() == 0);
    }
}

impl SegmentRef {
    /// Whether operations on this segment complete within the call (not delegated).
    fn immediate(&self) -> bool {
        self.rank as usize == crate::rank()
            || !(super::forced_remote()
                || crate::host_of_rank(self.rank as usize) != crate::host_of_rank(crate::rank()))
    }

    /// [`get`](Self::get) of `len` bytes without waiting.
    pub fn get_nb(&self, offset: u64, len: usize) -> Pending<Vec<u8>> {
        let s = *self;
        Pending::start(
            move || {
                let mut b = vec![0u8; len];
                s.get(offset, &mut b).map(|_| b)
            },
            self.immediate(),
        )
    }

    /// [`put`](Self::put) without waiting (`data` is moved into the operation).
    pub fn put_nb(&self, offset: u64, data: Vec<u8>) -> Pending<()> {
        let s = *self;
        Pending::start(move || s.put(offset, &data), self.immediate())
    }

    /// [`put_notify`](Self::put_notify) without waiting.
    pub fn put_notify_nb(&self, offset: u64, data: Vec<u8>, word: u64) -> Pending<()> {
        let s = *self;
        // Within a host the notification is still a request: only the owner's rank is immediate.
        let here = self.rank as usize == crate::rank();
        Pending::start(move || s.put_notify(offset, &data, word), here)
    }

    /// [`fetch_add`](Self::fetch_add) without waiting.
    pub fn fetch_add_nb(&self, offset: u64, v: u64) -> Pending<u64> {
        let s = *self;
        Pending::start(move || s.fetch_add(offset, v), self.immediate())
    }
}

/// The `_async` forms: a [`Promise`] of the result, ready at once within a host.
impl SegmentRef {
    fn start_async<T: 'static>(
        &self,
        op: impl FnOnce(SegmentRef) -> Result<T, SegmentError> + 'static,
        here: bool,
    ) -> Promise<Result<T, SegmentError>> {
        let s = *self;
        if here {
            return Promise::ready(op(s));
        }
        crate::spawn_async(move || op(s))
    }

    /// [`get`](Self::get) of `len` bytes without waiting: the promise of the bytes.
    pub fn get_async(&self, offset: u64, len: usize) -> Promise<Result<Vec<u8>, SegmentError>> {
        self.start_async(
            move |s| {
                let mut b = vec![0u8; len];
                s.get(offset, &mut b).map(|_| b)
            },
            self.immediate(),
        )
    }

    /// [`put`](Self::put) without waiting (`data` is moved into the operation).
    pub fn put_async(&self, offset: u64, data: Vec<u8>) -> Promise<Result<(), SegmentError>> {
        self.start_async(move |s| s.put(offset, &data), self.immediate())
    }

    /// [`put_notify`](Self::put_notify) without waiting.
    pub fn put_notify_async(
        &self,
        offset: u64,
        data: Vec<u8>,
        word: u64,
    ) -> Promise<Result<(), SegmentError>> {
        let here = self.rank as usize == crate::rank();
        self.start_async(move |s| s.put_notify(offset, &data, word), here)
    }

    /// [`fetch_add`](Self::fetch_add) without waiting.
    pub fn fetch_add_async(&self, offset: u64, v: u64) -> Promise<Result<u64, SegmentError>> {
        self.start_async(move |s| s.fetch_add(offset, v), self.immediate())
    }

    /// [`swap`](Self::swap) without waiting.
    pub fn swap_async(&self, offset: u64, v: u64) -> Promise<Result<u64, SegmentError>> {
        self.start_async(move |s| s.swap(offset, v), self.immediate())
    }

    /// [`compare_exchange`](Self::compare_exchange) without waiting.
    #[allow(clippy::type_complexity)]
    pub fn compare_exchange_async(
        &self,
        offset: u64,
        current: u64,
        new: u64,
    ) -> Promise<Result<Result<u64, u64>, SegmentError>> {
        self.start_async(
            move |s| s.compare_exchange(offset, current, new),
            self.immediate(),
        )
    }
}
