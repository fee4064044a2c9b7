//! Futures: [`Promise<T>`], the result of an operation already under way, which any executor can
//! await (`std::future::Future`) and a fiber can wait for without an executor
//! ([`Promise::wait`], [`block_on`]); and the combinators [`when_all`] and [`join_all`].
//!
//! **Naming.** Every blocking operation has a non-blocking twin named with the suffix `_async`
//! that starts the operation at once and returns a [`Promise`]: `Trust::apply_async`,
//! `Trust::apply_with_async` (and their `try_` forms), `SegmentRef::get_async`/`put_async`/
//! `fetch_add_async`/`swap_async`/`compare_exchange_async`, `JoinHandle::join_async`,
//! [`recv_async`](crate::recv_async), `Reader::read_exact_async`/`Writer::write_all_async`, and
//! in `gsm-collectives` `Team::barrier_async`, `broadcast_async`, `reduce_async`,
//! `allreduce_async` (MPI's `MPI_Iallreduce`), `allgather_async`. A promise is *eager* (as in
//! UPC++, unlike a Rust `async fn`): the operation runs whether or not anyone polls it, so
//! issuing many and then awaiting them overlaps them. Dropping a promise drops its result (a
//! failure included) when it comes; [`Trust::post`](crate::Trust::post) is the fire-and-forget
//! form whose failure still ends the run.
//!
//! **Where they complete.** A promise is completed on the worker that issued its operation (an
//! `apply_async`'s answer arrives there, as an `apply_then`'s callback does; the other
//! operations run in a fiber of their own on that worker), so the issuing worker must keep
//! running: from a fiber, wait for promises with [`Promise::wait`] or [`block_on`], which
//! suspend the fiber, never `std::thread`-blocking calls.
//!
//! **Other executors.** A `Promise<T>` is `Send` when `T` is, and its `Waker` is honoured from
//! the worker's thread: hand the promise to a tokio task (through a channel, say) and `.await` it
//! there. Operations are issued only on a worker; a thread that is no worker issues them through
//! a [`Bridge`](crate::Bridge), which a fiber serves. The crate's tokio test does both.
//!
//! **Cost.** An `apply_async` is an `apply_then` whose callback completes the promise: one shared
//! allocation and one uncontended lock more per request. Operations without a callback form (the
//! segment's remote operations, `recv`, `join`, streams, collectives) take a fiber each, like
//! the segment's `_nb` forms.
//!
//! This module does not run operations: each module issues its own, completing a promise made by
//! [`promise`] (a fiber's result: `spawn_async` in `spawn.rs`; a thread's job: `bridge.rs`); and
//! it is no executor for futures beyond waiting in one fiber.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crate::worker::{core, core_or_panic};

mod combine;
mod wait;

pub use combine::{JoinAll, WhenAll, join_all, when_all};
pub use wait::block_on;

/// Who waits for a promise.
enum Waiter {
    None,
    /// A task of some executor.
    Task(Waker),
    /// A fiber of the promise's home worker, waiting in [`Promise::wait`].
    Fiber(u32),
}

struct State<T> {
    value: Option<Result<T, String>>,
    waiter: Waiter,
}

struct Shared<T> {
    /// Set (under the lock, after the value) when the value is in.
    done: AtomicBool,
    /// The home word of the worker that completes the promise (0: none, made off the workers).
    home: u64,
    state: Mutex<State<T>>,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while the lock is held can only be in `Waker::clone`; the state stays whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The result of an operation under way: await it, or [`wait`](Promise::wait) for it in a fiber.
/// See the module docs.
#[must_use = "a promise does nothing when dropped but lose its result; use Trust::post to send without one"]
pub struct Promise<T> {
    shared: Arc<Shared<T>>,
}

/// The completing half of a [`Promise`]. Dropped without completing (its operation was dropped
/// with a run that ended), it fails the promise rather than leave its waiter waiting.
pub(crate) struct Completer<T> {
    shared: Option<Arc<Shared<T>>>,
}

/// A promise and its completer, completed on this worker (if called on one).
pub(crate) fn promise<T>() -> (Promise<T>, Completer<T>) {
    promise_at(core().map_or(0, |c| c.home))
}

/// A promise and its completer, completed on the worker of home word `home` (0: on any thread).
pub(crate) fn promise_at<T>(home: u64) -> (Promise<T>, Completer<T>) {
    let shared = Arc::new(Shared {
        done: AtomicBool::new(false),
        home,
        state: Mutex::new(State {
            value: None,
            waiter: Waiter::None,
        }),
    });
    (
        Promise {
            shared: shared.clone(),
        },
        Completer {
            shared: Some(shared),
        },
    )
}

impl<T> Promise<T> {
    /// A promise that holds `value` already.
    pub fn ready(value: T) -> Promise<T> {
        let (p, c) = promise();
        c.complete(value);
        p
    }

    /// A promise that holds a failure already: waiting for it panics with `message`.
    pub(crate) fn failed(message: String) -> Promise<T> {
        let (p, c) = promise();
        c.fail(message);
        p
    }

    /// Whether the result is in (awaiting or waiting would not suspend).
    pub fn is_ready(&self) -> bool {
        self.shared.done.load(Ordering::Acquire)
    }

    /// Suspends the calling fiber (not its worker) until the result is in, and returns it.
    ///
    /// # Panics
    /// With the operation's failure (as its blocking form panics); outside a fiber, or in a
    /// delegated closure or callback, unless the result is in already.
    #[track_caller]
    pub fn wait(self) -> T {
        if !self.is_ready() {
            let core = core_or_panic("Promise::wait");
            if core.home != self.shared.home {
                // Completed by another worker's thread: wait as for any future.
                return block_on(self);
            }
            core.assert_can_block();
            {
                let mut st = self.shared.lock();
                if st.value.is_none() {
                    st.waiter = Waiter::Fiber(core.current_fiber().unwrap_or(u32::MAX));
                }
            }
            core.wait_until(|| self.shared.done.load(Ordering::Acquire));
        }
        self.take()
    }

    /// The result, once in.
    #[track_caller]
    fn take(&self) -> T {
        let v = self.shared.lock().value.take();
        match v {
            Some(Ok(v)) => v,
            Some(Err(m)) => panic!("{m}"),
            None => panic!("gossamer: a Promise was awaited again after it returned its value"),
        }
    }
}

impl<T> Future for Promise<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if !self.is_ready() {
            let mut st = self.shared.lock();
            if st.value.is_none() {
                match &mut st.waiter {
                    Waiter::Task(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Waiter::Task(cx.waker().clone()),
                }
                return Poll::Pending;
            }
        }
        Poll::Ready(self.take())
    }
}

impl<T> std::fmt::Debug for Promise<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Promise")
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl<T> Completer<T> {
    /// Completes the promise with `value`.
    pub(crate) fn complete(self, value: T) {
        self.finish(Ok(value));
    }

    /// Fails the promise: waiting for it panics with `message`.
    pub(crate) fn fail(self, message: String) {
        self.finish(Err(message));
    }

    fn finish(mut self, r: Result<T, String>) {
        if let Some(shared) = self.shared.take() {
            settle(&shared, r);
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            settle(
                &shared,
                Err(
                    "gossamer: the operation of a Promise was dropped unfinished (its run ended)"
                        .into(),
                ),
            );
        }
    }
}

/// Puts the result in and wakes the waiter, outside the lock.
fn settle<T>(shared: &Shared<T>, r: Result<T, String>) {
    let waiter = {
        let mut st = shared.lock();
        st.value = Some(r);
        shared.done.store(true, Ordering::Release);
        std::mem::replace(&mut st.waiter, Waiter::None)
    };
    match waiter {
        Waiter::None => {}
        Waiter::Task(w) => w.wake(),
        Waiter::Fiber(id) => {
            // Registered only on the home worker, which is where promises complete.
            if let Some(c) = core().filter(|c| c.home == shared.home) {
                c.wake_fiber(id);
            }
        }
    }
}

#[cfg(test)]
mod tests;
