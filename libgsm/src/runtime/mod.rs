//! A job's life: [`run`] and [`spmd`] build the ring mesh (one request ring and one response ring
//! per ordered pair of workers), start the worker threads (optionally pinned), run the root fibers
//! (`run`'s main on each rank's first worker, or `spmd`'s body on every worker), wait until the
//! whole job is quiet, and stop every worker; [`fail_job`] ends a job early. What a worker does
//! in between (scheduling, serving, polling) is the worker's; how bytes reach another rank is the
//! fabrics'; who the ranks are is the bootstrap's. How a run ends on every rank together (fate
//! sharing, the termination waves) is written in `runtime/README.md`.
//!
//! **One rank or many.** A program started by a launcher (`gsmrun`, `mpirun`, `srun`: see
//! `job.rs`) is one rank of a job: the first `run`/`spmd` bootstraps the job over MPI, each call
//! connects the fabrics to the other ranks (`start.rs`, `fabrics.rs`), and every worker of every
//! rank is in one mesh (global worker ids number the workers rank by rank). A program started on
//! its own is a job of one rank and never touches MPI, so `cargo run` and `cargo test` work as
//! they are.
//!
//! When the roots are done the workers *drain*: they keep serving requests, completing responses
//! (so `apply_then` callbacks run), applying clone/drop toggles, flushing batches and running
//! ready fibers until the whole job is quiet: every worker's outgoing batches flushed, every
//! request issued answered, every ring empty (see `WorkerCore::try_finish`; across ranks,
//! `quiesce::terminate`). Only then do they stop: fibers still suspended (e.g. on a `join` nobody
//! will satisfy) are dropped (unwound), and each worker drops the properties left in its table,
//! once. So `run`/`spmd` return only after all of that. A fiber that never stops running (or a
//! remote `spawn_on` fiber that never finishes) keeps the job from being quiet, and so keeps `run`
//! from returning. After a failure (a panic in a root or a callback, a peer that vanished) the
//! workers stop at once, without draining.
//!
//! Pinning (`Config::pin`): worker i is pinned to the i-th CPU of the process's affinity mask;
//! it is skipped when there are more workers than allowed CPUs.
//!
//! # Logging
//!
//! The runtime logs through `tracing`, off by default. Set `GSM_LOG` (or, when it is unset,
//! `RUST_LOG`) to a filter (`GSM_LOG=debug`, `GSM_LOG=gossamer::quiesce=trace`) and the first
//! `run`/`spmd` of the process installs a subscriber that writes to standard error, unless the
//! program installed its own, which is then used as it is. Targets: `gossamer::bootstrap` (the
//! bootstrap's stages and their times), `gossamer::fabric` (the fabric chosen for each peer rank
//! and why), `gossamer::ring` (slot size, slots per ring, memory), `gossamer::worker` (workers
//! started), `gossamer::quiesce` (each termination wave's totals, the end verdict); `log.rs` has
//! the table of what each says at which level. Nothing is logged per request.

mod fabrics;
mod handoff;
mod job;
mod log;
mod memory;
mod mesh;
mod offer;
mod panics;
mod quiesce;
mod stall;
mod start;
mod workers;

use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::error::Error;
use crate::spawn::Worker;
use crate::worker::Place;

/// A root fiber's body: `run`'s main, or `spmd`'s body on one worker.
pub(crate) type Root = Box<dyn FnOnce() + Send>;

/// Builds the rings and runs the roots `make_roots` gives for this rank's place in the job
/// (`None` = serve only).
fn start(
    config: &Config,
    make_roots: impl FnOnce(&Place) -> Vec<Option<Root>>,
) -> Result<(), Error> {
    log::init();
    panics::install();
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
    let checked = config
        .validate()
        .and_then(|()| start::check_settings())
        .and_then(|()| memory::layout_of(config));
    if job::launched() {
        // Checked together: a rank alone refusing its configuration would leave the others
        // waiting for it in the run's first collective call.
        return job::start(config, checked, make_roots);
    }
    let layout = checked?;
    start::check_unused_settings()?;
    let place = Place::single(config.workers);
    let roots = make_roots(&place);
    start::start_single(config, place, layout, roots)
}

/// Runs `main` as a fiber on the first worker of this rank while every worker serves; returns
/// its result once it has returned and the job has drained (every request issued answered,
/// every callback run, every clone/drop applied; see the module docs).
///
/// Under a launcher with N ranks, `main` runs once on every rank (as an MPI program's `main`
/// does), each rank's call returns its own result, and delegation reaches every worker of every
/// rank; use [`rank`](crate::rank) to give ranks different roles. A multi-rank `run` is
/// collective: every rank must call it, in the same order as its other `run`/`spmd` calls.
///
/// The first `run` or [`spmd`] of a process turns on the runtime's log (through `tracing`, on
/// standard error) when `GSM_LOG` or `RUST_LOG` is set, unless the program installed a
/// subscriber of its own: `GSM_LOG=debug` shows the bootstrap, the fabrics, the rings, the
/// workers and how the job ended.
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
                let _main = crate::spawn::RunMain::enter();
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
