//! Starting one run, step by step: for a job of one rank, the heap mesh and the workers; for a
//! launched job of several, every rank agrees on its configuration, chooses and prepares its
//! fabrics, publishes its [`Offer`], checks the job's rings against each host's memory, finds
//! which peers it may read in one copy, connects the fabrics, joins their rings into one mesh,
//! starts the workers and waits for the job to end together (`quiesce.rs`). Every step that can
//! fail on one rank is a checked barrier ([`agree`]), so that a failure anywhere makes every rank
//! return the error instead of waiting. See ARCHITECTURE.md.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::Root;
use super::fabrics::{self, Fabrics, needs};
use super::handoff::Handoff;
use super::memory::{job_rings_fit, physical_memory};
use super::mesh::{Mesh, check_mesh, join_links, local_mesh};
use super::offer::Offer;
use super::quiesce::{Notes, another_ranks, terminate};
use super::workers::{join_workers, spawn_workers};
use crate::bootstrap::{Job, Stage};
use crate::config::Config;
use crate::error::Error;
use crate::fabric::{Doorbell, FABRICS, FabricError, FabricKind, Hooks, Settings, Topology};
use crate::wire::ring::RingLayout;
use crate::worker::{Place, Shared};

/// Refuses the fabric settings that a job of one rank does not use, if they cannot be
/// understood, as every rank of a larger job refuses them: a value not understood is then found
/// on the first small run, not on the first large one.
pub(crate) fn check_unused_settings() -> Result<(), Error> {
    crate::fabric::choice_from_env()?;
    Settings::check_env()?;
    Ok(())
}

/// Refuses a setting of the runtime's layers (the settings table's `Config`, runtime, worker and
/// fabric settings) set to a value it does not take, before anything starts: code that runs
/// later reads them with `gsm_contract::value`, which then never meets a bad value.
pub(crate) fn check_settings() -> Result<(), Error> {
    use gsm_contract::{Layer, table};
    let ours = [Layer::Config, Layer::Runtime, Layer::Worker, Layer::Fabric];
    let settings = table::ALL.iter().filter(|s| ours.contains(&s.layer));
    Ok(gsm_contract::check_env(settings)?)
}

/// Whether large records may be read in one copy from a peer's memory (`GSM_SINGLE_COPY`, default
/// on; `0`/`off` streams them through the rings instead). Any other value is an error: `OFF` or
/// `disable` meant "on" before.
fn single_copy_wanted() -> Result<bool, Error> {
    Ok(gsm_contract::get(&gsm_contract::table::SINGLE_COPY)?)
}

/// Fails on every rank if any rank passes `Err` (a checked barrier).
pub(crate) fn agree<T>(job: &Job, r: Result<T, Error>, step: &str) -> Result<T, Error> {
    let ok = job.all_true(r.is_ok());
    match r {
        Ok(v) if ok => Ok(v),
        Ok(_) => Err(Error::Start(format!(
            "another rank failed while {step} (see its error)"
        ))),
        Err(e) => Err(e),
    }
}

/// Says how large this rank's rings are (the log's `gossamer::ring` target).
fn log_rings(place: &Place, layout: RingLayout) {
    // Each local worker consumes a request and a response ring from every worker of another
    // rank (made at start by the fabrics; those from its own rank's workers on first use).
    let rings = 2 * place.local * (place.total - place.local);
    tracing::info!(
        target: "gossamer::ring",
        rank = place.rank,
        slot_size = layout.slot_size,
        slots_per_ring = layout.slots,
        ring_bytes = layout.bytes(),
        rings_consumed = rings,
        bytes = rings * layout.bytes(),
        "ring layout"
    );
}

/// Runs a job of one rank.
pub(crate) fn start_single(
    config: &Config,
    place: Place,
    layout: RingLayout,
    roots: Vec<Option<Root>>,
) -> Result<(), Error> {
    let n = place.local;
    log_rings(&place, layout);
    let ends = local_mesh(&place);
    let nroots = roots.iter().filter(|r| r.is_some()).count();
    let doors = (0..n).map(|_| Doorbell::heap()).collect();
    let bells = (0..place.total).map(|_| None).collect();
    let shared = Arc::new(Shared::new(place, doors, bells, nroots, false, layout));
    if nroots == 0 {
        shared.begin_drain();
    }
    let handles = spawn_workers(config, &shared, ends, roots);
    super::stall::watch(&shared);
    join_workers(&shared, handles)
}

/// Runs one run of a launched job of several ranks (see the module docs for its steps).
pub(crate) fn start_multi(
    job: &Job,
    config: &Config,
    layout: RingLayout,
    make_roots: impl FnOnce(&Place) -> Vec<Option<Root>>,
) -> Result<(), Error> {
    let hosts: Vec<String> = job.peers().iter().map(|p| p.hostname.clone()).collect();
    // Every peer's batch names its code by offsets checked against this table: read it before
    // any can arrive, on every rank together (a stripped binary stops the start with the reason).
    agree(
        job,
        crate::worker::entry::check_entries(),
        "reading this program's delegation entries",
    )?;
    let kinds = agree(job, fabrics::choose(job, &hosts), "choosing fabrics")?;
    let (mut fabrics, endpoints) = agree(job, Fabrics::prepare(&kinds), "preparing the fabrics")?;
    let single_copy = agree(job, single_copy_wanted(), "reading GSM_SINGLE_COPY")?;
    let mine = Offer {
        workers: config.workers as u32,
        slots: layout.slots,
        slot_size: layout.slot_size,
        endpoints,
        probe: if needs(&kinds, FabricKind::Shm) && single_copy {
            crate::wire::far::allow_peers()
        } else {
            0
        },
    };
    let offers = exchange_offers(job, &mine, &hosts, layout)?;
    // Hosts differ in memory, so a host's ranks may refuse alone: checked together.
    let workers: Vec<u32> = offers.iter().map(|o| o.workers).collect();
    let here = &hosts[job.rank() as usize];
    let fits = job_rings_fit(&workers, &hosts, here, layout, physical_memory());
    agree(job, fits, "checking the rings' memory")?;
    let readers = single_copy_readers(job, &kinds, &offers)?;
    let (topo, mut place) = plan(job, &offers, hosts, layout, &readers);

    // The fabrics call back into the runtime, which exists only after they attached.
    let runtime: Arc<Handoff<Arc<Shared>, FabricError>> = Arc::new(Handoff::default());
    let hooks = hooks(&runtime);
    let created = fabrics.create(&topo, &kinds, &offers, &hooks);
    agree(job, created, "creating the fabrics")?;
    if FABRICS.iter().any(|e| e.exchanges) {
        agree(
            job,
            fabrics.exchange(job),
            "exchanging the fabrics' cards (verbs queue pairs)",
        )?;
    }
    let links = agree(job, fabrics.attach(), "connecting the fabrics")?;
    fabrics.sealed();

    let mesh = join_links(&mut place, layout, links, &readers);
    agree(
        job,
        check_mesh(&place, &mesh.ends),
        "checking the ring mesh",
    )?;
    log_rings(&place, layout);
    run_to_end(job, config, place, mesh, &runtime, make_roots, fabrics)
}

/// Publishes this rank's offer and gathers every rank's; refuses a rank whose ring geometry
/// differs from this one's, or that has no workers.
fn exchange_offers(
    job: &Job,
    mine: &Offer,
    hosts: &[String],
    layout: RingLayout,
) -> Result<Vec<Offer>, Error> {
    let me = job.rank();
    let all = job
        .all_gather(&mine.encode())
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
    Ok(offers)
}

/// Single-copy reads between ranks of this host: which peers this rank can read (it probes each
/// one's offered address), gathered from every rank: rank r's bytes say whom r can read.
fn single_copy_readers(
    job: &Job,
    kinds: &[Option<FabricKind>],
    offers: &[Offer],
) -> Result<Vec<Vec<u8>>, Error> {
    let me = job.rank();
    let can_read: Vec<u8> = (0..job.size())
        .map(|r| {
            let o = &offers[r as usize];
            u8::from(
                r != me
                    && kinds[r as usize] == Some(FabricKind::Shm)
                    && o.probe != 0
                    && crate::wire::far::probe(job.peers()[r as usize].pid, o.probe),
            )
        })
        .collect();
    job.all_gather(&can_read)
        .map_err(|e| Error::Bootstrap(e.to_string()))
}

/// What the fabrics know of the job, and this rank's place in it (who may park for whom: the
/// ranks that can read this one, from `readers`).
fn plan(
    job: &Job,
    offers: &[Offer],
    hosts: Vec<String>,
    layout: RingLayout,
    readers: &[Vec<u8>],
) -> (Topology, Place) {
    let me = job.rank();
    let pids: Vec<u32> = job.peers().iter().map(|p| p.pid).collect();
    let far: Vec<bool> = readers
        .iter()
        .map(|bits| bits.get(me as usize) == Some(&1))
        .collect();
    let reads: Vec<bool> = (0..job.size())
        .map(|r| readers[me as usize].get(r as usize) == Some(&1))
        .collect();
    let topo = Topology {
        rank: me,
        workers: offers.iter().map(|o| o.workers).collect(),
        hosts: hosts.clone(),
        layout,
        job_id: job.job_id().to_string(),
        key: *job.key(),
    };
    let place = Place {
        rank: me,
        rank_workers: topo.workers.clone(),
        hosts,
        base: topo.first_worker(me) as usize,
        local: topo.local_workers() as usize,
        total: topo.total_workers() as usize,
        pids,
        far,
        reads,
        board: None,
        rma: None,
    };
    (topo, place)
}

/// The fabrics' callbacks into the runtime: wake a local worker, report a failure (kept until
/// the runtime exists).
fn hooks(runtime: &Arc<Handoff<Arc<Shared>, FabricError>>) -> Hooks {
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
}

/// Starts the workers on `mesh`, waits until the job ends on every rank, stops the workers, and
/// closes the fabrics (after one more barrier when the run went well).
fn run_to_end(
    job: &Job,
    config: &Config,
    place: Place,
    mesh: Mesh,
    runtime: &Handoff<Arc<Shared>, FabricError>,
    make_roots: impl FnOnce(&Place) -> Vec<Option<Root>>,
    mut fabrics: Fabrics,
) -> Result<(), Error> {
    let Mesh {
        ends,
        bells,
        doors,
        layout,
    } = mesh;
    let doors = doors.unwrap_or_else(|| (0..place.local).map(|_| Doorbell::heap()).collect());
    let roots = make_roots(&place);
    let nroots = roots.iter().filter(|r| r.is_some()).count();
    let shared = Arc::new(Shared::new(place, doors, bells, nroots, true, layout));
    if let Some(e) = runtime.attach(shared.clone()) {
        shared.fail(Error::Fabric(e));
    }
    if nroots == 0 {
        shared.begin_drain();
    }
    let handles = spawn_workers(config, &shared, ends, roots);
    super::stall::watch(&shared);
    let result = wait_and_stop(job, &shared, handles);
    fabrics.closing();
    if result.is_ok() {
        // Nobody drops its fabric (closing connections) before every rank expects it.
        let _ = job.all_true(true);
    }
    fabrics.close();
    result
}

/// Waits until the job ends ([`terminate`]), stops this rank's workers and joins them; tells
/// the other ranks of this rank's failure, if any.
fn wait_and_stop(job: &Job, shared: &Shared, handles: Vec<JoinHandle<()>>) -> Result<(), Error> {
    let mut notes = Notes::default();
    let ended = terminate(job, shared, &mut notes);
    if let Err(e) = &ended {
        shared.fail(e.clone());
    }
    shared.stop_all();
    let result = join_workers(shared, handles);
    if let Err(e) = &result {
        // A failure of the teardown itself (a worker thread that died) is told too.
        notes.post(job, e);
        if another_ranks(e) {
            crate::bootstrap::tell(Stage::Follows);
        }
    }
    result
}
