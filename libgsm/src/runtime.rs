//! Starting and stopping a runtime: builds the ring mesh (one request ring and one response ring
//! per ordered pair of workers), starts the worker threads (optionally pinned), runs the root
//! fibers (`run`'s main on each rank's first worker, or `spmd`'s body on every worker), and stops
//! every worker when the roots are done or something failed.
//!
//! **One rank or many.** A program started by a launcher (`gsmrun`, `mpirun`, `srun`: see
//! [`crate::cluster`]) is one rank of a job: the first `run`/`spmd` bootstraps the job over MPI,
//! each call connects the fabrics to the other ranks, and every worker of every rank is in one
//! mesh (global worker ids number the workers rank by rank). A program started on its own is a
//! job of one rank and never touches MPI, so `cargo run` and `cargo test` work as they are.
//!
//! When the roots are done the workers *drain* (DESIGN §3): they keep serving requests,
//! completing responses (so `apply_then` callbacks run), applying clone/drop toggles, flushing
//! batches and running ready fibers until the whole job is quiet: every worker's outgoing batches
//! flushed, every request issued answered, every ring empty (see `WorkerCore::try_finish`; across
//! ranks, `cluster::terminate`). Only then do they stop: fibers still suspended (e.g. on a `join`
//! nobody will satisfy) are dropped (unwound), and each worker drops the properties left in its
//! table, once. So `run`/`spmd` return only after all of that. A fiber that never stops running
//! (or a remote `spawn_on` fiber that never finishes) keeps the job from being quiet, and so keeps
//! `run` from returning. After a failure (a panic in a root or a callback, a peer that vanished)
//! the workers stop at once, without draining.
//!
//! Pinning (`Config::pin`): worker i is pinned to the i-th CPU of the process's affinity mask;
//! it is skipped when there are more workers than allowed CPUs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::config::Config;
use crate::error::Error;
use crate::fabric::Doorbell;
use crate::spawn::Worker;
use crate::wire::ring::{RingLayout, RingMemory};
use crate::worker::{Ends, Place, Shared, WorkerCore, fiber_panic, panic_message};

pub(crate) type Root = Box<dyn FnOnce() + Send>;

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

/// The ring geometry of `config`.
pub(crate) fn layout_of(config: &Config) -> Result<RingLayout, Error> {
    // Both are 32-bit in a ring's layout: larger values are refused, not wrapped.
    let (Ok(slots), Ok(slot_size)) = (
        u32::try_from(config.slots_per_ring),
        u32::try_from(config.slot_size),
    ) else {
        return Err(Error::Config(format!(
            "slots_per_ring = {}, slot_size = {} bytes (each must be below 2^32)",
            config.slots_per_ring, config.slot_size
        )));
    };
    let layout = RingLayout::new(slots, slot_size).map_err(|e| {
        Error::Config(format!(
            "{e} (slots_per_ring must be a power of two, slot_size a multiple of 64)"
        ))
    })?;
    rings_fit_in_memory(config, physical_memory())?;
    Ok(layout)
}

/// Bytes of RAM this machine has, if the system says.
pub(crate) fn physical_memory() -> Option<u128> {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page > 0).then(|| pages as u128 * page as u128)
}

/// Refuses a ring geometry whose rings alone would not fit in `memory` bytes. The rings between
/// this rank's own workers take `2 × workers² × slots_per_ring × slot_size` bytes (the rings to
/// other ranks' workers come on top, checked by [`job_rings_fit`] once the job is known); a geometry past the machine's memory aborted the process
/// on a failed allocation (`slots_per_ring(1 << 30)`), or ran it out of memory for minutes
/// (`workers(4096)` with the default slots: about 2.2 TB).
pub(crate) fn rings_fit_in_memory(config: &Config, memory: Option<u128>) -> Result<(), Error> {
    let Some(memory) = memory else {
        return Ok(());
    };
    let w = config.workers as u128;
    let need = 2 * w * w * config.slots_per_ring as u128 * config.slot_size as u128;
    if need > memory {
        return Err(Error::Config(format!(
            "{} workers with {} slots of {} bytes per ring need {} GiB of rings between them, \
             more than this machine's {} GiB of memory; lower workers, slots_per_ring or \
             slot_size (GSM_THREADS, GSM_SLOT_SIZE)",
            config.workers,
            config.slots_per_ring,
            config.slot_size,
            need >> 30,
            memory >> 30
        )));
    }
    Ok(())
}

/// Refuses a job whose rings on host `host` would not fit in its `memory` bytes, once every
/// rank's worker count is known (`workers[r]` for rank `r` on `hosts[r]`).
///
/// Every worker consumes a request ring and a response ring from every other worker of the job,
/// and the rings a worker consumes live on its host, whatever the fabric (heap, a shared
/// segment, or a tcp fabric's receiving side). So the workers of `host` need at least
/// `2 × their number × (job's workers − 1) × slots × slot size` bytes. That grows with the
/// whole job, which [`rings_fit_in_memory`] (this rank's workers alone) cannot see: two ranks
/// of three workers with 64 MiB slots passed it and were killed by the kernel's OOM killer,
/// with nothing said.
pub(crate) fn job_rings_fit(
    workers: &[u32],
    hosts: &[String],
    host: &str,
    layout: RingLayout,
    memory: Option<u128>,
) -> Result<(), Error> {
    let Some(memory) = memory else {
        return Ok(());
    };
    let total: u128 = workers.iter().map(|&w| u128::from(w)).sum();
    let (ranks, here) = workers
        .iter()
        .zip(hosts)
        .filter(|(_, h)| h.as_str() == host)
        .fold((0u32, 0u128), |(n, w), (&x, _)| (n + 1, w + u128::from(x)));
    let ring = u128::from(layout.slots) * u128::from(layout.slot_size);
    let need = 2 * here * total.saturating_sub(1) * ring;
    if need > memory {
        return Err(Error::Config(format!(
            "the job's {total} workers with {} slots of {} bytes per ring need at least {} GiB of \
             rings on host {host} ({ranks} rank(s), {here} workers there), more than its {} GiB \
             of memory; lower the workers per rank, slots_per_ring or slot_size (gsmrun -t, \
             GSM_THREADS, GSM_SLOT_SIZE), or spread the ranks over more hosts",
            layout.slots,
            layout.slot_size,
            need >> 30,
            memory >> 30
        )));
    }
    Ok(())
}

/// Empty ring ends for this rank's workers, with heap rings between every two of them.
pub(crate) fn local_mesh(place: &Place, layout: RingLayout) -> Vec<Ends> {
    let w = place.total;
    let mut ends: Vec<Ends> = (0..place.local)
        .map(|_| Ends {
            req_out: (0..w).map(|_| None).collect(),
            req_in: (0..w).map(|_| None).collect(),
            resp_out: (0..w).map(|_| None).collect(),
            resp_in: (0..w).map(|_| None).collect(),
        })
        .collect();
    for c in 0..place.local {
        for t in 0..place.local {
            if c == t {
                continue;
            }
            let (gc, gt) = (place.base + c, place.base + t);
            let (p, q) = Arc::new(RingMemory::new_heap(layout)).split();
            ends[c].req_out[gt] = Some(p);
            ends[t].req_in[gc] = Some(q);
            let (p, q) = Arc::new(RingMemory::new_heap(layout)).split();
            ends[t].resp_out[gc] = Some(p);
            ends[c].resp_in[gt] = Some(q);
        }
    }
    ends
}

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
    let cpus = allowed_cpus();
    let pin = config.pin && !cpus.is_empty() && n <= cpus.len();
    let mut handles = Vec::with_capacity(n);
    for ((local, e), root) in ends.into_iter().enumerate().zip(roots) {
        let shared2 = shared.clone();
        let global = shared.place.base + local;
        let (slot, stack, slots) = (config.slot_size, config.stack_size, config.slots_per_ring);
        let cpu = pin.then(|| cpus[local % cpus.len()]);
        let thread_stack = crate::fiber::worker_thread_stack(stack);
        let h = std::thread::Builder::new()
            .name(format!("gsm-worker-{global}"))
            .stack_size(thread_stack)
            .spawn(move || {
                if let Some(c) = cpu {
                    pin_to(c);
                }
                let core = WorkerCore::new(local, shared2.clone(), e, slot, stack, slots);
                core.enter(|| {
                    if let Some(root) = root {
                        let sh = shared2.clone();
                        // A root that cannot start ends the job with the reason; a panic here
                        // would end this thread unseen, and the other workers and ranks would
                        // wait for its root for ever.
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

/// Builds the rings and runs the roots `make_roots` gives for this rank's place in the job
/// (`None` = serve only).
fn start(
    config: &Config,
    make_roots: impl FnOnce(&Place) -> Vec<Option<Root>>,
) -> Result<(), Error> {
    // A run inside a run (from one of its fibers) would stop the calling worker from serving
    // its trustees, and everyone delegating to them, for as long as the inner run lasts; in a
    // launched job it is refused by the job's lock as well. Refused the same way everywhere, so
    // that a program tried alone behaves as it will under `gsmrun`.
    if crate::worker::core().is_some() {
        return Err(Error::Config(
            "gossamer::run/spmd was called from inside a running gossamer worker; runs cannot \
             nest (start more fibers with spawn or spawn_on instead)"
                .into(),
        ));
    }
    let checked = config.validate().and_then(|()| layout_of(config));
    if crate::cluster::launched() {
        // Checked together: a rank alone refusing its configuration would leave the others
        // waiting for it in the run's first collective call.
        return crate::cluster::start(config, checked, make_roots);
    }
    let layout = checked?;
    crate::cluster::check_unused_settings()?;
    let place = Place::single(config.workers);
    let roots = make_roots(&place);
    start_single(config, place, layout, roots)
}

/// Runs a job of one rank.
pub(crate) fn start_single(
    config: &Config,
    place: Place,
    layout: RingLayout,
    roots: Vec<Option<Root>>,
) -> Result<(), Error> {
    let n = place.local;
    let ends = local_mesh(&place, layout);
    let nroots = roots.iter().filter(|r| r.is_some()).count();
    let doors = (0..n).map(|_| Doorbell::heap()).collect();
    let bells = (0..place.total).map(|_| None).collect();
    let shared = Arc::new(Shared::new(place, doors, bells, nroots, false));
    if nroots == 0 {
        shared.begin_drain();
    }
    let handles = spawn_workers(config, &shared, ends, roots);
    join_workers(&shared, handles)
}

/// Runs `main` as a fiber on the first worker of this rank while every worker serves; returns
/// its result once it has returned and the job has drained (every request issued answered,
/// every callback run, every clone/drop applied; see the module docs).
///
/// Under a launcher with N ranks, `main` runs once on every rank (as an MPI program's `main`
/// does), each rank's call returns its own result, and delegation reaches every worker of every
/// rank; use [`rank`](crate::rank) to give ranks different roles. A multi-rank `run` is
/// collective: every rank must call it, in the same order as its other `run`/`spmd` calls.
pub fn run<R: Send + 'static>(
    config: Config,
    main: impl FnOnce() -> R + Send + 'static,
) -> Result<R, Error> {
    let out: Arc<Mutex<Option<R>>> = Arc::new(Mutex::new(None));
    let o2 = out.clone();
    start(&config, move |place| {
        let mut roots: Vec<Option<Root>> = (0..place.local).map(|_| None).collect();
        if let Some(r) = roots.first_mut() {
            *r = Some(Box::new(move || {
                let v = main();
                if let Ok(mut o) = o2.lock() {
                    *o = Some(v);
                }
            }));
        }
        roots
    })?;
    let v = out.lock().ok().and_then(|mut o| o.take());
    v.ok_or(Error::Stopped)
}

/// Ends the whole job for a failure the caller cannot recover from, then panics with `message`
/// so that the calling fiber unwinds.
///
/// A plain `panic!` in a fiber started by [`spawn`](crate::spawn) is caught and handed to its
/// `JoinHandle`: if the joiner carries on (it uses [`try_join`](crate::JoinHandle::try_join))
/// the job goes on too. That is right for a local mistake, but not for one that leaves other
/// workers or ranks waiting on this one (a collective whose members disagree, say): they would
/// wait for ever. `fail_job` first records [`Error::Panicked`] with this worker's rank and id and
/// `message` as the job's failure, which stops every worker of this rank and so ends the job on
/// every rank (as a panic of a root fiber does), and only then panics. Outside a worker there is
/// no job to end, and it only panics.
///
/// ```
/// let r = gossamer::spmd(gossamer::Config::default().workers(2), |_| {
///     let h = gossamer::spawn(|| gossamer::fail_job("the peers disagree"));
///     // The job is ending whatever this fiber does now.
///     let _ignored = h.try_join();
/// });
/// assert!(matches!(r, Err(gossamer::Error::Panicked { message, .. }) if message == "the peers disagree"));
/// ```
#[cold]
#[track_caller]
pub fn fail_job(message: impl std::fmt::Display) -> ! {
    let message = message.to_string();
    if let Some(core) = crate::worker::core() {
        core.shared.fail(Error::Panicked {
            rank: core.shared.place.rank,
            worker: core.id,
            message: message.clone(),
        });
    }
    panic!("{message}")
}

/// Runs `body` as a fiber on every worker (of every rank, under a launcher); returns this rank's
/// workers' results, in the order of their worker ids, when all are done and the job has
/// drained, as [`run`] does.
pub fn spmd<R: Send + 'static>(
    config: Config,
    body: impl Fn(&Worker) -> R + Send + Sync + 'static,
) -> Result<Vec<R>, Error> {
    let n = config.workers;
    let out: Arc<Mutex<Vec<Option<R>>>> = Arc::new(Mutex::new((0..n).map(|_| None).collect()));
    let body = Arc::new(body);
    let o2 = out.clone();
    start(&config, move |place| {
        (0..place.local)
            .map(|local| {
                let (b, o) = (body.clone(), o2.clone());
                let w = Worker {
                    id: place.base + local,
                    count: place.total,
                    rank: place.rank as usize,
                };
                Some(Box::new(move || {
                    let v = b(&w);
                    if let Ok(mut o) = o.lock() {
                        o[local] = Some(v);
                    }
                }) as Root)
            })
            .collect()
    })?;
    let v: Vec<Option<R>> = out
        .lock()
        .map(|mut o| std::mem::take(&mut *o))
        .unwrap_or_default();
    v.into_iter()
        .collect::<Option<Vec<R>>>()
        .ok_or(Error::Stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rings_of_a_host_grow_with_the_whole_job() {
        const GIB: u128 = 1 << 30;
        let layout = RingLayout {
            slots: 16,
            slot_size: 64 << 20,
        };
        let hosts = |h: &[&str]| h.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Two ranks of three workers on one host: 2 x 6 x 5 rings of 1 GiB consumed there.
        let one_host = hosts(&["a", "a"]);
        assert!(job_rings_fit(&[3, 3], &one_host, "a", layout, Some(60 * GIB)).is_ok());
        let e = job_rings_fit(&[3, 3], &one_host, "a", layout, Some(59 * GIB)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid gossamer configuration: the job's 6 workers with 16 slots of 67108864 bytes \
             per ring need at least 60 GiB of rings on host a (2 rank(s), 6 workers there), more \
             than its 59 GiB of memory; lower the workers per rank, slots_per_ring or slot_size \
             (gsmrun -t, GSM_THREADS, GSM_SLOT_SIZE), or spread the ranks over more hosts"
        );
        // Spread over two hosts, each holds the rings its own workers consume: 2 x 3 x 5.
        let two_hosts = hosts(&["a", "b"]);
        assert!(job_rings_fit(&[3, 3], &two_hosts, "b", layout, Some(30 * GIB)).is_ok());
        assert!(job_rings_fit(&[3, 3], &two_hosts, "b", layout, Some(29 * GIB)).is_err());
        // Memory unknown: nothing to check against.
        assert!(job_rings_fit(&[3, 3], &one_host, "a", layout, None).is_ok());
    }
}
