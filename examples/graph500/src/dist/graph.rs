//! Kernel 1 of the distributed engines: the 1-D block partition and each rank's rows of the CSR.
//!
//! A *rank* here is a member of the [`Exchange`]: an MPI rank, or a Gossamer worker.
//!
//! Vertices are split in contiguous blocks: rank r owns `r·chunk .. (r+1)·chunk` (clipped to N),
//! with `chunk = ⌈N / ranks⌉` rounded up to a multiple of 64 so that each rank's part of a vertex
//! bitmap is whole words (the bottom-up BFS all-gathers it). The generator's scrambled labels
//! spread the high-degree vertices over the blocks, so blocks balance about as well as a cyclic
//! split would, and a block split makes gathered arrays plain concatenations.
//!
//! Construction, as the sequential [`Csr`](crate::csr::Csr) does it but distributed: each rank
//! counts the degrees its own edges give every vertex, the counts are summed over the ranks
//! ([`Exchange::sum_u32`]) and each rank keeps its block's, which fixes the row offsets; then the
//! edges go to their owners in rounds of at most [`Exchange::ROUND`] edges per rank (one
//! [`Exchange::exchange`] each, every non-self-loop edge sent as two directed entries, one to each
//! endpoint's owner), and each rank places what it receives in its rows. Self-loops are dropped,
//! duplicates kept. The order of a row's entries differs from the sequential build's; no kernel
//! depends on it.
//!
//! This module abstracts ownership and the local rows. It does not search.

use super::Exchange;
use crate::kronecker::{EdgeList, Vertex};

/// Which rank owns which vertex: contiguous blocks of a multiple of 64 vertices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Partition {
    num_vertices: usize,
    chunk: usize,
    rank: usize,
    size: usize,
}

impl Partition {
    /// The partition of `num_vertices` over `size` ranks, seen from `rank`.
    pub fn new(num_vertices: usize, size: usize, rank: usize) -> Self {
        assert!(rank < size, "rank {rank} of {size}");
        let chunk = num_vertices.div_ceil(size).next_multiple_of(64);
        Self {
            num_vertices,
            chunk,
            rank,
            size,
        }
    }

    /// Number of vertices of the whole graph.
    pub fn num_vertices(&self) -> usize {
        self.num_vertices
    }

    /// The block length (the last blocks may own fewer vertices, or none).
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The rank owning `v`.
    #[inline]
    pub fn owner(&self, v: Vertex) -> usize {
        v as usize / self.chunk
    }

    /// The vertices rank `r` owns.
    pub fn range_of(&self, r: usize) -> std::ops::Range<usize> {
        let start = (r * self.chunk).min(self.num_vertices);
        let end = ((r + 1) * self.chunk).min(self.num_vertices);
        start..end
    }

    /// The first vertex this rank owns.
    #[inline]
    pub fn first(&self) -> usize {
        self.range_of(self.rank).start
    }

    /// Number of vertices this rank owns.
    pub fn local_count(&self) -> usize {
        self.range_of(self.rank).len()
    }

    /// How many vertices every rank owns, in rank order.
    pub fn counts(&self) -> Vec<usize> {
        (0..self.size).map(|r| self.range_of(r).len()).collect()
    }

    /// The local index of `v`, which this rank must own.
    #[inline]
    pub fn local(&self, v: Vertex) -> usize {
        debug_assert_eq!(self.owner(v), self.rank, "vertex {v} is not local");
        v as usize - self.rank * self.chunk
    }

    /// The global label of local vertex `i`.
    #[inline]
    pub fn global(&self, i: usize) -> Vertex {
        (self.rank * self.chunk + i) as Vertex
    }
}

/// This rank's rows of the undirected graph: targets are global labels.
#[derive(Clone, Debug, Default)]
pub struct LocalGraph {
    part: Partition,
    offsets: Vec<usize>,
    targets: Vec<Vertex>,
    weights: Vec<f32>,
    total_entries: u64,
    /// Whether [`sort_rows_by_weight`](Self::sort_rows_by_weight) ordered the rows.
    by_weight: bool,
}

impl LocalGraph {
    /// Builds this rank's rows from every rank's `list` (collective: every rank calls it).
    /// Without `weighted`, weights are neither sent nor kept.
    pub fn build<C: Exchange>(comm: &C, part: Partition, list: &EdgeList, weighted: bool) -> Self {
        let n = part.num_vertices();
        // Degrees: what this rank's edges give every vertex, summed over the ranks.
        let mut degree = vec![0u32; n];
        for e in list.edges.iter().filter(|e| !e.is_self_loop()) {
            degree[e.u as usize] += 1;
            degree[e.v as usize] += 1;
        }
        let degree = comm.sum_u32(&degree);
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
        let rounds = comm.max_u64(list.len().div_ceil(C::ROUND) as u64) as usize;
        let mut counts = vec![0usize; part.size()];
        let mut cursor = vec![0usize; part.size()];
        let mut send: Vec<u32> = Vec::new();
        let mut recv: Vec<u32> = Vec::new();
        for round in 0..rounds {
            let lo = (round * C::ROUND).min(list.len());
            let hi = ((round + 1) * C::ROUND).min(list.len());
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
            by_weight: false,
        }
    }

    /// Orders each row by weight, lightest first, so that the edges of a vertex that stay in its
    /// delta-stepping bucket are a prefix of its row (the delegation kernel's SSSP needs it).
    pub fn sort_rows_by_weight(&mut self) {
        self.by_weight = true;
        // Unweighted (BFS only), or no edges here: nothing to order.
        if self.weights.is_empty() {
            return;
        }
        let mut row = Vec::new();
        for i in 0..self.local_count() {
            let r = self.offsets[i]..self.offsets[i + 1];
            row.clear();
            row.extend(r.clone().map(|k| (self.weights[k], self.targets[k])));
            row.sort_unstable_by(|a: &(f32, Vertex), b| a.0.total_cmp(&b.0));
            for (k, &(w, v)) in r.zip(&row) {
                (self.weights[k], self.targets[k]) = (w, v);
            }
        }
    }

    /// Whether each row is ordered by weight, lightest first.
    pub fn by_weight(&self) -> bool {
        self.by_weight
    }

    /// The partition.
    pub fn partition(&self) -> &Partition {
        &self.part
    }

    /// Number of local vertices.
    pub fn local_count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Entries of all ranks (twice the non-self-loop edges).
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

    /// Whether `v` (owned by this rank) has an edge to another vertex.
    pub fn has_edge(&self, v: Vertex) -> bool {
        self.degree(self.part.local(v)) > 0
    }

    /// The search's edge count over all ranks (collective): half the degrees of the reached
    /// vertices, as [`Csr::component_edges`](crate::csr::Csr::component_edges) counts.
    pub fn component_edges<C: Exchange>(&self, comm: &C, reached: impl Fn(usize) -> bool) -> u64 {
        let twice: u64 = (0..self.local_count())
            .filter(|&i| reached(i))
            .map(|i| self.degree(i) as u64)
            .sum();
        comm.sum_u64(&[twice])[0] / 2
    }

    /// Bytes held by the rows.
    pub fn bytes(&self) -> usize {
        self.offsets.len() * size_of::<usize>()
            + self.targets.len() * size_of::<Vertex>()
            + self.weights.len() * size_of::<f32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_every_vertex_once_in_whole_words() {
        for (n, size) in [(1024, 1), (1024, 2), (1024, 3), (128, 5), (2, 3)] {
            let parts: Vec<_> = (0..size).map(|r| Partition::new(n, size, r)).collect();
            assert_eq!(parts[0].chunk() % 64, 0);
            let mut seen = vec![0; n];
            for p in &parts {
                for v in p.range_of(p.rank()) {
                    assert_eq!(p.owner(v as Vertex), p.rank());
                    assert_eq!(p.global(p.local(v as Vertex)), v as Vertex);
                    seen[v] += 1;
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "n {n} size {size}");
            assert_eq!(parts[0].counts().iter().sum::<usize>(), n);
        }
    }
}
