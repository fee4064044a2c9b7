//! The only MPI calls the runtime makes, each wrapped in a safe function that returns
//! [`BootstrapError`]. This is the one place that names the `mpi` crate.
//!
//! Open MPI's default error handler (`MPI_ERRORS_ARE_FATAL`) aborts the job when a call itself
//! fails, so the errors returned here are the ones that can be seen before a call is made (MPI
//! already initialised, a buffer too large for MPI's `int` counts). Nothing here is on the data
//! path: these calls run at start-up, at the final barrier and at `MPI_Finalize`.

use super::BootstrapError;
use mpi::Count;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};

/// An initialised MPI library; dropping it calls `MPI_Finalize`.
pub(super) struct Mpi {
    universe: Universe,
    world: SimpleCommunicator,
}

/// `MPI_Init_thread` with `MPI_THREAD_FUNNELED`: the process has several threads (the workers),
/// but only the thread that created the [`Job`](super::Job) calls MPI.
pub(super) fn init() -> Result<Mpi, BootstrapError> {
    if mpi::environment::is_initialized() {
        return Err(BootstrapError::AlreadyInitialised);
    }
    let (universe, _provided) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .ok_or(BootstrapError::AlreadyInitialised)?;
    let world = universe.world();
    Ok(Mpi { universe, world })
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

    /// `MPI_Barrier` on `MPI_COMM_WORLD`.
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

/// Calls `MPI_Finalize` when dropped (or by [`finalize`](Self::finalize)); `Send` and `Sync`, so it
/// can live in an error value.
pub(super) struct Finalizer(Universe);

impl Finalizer {
    /// `MPI_Finalize` now.
    pub(super) fn finalize(self) {
        drop(self.0);
    }
}

fn count(len: usize, what: &'static str) -> Result<Count, BootstrapError> {
    Count::try_from(len).map_err(|_| BootstrapError::TooLarge { what, len })
}
