//! [`block_on`]: a fiber waits for any future, polling it when its waker says so. The waker only
//! sets a flag, from any thread; the worker tests the flag once per turn of its loop
//! (`wait_for`), so the fiber is suspended meanwhile and a wake from another thread (a tokio
//! thread, another worker) needs nothing of that thread but a store. It is not an executor:
//! it polls one future on one fiber, and spawns nothing.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use crate::worker::core_or_panic;

/// The waker of a fiber in [`block_on`].
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// Suspends the calling fiber (not its worker) until `fut` is ready, and returns its output.
///
/// A fiber waiting here counts as waiting for the deadlock watch (as in `wait_for`): a future
/// that only something outside the job can wake (a timer of another runtime, say) must be
/// woken within the watch's second, or the run ends as deadlocked; serve such input through a
/// [`Bridge`](crate::Bridge) instead. For a [`Promise`](crate::Promise) of this worker,
/// [`Promise::wait`](crate::Promise::wait) is cheaper (the completion wakes the fiber itself).
///
/// # Panics
/// Outside a fiber, or in a delegated closure or a callback.
#[track_caller]
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let core = core_or_panic("gossamer::block_on");
    core.assert_can_block();
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        // Cleared before the poll, so that a wake during it is seen after. The condition below
        // only reads: `wait_for` may test it more than once (on the worker, then in the fiber).
        flag.0.store(false, Ordering::Release);
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        core.wait_for(&mut || flag.0.load(Ordering::Acquire));
    }
}
