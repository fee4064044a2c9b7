//! Delta-stepping SSSP on a team of threads (Meyer and Sanders 2003) with bucket fusion (Zhang,
//! Brahmakshatriya, Shun, Amarasinghe et al., "Optimizing ordered graph algorithms with
//! GraphIt", CGO 2020), as GAPBS's `sssp.cc` runs it.
//!
//! The current bucket's vertices sit in one shared frontier; each thread relaxes a share of them
//! and files the vertices it improves into its own buckets. Bucket fusion: while a thread's own
//! copy of the current bucket stays small, it keeps relaxing it without a barrier, so the long
//! tail of nearly empty buckets costs no synchronisation. Then the threads agree on the lowest
//! non-empty bucket, copy their parts of it into the frontier, and go on.
//!
//! Graph500 wants parents as well as distances, so a vertex's distance and parent are one
//! 64-bit word (the distance's bits above the parent) changed by one compare-and-swap: a
//! distance is only ever set with the parent whose relaxation gave it, which keeps the tree exact
//! for validation (`dist[v] = dist[parent] + w` in `f32`) and acyclic (the distance strictly
//! falls at each change). Non-negative `f32` order as their bits do.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ::graph500::bfs::NO_PARENT;
use ::graph500::csr::Csr;
use ::graph500::kronecker::Vertex;

use super::frontier::Queue;
use super::team::{self, Chunks};

/// A thread keeps relaxing its own copy of the current bucket while it holds fewer vertices
/// than this (GAPBS's `kBinSizeThreshold`).
const FUSE_BELOW: usize = 1000;
/// The frontier is taken in chunks of this many vertices.
const CHUNK: usize = 64;
/// No bucket: the search is over.
const NO_BUCKET: usize = usize::MAX;

/// The bucket width for `g`: the mean weight over twice the average degree, i.e. about half the
/// weight at which the lightest edge of a vertex lies. Narrow enough that few vertices are
/// relaxed twice; bucket fusion makes the many buckets this gives cheap.
pub fn delta_for(g: &Csr) -> f32 {
    let n = g.num_vertices();
    let entries = g.num_entries();
    if entries == 0 {
        return 1.0;
    }
    let total: f64 = (0..n as Vertex)
        .map(|v| g.weights(v).iter().map(|&w| f64::from(w)).sum::<f64>())
        .sum();
    let mean_weight = total / entries as f64;
    let average_degree = entries as f64 / n as f64;
    ((mean_weight / (2.0 * average_degree)) as f32).clamp(1e-4, 1.0)
}

/// The frontier of one search, kept from search to search (allocated once per graph).
#[derive(Debug)]
pub struct Space {
    frontier: Queue,
}

impl Space {
    /// A frontier for searches over `g`: a bucket holds at most one entry per improving
    /// relaxation, bounded in practice by the number of edge entries.
    pub fn new(g: &Csr) -> Self {
        Self {
            frontier: Queue::with_capacity(g.num_entries().max(g.num_vertices()) + 1),
        }
    }
}

#[inline]
fn pack(dist: f32, parent: Vertex) -> u64 {
    (u64::from(dist.to_bits()) << 32) | u64::from(parent)
}

#[inline]
fn dist_of(word: u64) -> f32 {
    f32::from_bits((word >> 32) as u32)
}

/// State the members share during one search.
struct Shared<'a> {
    g: &'a Csr,
    delta: f32,
    frontier: &'a Queue,
    paths: Vec<AtomicU64>,
    /// The bucket of iteration `i` is `bucket[i % 2]`; the members lower `bucket[(i + 1) % 2]`
    /// to their lowest non-empty bucket while iteration `i` runs.
    bucket: [AtomicUsize; 2],
    /// The frontier's length in iteration `i` is `len[i % 2]`; `len[(i + 1) % 2]` grows as
    /// members copy in their part of the next bucket.
    len: [AtomicUsize; 2],
    chunks: [Chunks; 2],
}

/// Distances and parents from `root` over `g` on `threads` threads, buckets of width `delta`.
/// Unreached vertices have [`NO_PARENT`] and `f32::INFINITY`.
///
/// # Panics
/// If `g` has no weights, or `delta` is not positive.
pub fn search(
    g: &Csr,
    root: Vertex,
    delta: f32,
    threads: usize,
    space: &Space,
) -> (Vec<Vertex>, Vec<f32>) {
    assert!(delta > 0.0, "bucket width {delta} is not positive");
    let n = g.num_vertices();
    let unreached = pack(f32::INFINITY, NO_PARENT);
    let paths: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(unreached)).collect();
    paths[root as usize].store(pack(0.0, root), Ordering::Relaxed);
    space.frontier.put(0, &mut vec![root]);
    let shared = Shared {
        g,
        delta,
        frontier: &space.frontier,
        paths,
        bucket: [AtomicUsize::new(0), AtomicUsize::new(NO_BUCKET)],
        len: [AtomicUsize::new(1), AtomicUsize::new(0)],
        chunks: [Chunks::default(), Chunks::default()],
    };
    team::run(threads, |member, barrier| {
        let mut buckets: Vec<Vec<Vertex>> = Vec::new();
        let mut iteration = 0usize;
        loop {
            let p = iteration & 1;
            let current = shared.bucket[p].load(Ordering::Relaxed);
            if current == NO_BUCKET {
                break;
            }
            shared.relax_frontier(current, p, &mut buckets);
            shared.fuse(current, &mut buckets);
            if let Some(lowest) = (current..buckets.len()).find(|&b| !buckets[b].is_empty()) {
                shared.bucket[p ^ 1].fetch_min(lowest, Ordering::Relaxed);
            }
            barrier.wait();
            if member == 0 {
                // Iteration i + 2 reuses these; nobody reads them before the next barrier.
                shared.bucket[p].store(NO_BUCKET, Ordering::Relaxed);
                shared.len[p].store(0, Ordering::Relaxed);
                shared.chunks[p].reset();
            }
            let next = shared.bucket[p ^ 1].load(Ordering::Relaxed);
            if let Some(mine) = buckets.get_mut(next) {
                shared.copy_in(mine, p ^ 1);
            }
            iteration += 1;
            barrier.wait();
        }
    });
    let mut parent = Vec::with_capacity(n);
    let mut dist = Vec::with_capacity(n);
    for word in shared.paths {
        let word = word.into_inner();
        parent.push(word as u32);
        dist.push(dist_of(word));
    }
    (parent, dist)
}

impl Shared<'_> {
    #[inline]
    fn bucket_of(&self, d: f32) -> usize {
        (d / self.delta) as usize
    }

    /// Relaxes the frontier's vertices still in bucket `current` (an entry whose distance fell
    /// to an earlier bucket since was relaxed there).
    fn relax_frontier(&self, current: usize, p: usize, buckets: &mut Vec<Vec<Vertex>>) {
        let len = self.len[p].load(Ordering::Relaxed);
        while let Some(range) = self.chunks[p].next(CHUNK, len) {
            for i in range {
                let u = self.frontier.get(i);
                self.relax_if_in(u, current, buckets);
            }
        }
    }

    /// Bucket fusion: relaxes this thread's own share of bucket `current` while it is small.
    fn fuse(&self, current: usize, buckets: &mut Vec<Vec<Vertex>>) {
        while let Some(b) = buckets.get_mut(current) {
            if b.is_empty() || b.len() >= FUSE_BELOW {
                break;
            }
            let work = std::mem::take(b);
            for &u in &work {
                self.relax_if_in(u, current, buckets);
            }
            // Give the allocation back for the next round, unless the bucket refilled meanwhile.
            let b = &mut buckets[current];
            if b.is_empty() {
                *b = work;
                b.clear();
            }
        }
    }

    #[inline]
    fn relax_if_in(&self, u: Vertex, current: usize, buckets: &mut Vec<Vec<Vertex>>) {
        let du = dist_of(self.paths[u as usize].load(Ordering::Relaxed));
        if self.bucket_of(du) < current {
            return;
        }
        for (&v, &w) in self.g.neighbors(u).iter().zip(self.g.weights(u)) {
            let candidate = du + w;
            let slot = &self.paths[v as usize];
            let mut old = slot.load(Ordering::Relaxed);
            while candidate < dist_of(old) {
                match slot.compare_exchange_weak(
                    old,
                    pack(candidate, u),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let b = self.bucket_of(candidate);
                        if b >= buckets.len() {
                            buckets.resize_with(b + 1, Vec::new);
                        }
                        buckets[b].push(v);
                        break;
                    }
                    Err(now) => old = now,
                }
            }
        }
    }

    /// Copies this thread's part of the next bucket into the frontier of parity `p`.
    fn copy_in(&self, mine: &mut Vec<Vertex>, p: usize) {
        if mine.is_empty() {
            return;
        }
        let start = self.len[p].fetch_add(mine.len(), Ordering::Relaxed);
        self.frontier.put(start, mine);
    }
}
