//! The collectives the MPI baseline uses, each a safe method over `MPI_COMM_WORLD`.
//!
//! This is the one file of the crate that names the `mpi` crate, and it implements [`Exchange`] for
//! [`Comm`], so the shared kernels of [`crate::dist`] run over MPI. It abstracts the handful of
//! bulk-synchronous exchanges the kernels need (all-to-all of `u32` words with per-rank counts,
//! reductions of small arrays, all-gathers of blocks); it does not know about graphs. Open MPI's
//! default error handler aborts the job when a call fails, so nothing here returns an error; a
//! buffer too large for MPI's `int` counts panics with the size, before the call.

use mpi::Count;
use mpi::datatype::{Equivalence, Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};

use crate::dist::Exchange;
use crate::kronecker::Vertex;
use crate::outcome::CommError;

/// An initialised MPI library and its world communicator; dropping it calls `MPI_Finalize`,
/// except while a panic unwinds (see `Finalizer`).
pub struct Comm {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    // Declared last: dropped (finalising MPI) after the communicator.
    _universe: Finalizer,
}

/// Finalises MPI when dropped, unless a panic is unwinding: a panic on one rank (a failed
/// assertion, an MPI count out of range) happens while the other ranks are in a collective call
/// this rank will never make, and `MPI_Finalize`, which waits for every rank, would then hang the
/// whole job instead of letting this rank exit (with 101) and the launcher end the job.
struct Finalizer(std::mem::ManuallyDrop<Universe>);

impl Drop for Finalizer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // SAFETY: dropped once, here; the field is not used after.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.0) };
        }
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Comm {{ rank: {}, size: {} }}", self.rank, self.size)
    }
}

fn count(len: usize, what: &str) -> Count {
    Count::try_from(len).unwrap_or_else(|_| {
        panic!("{what}: {len} elements exceed MPI's int count; use more ranks or a smaller SCALE")
    })
}

/// Displacements of consecutive blocks with these counts.
fn displacements(counts: &[Count], what: &str) -> (Vec<Count>, usize) {
    let mut displs = Vec::with_capacity(counts.len());
    let mut total = 0usize;
    for &c in counts {
        displs.push(count(total, what));
        total += c as usize;
    }
    count(total, what);
    (displs, total)
}

impl Comm {
    /// `MPI_Init_thread` (funnelled: only the main thread calls MPI; the baseline has no other).
    pub fn init() -> Result<Self, CommError> {
        let (universe, _provided) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or(CommError::AlreadyInitialised)?;
        let world = universe.world();
        // Ranks and sizes are never negative.
        let rank = world.rank() as usize;
        let size = world.size() as usize;
        // Under another MPI's launcher every rank would run the whole benchmark alone.
        gossamer::bootstrap::check_world_size(size as u32)?;
        Ok(Self {
            world,
            rank,
            size,
            _universe: Finalizer(std::mem::ManuallyDrop::new(universe)),
        })
    }

    /// Element-wise sum over the ranks (`MPI_Allreduce`, `MPI_SUM`).
    pub fn sum<T: Equivalence + Copy + Default>(&self, mine: &[T]) -> Vec<T> {
        let mut all = vec![T::default(); mine.len()];
        count(mine.len(), "sum");
        self.world
            .all_reduce_into(mine, &mut all[..], mpi::collective::SystemOperation::sum());
        all
    }

    /// Minimum over the ranks of one value.
    pub fn min_u64(&self, mine: u64) -> u64 {
        let mut all = 0u64;
        self.world
            .all_reduce_into(&mine, &mut all, mpi::collective::SystemOperation::min());
        all
    }

    /// `MPI_Allgather` of equal blocks: `all` is `size` blocks of `mine.len()` elements.
    pub fn all_gather_blocks<T: Equivalence>(&self, mine: &[T], all: &mut [T]) {
        assert_eq!(all.len(), mine.len() * self.size, "all-gather block sizes");
        count(all.len(), "all-gather");
        self.world.all_gather_into(mine, all);
    }

    /// `MPI_Allgatherv`: rank r contributes `counts[r]` elements (`mine` on this rank); returns
    /// the concatenation in rank order.
    pub fn all_gather_var<T: Equivalence + Copy + Default>(
        &self,
        mine: &[T],
        counts: &[usize],
    ) -> Vec<T> {
        assert_eq!(counts.len(), self.size);
        assert_eq!(
            counts[self.rank],
            mine.len(),
            "this rank's all-gather count"
        );
        let counts: Vec<Count> = counts.iter().map(|&c| count(c, "all-gather")).collect();
        let (displs, total) = displacements(&counts, "all-gather");
        let mut all = vec![T::default(); total];
        {
            let mut partition = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(mine, &mut partition);
        }
        all
    }
}

impl Exchange for Comm {
    /// Two entries of three words per edge: 12 MiB out, about as much in.
    const ROUND: usize = 1 << 19;
    /// The degree sum and gathered validation arrays.
    const BYTES_PER_VERTEX: f64 = 24.0;

    /// This process's rank.
    fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    fn size(&self) -> usize {
        self.size
    }

    /// `MPI_Barrier`.
    fn barrier(&self) {
        self.world.barrier();
    }

    fn sum_u32(&self, mine: &[u32]) -> Vec<u32> {
        self.sum(mine)
    }

    fn sum_u64(&self, mine: &[u64]) -> Vec<u64> {
        self.sum(mine)
    }

    /// Maximum over the ranks of one value.
    fn max_u64(&self, mine: u64) -> u64 {
        let mut all = 0u64;
        self.world
            .all_reduce_into(&mine, &mut all, mpi::collective::SystemOperation::max());
        all
    }

    /// Bitwise OR over the ranks, in place.
    fn or_in_place(&self, words: &mut [u64]) {
        let mine = words.to_vec();
        count(mine.len(), "bitwise or");
        self.world.all_reduce_into(
            &mine[..],
            words,
            mpi::collective::SystemOperation::bitwise_or(),
        );
    }

    /// `value` as rank `root` has it (`MPI_Bcast` of one byte).
    fn broadcast_bool(&self, root: usize, value: bool) -> bool {
        let mut byte = u8::from(value);
        self.world
            .process_at_rank(root as mpi::Rank)
            .broadcast_into(&mut byte);
        byte != 0
    }

    fn all_gather_words(&self, mine: &[u64], all: &mut [u64]) {
        self.all_gather_blocks(mine, all);
    }

    fn all_gather_vertices(&self, mine: &[Vertex], counts: &[usize]) -> Vec<Vertex> {
        self.all_gather_var(mine, counts)
    }

    fn all_gather_dists(&self, mine: &[f32], counts: &[usize]) -> Vec<f32> {
        self.all_gather_var(mine, counts)
    }

    /// Byte strings of every rank, in rank order (a count all-gather, then `MPI_Allgatherv`).
    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let mut counts = vec![0u64; self.size];
        self.all_gather_blocks(&[mine.len() as u64], &mut counts);
        let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
        let all = self.all_gather_var(mine, &counts);
        let mut out = Vec::with_capacity(self.size);
        let mut at = 0;
        for c in counts {
            out.push(all[at..at + c].to_vec());
            at += c;
        }
        out
    }

    /// Personalised all-to-all of `u32` words: `send` holds the words for rank 0, then for rank
    /// 1, …, `send_counts[r]` of them for rank r. The words received (from rank 0 first) replace
    /// `recv`'s contents. One `MPI_Alltoall` of the counts, then one `MPI_Alltoallv`.
    fn exchange(&self, send: &[u32], send_counts: &[usize], recv: &mut Vec<u32>) {
        self.exchange_min(send, send_counts, u64::MAX, recv);
    }

    /// [`Self::exchange`], also returning the minimum over the ranks of `mine`, which travels
    /// with the counts (so one `MPI_Alltoall` serves both, saving an `MPI_Allreduce`).
    fn exchange_min(
        &self,
        send: &[u32],
        send_counts: &[usize],
        mine: u64,
        recv: &mut Vec<u32>,
    ) -> u64 {
        assert_eq!(send_counts.len(), self.size);
        let counts: Vec<Count> = send_counts
            .iter()
            .map(|&c| count(c, "all-to-all"))
            .collect();
        let (send_displs, send_total) = displacements(&counts, "all-to-all");
        assert_eq!(send_total, send.len(), "all-to-all send counts");
        let header: Vec<u64> = counts.iter().flat_map(|&c| [c as u64, mine]).collect();
        let mut got = vec![0u64; 2 * self.size];
        self.world.all_to_all_into(&header[..], &mut got[..]);
        let recv_counts: Vec<Count> = got.chunks_exact(2).map(|h| h[0] as Count).collect();
        let lowest = got.chunks_exact(2).map(|h| h[1]).min().unwrap_or(mine);
        let (recv_displs, recv_total) = displacements(&recv_counts, "all-to-all");
        recv.clear();
        recv.resize(recv_total, 0);
        let out = Partition::new(send, &counts[..], &send_displs[..]);
        let mut into = PartitionMut::new(&mut recv[..], &recv_counts[..], &recv_displs[..]);
        self.world.all_to_all_varcount_into(&out, &mut into);
        lowest
    }
}
