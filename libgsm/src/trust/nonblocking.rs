//! The non-blocking forms of `Trust`'s calls: `apply_async` and `apply_with_async` (and their
//! `try_` forms), which return a [`Promise`], and `post`/`post_with`, which return nothing. Each is
//! an `apply_then` (`mod.rs`) whose callback completes the promise, or, for `post`, checks the
//! answer only for a failure: so each runs inline on the trustee's own worker, keeps the bound
//! of unanswered requests and is a task of the completion scope it is issued in. It does not
//! stage or serve anything itself.

use super::*;
use crate::future::{Promise, promise};

impl<T: Send + 'static> Trust<T> {
    /// Runs `f` on the property, as [`apply`](Self::apply) does, without waiting: the promise
    /// of its result. Await it (from any executor), [`wait`](Promise::wait) for it in a fiber,
    /// or drop it. Issued in a completion scope ([`finish`](crate::finish)), it is one of the
    /// scope's tasks until its answer is in.
    ///
    /// ```
    /// gossamer::run(gossamer::Config::default().workers(2), || {
    ///     let t = gossamer::entrust_on(gossamer::WorkerId::new(1), || 10u64);
    ///     let a = t.apply_async(|n| { *n += 1; *n });
    ///     let b = t.apply_async(|n| { *n *= 2; *n });
    ///     assert_eq!(gossamer::when_all([a, b]).wait(), vec![11, 22]);
    /// })
    /// .unwrap();
    /// ```
    ///
    /// # Panics
    /// Outside a gossamer worker. A failure of the request (panic, poison, dead property) is the
    /// promise's: awaiting it panics with the message [`apply`](Self::apply) would have.
    #[inline]
    #[track_caller]
    pub fn apply_async<U: Wire + Send, F: FnOnce(&mut T) -> U + NoRef>(&self, f: F) -> Promise<U> {
        let (p, c) = promise();
        self.try_apply_then_as("Trust::apply_async", f, move |r| match r {
            Ok(u) => c.complete(u),
            Err(e) => c.fail(format!("gossamer: Trust::apply_async failed: {e}")),
        });
        p
    }

    /// Like [`apply_async`](Self::apply_async), but the promise holds failures as errors.
    #[inline]
    #[track_caller]
    pub fn try_apply_async<U: Wire + Send, F: FnOnce(&mut T) -> U + NoRef>(
        &self,
        f: F,
    ) -> Promise<Result<U, DelegationError>> {
        let (p, c) = promise();
        self.try_apply_then_as("Trust::try_apply_async", f, move |r| c.complete(r));
        p
    }

    /// Runs `f(property, arg)` on the trustee, as [`apply_with`](Self::apply_with) does, without
    /// waiting: the promise of its result (see [`apply_async`](Self::apply_async)).
    #[inline]
    #[track_caller]
    pub fn apply_with_async<A: Wire, U: Wire + Send, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        arg: A,
        f: F,
    ) -> Promise<U> {
        let (p, c) = promise();
        self.try_apply_with_then_as("Trust::apply_with_async", arg, f, move |r| match r {
            Ok(u) => c.complete(u),
            Err(e) => c.fail(format!("gossamer: Trust::apply_with_async failed: {e}")),
        });
        p
    }

    /// Like [`apply_with_async`](Self::apply_with_async), but the promise holds failures as
    /// errors.
    #[inline]
    #[track_caller]
    pub fn try_apply_with_async<A: Wire, U: Wire + Send, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        arg: A,
        f: F,
    ) -> Promise<Result<U, DelegationError>> {
        let (p, c) = promise();
        self.try_apply_with_then_as("Trust::try_apply_with_async", arg, f, move |r| {
            c.complete(r)
        });
        p
    }

    /// Runs `f` on the property and forgets it: fire-and-forget delegation, with no callback and
    /// no result. Issued in a completion scope ([`finish`](crate::finish)), it is one of the
    /// scope's tasks until the trustee has run it, so `finish` waits for it. Its order with the
    /// other requests of this worker to the same trustee is kept, as for every request.
    ///
    /// ```
    /// gossamer::run(gossamer::Config::default().workers(2), || {
    ///     let t = gossamer::entrust_on(gossamer::WorkerId::new(1), || 0u64);
    ///     gossamer::finish(|| {
    ///         for k in 1..=10u64 {
    ///             t.post(move |n| *n += k);
    ///         }
    ///     });
    ///     assert_eq!(t.apply(|n| *n), 55);
    /// })
    /// .unwrap();
    /// ```
    ///
    /// # Panics
    /// Outside a gossamer worker. A failure of the request (the closure panicked, the property
    /// is poisoned or dead) ends the run with an error, as an `apply_then`'s does; inside a
    /// completion scope it is the scope's failure, raised by `finish`.
    #[inline]
    #[track_caller]
    pub fn post<F: FnOnce(&mut T) + NoRef>(&self, f: F) {
        self.try_apply_then_as("Trust::post", f, posted);
    }

    /// Runs `f(property, arg)` on the trustee and forgets it, `arg` moved there as with
    /// [`apply_with`](Self::apply_with); otherwise as [`post`](Self::post).
    #[inline]
    #[track_caller]
    pub fn post_with<A: Wire, F: FnOnce(&mut T, A) + NoRef>(&self, arg: A, f: F) {
        self.try_apply_with_then_as("Trust::post_with", arg, f, posted);
    }
}

/// The callback of a posted request: nothing unless it failed.
fn posted(r: Result<(), DelegationError>) {
    if let Err(e) = r {
        panic!("gossamer: Trust::post failed: {e}");
    }
}
