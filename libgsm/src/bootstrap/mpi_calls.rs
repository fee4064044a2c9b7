//! The only MPI calls the runtime makes, each wrapped in a safe function that returns
//! [`BootstrapError`]. This is the one place that names the `mpi` crate.
//!
//! Open MPI's default error handler (`MPI_ERRORS_ARE_FATAL`) aborts the job when a call itself
//! fails, so the errors returned here are the ones that can be seen before a call is made (MPI
//! already initialised, a buffer too large for MPI's `int` counts). Nothing here is on the data
//! path: these calls run at start-up, in the waves that decide the end of a run, for the note
//! of a failed run, at the final barrier and at `MPI_Finalize`.
//!
//! Gossamer talks on its own duplicate of `MPI_COMM_WORLD`, made once per job, so that a program
//! that owns MPI and uses the world communicator itself never receives a message of gossamer's
//! (a failure note, which a receive with `MPI_ANY_TAG` would otherwise take), nor the reverse.

use super::BootstrapError;
use mpi::Count;
use mpi::attribute::CommAttribute;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::point_to_point::MatchedReceiveVec as _;
use mpi::topology::AnyCommunicator as _;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Root, Source};
use std::time::{Duration, Instant};

/// The tag of a failure note (see [`Mpi::post_notes`]); gossamer's communicator carries no other
/// point-to-point message.
const NOTE_TAG: mpi::Tag = 0x6e6f;

/// The longest failure note sent, in bytes: below the eager limit of every MPI transport (Open
/// MPI's shared-memory one is 4 KiB), so that a note needs no answer from its receiver to be
/// sent.
pub(super) const NOTE_MAX: usize = 3072;

/// An initialised MPI library; dropping it calls `MPI_Finalize` when this process initialised
/// it here (`universe` is `None` when the program initialised MPI itself and owns finalising).
pub(super) struct Mpi {
    /// Gossamer's duplicate of the world communicator. Declared before `universe`, so that it
    /// is freed first when an `Mpi` is dropped: `MPI_Comm_free` after `MPI_Finalize` aborts.
    world: SimpleCommunicator,
    universe: Option<Universe>,
}

/// Whether MPI has been initialised in this process (by anyone), finalised since or not.
pub(super) fn initialised() -> bool {
    mpi::environment::is_initialized()
}

/// Whether MPI is initialised in this process (by anyone) and not yet finalised.
pub(super) fn live() -> bool {
    mpi::environment::is_initialized() && !mpi::environment::is_finalized()
}

/// `MPI_Init_thread` with `MPI_THREAD_FUNNELED`: the process has several threads (the workers),
/// but only the thread that created the [`Job`](super::Job) calls MPI.
pub(super) fn init() -> Result<Mpi, BootstrapError> {
    if mpi::environment::is_initialized() {
        return Err(BootstrapError::AlreadyInitialised);
    }
    let (universe, _provided) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .ok_or(BootstrapError::AlreadyInitialised)?;
    let world = universe.world().duplicate();
    Ok(Mpi {
        universe: Some(universe),
        world,
    })
}

/// Uses an MPI library the program initialised itself (it keeps the duty to finalise it).
/// Its `MPI_Finalize` will tell the wrapper that this rank is leaving (see [`LeavingMark`]).
pub(super) fn join_existing() -> Option<Mpi> {
    if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
        return None;
    }
    SimpleCommunicator::self_comm().set_attr(LeavingMark);
    Some(Mpi {
        universe: None,
        world: SimpleCommunicator::world().duplicate(),
    })
}

/// An attribute of `MPI_COMM_SELF` in a program that owns MPI: `MPI_Finalize` deletes the
/// attributes of `MPI_COMM_SELF` before anything else (the MPI standard's "Allowing User
/// Functions at Process Termination"), and the deletion tells the rank wrapper that this rank
/// is leaving the job, as gossamer's own finalising does ([`Finalizer`]), before it can wait in
/// `MPI_Finalize` for ranks that are still running.
#[derive(Clone, Copy)]
struct LeavingMark;

impl CommAttribute for LeavingMark {
    unsafe extern "C" fn comm_delete_attr_fn(
        _comm: mpi::ffi::MPI_Comm,
        _key: std::os::raw::c_int,
        val: *mut std::ffi::c_void,
        _extra_state: *mut std::ffi::c_void,
    ) -> std::os::raw::c_int {
        super::tell(super::Stage::Leaving);
        // SAFETY: `set_attr` stored a `Box<LeavingMark>` under this key, and MPI deletes it once.
        drop(unsafe { Box::from_raw(val.cast::<LeavingMark>()) });
        mpi::ffi::MPI_SUCCESS as std::os::raw::c_int
    }
}

/// An `MPI_Iallreduce` (sum of `u64`s) in flight; its buffers are leaked on purpose (they are
/// tiny), so that a reduction abandoned because a peer vanished never frees memory MPI may still
/// write.
pub(super) struct Wave {
    request: Option<mpi::request::Request<'static, [u64], mpi::request::StaticScope>>,
    out: *mut [u64],
}

impl Wave {
    /// The sums, once every rank has contributed.
    pub(super) fn test(&mut self) -> Option<Vec<u64>> {
        let r = self.request.take()?;
        match r.test() {
            Ok(_) => {
                // SAFETY: the request completed, so MPI no longer writes `out`, which was leaked
                // (never freed) when the wave started.
                Some(unsafe { (*self.out).to_vec() })
            }
            Err(r) => {
                self.request = Some(r);
                None
            }
        }
    }

    /// Gives up on the reduction (a peer vanished): it will never complete.
    pub(super) fn abandon(mut self) {
        if let Some(r) = self.request.take() {
            std::mem::forget(r);
        }
    }
}

impl Mpi {
    /// This process's rank in `MPI_COMM_WORLD`.
    pub(super) fn rank(&self) -> u32 {
        // A rank is never negative.
        self.world.rank() as u32
    }

    /// The number of ranks in `MPI_COMM_WORLD`.
    pub(super) fn size(&self) -> u32 {
        self.world.size() as u32
    }

    /// `MPI_Allgather` of one count per rank.
    pub(super) fn all_gather_count(&self, mine: usize) -> Result<Vec<Count>, BootstrapError> {
        let mine = count(mine, "this rank's bootstrap record")?;
        let mut all = vec![0 as Count; self.size() as usize];
        self.world.all_gather_into(&mine, &mut all[..]);
        Ok(all)
    }

    /// `MPI_Allgatherv` of byte strings whose lengths every rank already knows (`counts`).
    pub(super) fn all_gather_bytes(
        &self,
        mine: &[u8],
        counts: &[Count],
    ) -> Result<Vec<u8>, BootstrapError> {
        let mut displs = Vec::with_capacity(counts.len());
        let mut total: usize = 0;
        for &c in counts {
            displs.push(count(total, "the job's bootstrap records")?);
            total += usize::try_from(c).unwrap_or(0);
        }
        count(total, "the job's bootstrap records")?;
        let mut all = vec![0u8; total];
        {
            let mut partition = PartitionMut::new(&mut all[..], counts, &displs[..]);
            self.world.all_gather_varcount_into(mine, &mut partition);
        }
        Ok(all)
    }

    /// `MPI_Bcast` of `buf` from rank 0.
    pub(super) fn broadcast_from_root(&self, buf: &mut [u8]) -> Result<(), BootstrapError> {
        count(buf.len(), "the job key")?;
        self.world.process_at_rank(0).broadcast_into(buf);
        Ok(())
    }

    /// `MPI_Allreduce` with `MPI_MIN` of one flag per rank: whether every rank passed `true`.
    pub(super) fn all_true(&self, mine: bool) -> bool {
        let mine = u8::from(mine);
        let mut all = 0u8;
        self.world
            .all_reduce_into(&mine, &mut all, mpi::collective::SystemOperation::min());
        all == 1
    }

    /// Starts an `MPI_Iallreduce` summing `vals` over the ranks.
    pub(super) fn start_sum(&self, vals: &[u64]) -> Wave {
        let send: &'static [u64] = Box::leak(vals.to_vec().into_boxed_slice());
        let out: *mut [u64] = Box::into_raw(vec![0u64; vals.len()].into_boxed_slice());
        // SAFETY: `out` comes from `Box::into_raw` and is never freed, so it is valid for
        // `'static`; this is the only reference made from it until the request completes, after
        // which `Wave::test` reads through `out` itself.
        let recv: &'static mut [u64] = unsafe { &mut *out };
        let request = self.world.immediate_all_reduce_into(
            mpi::request::StaticScope,
            send,
            recv,
            mpi::collective::SystemOperation::sum(),
        );
        Wave {
            request: Some(request),
            out,
        }
    }

    /// Sends `note` (at most [`NOTE_MAX`] bytes) to each rank of `to` (`MPI_Isend`), then drives
    /// the sends (`MPI_Test`) until all are done or `within` has passed: a transport that has no
    /// connection to a peer yet (Open MPI's tcp one connects on first use) needs the sender's
    /// progress to open one, and a failed rank makes no MPI call after this. Sends still
    /// pending then are given up (never freed, nor is the buffer, which MPI may still read).
    pub(super) fn post_notes(&self, to: impl Iterator<Item = u32>, note: &[u8], within: Duration) {
        let note: &'static [u8] = Box::leak(note[..note.len().min(NOTE_MAX)].into());
        // A rank number fits MPI's `int`: it came from MPI.
        let mut pending: Vec<_> = to
            .map(|r| {
                self.world
                    .process_at_rank(r as mpi::Rank)
                    .immediate_send_with_tag(mpi::request::StaticScope, note, NOTE_TAG)
            })
            .collect();
        let until = Instant::now() + within;
        while !pending.is_empty() && Instant::now() < until {
            pending = pending.into_iter().filter_map(|r| r.test().err()).collect();
            std::thread::yield_now();
        }
        for r in pending {
            std::mem::forget(r);
        }
    }

    /// A note another rank posted, if one has arrived: `(its rank, the note)` (`MPI_Improbe`,
    /// then `MPI_Mrecv`).
    pub(super) fn take_note(&self) -> Option<(u32, Vec<u8>)> {
        let probed = self
            .world
            .any_process()
            .immediate_matched_probe_with_tag(NOTE_TAG)?;
        let (note, status) = probed.matched_receive_vec::<u8>();
        Some((status.source_rank() as u32, note))
    }

    /// `MPI_Barrier` (gossamer's communicator spans `MPI_COMM_WORLD`).
    pub(super) fn barrier(&self) -> Result<(), BootstrapError> {
        self.world.barrier();
        Ok(())
    }

    /// `MPI_Finalize` (through dropping the universe).
    pub(super) fn finalize(self) {
        self.into_finalizer().finalize();
    }

    /// Gives up the communicator and keeps only what calls `MPI_Finalize` when dropped.
    pub(super) fn into_finalizer(self) -> Finalizer {
        let Mpi { universe, world } = self;
        drop(world);
        Finalizer(universe)
    }
}

/// Calls `MPI_Finalize` when dropped (or by [`finalize`](Self::finalize)), if this process
/// initialised MPI, after telling the wrapper that this rank is leaving the job (also when the
/// program owns MPI: the job is over for gossamer); `Send` and `Sync`, so it can live in an error
/// value.
pub(super) struct Finalizer(Option<Universe>);

impl Finalizer {
    /// `MPI_Finalize` now.
    pub(super) fn finalize(self) {
        drop(self);
    }
}

impl Drop for Finalizer {
    fn drop(&mut self) {
        super::tell(super::Stage::Leaving);
        drop(self.0.take());
    }
}

fn count(len: usize, what: &'static str) -> Result<Count, BootstrapError> {
    Count::try_from(len).map_err(|_| BootstrapError::TooLarge { what, len })
}
