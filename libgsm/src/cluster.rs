//! The parts of a runtime that span ranks: whether this process is one rank of a launched job, the
//! process's bootstrapped [`Job`], connecting the fabrics for one `run`/`spmd`, deciding together
//! when the job is over, and noticing a peer that vanished.
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
//!
//! **One run** (collective over the ranks): every rank publishes its workers, ring geometry and
//! fabric endpoints (`MPI_Allgather`); each peer gets a fabric from [`FabricChoice::pick`]
//! (`GSM_FABRIC`: auto = shm on the same host, tcp between hosts); the fabrics go through their
//! phases (see [`crate::fabric`]) with `MPI_Allreduce` as a checked barrier in between, so a
//! failure on one rank makes every rank return the error instead of waiting; the ring ends they
//! return join this rank's heap rings in one mesh over global worker ids; the workers start.
//!
//! **Ending together.** A rank whose roots are done and whose workers are all quiet may still be
//! sent work by another rank. So this thread runs *waves*: when the rank is quiet it contributes
//! `(not quiet, slots sent to other ranks, slots received from them, …)` to a non-blocking sum
//! (`MPI_Iallreduce`). The job is over when two consecutive waves find every rank quiet and the
//! same totals with sent = received (the four-counter method of Mattern, 1987): every slot ever
//! published has been consumed and nothing happened in between. A rank whose roots are *not*
//! done joins the waves too once all its workers are quiet (its workers watch for that as soon
//! as one of them goes to sleep; see `WorkerCore::run_loop`), and says so in its contribution:
//! when the job is found quiet with roots left somewhere, it is deadlocked (quiescence is
//! stable: nothing can wake those roots' fibers), and once every rank has seen that for
//! [`STALL_CONFIRM`] the run fails on every rank with [`Error::Deadlock`], naming what each
//! rank's fibers wait for, instead of hanging. While it waits, the thread
//! watches the processes of this host's peers (`pidfd`) and the runtime's failure flag, so a
//! vanished peer or a failure never leaves it waiting in MPI; peers on other hosts are watched
//! by the tcp fabric (a closed connection). Then every rank stops its workers, tells its fabrics
//! that closing is expected, passes one more barrier, and drops them.
//!
//! **A failed run is told.** A rank whose run fails (a panic, a broken record, a property
//! count gone wrong) sends every other rank a failure note with its error (an `MPI_Isend` on
//! gossamer's own communicator, driven out for at most [`NOTE_GRACE`] without waiting for the
//! receivers), and each rank's waiting thread takes notes as it goes: the run then fails there
//! with [`Error::PeerFailed`], carrying the first rank's error. Without the note the others ran
//! on until the failed rank's process ended, which need not be soon (its program may handle the
//! error and go on), and then reported it as vanished. A rank that sees a peer vanish waits a
//! moment for that peer's note, so that a rank that failed and then exited is reported with its
//! reason. Losses of peers and deadlocks are not told: every rank finds those by itself.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::bootstrap::{BootstrapError, Job, Stage};
use crate::config::Config;
use crate::error::Error;
use crate::fabric::shm::Shm;
use crate::fabric::tcp::Tcp;
use crate::fabric::{
    Bell, Doorbell, Fabric, FabricChoice, FabricError, FabricKind, Hooks, Lane, Links, Peer,
    Settings, Topology,
};
use crate::runtime::{Root, join_workers, local_mesh, spawn_workers, start_single};
use crate::wire::ring::RingLayout;
use crate::worker::{Ends, Place, STALL_CONFIRM, Shared};

/// Whether this process is a rank of a launched job (see the module docs).
pub(crate) fn launched() -> bool {
    const VARS: [&str; 5] = [
        "GSM_SIZE",
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMI_RANK",
        "PMIX_RANK",
    ];
    VARS.iter().any(|v| std::env::var_os(v).is_some()) || mpi_initialised_by_program()
}

fn mpi_initialised_by_program() -> bool {
    // Held: a run of this process is under way, so the job is ours.
    let ours = match JOB.try_lock() {
        Ok(j) => j.is_some(),
        Err(std::sync::TryLockError::WouldBlock) => true,
        Err(std::sync::TryLockError::Poisoned(_)) => false,
    };
    !ours && mpi::environment::is_initialized() && !mpi::environment::is_finalized()
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
extern "C" fn finalize_at_exit(status: libc::c_int, _: *mut libc::c_void) {
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

// SAFETY: the declaration matches glibc's `int on_exit(void (*)(int, void *), void *)`.
unsafe extern "C" {
    /// glibc's `atexit` that also hands the handler the exit status (not in the `libc` crate).
    fn on_exit(
        f: extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
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
        let user_mpi = mpi::environment::is_initialized();
        let job = if user_mpi {
            Job::join(b"")
        } else {
            Job::init(b"")
        };
        let job = job.map_err(|e: BootstrapError| Error::Bootstrap(e.to_string()))?;
        // Also when the program owns MPI: the handler then only gives the job up, which tells the
        // rank wrapper this rank left it (see `bootstrap::Stage`).
        // SAFETY: registers a plain `extern "C" fn` with the C library, which calls it at exit
        // with the status and the (unused, null) argument.
        unsafe { on_exit(finalize_at_exit, std::ptr::null_mut()) };
        *guard = Some(ProcessJob {
            job,
            thread: std::thread::current().id(),
            owns_mpi: !user_mpi,
            failed: false,
        });
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

/// Refuses the fabric settings that a job of one rank does not use, if they cannot be
/// understood, as every rank of a larger job refuses them: a value not understood is then found
/// on the first small run, not on the first large one.
pub(crate) fn check_unused_settings() -> Result<(), Error> {
    FabricChoice::from_env()?;
    Settings::check_env()?;
    single_copy_wanted()?;
    Ok(())
}

/// Whether large records may be read in one copy from a peer's memory (`GSM_SINGLE_COPY`, default
/// on; `0`/`off` streams them through the rings instead). Any other value is an error: `OFF` or
/// `disable` meant "on" before.
fn single_copy_wanted() -> Result<bool, Error> {
    crate::config::env_switch("GSM_SINGLE_COPY", true)
}

/// Fails on every rank if any rank passes `Err` (a checked barrier).
fn agree<T>(job: &Job, r: Result<T, Error>, step: &str) -> Result<T, Error> {
    let ok = job.all_true(r.is_ok());
    match r {
        Ok(v) if ok => Ok(v),
        Ok(_) => Err(Error::Start(format!(
            "another rank failed while {step} (see its error)"
        ))),
        Err(e) => Err(e),
    }
}

/// What each rank publishes for one run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Offer {
    workers: u32,
    slots: u32,
    slot_size: u32,
    tcp: Vec<u8>,
    shm: Vec<u8>,
    /// Where peers on this host read to test single-copy reads (0: not offered).
    probe: u64,
}

impl Offer {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [self.workers, self.slots, self.slot_size] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for e in [&self.tcp, &self.shm] {
            b.extend_from_slice(&(e.len() as u32).to_le_bytes());
            b.extend_from_slice(e);
        }
        b.extend_from_slice(&self.probe.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Offer> {
        let u = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
        };
        let (workers, slots, slot_size) = (u(0)?, u(4)?, u(8)?);
        let tl = u(12)? as usize;
        let tcp = b.get(16..16 + tl)?.to_vec();
        let sl = u(16 + tl)? as usize;
        let shm = b.get(20 + tl..20 + tl + sl)?.to_vec();
        let at = 20 + tl + sl;
        let probe = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
        if b.len() != at + 8 {
            return None;
        }
        Some(Offer {
            workers,
            slots,
            slot_size,
            tcp,
            shm,
            probe,
        })
    }
}

fn start_multi(
    job: &Job,
    config: &Config,
    layout: RingLayout,
    make_roots: impl FnOnce(&Place) -> Vec<Option<Root>>,
) -> Result<(), Error> {
    let me = job.rank();
    let size = job.size();
    let hosts: Vec<String> = job.peers().iter().map(|p| p.hostname.clone()).collect();

    // Every peer's batch names its code by offsets checked against this table: read it before
    // any can arrive, on every rank together (a stripped binary stops the start with the reason).
    agree(
        job,
        crate::worker::entry::check_entries(),
        "reading this program's delegation entries",
    )?;

    // Which fabric serves which peer, and what to prepare.
    let kinds = agree(
        job,
        (|| -> Result<Vec<Option<FabricKind>>, Error> {
            let choice = FabricChoice::from_env()?;
            (0..size)
                .map(|r| {
                    if r == me {
                        return Ok(None);
                    }
                    let k = choice.pick(job.same_host(r), r, &hosts[r as usize])?;
                    Ok(Some(k))
                })
                .collect()
        })(),
        "choosing fabrics",
    )?;
    let needs = |k: FabricKind| kinds.contains(&Some(k));
    type Prepared = (Option<(Shm, Vec<u8>)>, Option<(Tcp, Vec<u8>)>);
    let prepared = (|| -> Result<Prepared, Error> {
        let settings = Settings::from_env()?;
        let shm = if needs(FabricKind::Shm) {
            Some(Shm::prepare(&settings)?)
        } else {
            None
        };
        let tcp = if needs(FabricKind::Tcp) {
            Some(Tcp::prepare(&settings)?)
        } else {
            None
        };
        Ok((shm, tcp))
    })();
    let (shm, tcp) = agree(job, prepared, "preparing the fabrics")?;
    let single_copy = agree(job, single_copy_wanted(), "reading GSM_SINGLE_COPY")?;
    let offer = Offer {
        workers: config.workers as u32,
        slots: layout.slots,
        slot_size: layout.slot_size,
        tcp: tcp.as_ref().map(|t| t.1.clone()).unwrap_or_default(),
        shm: shm.as_ref().map(|s| s.1.clone()).unwrap_or_default(),
        probe: if needs(FabricKind::Shm) && single_copy {
            crate::wire::far::allow_peers()
        } else {
            0
        },
    };
    let all = job
        .all_gather(&offer.encode())
        .map_err(|e| Error::Bootstrap(e.to_string()))?;
    let offers: Vec<Offer> = all
        .iter()
        .enumerate()
        .map(|(r, b)| {
            Offer::decode(b)
                .ok_or_else(|| Error::Bootstrap(format!("rank {r} sent a malformed set-up record")))
        })
        .collect::<Result<_, _>>()?;
    for (r, o) in offers.iter().enumerate() {
        if (o.slots, o.slot_size) != (layout.slots, layout.slot_size) {
            return Err(Error::Config(format!(
                "rank {r} (host {}) uses {} slots of {} bytes per ring, rank {me} uses {} of {}; \
                 every rank must use the same slot geometry (GSM_SLOT_SIZE, Config::slot_size, \
                 Config::slots_per_ring)",
                hosts[r], o.slots, o.slot_size, layout.slots, layout.slot_size
            )));
        }
        if o.workers == 0 {
            return Err(Error::Config(format!("rank {r} has no workers")));
        }
    }
    // Hosts differ in memory, so a host's ranks may refuse alone: checked together.
    let workers: Vec<u32> = offers.iter().map(|o| o.workers).collect();
    let fits = crate::runtime::job_rings_fit(
        &workers,
        &hosts,
        &hosts[me as usize],
        layout,
        crate::runtime::physical_memory(),
    );
    agree(job, fits, "checking the rings' memory")?;
    // Single-copy reads between ranks of this host: who can read whom, then who may park for whom.
    let pids: Vec<u32> = job.peers().iter().map(|p| p.pid).collect();
    let can_read: Vec<u8> = (0..size)
        .map(|r| {
            let o = &offers[r as usize];
            u8::from(
                r != me
                    && kinds[r as usize] == Some(FabricKind::Shm)
                    && o.probe != 0
                    && crate::wire::far::probe(pids[r as usize], o.probe),
            )
        })
        .collect();
    let readers = job
        .all_gather(&can_read)
        .map_err(|e| Error::Bootstrap(e.to_string()))?;
    let far: Vec<bool> = readers
        .iter()
        .map(|bits| bits.get(me as usize) == Some(&1))
        .collect();
    let topo = Topology {
        rank: me,
        workers: offers.iter().map(|o| o.workers).collect(),
        hosts: hosts.clone(),
        layout,
        job_id: job.job_id().to_string(),
        key: *job.key(),
    };
    let mut place = Place {
        rank: me,
        rank_workers: topo.workers.clone(),
        hosts,
        base: topo.first_worker(me) as usize,
        local: topo.local_workers() as usize,
        total: topo.total_workers() as usize,
        pids,
        far,
        board: None,
    };
    let peers_of = |k: FabricKind, pick: fn(&Offer) -> &Vec<u8>| -> Vec<Peer> {
        (0..size)
            .filter(|&r| kinds[r as usize] == Some(k))
            .map(|r| Peer {
                rank: r,
                endpoint: pick(&offers[r as usize]).clone(),
            })
            .collect()
    };

    // The fabrics call back into the runtime, which exists only after they attached.
    let runtime: Arc<Handoff<Arc<Shared>, FabricError>> = Arc::new(Handoff::default());
    let hooks = {
        let (r1, r2) = (runtime.clone(), runtime.clone());
        Hooks {
            wake: Arc::new(move |l| {
                if let Some(sh) = r1.get() {
                    if let Some(d) = sh.doors.get(l as usize) {
                        d.ring();
                    }
                }
            }),
            fail: Arc::new(move |e| {
                if let Some((sh, e)) = r2.report(e) {
                    sh.fail(Error::Fabric(e));
                }
            }),
        }
    };
    let mut shm = shm.map(|s| s.0);
    let mut tcp = tcp.map(|t| t.0);
    let created = (|| -> Result<(), Error> {
        if let Some(f) = &mut shm {
            f.create(&topo, &peers_of(FabricKind::Shm, |o| &o.shm), hooks.clone())?;
        }
        if let Some(f) = &mut tcp {
            f.create(&topo, &peers_of(FabricKind::Tcp, |o| &o.tcp), hooks.clone())?;
        }
        Ok(())
    })();
    agree(job, created, "creating the fabrics")?;
    let attached = (|| -> Result<Vec<Links>, Error> {
        let mut v = Vec::new();
        if let Some(f) = &mut shm {
            v.push(f.attach()?);
        }
        if let Some(f) = &mut tcp {
            v.push(f.attach()?);
        }
        Ok(v)
    })();
    let links = agree(job, attached, "connecting the fabrics")?;
    if let Some(f) = &mut shm {
        f.sealed();
    }
    if let Some(f) = &mut tcp {
        f.sealed();
    }

    // One mesh: heap rings within the rank, fabric rings to the others.
    let mut ends = local_mesh(&place, layout);
    let mut bells: Vec<Option<Bell>> = (0..place.total).map(|_| None).collect();
    let mut doors: Option<Vec<Doorbell>> = None;
    let mut boards = Vec::new();
    for mut l in links {
        boards.append(&mut l.boards);
        place_links(&place, &mut ends, l.outgoing, l.incoming);
        for (g, b) in l.bells {
            if let Some(slot) = bells.get_mut(g as usize) {
                *slot = Some(b);
            }
        }
        if let Some(d) = l.local_bells {
            doors = Some(d);
        }
    }
    if !boards.is_empty() {
        let readable = readers
            .iter()
            .map(|bits| bits.iter().map(|&b| b == 1).collect())
            .collect();
        place.board = Some(Arc::new(crate::board::Board::new(
            me as usize,
            place.pids.clone(),
            boards,
            readable,
        )));
    }
    let complete = check_mesh(&place, &ends);
    agree(job, complete, "checking the ring mesh")?;
    let doors = doors.unwrap_or_else(|| (0..place.local).map(|_| Doorbell::heap()).collect());

    let roots = make_roots(&place);
    let nroots = roots.iter().filter(|r| r.is_some()).count();
    let shared = Arc::new(Shared::new(place, doors, bells, nroots, true));
    if let Some(e) = runtime.attach(shared.clone()) {
        shared.fail(Error::Fabric(e));
    }
    if nroots == 0 {
        shared.begin_drain();
    }
    let handles = spawn_workers(config, &shared, ends, roots);
    let mut notes = Notes::default();
    let ended = terminate(job, &shared, &mut notes);
    if let Err(e) = &ended {
        shared.fail(e.clone());
    }
    shared.stop_all();
    let result = join_workers(&shared, handles);
    if let Err(e) = &result {
        // A failure of the teardown itself (a worker thread that died) is told too.
        notes.post(job, e);
        if another_ranks(e) {
            crate::bootstrap::tell(Stage::Follows);
        }
    }
    if let Some(f) = &mut shm {
        f.closing();
    }
    if let Some(f) = &mut tcp {
        f.closing();
    }
    if result.is_ok() {
        // Nobody drops its fabric (closing connections) before every rank expects it.
        let _ = job.all_true(true);
    }
    drop(shm);
    drop(tcp);
    result
}

/// Puts a fabric's ring ends into the workers' vectors.
fn place_links(
    place: &Place,
    ends: &mut [Ends],
    outgoing: Vec<crate::fabric::OutLink>,
    incoming: Vec<crate::fabric::InLink>,
) {
    for o in outgoing {
        let (l, g) = (o.local as usize, o.remote as usize);
        if l >= place.local || g >= place.total {
            continue;
        }
        match o.lane {
            Lane::Request => ends[l].req_out[g] = Some(o.producer),
            Lane::Response => ends[l].resp_out[g] = Some(o.producer),
        }
    }
    for i in incoming {
        let (l, g) = (i.local as usize, i.remote as usize);
        if l >= place.local || g >= place.total {
            continue;
        }
        match i.lane {
            Lane::Request => ends[l].req_in[g] = Some(i.consumer),
            Lane::Response => ends[l].resp_in[g] = Some(i.consumer),
        }
    }
}

/// Every local worker has all four ring ends to every other worker of the job.
fn check_mesh(place: &Place, ends: &[Ends]) -> Result<(), Error> {
    for (l, e) in ends.iter().enumerate() {
        let me = place.base + l;
        for g in (0..place.total).filter(|&g| g != me) {
            let have = [
                e.req_out[g].is_some(),
                e.req_in[g].is_some(),
                e.resp_out[g].is_some(),
                e.resp_in[g].is_some(),
            ];
            if have.contains(&false) {
                return Err(Error::Start(format!(
                    "no ring between worker {me} (rank {}) and worker {g} (rank {}): the fabric \
                     set-up is incomplete",
                    place.rank,
                    place.rank_of(g)
                )));
            }
        }
    }
    Ok(())
}

/// This rank's contribution to a wave, if it is quiet now (see the module docs): `(0, slots
/// sent, slots received, whether roots are left, 0)`; the caller fills in the last element,
/// whether this rank has seen the job stalled for [`STALL_CONFIRM`].
fn sample(sh: &Shared) -> Option<[u64; 5]> {
    let stalled = sh.roots_left.load(Ordering::SeqCst) > 0;
    if !stalled && !sh.draining.load(Ordering::SeqCst) {
        return None;
    }
    let a = sh.rank_quiet.load(Ordering::SeqCst);
    if a == u64::MAX || sh.activity.load(Ordering::SeqCst) != a {
        return None;
    }
    let (s, r) = sh.traffic();
    // Every worker still stands by its report: one that did work while counting was off has
    // withdrawn it without moving `activity` (see `WorkerCore::run_loop`).
    let reports = sh.quiet.iter().all(|q| q.load(Ordering::SeqCst) == a);
    // Fibers in `wait_for` wait for another rank's write to the host board, which no slot
    // counts: every worker with such fibers must have tested them since the last wave ended
    // here, which was after every rank's sample in it. A write that the test missed was made
    // after that rank's last sample, by a turn that bumps its `activity`, so the next wave sees
    // that rank move.
    let waves = sh.waves.load(Ordering::SeqCst);
    let fresh = sh.board_fresh.iter().all(|f| {
        let f = f.load(Ordering::SeqCst);
        f == u64::MAX || f == waves
    });
    (reports && fresh && sh.activity.load(Ordering::SeqCst) == a).then_some([
        0,
        s,
        r,
        u64::from(stalled),
        0,
    ])
}

/// The failure notes of one run (see the module docs): whether this rank has told the others
/// of its failure.
#[derive(Default)]
struct Notes {
    posted: bool,
}

/// How long a rank that saw a peer vanish waits for that peer's failure note, which may come
/// by another path than the one that showed the loss (MPI's own connection, not the fabric's),
/// and how long a failed rank drives its notes out. Only a failing run waits this long.
const NOTE_GRACE: Duration = Duration::from_millis(200);

impl Notes {
    /// Tells the other ranks of `e`, once per run, if it is this rank's own failure: not a
    /// peer's loss or failure (that peer, or the peer that lost it, tells its own story; and
    /// a vanished peer may not be sent to) and not a deadlock (every rank finds that together).
    fn post(&mut self, job: &Job, e: &Error) {
        let own = !another_ranks(e) && !matches!(e, Error::Deadlock { .. });
        if own && !std::mem::replace(&mut self.posted, true) {
            job.post_failure(&e.to_string(), NOTE_GRACE);
        }
    }

    /// A peer's failure note, if one has arrived, as this rank's error.
    fn take(job: &Job) -> Option<Error> {
        let (rank, cause) = job.failure_note()?;
        let host = job
            .peers()
            .iter()
            .find(|p| p.rank == rank)
            .map_or_else(|| "?".to_string(), |p| p.hostname.clone());
        Some(Error::PeerFailed { rank, host, cause })
    }

    /// `lost` (a peer vanished), or the failure note that explains it if one arrives within
    /// [`NOTE_GRACE`]: a peer that failed and then ended (its program returned the error, or
    /// panicked with it) was seen to vanish, but it said why first.
    fn explain(job: &Job, lost: Error) -> Error {
        let until = std::time::Instant::now() + NOTE_GRACE;
        loop {
            if let Some(e) = Self::take(job) {
                return e;
            }
            if std::time::Instant::now() >= until {
                return lost;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Whether `e` is another rank's failure rather than this rank's own: a peer vanished, or told
/// its failure.
fn another_ranks(e: &Error) -> bool {
    peer_lost(e) || matches!(e, Error::PeerFailed { .. })
}

/// Whether `e` says that a peer vanished (this runtime's watch or a fabric's).
fn peer_lost(e: &Error) -> bool {
    matches!(
        e,
        Error::PeerLost { .. } | Error::Fabric(FabricError::PeerLost { .. })
    )
}

/// Waits until every rank agrees that the job is over, or something failed.
///
/// The job is over when two consecutive waves find every rank quiet with the same totals and
/// sent = received, and no rank with roots left. When ranks with roots left are among them, the
/// job is deadlocked instead: quiescence is stable, so nothing can ever wake their fibers. Each
/// rank starts a clock at that wave (the same wave on every rank, since all see the same sums)
/// and says in its later samples whether [`STALL_CONFIRM`] has passed on it; the first wave in
/// which every rank says so ends the job as deadlocked on every rank, together.
///
/// A failure of this rank is told to the others at once ([`Notes::post`]), and a failure
/// another rank told ends this rank's run with [`Error::PeerFailed`]: a rank whose run failed
/// may stay alive (its program caught the error and goes on), and the others would otherwise
/// keep running until its process ended. A peer seen to vanish is explained by its note when
/// one comes ([`Notes::explain`]).
fn terminate(job: &Job, sh: &Shared, notes: &mut Notes) -> Result<(), Error> {
    let mut watch = PeerWatch::new(job);
    let mut wave: Option<crate::bootstrap::Sum> = None;
    let mut prev: Option<(u64, u64)> = None;
    let mut stalled_since: Option<std::time::Instant> = None;
    loop {
        if sh.failed() {
            if let Some(w) = wave.take() {
                w.abandon();
            }
            let failure = sh.failure.lock().ok().and_then(|f| f.clone());
            match failure {
                Some(lost) if peer_lost(&lost) => {
                    let why = Notes::explain(job, lost);
                    if matches!(why, Error::PeerFailed { .. }) {
                        if let Ok(mut f) = sh.failure.lock() {
                            *f = Some(why);
                        }
                    }
                }
                Some(e) => notes.post(job, &e),
                None => {}
            }
            return Ok(()); // the failure itself is returned by `join_workers`
        }
        if let Some(e) = Notes::take(job) {
            if let Some(w) = wave.take() {
                w.abandon();
            }
            return Err(e);
        }
        if let Some(e) = watch.wait(Duration::from_millis(1)) {
            // A peer that found the job deadlocked in the wave in flight ends at once (no
            // barrier follows that verdict), and its exit can be seen here before the same
            // verdict is: read the wave once more, so that every rank reports the deadlock,
            // not the first one's exit ("vanished" on rank 1, seen in CI).
            if let Some(mut w) = wave.take() {
                match w.test() {
                    Some(v) => {
                        if let Some(Err(deadlock)) = judge(&v, job, &mut prev, &mut stalled_since) {
                            return Err(deadlock);
                        }
                    }
                    None => w.abandon(),
                }
            }
            return Err(Notes::explain(job, e));
        }
        match &mut wave {
            None => {
                if let Some(mut v) = sample(sh) {
                    v[4] = u64::from(stalled_since.is_some_and(|t| t.elapsed() >= STALL_CONFIRM));
                    wave = Some(job.start_sum(&v));
                }
            }
            Some(w) => {
                if let Some(v) = w.test() {
                    wave = None;
                    sh.waves.fetch_add(1, Ordering::SeqCst);
                    if let Some(verdict) = judge(&v, job, &mut prev, &mut stalled_since) {
                        return verdict;
                    }
                }
            }
        }
    }
}

/// What the sums `v` of a completed wave say (see [`terminate`]): the job is over (`Ok`),
/// deadlocked (`Err`), or neither yet (`None`), with the previous wave's totals and the
/// stall clock brought up to date.
fn judge(
    v: &[u64],
    job: &Job,
    prev: &mut Option<(u64, u64)>,
    stalled_since: &mut Option<std::time::Instant>,
) -> Option<Result<(), Error>> {
    let at = |i: usize, or: u64| v.get(i).copied().unwrap_or(or);
    let quiet = at(0, 1) == 0;
    let (s, r, stalled, expired) = (at(1, 0), at(2, 1), at(3, 0), at(4, 0));
    if quiet && s == r && *prev == Some((s, r)) {
        if stalled == 0 {
            return Some(Ok(()));
        }
        if expired == u64::from(job.size()) {
            crate::bootstrap::tell(crate::bootstrap::Stage::Deadlocked);
            return Some(Err(Error::Deadlock {
                rank: job.rank(),
                waits: Vec::new(),
            }));
        }
        stalled_since.get_or_insert_with(std::time::Instant::now);
    } else {
        *prev = (quiet && s == r).then_some((s, r));
        *stalled_since = None;
    }
    None
}

/// Watches the processes of this host's peer ranks.
struct PeerWatch {
    /// (rank, host, pid, pidfd or -1)
    peers: Vec<(u32, String, u32, i32)>,
}

impl PeerWatch {
    fn new(job: &Job) -> PeerWatch {
        let peers = job
            .peers()
            .iter()
            .filter(|p| p.rank != job.rank() && job.same_host(p.rank))
            .map(|p| {
                // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
                let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p.pid as libc::pid_t, 0) };
                (p.rank, p.hostname.clone(), p.pid, fd as i32)
            })
            .collect();
        PeerWatch { peers }
    }

    /// Waits up to `t` for a peer to end; returns the error naming it.
    fn wait(&mut self, t: Duration) -> Option<Error> {
        let mut fds: Vec<libc::pollfd> = self
            .peers
            .iter()
            .filter(|p| p.3 >= 0)
            .map(|p| libc::pollfd {
                fd: p.3,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if fds.is_empty() {
            std::thread::sleep(t);
        } else {
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd structures.
            unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    t.as_millis() as i32,
                )
            };
        }
        for (rank, host, pid, fd) in &self.peers {
            let gone = if *fd >= 0 {
                fds.iter().any(|p| p.fd == *fd && p.revents != 0)
            } else {
                // SAFETY: signal 0 only checks that the process exists.
                let rc = unsafe { libc::kill(*pid as libc::pid_t, 0) };
                rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            };
            if gone {
                return Some(Error::PeerLost {
                    rank: *rank,
                    host: host.clone(),
                    pid: *pid,
                    detail: "its process ended before the job did".into(),
                });
            }
        }
        None
    }
}

impl Drop for PeerWatch {
    fn drop(&mut self) {
        for p in &self.peers {
            if p.3 >= 0 {
                // SAFETY: a descriptor we opened and close once.
                unsafe { libc::close(p.3) };
            }
        }
    }
}

/// Hands the runtime (`S`) to the fabrics' callbacks once it exists, and the first failure
/// (`E`) they report before then to the runtime: neither is lost whatever the interleaving. The
/// failure is kept and the runtime set under one lock; checked apart, a failure reported while
/// the runtime was being set could land in the "before" box just after it had been emptied, and
/// the job went on with a link the fabric had given up on (it reports each failure once).
struct Handoff<S, E> {
    runtime: OnceLock<S>,
    early: Mutex<Option<E>>,
}

impl<S, E> Default for Handoff<S, E> {
    fn default() -> Self {
        Handoff {
            runtime: OnceLock::new(),
            early: Mutex::new(None),
        }
    }
}

impl<S: Clone, E> Handoff<S, E> {
    /// The runtime, once attached.
    fn get(&self) -> Option<&S> {
        self.runtime.get()
    }

    /// A failure from a fabric: the runtime to report it to, or `None` if it was kept (the
    /// first of those before the runtime exists is kept, for [`attach`](Self::attach)).
    fn report(&self, e: E) -> Option<(S, E)> {
        let mut early = self.early.lock().unwrap_or_else(|p| p.into_inner());
        match self.runtime.get() {
            Some(s) => Some((s.clone(), e)),
            None => {
                early.get_or_insert(e);
                None
            }
        }
    }

    /// Sets the runtime; returns the failure reported before, if any.
    fn attach(&self, s: S) -> Option<E> {
        let mut early = self.early.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self.runtime.set(s);
        early.take()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failure_reported_while_the_runtime_is_attached_is_delivered_once() {
        use std::sync::Arc;
        use std::time::Duration;
        // The runtime is being attached (the lock held, as `attach` holds it) when a fabric
        // reports: the report must wait and then go to the runtime. Deciding before the lock
        // that there was no runtime yet, it was put in the box `attach` had already emptied.
        let h: Arc<Handoff<u32, u32>> = Arc::new(Handoff::default());
        let attaching = h.early.lock().unwrap();
        let h2 = h.clone();
        let reporter = std::thread::spawn(move || h2.report(7));
        std::thread::sleep(Duration::from_millis(50));
        h.runtime.set(1).unwrap();
        drop(attaching);
        assert_eq!(
            reporter.join().unwrap(),
            Some((1, 7)),
            "the failure was lost"
        );
        assert_eq!(h.attach(2), None, "the failure was kept as well");
        // Before the runtime exists, the first failure is kept for it.
        let h: Handoff<u32, u32> = Handoff::default();
        assert_eq!(h.report(3), None);
        assert_eq!(h.report(4), None);
        assert_eq!(h.attach(1), Some(3));
        assert_eq!(h.report(5), Some((1, 5)));
    }

    use super::*;

    #[test]
    fn offers_round_trip_and_truncation_is_refused() {
        let o = Offer {
            workers: 3,
            slots: 16,
            slot_size: 4096,
            tcp: vec![1, 2, 3],
            shm: vec![],
            probe: 0x1234,
        };
        let b = o.encode();
        assert_eq!(Offer::decode(&b), Some(o));
        assert_eq!(Offer::decode(&b[..b.len() - 1]), None);
    }
}
