//! This rank's worker threads: starting one per local worker (named, sized for serving on its
//! own stack, optionally pinned), each running its root fiber and then the scheduler loop, and
//! joining them into the run's result. What a worker does meanwhile is the worker's
//! (`WorkerCore::run_loop`); when to stop them is the caller's.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use super::Root;
use crate::config::Config;
use crate::error::Error;
use crate::worker::{Ends, Shared, WorkerCore, fiber_panic, panic_message};

/// Starts one thread per local worker, each running its root (if any) as a fiber and then the
/// scheduler loop until the runtime stops.
pub(crate) fn spawn_workers(
    config: &Config,
    shared: &Arc<Shared>,
    ends: Vec<Ends>,
    roots: Vec<Option<Root>>,
) -> Vec<JoinHandle<()>> {
    let n = shared.place.local;
    let rank = shared.place.rank;
    let cpus = crate::sys::proc::allowed_cpus();
    let pin = config.pin && !cpus.is_empty() && n <= cpus.len();
    let thread_stack = crate::fiber::worker_thread_stack(config.stack_size);
    tracing::info!(
        target: "gossamer::worker",
        rank,
        workers = n,
        first = shared.place.base,
        pinned = pin,
        fiber_stack = config.stack_size,
        thread_stack,
        "starting workers"
    );
    let mut handles = Vec::with_capacity(n);
    for ((local, e), root) in ends.into_iter().enumerate().zip(roots) {
        let global = shared.place.base + local;
        let cpu = pin.then(|| cpus[local % cpus.len()]);
        let h = std::thread::Builder::new()
            .name(format!("gsm-worker-{global}"))
            .stack_size(thread_stack)
            .spawn({
                let shared = shared.clone();
                let sizes = (config.slot_size, config.stack_size, config.slots_per_ring);
                move || worker_thread(sizes, shared, local, e, root, cpu)
            })
            .map_err(|e| {
                Error::Start(format!(
                    "worker thread {global}, with a stack of {thread_stack} bytes (the fiber \
                     stack size plus 64 KiB, at least 2 MiB; lower GSM_STACK_SIZE or \
                     Config::stack_size if the address space is short): {e}"
                ))
            });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                shared.fail(e);
                break;
            }
        }
    }
    handles
}

/// The body of worker `local`'s thread: pins it, runs its root as a fiber, then its scheduler
/// loop, then its teardown (`sizes`: slot size, fiber stack size, slots per ring).
fn worker_thread(
    (slot, stack, slots): (usize, usize, usize),
    shared2: Arc<Shared>,
    local: usize,
    e: Ends,
    root: Option<Root>,
    cpu: Option<usize>,
) {
    let rank = shared2.place.rank;
    let global = shared2.place.base + local;
    if let Some(c) = cpu {
        crate::sys::proc::pin_to(c);
    }
    let core = WorkerCore::new(local, shared2.clone(), e, slot, stack, slots);
    core.enter(|| {
        if let Some(root) = root {
            let sh = shared2.clone();
            // A root that cannot start ends the job with the reason; a panic here would end
            // this thread unseen, and the other workers and ranks would wait for its root for
            // ever.
            let started = core.try_spawn_fiber(move || {
                let r = catch_unwind(AssertUnwindSafe(root));
                if let Err(p) = r {
                    sh.fail(Error::Panicked {
                        rank,
                        worker: global,
                        message: fiber_panic(p),
                    });
                }
                if sh.roots_left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    sh.begin_drain();
                }
            });
            if let Err(e) = started {
                shared2.fail(Error::Start(format!(
                    "the root fiber of worker {global}: {e}"
                )));
            }
        }
        let r = catch_unwind(AssertUnwindSafe(|| core.run_loop()));
        if let Err(p) = r {
            shared2.fail(Error::Panicked {
                rank,
                worker: global,
                message: panic_message(&*p),
            });
        }
        core.teardown();
    });
}

/// Joins the worker threads and returns the runtime's first failure, if any.
pub(crate) fn join_workers(shared: &Shared, handles: Vec<JoinHandle<()>>) -> Result<(), Error> {
    for h in handles {
        if h.join().is_err() {
            shared.fail(Error::Panicked {
                rank: shared.place.rank,
                worker: usize::MAX,
                message: "a worker thread died during teardown".into(),
            });
        }
    }
    match shared.failure.lock().ok().and_then(|mut f| f.take()) {
        Some(Error::Deadlock { rank, .. }) => {
            // The workers said in their teardown what their fibers waited for.
            let mut by_worker = shared.waits.lock().map(|w| w.clone()).unwrap_or_default();
            by_worker.sort();
            let waits = by_worker
                .into_iter()
                .map(|(w, what)| format!("worker {w}: {}", what.join(", ")))
                .collect();
            Err(Error::Deadlock { rank, waits })
        }
        Some(e) => Err(e),
        None => Ok(()),
    }
}
