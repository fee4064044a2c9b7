//! Starting and stopping a runtime: builds the ring mesh (one request ring and one response ring
//! per ordered pair of workers), starts the worker threads (optionally pinned), runs the root
//! fibers (`run`'s main on worker 0, or `spmd`'s body on every worker), and stops every worker
//! when the roots are done or something failed.
//!
//! When the roots are done the workers *drain* (DESIGN §3): they keep serving requests,
//! completing responses (so `apply_then` callbacks run), applying clone/drop toggles, flushing
//! batches and running ready fibers until the whole job is quiet: every worker's outgoing batches
//! flushed, every request issued answered, every ring empty (see `WorkerCore::try_finish`). Only
//! then do they stop: fibers still suspended (e.g. on a `join` nobody will satisfy) are dropped
//! (unwound), and each worker drops the properties left in its table, once. So `run`/`spmd`
//! return only after all of that. A fiber that never stops running (or a remote `spawn_on` fiber
//! that never finishes) keeps the job from being quiet, and so keeps `run` from returning.
//! After a failure (a panic in a root or a callback) the workers stop at once, without draining.
//!
//! Pinning (`Config::pin`): worker i is pinned to the i-th CPU of the process's affinity mask;
//! it is skipped when there are more workers than allowed CPUs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::error::Error;
use crate::spawn::Worker;
use crate::wire::ring::{RingLayout, RingMemory};
use crate::worker::{Ends, Shared, WorkerCore, panic_message};

type Root = Box<dyn FnOnce() + Send>;

fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `set` is a plain bitmask; sched_getaffinity fills it for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn pin_to(cpu: usize) {
    // SAFETY: builds a one-CPU mask and applies it to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Builds the rings and runs one root per worker (`None` = serve only).
fn start(config: &Config, roots: Vec<Option<Root>>) -> Result<(), Error> {
    config.validate()?;
    let n = config.workers;
    let layout =
        RingLayout::new(config.slots_per_ring as u32, config.slot_size as u32).map_err(|e| {
            Error::Config(format!(
                "{e} (slots_per_ring must be a power of two, slot_size a multiple of 64)"
            ))
        })?;
    let mut ends: Vec<Ends> = (0..n)
        .map(|_| Ends {
            req_out: (0..n).map(|_| None).collect(),
            req_in: (0..n).map(|_| None).collect(),
            resp_out: (0..n).map(|_| None).collect(),
            resp_in: (0..n).map(|_| None).collect(),
        })
        .collect();
    for c in 0..n {
        for t in 0..n {
            if c == t {
                continue;
            }
            let (p, q) = Arc::new(RingMemory::new_heap(layout)).split();
            ends[c].req_out[t] = Some(p);
            ends[t].req_in[c] = Some(q);
            let (p, q) = Arc::new(RingMemory::new_heap(layout)).split();
            ends[t].resp_out[c] = Some(p);
            ends[c].resp_in[t] = Some(q);
        }
    }
    let nroots = roots.iter().filter(|r| r.is_some()).count();
    let shared = Arc::new(Shared::new(n, nroots));
    let cpus = allowed_cpus();
    let pin = config.pin && !cpus.is_empty() && n <= cpus.len();
    let mut handles = Vec::with_capacity(n);
    for ((id, e), root) in ends.into_iter().enumerate().zip(roots) {
        let shared2 = shared.clone();
        let (slot, stack, slots) = (config.slot_size, config.stack_size, config.slots_per_ring);
        let cpu = pin.then(|| cpus[id % cpus.len()]);
        let h = std::thread::Builder::new()
            .name(format!("gsm-worker-{id}"))
            .spawn(move || {
                if let Some(c) = cpu {
                    pin_to(c);
                }
                let _ = shared2.threads[id].set(std::thread::current());
                let core = WorkerCore::new(id, shared2.clone(), e, slot, stack, slots);
                core.enter(|| {
                    if let Some(root) = root {
                        let sh = shared2.clone();
                        core.spawn_fiber(move || {
                            let r = catch_unwind(AssertUnwindSafe(root));
                            if let Err(p) = r {
                                if !(p.is::<String>() || p.is::<&str>()) {
                                    std::panic::resume_unwind(p);
                                }
                                sh.fail(Error::Panicked {
                                    worker: id,
                                    message: panic_message(&*p),
                                });
                            }
                            if sh.roots_left.fetch_sub(1, Ordering::AcqRel) == 1 {
                                sh.begin_drain();
                            }
                        });
                    }
                    let r = catch_unwind(AssertUnwindSafe(|| core.run_loop()));
                    if let Err(p) = r {
                        shared2.fail(Error::Panicked {
                            worker: id,
                            message: panic_message(&*p),
                        });
                    }
                    core.teardown();
                });
            })
            .map_err(|e| Error::Start(format!("worker thread {id}: {e}")));
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                shared.fail(e);
                break;
            }
        }
    }
    for h in handles {
        if h.join().is_err() {
            shared.fail(Error::Panicked {
                worker: usize::MAX,
                message: "a worker thread died during teardown".into(),
            });
        }
    }
    match shared.failure.lock().ok().and_then(|mut f| f.take()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Runs `main` as a fiber on worker 0 while every worker serves; returns its result once it has
/// returned and the job has drained (every request issued answered, every callback run, every
/// clone/drop applied; see the module docs).
pub fn run<R: Send + 'static>(
    config: Config,
    main: impl FnOnce() -> R + Send + 'static,
) -> Result<R, Error> {
    let out: Arc<Mutex<Option<R>>> = Arc::new(Mutex::new(None));
    let o2 = out.clone();
    let mut roots: Vec<Option<Root>> = (0..config.workers).map(|_| None).collect();
    if let Some(r) = roots.first_mut() {
        *r = Some(Box::new(move || {
            let v = main();
            if let Ok(mut o) = o2.lock() {
                *o = Some(v);
            }
        }));
    }
    start(&config, roots)?;
    let v = out.lock().ok().and_then(|mut o| o.take());
    v.ok_or(Error::Stopped)
}

/// Runs `body` as a fiber on every worker; returns the results by worker id when all are done
/// and the job has drained, as [`run`] does.
pub fn spmd<R: Send + 'static>(
    config: Config,
    body: impl Fn(&Worker) -> R + Send + Sync + 'static,
) -> Result<Vec<R>, Error> {
    let n = config.workers;
    let out: Arc<Mutex<Vec<Option<R>>>> = Arc::new(Mutex::new((0..n).map(|_| None).collect()));
    let body = Arc::new(body);
    let roots = (0..n)
        .map(|id| {
            let (b, o) = (body.clone(), out.clone());
            Some(Box::new(move || {
                let v = b(&Worker { id, count: n });
                if let Ok(mut o) = o.lock() {
                    o[id] = Some(v);
                }
            }) as Root)
        })
        .collect();
    start(&config, roots)?;
    let v: Vec<Option<R>> = out
        .lock()
        .map(|mut o| std::mem::take(&mut *o))
        .unwrap_or_default();
    v.into_iter()
        .collect::<Option<Vec<R>>>()
        .ok_or(Error::Stopped)
}
