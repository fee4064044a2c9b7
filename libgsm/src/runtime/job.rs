//! The process's job: whether this process is one rank of a launched job, the [`Job`] the first
//! launched `run`/`spmd` bootstraps and later ones reuse, and what happens to MPI at exit. It
//! starts nothing itself: each run goes to `start.rs` with the job in hand.
//!
//! **Launched or not.** The process is a rank of a job when a launcher said so in the
//! environment (`GSM_SIZE` from `gsmrun`, `OMPI_COMM_WORLD_SIZE` from Open MPI, `PMI_SIZE` /
//! `PMI_RANK` from Hydra, `PMIX_RANK` from PMIx/`srun`) or when the program initialised MPI
//! itself. Otherwise it is a job of one rank and MPI is never touched.
//!
//! **The job** is bootstrapped once per process, by the first `run`/`spmd` ([`Job::init`], or
//! [`Job::join`] when the program initialised MPI), and kept for later calls. When gossamer
//! initialised MPI, `MPI_Finalize` runs at process exit (an `on_exit` handler), after the last
//! `run`, unless a run failed or the process ends with a failing status: then a peer may be gone,
//! or waiting for this rank in a run it will never join, and finalising could wait forever, so
//! MPI is abandoned and the launcher tears the job down when this process exits. All MPI
//! calls happen on the thread that made the first call (MPI is initialised `FUNNELED`); a
//! multi-rank `run` from another thread is refused.

use std::sync::Mutex;

use super::Root;
use super::start::{agree, check_unused_settings, start_multi, start_single};
use crate::bootstrap::{BootstrapError, Job, Stage};
use crate::config::Config;
use crate::error::Error;
use crate::wire::ring::RingLayout;
use crate::worker::Place;

/// Whether this process is a rank of a launched job (see the module docs).
pub(crate) fn launched() -> bool {
    const VARS: [&str; 4] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"];
    // Set at all, even to a value not understood: the bootstrap then says what is wrong with it.
    let by_gsmrun = !matches!(
        gsm_contract::get::<Option<u32>>(&gsm_contract::table::SIZE),
        Ok(None)
    );
    by_gsmrun || VARS.iter().any(|v| std::env::var_os(v).is_some()) || mpi_initialised_by_program()
}

fn mpi_initialised_by_program() -> bool {
    // Held: a run of this process is under way, so the job is ours.
    let ours = match JOB.try_lock() {
        Ok(j) => j.is_some(),
        Err(std::sync::TryLockError::WouldBlock) => true,
        Err(std::sync::TryLockError::Poisoned(_)) => false,
    };
    !ours && crate::bootstrap::mpi_live()
}

/// The process's job, usable only from the thread that bootstrapped it.
struct ProcessJob {
    job: Job,
    thread: std::thread::ThreadId,
    /// Whether gossamer initialised MPI (and so finalises it at exit).
    owns_mpi: bool,
    /// A run failed: do not finalise (a peer may be gone).
    failed: bool,
}

// SAFETY: the job's MPI handles are only used from `thread` (checked in `with_job` before every
// use); the mutex only moves the box between calls of that same thread and the exit handler,
// which takes it only when no run holds it (and then only abandons or finalises it).
unsafe impl Send for ProcessJob {}

static JOB: Mutex<Option<ProcessJob>> = Mutex::new(None);

/// At exit with `status`: finalises MPI if gossamer initialised it, no run failed and the process
/// is ending well (status 0). Otherwise MPI is abandoned and the launcher, seeing the rank end
/// without finalising (or with a failing status), ends the job:
/// - a process ending with a failing status (a panic between runs ends it with 101, say) may be
///   awaited by the other ranks in their next run, and `MPI_Finalize`, which waits for every
///   rank, would hang the whole job;
/// - when the process exits in the middle of a run (`std::process::exit` in a fiber), the run
///   holds the job; waiting for it here hung the process for ever, and the job with it.
///
/// When the program owns MPI, the job is only let go of: abandoned after a failure or with a
/// failing status, released (its own `MPI_Finalize` said the rank is leaving) when all went
/// well. Either way the rank wrapper hears that this rank left the job, and whether it gave the
/// job up: `gsmrun` reports a rank that exits 0 after a failed run as the failure it is. A
/// process that exits in the middle of a run tells nothing, and `gsmrun` reports it even when
/// its status is 0.
fn finalize_at_exit(status: i32) {
    let job = JOB.try_lock().ok().and_then(|mut j| j.take());
    if let Some(mut pj) = job {
        if pj.failed || status != 0 {
            pj.job.abandon();
        } else if !pj.owns_mpi {
            pj.job.release();
        } else {
            pj.job.finalize();
        }
    }
}

/// Runs `f` with the process's job, bootstrapping it on first use.
///
/// The job stays locked for the whole run, so a `run`/`spmd` called inside another run of this
/// process (from one of its fibers) is refused rather than left waiting for the lock for ever.
fn with_job<R>(f: impl FnOnce(&mut ProcessJob) -> Result<R, Error>) -> Result<R, Error> {
    let mut guard = match JOB.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::WouldBlock) => {
            return Err(Error::Config(
                "gossamer::run/spmd was called while another run of this process is under way \
                 (from inside it, or from another thread?); runs of a launched job cannot nest or overlap"
                    .into(),
            ));
        }
        Err(std::sync::TryLockError::Poisoned(_)) => {
            return Err(Error::Bootstrap(
                "the job state is poisoned by an earlier panic".into(),
            ));
        }
    };
    if guard.is_none() {
        *guard = Some(bootstrap()?);
    }
    let Some(pj) = guard.as_mut() else {
        return Err(Error::Stopped);
    };
    if pj.failed {
        return Err(Error::Bootstrap(
            "an earlier gossamer run of this job failed; the job cannot run again".into(),
        ));
    }
    if pj.thread != std::thread::current().id() {
        return Err(Error::Config(
            "in a multi-rank job, gossamer::run/spmd must be called from the thread that called \
             it first (MPI is initialised for one thread)"
                .into(),
        ));
    }
    f(pj)
}

/// Bootstraps the process's job ([`Job::join`] when the program initialised MPI, [`Job::init`]
/// otherwise) and registers what happens to it at exit.
fn bootstrap() -> Result<ProcessJob, Error> {
    let began = std::time::Instant::now();
    let user_mpi = crate::bootstrap::mpi_initialised();
    let job = if user_mpi {
        Job::join(b"")
    } else {
        Job::init(b"")
    };
    let job = job.map_err(|e: BootstrapError| Error::Bootstrap(e.to_string()))?;
    tracing::info!(
        target: "gossamer::bootstrap",
        rank = job.rank(),
        size = job.size(),
        job_id = job.job_id(),
        program_owns_mpi = user_mpi,
        took = ?began.elapsed(),
        "joined the job"
    );
    // Also when the program owns MPI: the handler then only gives the job up, which tells the
    // rank wrapper this rank left it (see `bootstrap::Stage`).
    let _ = crate::sys::proc::on_exit(finalize_at_exit);
    Ok(ProcessJob {
        job,
        thread: std::thread::current().id(),
        owns_mpi: !user_mpi,
        failed: false,
    })
}

/// Runs one collective `run`/`spmd` of a launched job.
///
/// `checked` is this rank's verdict on its configuration; every rank takes part in checking it,
/// so that all fail when one does.
pub(crate) fn start(
    config: &Config,
    checked: Result<RingLayout, Error>,
    make_roots: impl FnOnce(&Place) -> Vec<Option<Root>>,
) -> Result<(), Error> {
    with_job(|pj| {
        // Before the run's first exchange: a rank that exits 0 without this stage, while another
        // rank waits here, ends the job (see `bootstrap::Stage`).
        crate::bootstrap::tell(Stage::Run);
        tracing::debug!(target: "gossamer::bootstrap", rank = pj.job.rank(), "run starting");
        if pj.job.size() == 1 {
            let layout = checked?;
            check_unused_settings()?;
            let mut place = Place::single(config.workers);
            place.hosts = vec![pj.job.peers()[0].hostname.clone()];
            let roots = make_roots(&place);
            return start_single(config, place, layout, roots);
        }
        let r = agree(&pj.job, checked, "checking its configuration")
            .and_then(|layout| start_multi(&pj.job, config, layout, make_roots));
        if r.is_err() {
            pj.failed = true;
        }
        r
    })
}
