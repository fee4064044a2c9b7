//! Execution contexts on a worker: how deep the running code is in delegated closures and in
//! callbacks, and running code one level deeper with its panic caught. What running a closure
//! on a property means (lookup, poisoning) is delegation's, in `trust/serve.rs`; whether a fiber
//! runs is the scheduler's.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// One level of delegated closure, and one of callback, in a [`Context`].
pub(crate) const DELEGATED: u64 = 1;
pub(crate) const CALLBACK: u64 = 1 << 32;

/// A value alone in its cache line: its neighbours in a struct are not next to it, so the
/// compiler cannot merge an update of it with one of theirs into one wide load and store.
#[repr(align(64))]
#[derive(Debug, Default)]
struct Lone<T>(T);

/// How deep the running code is in delegated closures (`DELEGATED` each, the low half) and in
/// callbacks (`CALLBACK` each, the high half); 0 outside both. One word, so that an inline
/// `apply_then` enters its closure's and then its callback's context with one store each and
/// leaves with one.
///
/// Alone in its cache line: next to the pending table's borrow flag, the compiler merged the
/// release of that borrow and the step into callback context into one 16-byte load and store,
/// and the load, overlapping the flag's 8-byte store just before it, waited for that store to
/// retire (a failed store-to-load forward).
#[derive(Debug, Default)]
pub(crate) struct Context {
    depth: Lone<Cell<u64>>,
}

impl Context {
    /// The current level, for [`set`](Self::set) to put back.
    #[inline(always)]
    pub(crate) fn level(&self) -> u64 {
        self.depth.0.get()
    }

    /// Sets the level: one of [`level`](Self::level)'s values plus steps, or one read before.
    ///
    /// The level is restored by storing the value read before, not by a decrement: an increment
    /// and a decrement of the same word are two dependent read-modify-writes per closure, and in
    /// a loop of inline applies they made a chain through memory that every iteration waited on.
    #[inline(always)]
    pub(crate) fn set(&self, level: u64) {
        self.depth.0.set(level);
    }

    /// Whether code runs outside every delegated closure and callback.
    #[inline(always)]
    pub(crate) fn outside(&self) -> bool {
        self.level() == 0
    }

    /// Whether a delegated closure runs (at any depth, callbacks aside).
    #[inline(always)]
    pub(crate) fn in_delegated(&self) -> bool {
        self.level() as u32 != 0
    }

    /// Runs `f` one level deeper (`step` is [`DELEGATED`] or [`CALLBACK`]), catching a panic,
    /// and puts the level back as it was.
    #[inline(always)]
    pub(crate) fn caught<R>(&self, step: u64, f: impl FnOnce() -> R) -> std::thread::Result<R> {
        let level = self.level();
        self.set(level + step);
        let r = catch_unwind(AssertUnwindSafe(f));
        self.set(level);
        r
    }
}
