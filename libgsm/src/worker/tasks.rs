//! The task counts of completion scopes ([`crate::finish`]): which scope the running code belongs
//! to, and, per worker, how many tasks of each scope were started and finished here. It counts;
//! it does not decide when a scope is done (the waves of `scope.rs` do) and sends nothing.
//!
//! A *task* of a scope is a request started with `apply_then`/`apply_with_then` (from its issue
//! until its callback has run, both on the issuing worker), a fiber started with `spawn`,
//! `spawn_on` or `spawn_on_with` (from the spawn, counted on the spawning worker, until it
//! returns, counted on the worker it ran on), a blocking `apply`/`apply_with` to another worker
//! (while its fiber waits), and the scope's body. Code runs *in* a scope when
//! it is the body, a task's fiber, a task's callback, or a closure delegated from code in the
//! scope (blocking `apply` included, whose closure carries the scope to its trustee); what such
//! code starts is a task of the same scope. The scope travels inside the delegated closure (its
//! word is captured beside the user's), so the wire and the workers' loops do not know of it;
//! the fiber-local word lives in `fiber.rs`. See ARCHITECTURE.md.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::fiber;

/// One scope's counts on this worker.
struct Count {
    scope: u64,
    started: u64,
    finished: u64,
    /// The first panic of a task of the scope that ran here.
    failure: Option<String>,
}

thread_local! {
    static COUNTS: RefCell<Vec<Count>> = const { RefCell::new(Vec::new()) };
    /// The index in `COUNTS` last used (scopes nest, so a handful are live).
    static LAST: Cell<usize> = const { Cell::new(0) };
    /// The scopes opened on this worker and not closed, by sequence number.
    static OPEN: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Sequence numbers of scopes, unique in the process (so also across runs on one thread).
static SEQ: AtomicU32 = AtomicU32::new(1);

/// The scope the running code belongs to (0: none).
#[inline(always)]
pub(crate) fn current() -> u64 {
    fiber::scope()
}

/// The worker a scope was opened on.
pub(crate) fn home(scope: u64) -> usize {
    (scope >> 32) as usize - 1
}

/// Opens a new scope whose home is worker `home`.
pub(crate) fn open(home: usize) -> u64 {
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    OPEN.with(|o| o.borrow_mut().push(seq));
    ((home as u64 + 1) << 32) | u64::from(seq)
}

/// The word of the `seq`-th collective scope of the run ([`crate::finish_all`]): the same on
/// every worker (each counts its own calls, which all make in the same order); its home part,
/// `u32::MAX`, is no worker's, so the clean-up of [`probe`] never takes its counts.
pub(crate) fn collective(seq: u32) -> u64 {
    (u64::from(u32::MAX) << 32) | u64::from(seq)
}

/// Forgets this worker's counts of the done collective `scope` (every worker does).
pub(crate) fn forget(scope: u64) {
    COUNTS.with(|c| c.borrow_mut().retain(|e| e.scope != scope));
}

/// Closes `scope` on its home: its counts here are forgotten; those on other workers go with the
/// next probe from this home (see [`probe`]).
pub(crate) fn close(scope: u64) {
    OPEN.with(|o| o.borrow_mut().retain(|&s| s != scope as u32));
    COUNTS.with(|c| c.borrow_mut().retain(|e| e.scope != scope));
}

/// The lowest sequence number still open on this worker (every scope of this home below it is
/// closed), or `u32::MAX`.
pub(crate) fn floor() -> u32 {
    OPEN.with(|o| o.borrow().iter().copied().min().unwrap_or(u32::MAX))
}

/// Runs `f` on this worker's counts of `scope`, made if missing.
#[inline]
fn with_count<R>(scope: u64, f: impl FnOnce(&mut Count) -> R) -> R {
    COUNTS.with(|c| {
        let mut c = c.borrow_mut();
        let last = LAST.with(Cell::get);
        let i = match c.get(last) {
            Some(e) if e.scope == scope => last,
            _ => match c.iter().position(|e| e.scope == scope) {
                Some(i) => i,
                None => {
                    c.push(Count {
                        scope,
                        started: 0,
                        finished: 0,
                        failure: None,
                    });
                    c.len() - 1
                }
            },
        };
        LAST.with(|l| l.set(i));
        f(&mut c[i])
    })
}

/// Counts a task of `scope` started here.
#[inline]
pub(crate) fn started(scope: u64) {
    with_count(scope, |c| c.started += 1);
}

/// Counts a task of `scope` finished here, with its panic if it had one.
#[inline]
pub(crate) fn finished(scope: u64, failure: Option<String>) {
    with_count(scope, |c| {
        if c.failure.is_none() {
            c.failure = failure;
        }
        c.finished += 1;
    });
}

/// Puts back the scope a [`within`] replaced, also when its code unwinds.
struct Restore(u64);

impl Drop for Restore {
    fn drop(&mut self) {
        fiber::set_scope(self.0);
    }
}

/// Runs `f` in `scope` (0: in none).
#[inline(always)]
pub(crate) fn within<R>(scope: u64, f: impl FnOnce() -> R) -> R {
    let _back = Restore(fiber::set_scope(scope));
    f()
}

/// Runs the callback of a request of `scope` in it, then counts the request finished. A panic
/// of the callback (or the failure `apply_then` turns into one) is the scope's to report, to its
/// caller, so it does not end the run here.
pub(crate) fn callback(scope: u64, then: impl FnOnce()) {
    let r = catch_unwind(AssertUnwindSafe(|| within(scope, then)));
    finished(scope, r.err().map(|p| crate::worker::panic_message(&*p)));
}

/// Runs the body of a fiber of `scope` in it and counts the fiber finished. A panic is recorded
/// for the scope and then goes on as any fiber's panic (to `join`).
pub(crate) fn fiber<R>(scope: u64, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(|| within(scope, f))) {
        Ok(r) => {
            finished(scope, None);
            r
        }
        Err(p) => {
            finished(scope, Some(crate::worker::panic_message(&*p)));
            resume_unwind(p)
        }
    }
}

/// Whether every task of `scope` started on this worker has finished here (its requests'
/// callbacks; its fibers on this worker), as far as this worker's counts show.
pub(crate) fn balanced_here(scope: u64) -> bool {
    with_count(scope, |c| c.started == c.finished)
}

/// How many tasks of `scope` were started on this worker (the body counts as one on its home).
pub(crate) fn started_here(scope: u64) -> u64 {
    with_count(scope, |c| c.started)
}

/// This worker's counts of `scope`: `(started, finished, first failure)`. Counts of closed scopes
/// of the same home (below `floor`, see [`floor`]) are forgotten on the way.
pub(crate) fn probe(scope: u64, floor: u32) -> (u64, u64, Option<String>) {
    COUNTS.with(|c| {
        let mut c = c.borrow_mut();
        let home = scope >> 32;
        c.retain(|e| e.scope == scope || e.scope >> 32 != home || (e.scope as u32) >= floor);
        LAST.with(|l| l.set(0));
        c.iter()
            .find(|e| e.scope == scope)
            .map_or((0, 0, None), |e| (e.started, e.finished, e.failure.clone()))
    })
}
