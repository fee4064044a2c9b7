//! Kernel 3 of `--engine gsm`: asynchronous delta-stepping (Meyer and Sanders 2003) by delegation.
//!
//! Buckets of width Δ as in the other kernels, with Meyer and Sanders' split of each vertex's
//! edges: those whose relaxation stays in the vertex's bucket and those that leave it (rows are
//! ordered by weight, [`Kernels::prepare`](crate::dist::Kernels::prepare), so each is a part of
//! the row). Bucket k is one job-wide completion scope ([`gossamer::finish_all_min`]): each worker
//! first relaxes the leaving edges of the vertices it settled in the bucket before (their
//! distances are final now, so those edges are relaxed once per search), then settles its
//! vertices of bucket k in rounds (those filed in it, then those the round filed in it),
//! relaxing only the edges that stay in k. A relaxation of a vertex it owns applies at once;
//! those of a step for another worker's vertices go to that owner as one delegated closure with a
//! `Vec` of `(v, d, u)` ([`gossamer::Batches`]). The owner lowers the distances and, if some
//! vertex falls in the bucket it is settling, spawns a fiber that settles from there, delegating
//! onward (one fiber for every batch that arrives before it runs); other vertices wait in their
//! buckets. When the scope is done, bucket k is settled everywhere, and the scope's last wave
//! carries the minimum over the workers of the next bucket (their lowest non-empty one, or k + 1
//! while leaving edges are still to relax): no exchange rounds, and no collective of its own. A
//! worker does not send a vertex a distance that is not below the lowest it has sent it. A
//! bucket entry and a settled one carry the distance of their time: one whose vertex has a lower
//! distance since is stale and skipped, so a vertex lowered within its bucket is settled again
//! but leaves it once, from its last distance.
//!
//! A distance is only ever set to `dist[u] + w`, and only when lower, so the distances are the
//! fixpoint every kernel reaches, bit for bit; a parent among equal-distance ones may differ.

use gossamer::{Trust, finish_all_min};

use super::comm::Comm;
use super::kernels::Owned;
use crate::bfs::NO_PARENT;
use crate::dist::Exchange;
use crate::dist::graph::LocalGraph;
use crate::dist::sssp::LocalPaths;
use crate::kronecker::Vertex;

/// Delta-stepping from `root` with bucket width `delta` (collective).
pub(super) fn search(me: &Trust<Owned>, comm: &Comm, root: Vertex, delta: f32) -> LocalPaths {
    assert!(
        delta > 0.0 && delta <= 1.0,
        "bucket width {delta} outside (0, 1]"
    );
    me.apply(move |o| o.start_sssp(root, delta));
    // No relaxation may reach a worker before its reset.
    comm.barrier();
    let mut k = 0;
    while k != u64::MAX {
        let step = || me.apply(move |o| o.step(k as usize));
        k = finish_all_min(step, || me.apply(|o| o.lowest())).1;
    }
    let (parent, dist) = me.apply(|o| (std::mem::take(&mut o.parent), std::mem::take(&mut o.dist)));
    LocalPaths { parent, dist }
}

impl Owned {
    fn start_sssp(&mut self, root: Vertex, delta: f32) {
        assert!(self.g.by_weight(), "SSSP needs rows ordered by weight");
        let local = self.part.local_count();
        (self.parent, self.dist) = (vec![NO_PARENT; local], vec![f32::INFINITY; local]);
        self.sent = vec![f32::INFINITY; self.part.num_vertices()];
        // A new distance is below the current bucket's end plus the largest weight (< 1).
        self.buckets = vec![Vec::new(); (1.0 / delta).ceil() as usize + 2];
        (self.current, self.delta) = (0, delta);
        if self.part.owner(root) == self.part.rank() {
            self.improve(self.part.local(root), 0.0, root);
        }
    }

    /// The lowest bucket with work here (the next one while leaving edges wait), or `u64::MAX`.
    fn lowest(&self) -> u64 {
        let ring = self.buckets.len();
        let busy = |k: &usize| {
            !self.buckets[(self.current + k) % ring].is_empty()
                || *k == 1 && !self.settled.is_empty()
        };
        (0..ring)
            .find(busy)
            .map_or(u64::MAX, |k| (self.current + k) as u64)
    }

    /// Bucket `k` here: relaxes the edges that leave the last bucket from the vertices settled
    /// in it (their distances are final now; each once, from its last distance), then settles
    /// this worker's vertices of bucket k.
    fn step(&mut self, k: usize) {
        let (g, mut last) = (self.g.clone(), std::mem::take(&mut self.settled));
        // In row order, so that the rows are read one after another.
        last.sort_unstable_by_key(|e| e.0);
        for (i, d) in last {
            if self.dist[i as usize] == d {
                self.relax_edges(&g, i as usize, false);
            }
        }
        self.drain(k);
    }

    /// Settles this worker's vertices of bucket `k` in rounds: those filed in it, then those the
    /// round filed in it, until none is (first in, first out: settling the newest first relaxed
    /// the same edges many times over). An entry whose vertex has a lower distance since is stale.
    fn drain(&mut self, k: usize) {
        let (g, slot) = (self.g.clone(), k % self.buckets.len());
        self.current = k;
        loop {
            for (i, d) in std::mem::take(&mut self.buckets[slot]) {
                if self.dist[i as usize] == d {
                    self.settled.push((i, d));
                    self.relax_edges(&g, i as usize, true);
                }
            }
            self.out.send(|o, batch| o.relax(&batch));
            if self.buckets[slot].is_empty() {
                return;
            }
        }
    }

    /// The delegated relaxations: `(v, d, u)` triples for vertices owned here; those that fall
    /// in the bucket being settled here are settled at once, by one fiber for all the batches
    /// that arrive before it runs.
    fn relax(&mut self, batch: &[u32]) {
        let mut now = false;
        for r in batch.chunks(3) {
            now |= self.improve(self.part.local(r[0]), f32::from_bits(r[1]), r[2]) == self.current;
        }
        if now && !std::mem::replace(&mut self.pending, true) {
            let me = self.out.trusts()[self.part.rank()].clone();
            let _ = gossamer::spawn(move || me.apply(|o| (o.pending = false, o.drain(o.current))));
        }
    }

    /// Lowers vertex `j`'s distance to `d` through `u` if that is lower, filing it in its bucket;
    /// returns the bucket (`usize::MAX` if not lower).
    fn improve(&mut self, j: usize, d: f32, u: Vertex) -> usize {
        if d >= self.dist[j] {
            return usize::MAX;
        }
        let (b, ring) = ((d / self.delta) as usize, self.buckets.len());
        (self.dist[j], self.parent[j]) = (d, u);
        self.buckets[b % ring].push((j as u32, d));
        b
    }

    /// Relaxes the edges of vertex `i` that stay in its bucket (`inside`) or those that leave it
    /// (its row is ordered by weight, so each is a part of the row).
    fn relax_edges(&mut self, g: &LocalGraph, i: usize, inside: bool) {
        let (du, u, part) = (self.dist[i], self.part.global(i), self.part);
        let (bucket, ws) = (|w| ((du + w) / self.delta) as usize, g.weights(i));
        // A linear scan: the in-bucket edges are a few at the row's start, and a binary search's
        // dependent loads missed the cache one after another.
        let split = ws
            .iter()
            .position(|&w| bucket(w) != bucket(0.0))
            .unwrap_or(ws.len());
        let edges = if inside { 0..split } else { split..ws.len() };
        for (&v, &w) in g.neighbors(i)[edges.clone()].iter().zip(&ws[edges]) {
            let (d, owner) = (du + w, part.owner(v));
            if owner == part.rank() {
                self.improve(part.local(v), d, u);
            } else if d < self.sent[v as usize] {
                self.sent[v as usize] = d;
                self.out.extend(owner, [v, d.to_bits(), u]);
            }
        }
    }
}
