//! Kernel 3 of `--engine gsm`: asynchronous delta-stepping (Meyer and Sanders 2003) by delegation.
//!
//! Buckets of width Δ as in the sequential and bulk-synchronous kernels (every edge relaxed, no
//! light/heavy split). Bucket k is one job-wide completion scope ([`gossamer::finish_all_min`]):
//! each worker settles its vertices of bucket k in rounds (those filed in it, then those the round
//! filed in it); a relaxation of a vertex it owns applies at once, and the relaxations of a
//! round for another worker's vertices go to that owner as one delegated closure with a `Vec`
//! of `(v, d, u)` ([`gossamer::Batches`]). The owner lowers the distances and, if some vertex falls
//! in the bucket it is settling, spawns a fiber that settles from there, delegating onward (one
//! fiber for every batch that arrives before it runs, so that batches arriving together are
//! settled in one round); other vertices wait in their buckets. When the scope is done, bucket k
//! is settled everywhere, and the scope's last wave also carries the minimum over the workers of
//! their lowest non-empty bucket, the next one: no exchange rounds within a bucket, and no
//! collective of its own. A worker does not send a vertex a distance that is not below the
//! lowest it has sent it this search.
//!
//! A distance is only ever set to `dist[u] + w`, and only when lower, so the distances are the
//! fixpoint every kernel reaches, bit for bit; a parent among equal-distance ones may differ.

use gossamer::{Trust, finish_all_min};

use super::comm::Comm;
use super::kernels::Owned;
use crate::bfs::NO_PARENT;
use crate::dist::Exchange;
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
        let drain = || me.apply(move |o| o.drain(k as usize));
        k = finish_all_min(drain, || me.apply(|o| o.lowest())).1;
    }
    let (parent, dist) = me.apply(|o| (std::mem::take(&mut o.parent), std::mem::take(&mut o.dist)));
    LocalPaths { parent, dist }
}

impl Owned {
    fn start_sssp(&mut self, root: Vertex, delta: f32) {
        let local = self.part.local_count();
        (self.parent, self.dist) = (vec![NO_PARENT; local], vec![f32::INFINITY; local]);
        self.done_at = vec![f32::INFINITY; local];
        self.sent = vec![f32::INFINITY; self.part.num_vertices()];
        // A new distance is below the current bucket's end plus the largest weight (< 1).
        self.buckets = vec![Vec::new(); (1.0 / delta).ceil() as usize + 2];
        (self.current, self.delta) = (0, delta);
        if self.part.owner(root) == self.part.rank() {
            self.improve(self.part.local(root), 0.0, root);
        }
    }

    /// The lowest bucket with vertices filed here, or `u64::MAX`.
    fn lowest(&self) -> u64 {
        let ring = self.buckets.len();
        (0..ring)
            .find(|k| !self.buckets[(self.current + k) % ring].is_empty())
            .map_or(u64::MAX, |k| (self.current + k) as u64)
    }

    /// Settles this worker's vertices of bucket `k`, in rounds: the vertices filed in it, then
    /// those the round filed in it, until none is (first in, first out: settling the newest
    /// first relaxed the same edges many times over).
    fn drain(&mut self, k: usize) {
        self.current = k;
        let slot = k % self.buckets.len();
        while !self.buckets[slot].is_empty() {
            // The two vectors trade places, so that neither is allocated afresh each round.
            let mut round =
                std::mem::replace(&mut self.buckets[slot], std::mem::take(&mut self.spare));
            self.settle(&round);
            round.clear();
            self.spare = round;
        }
    }

    /// The delegated relaxations: `(v, d, u)` triples for vertices owned here; those that fall
    /// in the bucket being settled here are settled at once.
    fn relax(&mut self, batch: &[u32]) {
        let mut now = false;
        for r in batch.chunks(3) {
            now |= self.improve(self.part.local(r[0]), f32::from_bits(r[1]), r[2]) == self.current;
        }
        // One settling fiber for all the batches that arrive before it runs, not one per batch.
        if now && !self.pending {
            self.pending = true;
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
        (self.dist[j], self.parent[j]) = (d, u);
        let b = (d / self.delta) as usize;
        let ring = self.buckets.len();
        self.buckets[b % ring].push(j as u32);
        b
    }

    /// Relaxes the edges of the vertices of `round` still in the current bucket.
    fn settle(&mut self, round: &[u32]) {
        let (g, part) = (self.g.clone(), self.part);
        for &i in round {
            let (i, du) = (i as usize, self.dist[i as usize]);
            if self.done_at[i] == du || (du / self.delta) as usize != self.current {
                continue;
            }
            self.done_at[i] = du;
            let u = part.global(i);
            for (&v, &w) in g.neighbors(i).iter().zip(g.weights(i)) {
                let (d, owner) = (du + w, part.owner(v));
                if owner == part.rank() {
                    self.improve(part.local(v), d, u);
                } else if d < self.sent[v as usize] {
                    self.sent[v as usize] = d;
                    self.out.extend(owner, [v, d.to_bits(), u]);
                }
            }
        }
        self.out.send(|o, batch| o.relax(&batch));
    }
}
