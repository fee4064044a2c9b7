//! The collectives the Gossamer engine uses, each a method over the job's world [`Team`].
//!
//! This is the one file of [`crate::gsm_engine`] that names `gsm-collectives`, and it implements
//! [`Exchange`] for [`Comm`], so the shared kernels of [`crate::dist`] run over the runtime. It
//! offers the same handful of bulk-synchronous exchanges as the MPI baseline's
//! [`Comm`](crate::mpi_engine::comm::Comm) (all-to-all of `u32` words with per-member counts,
//! reductions of small arrays, all-gathers of blocks), but between *workers*: a member is one
//! worker of one rank, the members of a rank meet by pointer, and the ranks exchange bytes over the
//! runtime's fabric. It does not know about graphs.
//!
//! **Publishing before computing.** Every method ends with `publish`: the runtime stages a
//! worker's outgoing messages and publishes them when its scheduler polls, between fiber
//! resumptions, so a message the last step of a collective sends (a rank's leader handing the
//! result back to the other workers of its rank, say) would wait, staged, while the calling
//! fiber goes on computing — the other workers of the rank idle until its next collective. At
//! SCALE 20 on 1 rank of 2 workers that serialised the two workers (generation and search times
//! of one worker). `publish` is `gossamer::flush`.
//!
//! A collective's argument error (a count that does not add up) is a bug of the kernels, not
//! something a user can cause, so it panics with the team's message; a panic ends the job on
//! every rank.

use gsm_collectives::op::{BitOr, Max, Min, Sum};
use gsm_collectives::{Op, Plain, Team};

use crate::dist::Exchange;
use crate::kronecker::Vertex;

/// One worker's handle on the job's world team.
pub struct Comm {
    team: Team,
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Comm {{ member: {}, size: {} }}",
            self.team.index(),
            self.team.size()
        )
    }
}

/// Publishes what the calling worker has staged for other workers now (see the module docs).
fn publish() {
    gossamer::flush();
}

impl Comm {
    /// The world team, seen from the calling worker (call it on every worker, inside
    /// `gossamer::spmd`).
    pub fn world() -> Self {
        Self {
            team: Team::world(),
        }
    }

    fn reduce<T: Plain + Default, O: Op<T>>(&self, mine: &[T], op: O) -> Vec<T> {
        let mut all = vec![T::default(); mine.len()];
        self.team
            .allreduce(mine, &mut all, op)
            .expect("allreduce buffers of equal length");
        publish();
        all
    }

    /// Minimum over the workers of one value.
    pub fn min_u64(&self, mine: u64) -> u64 {
        self.reduce(&[mine], Min)[0]
    }

    /// Every worker's `mine`, concatenated in worker order (`counts[w]` elements from worker w,
    /// checked against what arrived).
    pub fn all_gather_var<T: Plain>(&self, mine: &[T], counts: &[usize]) -> Vec<T> {
        let parts = self.team.allgatherv(mine);
        publish();
        assert_eq!(parts.counts(), counts, "all-gather counts");
        parts.data
    }
}

impl Exchange for Comm {
    /// A quarter of the MPI baseline's round (3 MiB out, about as much in, each copied a few
    /// times on its way through the team's all-to-all): a larger round raises the peak memory per
    /// rank and builds no faster (the smaller buffers are reused by the allocator instead of
    /// mapped and faulted in afresh).
    const ROUND: usize = 1 << 17;
    /// The degree sum, the searches' per-vertex arrays and gathered validation arrays.
    const BYTES_PER_VERTEX: f64 = 32.0;

    /// This worker's index in the team (its global worker id).
    fn rank(&self) -> usize {
        self.team.index()
    }

    /// The number of workers of the job.
    fn size(&self) -> usize {
        self.team.size()
    }

    /// Waits until every worker has called it.
    fn barrier(&self) {
        self.team.barrier();
        publish();
    }

    fn sum_u32(&self, mine: &[u32]) -> Vec<u32> {
        self.reduce(mine, Sum)
    }

    fn sum_u64(&self, mine: &[u64]) -> Vec<u64> {
        self.reduce(mine, Sum)
    }

    /// Maximum over the workers of one value.
    fn max_u64(&self, mine: u64) -> u64 {
        self.reduce(&[mine], Max)[0]
    }

    /// Bitwise OR over the workers, in place.
    fn or_in_place(&self, words: &mut [u64]) {
        self.team.allreduce_in_place(words, BitOr);
        publish();
    }

    /// `value` as worker `root` has it.
    fn broadcast_bool(&self, root: usize, value: bool) -> bool {
        let mut byte = [u8::from(value)];
        self.team
            .broadcast(&mut byte, root)
            .expect("the root is a member");
        publish();
        byte[0] != 0
    }

    fn all_gather_words(&self, mine: &[u64], all: &mut [u64]) {
        self.team
            .allgather(mine, all)
            .expect("all-gather block sizes");
        publish();
    }

    fn all_gather_vertices(&self, mine: &[Vertex], counts: &[usize]) -> Vec<Vertex> {
        self.all_gather_var(mine, counts)
    }

    fn all_gather_dists(&self, mine: &[f32], counts: &[usize]) -> Vec<f32> {
        self.all_gather_var(mine, counts)
    }

    /// Byte strings of every worker, in worker order.
    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let parts = self.team.allgatherv(mine);
        publish();
        (0..parts.len()).map(|i| parts.part(i).to_vec()).collect()
    }

    /// Personalised all-to-all of `u32` words: `send` holds the words for worker 0, then for
    /// worker 1, …, `send_counts[w]` of them for worker w. The words received (from worker 0
    /// first) replace `recv`'s contents. One message per destination worker.
    fn exchange(&self, send: &[u32], send_counts: &[usize], recv: &mut Vec<u32>) {
        let parts = self
            .team
            .alltoallv(send, send_counts)
            .expect("all-to-all counts add up");
        publish();
        *recv = parts.data;
    }

    /// [`Self::exchange`], also returning the minimum over the workers of `mine`, which travels
    /// at the head of every part (two words), so that one exchange serves both.
    fn exchange_min(
        &self,
        send: &[u32],
        send_counts: &[usize],
        mine: u64,
        recv: &mut Vec<u32>,
    ) -> u64 {
        let head = [mine as u32, (mine >> 32) as u32];
        let mut framed = Vec::with_capacity(send.len() + 2 * send_counts.len());
        let mut counts = Vec::with_capacity(send_counts.len());
        let mut at = 0;
        for &c in send_counts {
            framed.extend_from_slice(&head);
            framed.extend_from_slice(&send[at..at + c]);
            counts.push(c + 2);
            at += c;
        }
        let parts = self
            .team
            .alltoallv(&framed, &counts)
            .expect("all-to-all counts add up");
        publish();
        recv.clear();
        let mut lowest = mine;
        for i in 0..parts.len() {
            let p = parts.part(i);
            lowest = lowest.min(u64::from(p[0]) | (u64::from(p[1]) << 32));
            recv.extend_from_slice(&p[2..]);
        }
        lowest
    }
}
