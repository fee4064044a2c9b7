//! Execution contexts on a worker: fiber, delegated closure, callback; running a closure in
//! one and turning its panic into an error. See ARCHITECTURE.md.

use super::*;

impl WorkerCore {
    /// Whether the caller may suspend: on a fiber, not inside a delegated closure or callback.
    #[inline]
    pub(crate) fn can_block(&self) -> bool {
        self.current.get().is_some() && self.context.get() == 0
    }

    /// Whether requests to self must be deferred to the loopback queue (a property closure or
    /// callback is running on this worker).
    #[inline]
    pub(crate) fn must_defer(&self) -> bool {
        self.context.get() as u32 != 0
    }

    /// Whether a delegated closure or a callback is running on this worker.
    #[inline]
    pub(crate) fn delegated_or_callback(&self) -> bool {
        self.context.get() != 0
    }

    /// Panics with [`BLOCKING_IN_DELEGATED`] unless the caller may block.
    #[inline]
    #[track_caller]
    pub(crate) fn assert_can_block(&self) {
        if !self.can_block() {
            cannot_block(
                self.unwinding_fibers(),
                self.current.get().is_none() && self.context.get() == 0,
            );
        }
    }

    /// Runs `f` on property `(idx, gn)` of type `T` as a delegated closure: no blocking inside,
    /// panics caught and turned into poison.
    #[inline]
    pub(crate) fn run_delegated<T: 'static, U>(
        &self,
        idx: u32,
        gn: u32,
        f: impl FnOnce(&mut T) -> U,
    ) -> Result<U, DelegationError> {
        let p = self.lookup::<T>(idx, gn)?;
        // SAFETY: `p` was just looked up, so it is live; see `run_on`.
        unsafe { self.run_on(p, idx, gn, f) }
    }

    /// [`run_delegated`](Self::run_delegated) for a trust of this process, which carries the
    /// property's key word `k` (`property::key`): the lookup is one compare when it matches.
    #[inline(always)]
    pub(crate) fn run_keyed<T: 'static, U>(
        &self,
        idx: u32,
        gn: u32,
        k: u64,
        f: impl FnOnce(&mut T) -> U,
    ) -> Result<U, DelegationError> {
        // SAFETY: the reference ends with this statement, and a lookup runs no user code.
        let p = unsafe { self.table() }.get_keyed::<T>(idx, gn, k)?;
        // SAFETY: `p` was just looked up, so it is live; see `run_on`.
        unsafe { self.run_on(p, idx, gn, f) }
    }

    /// [`run_keyed`](Self::run_keyed) and then `then` with its result, as an inline
    /// `apply_then` does: the closure in delegated context, the callback in callback context
    /// (a panic in it ends the job, see [`guarded`](Self::guarded)). The context word goes from
    /// the closure's level straight to the callback's: three stores per apply instead of four.
    #[inline(always)]
    pub(crate) fn run_keyed_then<T: 'static, U>(
        &self,
        idx: u32,
        gn: u32,
        k: u64,
        f: impl FnOnce(&mut T) -> U,
        then: impl FnOnce(Result<U, DelegationError>),
    ) {
        let level = self.context.get();
        // SAFETY: the reference ends with this statement, and a lookup runs no user code.
        let r = match unsafe { self.table() }.get_keyed::<T>(idx, gn, k) {
            Ok(p) => {
                self.context.set(level + DELEGATED);
                // SAFETY: `p` was just looked up, so it is live; see `run_on`.
                let r = catch_unwind(AssertUnwindSafe(|| f(unsafe { &mut *p })));
                self.context.set(level + CALLBACK);
                r.map_err(|e| self.closure_panicked(idx, gn, &*e))
            }
            Err(e) => {
                self.context.set(level + CALLBACK);
                Err(e)
            }
        };
        let c = catch_unwind(AssertUnwindSafe(|| then(r)));
        self.context.set(level);
        if let Err(p) = c {
            self.callback_panicked(&*p);
        }
    }

    /// Where the live, unpoisoned property `(idx, gn)` of type `T` is.
    #[inline(always)]
    pub(super) fn lookup<T: 'static>(&self, idx: u32, gn: u32) -> Result<*mut T, DelegationError> {
        // SAFETY: the reference ends with this statement, and a lookup runs no user code.
        unsafe { self.table() }.get::<T>(idx, gn)
    }

    /// The property table, for one lookup, without a `RefCell` guard: then the lookup stores
    /// nothing, and a guard's two stores to the borrow flag per closure cost more than the
    /// lookup in a loop of inline applies, whose stores are what limits it.
    ///
    /// Nor does it test the borrow flag, as `RefCell::try_borrow_unguarded` would: no mutable
    /// borrow of the table can be live when a closure starts, since every `borrow_mut` of it ends
    /// within the statement that takes it, and none of those statements runs user code (values
    /// leave the table by `toggle` and `drain` and are dropped after the borrow has ended). The
    /// test was a load and a branch per inline apply, which showed in a loop of them. Debug
    /// builds still check it.
    ///
    /// # Safety
    /// The caller must drop the reference before anything can borrow the table mutably: before
    /// any user code runs, and before anything inserts, toggles or poisons.
    #[inline(always)]
    pub(super) unsafe fn table(&self) -> &PropertyTable {
        debug_assert!(
            self.props.try_borrow_mut().is_ok(),
            "gossamer: the property table is borrowed while a closure starts"
        );
        // SAFETY: only this thread uses the table, no mutable borrow of it is live (see above),
        // and the caller drops the reference before anything borrows it mutably (contract).
        unsafe { &*self.props.as_ptr() }
    }

    /// Runs `f` on the property `(idx, gn)` at `p` as a delegated closure; a panic poisons it.
    ///
    /// # Safety
    /// `p` must be what [`lookup`](Self::lookup) returned for `(idx, gn)`, with no toggle or
    /// poisoning on this worker since. Then it points to the live boxed property, and it is not
    /// freed while `f` runs: frees happen only in `toggle`, which runs from the poller's serve
    /// loop or loopback, never nested inside a delegated closure (requests to self are deferred
    /// while a delegated closure runs), and no other `&mut T` exists since only this thread
    /// touches it and delegated closures do not nest on one property (nested requests to this
    /// worker are deferred).
    #[inline(always)]
    pub(super) unsafe fn run_on<T: 'static, U>(
        &self,
        p: *mut T,
        idx: u32,
        gn: u32,
        f: impl FnOnce(&mut T) -> U,
    ) -> Result<U, DelegationError> {
        // SAFETY: see the contract above.
        let r = caught_at(&self.context, DELEGATED, || f(unsafe { &mut *p }));
        r.map_err(|e| self.closure_panicked(idx, gn, &*e))
    }

    /// A delegated closure on property `(idx, gn)` panicked with `e`: poisons the property and
    /// returns the error its caller gets.
    #[cold]
    pub(super) fn closure_panicked(
        &self,
        idx: u32,
        gn: u32,
        e: &(dyn std::any::Any + Send),
    ) -> DelegationError {
        self.props.borrow_mut().poison(idx, gn);
        panic_to_error(e)
    }

    /// Serves `first`, a request to run an `F` on a `T`, and then every record right behind it
    /// in its batch that is of the same kind and plain ([`Request::plain_head`]): one trampoline
    /// call for the run instead of one per record, no general decoding, and the property looked
    /// up again only when a record names another one (or the last closure panicked). What ends
    /// the run is left in `more` for the serve loop.
    ///
    /// The looked-up pointer stays valid from one record to the next: the only code that runs
    /// in between is the closures themselves, and they can neither free a property (their
    /// toggles to this worker are deferred to the loopback queue) nor poison one without
    /// panicking, which ends the reuse.
    ///
    /// The continuations behind a record (most of a run: a batch starts each run with one full
    /// record) are served by a loop of their own, in one `catch_unwind` with the delegated
    /// depth raised once: a panic there poisons the property, answers the record that panicked
    /// after those before it, and leaves the rest to the general loop, which finds the property
    /// poisoned. Per record that loop reads the id and the capture, runs the closure and
    /// gathers the result (or answers it at once, for a client in another rank); the general
    /// loop also looked the property up, compared it with the last, and counted the depth and
    /// caught a panic per record.
    ///
    /// # Safety
    /// `first` must have been encoded for this `(T, U, F)` (captured bytes = one `F`), and so
    /// must every record of `more` whose first header word equals `first`'s.
    #[inline(always)]
    pub(crate) unsafe fn serve_run<
        T: 'static,
        U: serde::Serialize + 'static,
        F: FnOnce(&mut T) -> U + Copy,
    >(
        &self,
        client: usize,
        first: &Request<'_>,
        more: &mut RequestReader<'_>,
    ) {
        if first.cap_len != std::mem::size_of::<F>() {
            // Not what this trampoline's sender writes: refuse it (and the run with it, whose
            // records have the same length) rather than read past the captured bytes.
            self.respond::<U>(client, first.req, Err(capture_mismatch()));
            return;
        }
        // A closure that never returns is reported by the stall watch, named by its type.
        let _serving = self.shared.busy[self.local].serving::<F>();
        // Only a plain record starts a run; any other is served alone.
        let head = first.plain_head();
        // Results for a client of this rank are gathered and staged `RUN_GROUP` at a time, with
        // one borrow of the out-queue and one room check (`push_value_responses`); anything else
        // (a failure, a one-way request, a client in another rank) first stages what was
        // gathered, so the responses keep the order of the requests.
        let gather = !self.remote[client] && std::mem::size_of::<U>() <= SMALL;
        let mut group: [MaybeUninit<(u32, ManuallyDrop<U>)>; RUN_GROUP] =
            [const { MaybeUninit::uninit() }; RUN_GROUP];
        let mut n = 0;
        let stage = |group: &[MaybeUninit<(u32, ManuallyDrop<U>)>], n: usize| {
            if n > 0 {
                // SAFETY: the first `n` entries were written below and not yet staged;
                // `MaybeUninit<X>` has the layout of `X`.
                let done = unsafe {
                    std::slice::from_raw_parts(group.as_ptr().cast::<(u32, ManuallyDrop<U>)>(), n)
                };
                self.out_resp[client]
                    .borrow_mut()
                    .push_value_responses(status::OK, done);
            }
        };
        // The property last looked up, while it is known to be live and unpoisoned.
        let mut known = None;
        let mut next = Some((first.req, first.idx, first.gn, first.cap()));
        while let Some((req, idx, gn, cap)) = next {
            // SAFETY: `first`, or a record of the same first header word (contract), so of the
            // same capture length, which is one `F`'s (checked above).
            let f: F = unsafe { std::ptr::read_unaligned(cap.as_ptr().cast::<F>()) };
            let p = match known {
                Some((i, g, p)) if i == idx && g == gn => Ok(p),
                _ => self.lookup::<T>(idx, gn),
            };
            let r = match p {
                Ok(p) => {
                    known = Some((idx, gn, p));
                    // SAFETY: looked up for `(idx, gn)` by this run, and nothing toggled or
                    // poisoned since (a poisoning closure clears `known` below).
                    unsafe { self.run_on(p, idx, gn, f) }
                }
                Err(e) => Err(e),
            };
            match r {
                Ok(u) if gather && req != NO_REPLY => {
                    group[n] = MaybeUninit::new((req, ManuallyDrop::new(u)));
                    n += 1;
                    if n == RUN_GROUP {
                        stage(&group, n);
                        n = 0;
                    }
                }
                r => {
                    if r.is_err() {
                        known = None;
                    }
                    stage(&group, n);
                    n = 0;
                    self.respond(client, req, r);
                }
            }
            if let (Some(h), Some((i, g, p))) = (head, known)
                && more.continues(h, i, g)
            {
                // The continuations right behind this record name the same live property and
                // closure type, so each needs only its id and captured bytes: no lookup or
                // compare, and one depth count and one `catch_unwind` for all of them.
                let level = self.context.get();
                self.context.set(level + DELEGATED);
                let mut at = NO_REPLY;
                let mut running = false;
                let caught = catch_unwind(AssertUnwindSafe(|| {
                    while let Some((req, cap)) = more.next_continuation() {
                        // SAFETY: a continuation of a record of this kind (`continues`), so
                        // its captured bytes are one `F` (checked above for `first`).
                        let f: F = unsafe { std::ptr::read_unaligned(cap.as_ptr().cast::<F>()) };
                        at = req;
                        running = true;
                        // SAFETY: `p` was looked up for `(i, g)` by this run, and nothing
                        // toggled or poisoned since (see `run_on`).
                        let u = f(unsafe { &mut *p });
                        running = false;
                        if req == NO_REPLY {
                            drop(u);
                            continue;
                        }
                        if !gather {
                            self.respond(client, req, Ok(u));
                            continue;
                        }
                        group[n] = MaybeUninit::new((req, ManuallyDrop::new(u)));
                        n += 1;
                        if n == RUN_GROUP {
                            stage(&group, n);
                            n = 0;
                        }
                    }
                }));
                self.context.set(level);
                if let Err(e) = caught {
                    if !running {
                        std::panic::resume_unwind(e);
                    }
                    self.props.borrow_mut().poison(i, g);
                    known = None;
                    stage(&group, n);
                    n = 0;
                    self.respond::<U>(client, at, Err(panic_to_error(&*e)));
                }
            }
            next = head.and_then(|h| more.next_plain(h));
        }
        stage(&group, n);
    }

    /// Runs `f` as a delegated closure that has no property (e.g. `entrust_on`'s maker).
    pub(crate) fn run_plain<U>(&self, f: impl FnOnce() -> U) -> Result<U, DelegationError> {
        caught_at(&self.context, DELEGATED, f).map_err(|e| panic_to_error(&*e))
    }
}
