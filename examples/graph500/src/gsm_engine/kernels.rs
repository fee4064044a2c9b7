//! `--engine gsm`'s search kernels, written with trusts: the state of a search (parents,
//! distances, frontier, buckets) is a property of the worker that owns the vertices, [`Owned`],
//! and work on a vertex another worker owns is a closure delegated to that worker with
//! `apply_with_then` (one closure per destination and step, [`gossamer::Batches`]). A step ends
//! when the job-wide completion scope of the step ([`gossamer::finish_all`]) says that every
//! closure any worker delegated, and all they started in turn, has run: [`bfs`](super::bfs) has
//! one scope per top-down level, [`sssp`](super::sssp) one per bucket. Each worker reaches its own property inline (it is its
//! trustee); the graph's rows are shared read-only with it (`Arc`).
//!
//! This module holds what both kernels share: the property. Its set-up (every worker's trust in
//! every property, [`gossamer::entrust_all`], so that a closure can delegate onward from where it
//! runs, through [`gossamer::Batches`]) and release are the engine's glue
//! ([`Delegation`](super::Delegation)), as the bulk-synchronous kernels' `Bsp` is. The kernels' steps are `impl Owned` blocks in `bfs.rs` and `sssp.rs`.

use std::sync::Arc;

use gossamer::Batches;

use crate::dist::graph::{LocalGraph, Partition};
use crate::kronecker::Vertex;

/// What one worker owns during a search.
#[derive(Debug, Default)]
pub struct Owned {
    pub(super) g: Arc<LocalGraph>,
    pub(super) part: Partition,
    /// Work for the other workers' vertices, one delegated closure per worker and step: BFS
    /// visits `[v, u]`, SSSP relaxations `[v, d, u]`.
    pub(super) out: Batches<Owned, u32>,
    pub(super) parent: Vec<Vertex>,
    pub(super) dist: Vec<f32>,
    /// BFS: remote vertices this worker has sent a visit this search (one bit each).
    pub(super) sent_bits: Vec<u64>,
    /// SSSP: the lowest distance this worker has sent each remote vertex this search.
    pub(super) sent: Vec<f32>,
    pub(super) frontier: Vec<u32>,
    pub(super) next: Vec<u32>,
    /// SSSP: the ring of buckets, each entry a local vertex and the distance it was filed with.
    pub(super) buckets: Vec<Vec<(u32, f32)>>,
    /// SSSP: the vertices settled in the current bucket (each time, with the distance), whose
    /// edges that leave it wait for its end.
    pub(super) settled: Vec<(u32, f32)>,
    pub(super) current: usize,
    /// SSSP: a fiber is on its way to settle what delegated relaxations filed in this bucket.
    pub(super) pending: bool,
    pub(super) delta: f32,
}
