//! [`Bridge`]: how a thread that is no worker (a tokio runtime's, say) issues Gossamer
//! operations. It submits jobs, each a closure that starts an operation and returns its
//! [`Promise`]; a fiber on a worker serves the bridge, running each job in a fiber of its own;
//! the promise the thread gets back completes with the job's result, and its waker is called
//! from that worker. A queue and a flag, nothing more: it does not pick a worker for a job (the
//! serving fiber's worker runs them all) or bound the queue.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::future::{Promise, promise_at};
use crate::worker::core_or_panic;

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Inner {
    jobs: Mutex<VecDeque<Job>>,
    /// Jobs in `jobs`: the serving fiber's condition reads it without the lock.
    queued: AtomicUsize,
    closed: AtomicBool,
}

/// A queue of jobs from any thread to a fiber that serves them ([`serve`](Bridge::serve)).
/// Clones share the queue.
///
/// ```
/// use gossamer::{Bridge, Config, WorkerId};
///
/// gossamer::run(Config::default().workers(2), || {
///     let counter = gossamer::entrust_on(WorkerId::new(1), || 0u64);
///     let bridge = Bridge::new();
///     let b = bridge.clone();
///     // A thread that is no worker: it submits, and waits with an executor of its own (here
///     // a plain `std` wait, through the promise's `is_ready`).
///     let user = std::thread::spawn(move || {
///         let p = b.submit(move || counter.apply_async(|n| { *n += 5; *n }));
///         while !p.is_ready() { std::thread::yield_now(); }
///         b.close();
///         p
///     });
///     bridge.serve();
///     let p = user.join().unwrap();
///     assert_eq!(p.wait(), 5);
/// })
/// .unwrap();
/// ```
#[derive(Clone, Default)]
pub struct Bridge {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("queued", &self.inner.queued.load(Ordering::Relaxed))
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Bridge {
    pub fn new() -> Bridge {
        Bridge::default()
    }

    /// From any thread: has the serving worker run `job` (in a fiber of its own, so it may
    /// block) and returns the promise of its result. A panic of the job, or the failure of the
    /// promise it returns, is this promise's failure. A job submitted after
    /// [`close`](Self::close) is still run if the server has not returned yet, else never (its
    /// promise fails when the bridge is dropped).
    pub fn submit<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> Promise<T> + Send + 'static,
    ) -> Promise<T> {
        let (p, c) = promise_at(0);
        let run: Job = Box::new(move || {
            drop(crate::spawn::spawn(move || {
                match catch_unwind(AssertUnwindSafe(move || job().wait())) {
                    Ok(v) => c.complete(v),
                    Err(e) => c.fail(crate::worker::panic_message(&*e)),
                }
            }));
        });
        let mut jobs = self.inner.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.push_back(run);
        self.inner.queued.store(jobs.len(), Ordering::Release);
        p
    }

    /// Tells the server to return once the jobs submitted so far have been started.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
    }

    /// Serves the bridge until it is closed and empty: call it in a fiber on the worker that
    /// should issue the jobs. While it waits for jobs its worker does not sleep for long (it
    /// looks at the queue between its other work) and the run is not quiet: close the bridge
    /// when its users are done.
    ///
    /// # Panics
    /// Outside a fiber, or in a delegated closure or a callback.
    #[track_caller]
    pub fn serve(&self) {
        let core = core_or_panic("Bridge::serve");
        loop {
            let batch = {
                let mut jobs = self.inner.jobs.lock().unwrap_or_else(|e| e.into_inner());
                self.inner.queued.store(0, Ordering::Release);
                std::mem::take(&mut *jobs)
            };
            let none = batch.is_empty();
            for job in batch {
                job();
            }
            if none && self.inner.closed.load(Ordering::Acquire) {
                return;
            }
            core.wait_in_flight(&mut || {
                self.inner.queued.load(Ordering::Acquire) > 0
                    || self.inner.closed.load(Ordering::Acquire)
            });
        }
    }
}
