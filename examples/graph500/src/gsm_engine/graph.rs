//! Kernel 1 of the Gossamer engine: each worker's rows of the CSR.
//!
//! The partition is the MPI baseline's [`Partition`], over the job's *workers* instead of its
//! ranks: worker w (global id) owns the w-th block of a multiple of 64 vertices, so that the
//! bottom-up BFS all-gathers whole words. Construction is the baseline's too, between workers:
//! each worker counts the degrees its own edges give every vertex, the counts are summed over the
//! team (allreduce) and each worker keeps its block's, which fixes the row offsets; then the edges
//! go to their owners in rounds of at most [`ROUND`] edges per worker (one team all-to-all each,
//! one message per destination worker, every non-self-loop edge sent as two directed entries),
//! and each worker places what it receives in its rows. Self-loops are dropped, duplicates kept.
//!
//! This module abstracts a worker's local rows. It does not search.

use super::comm::Comm;
use crate::kronecker::{EdgeList, Vertex};
pub use crate::mpi_engine::graph::Partition;

/// Edges per worker sent in one construction round: bounds the exchange buffers (two entries of
/// three words per edge: 3 MiB out, about as much in, each copied a few times on its way through
/// the team's all-to-all), so that the peak memory of construction is the edges and the rows, not
/// the messages. A quarter of the MPI baseline's round: at SCALE 20 on 2 ranks of 1 worker,
/// `1 << 19` peaked at 340 MiB per rank and `1 << 17` at 294 MiB, construction no slower (the
/// smaller buffers are reused by the allocator instead of mapped and faulted in afresh).
pub const ROUND: usize = 1 << 17;

/// This worker's rows of the undirected graph: targets are global labels.
#[derive(Clone, Debug)]
pub struct LocalGraph {
    part: Partition,
    offsets: Vec<usize>,
    targets: Vec<Vertex>,
    weights: Vec<f32>,
    total_entries: u64,
}

impl LocalGraph {
    /// Builds this worker's rows from every worker's `list` (collective: every worker calls it).
    /// Without `weighted`, weights are neither sent nor kept.
    pub fn build(comm: &Comm, part: Partition, list: &EdgeList, weighted: bool) -> Self {
        let n = part.num_vertices();
        // Degrees: what this worker's edges give every vertex, summed over the workers.
        let mut degree = vec![0u32; n];
        for e in list.edges.iter().filter(|e| !e.is_self_loop()) {
            degree[e.u as usize] += 1;
            degree[e.v as usize] += 1;
        }
        let degree = comm.sum(&degree);
        let mine = part.range_of(part.rank());
        let mut offsets = Vec::with_capacity(mine.len() + 1);
        offsets.push(0usize);
        let mut total = 0usize;
        for &d in &degree[mine.clone()] {
            total += d as usize;
            offsets.push(total);
        }
        let total_entries: u64 = degree.iter().map(|&d| u64::from(d)).sum();
        drop(degree);
        let mut next = offsets[..mine.len()].to_vec();
        let mut targets = vec![0 as Vertex; total];
        let mut weights = if weighted {
            vec![0f32; total]
        } else {
            Vec::new()
        };

        // Entries as words: source, target, and the weight's bits when weighted.
        let stride = if weighted { 3 } else { 2 };
        let rounds = comm.max_u64(list.len().div_ceil(ROUND) as u64) as usize;
        let mut counts = vec![0usize; part.size()];
        let mut cursor = vec![0usize; part.size()];
        let mut send: Vec<u32> = Vec::new();
        let mut recv: Vec<u32> = Vec::new();
        for round in 0..rounds {
            let lo = (round * ROUND).min(list.len());
            let hi = ((round + 1) * ROUND).min(list.len());
            let edges = &list.edges[lo..hi];
            let ws = &list.weights[lo..hi];
            counts.fill(0);
            for e in edges.iter().filter(|e| !e.is_self_loop()) {
                counts[part.owner(e.u)] += stride;
                counts[part.owner(e.v)] += stride;
            }
            let mut at = 0;
            for (c, n) in cursor.iter_mut().zip(&counts) {
                *c = at;
                at += n;
            }
            send.clear();
            send.resize(at, 0);
            for (e, &w) in edges.iter().zip(ws) {
                if e.is_self_loop() {
                    continue;
                }
                for (a, b) in [(e.u, e.v), (e.v, e.u)] {
                    let slot = &mut cursor[part.owner(a)];
                    send[*slot] = a;
                    send[*slot + 1] = b;
                    if weighted {
                        send[*slot + 2] = w.to_bits();
                    }
                    *slot += stride;
                }
            }
            comm.exchange(&send, &counts, &mut recv);
            for entry in recv.chunks_exact(stride) {
                let i = part.local(entry[0]);
                let slot = next[i];
                next[i] += 1;
                targets[slot] = entry[1];
                if weighted {
                    weights[slot] = f32::from_bits(entry[2]);
                }
            }
        }
        debug_assert!(next.iter().zip(&offsets[1..]).all(|(a, b)| a == b));
        Self {
            part,
            offsets,
            targets,
            weights,
            total_entries,
        }
    }

    /// The partition.
    pub fn partition(&self) -> &Partition {
        &self.part
    }

    /// Number of local vertices.
    pub fn local_count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Entries of all workers (twice the non-self-loop edges).
    pub fn total_entries(&self) -> u64 {
        self.total_entries
    }

    /// Degree of local vertex `i`.
    #[inline]
    pub fn degree(&self, i: usize) -> usize {
        self.offsets[i + 1] - self.offsets[i]
    }

    /// Neighbours (global labels) of local vertex `i`.
    #[inline]
    pub fn neighbors(&self, i: usize) -> &[Vertex] {
        &self.targets[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Weights of local vertex `i`'s edges, parallel to [`Self::neighbors`].
    #[inline]
    pub fn weights(&self, i: usize) -> &[f32] {
        &self.weights[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Whether `v` (owned by this worker) has an edge to another vertex.
    pub fn has_edge(&self, v: Vertex) -> bool {
        self.degree(self.part.local(v)) > 0
    }

    /// The search's edge count over all workers (collective): half the degrees of the reached
    /// vertices, as [`Csr::component_edges`](crate::csr::Csr::component_edges) counts.
    pub fn component_edges(&self, comm: &Comm, reached: impl Fn(usize) -> bool) -> u64 {
        let twice: u64 = (0..self.local_count())
            .filter(|&i| reached(i))
            .map(|i| self.degree(i) as u64)
            .sum();
        comm.sum(&[twice])[0] / 2
    }

    /// Bytes held by the rows.
    pub fn bytes(&self) -> usize {
        self.offsets.len() * size_of::<usize>()
            + self.targets.len() * size_of::<Vertex>()
            + self.weights.len() * size_of::<f32>()
    }
}
