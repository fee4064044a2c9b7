//! `--engine gsm`'s search kernels, written with trusts: the state of a search (parents,
//! distances, frontier, buckets) is a property of the worker that owns the vertices, [`Owned`],
//! and work on a vertex another worker owns is a closure delegated to that worker with
//! `apply_with_then`, which the runtime batches per destination. A step ends when the
//! completion scope each worker opened for it ([`gossamer::finish`]) says that every closure it
//! delegated, and all they started in turn, has run, and every worker has said so (a barrier): [`bfs`](super::bfs) has one scope per top-down level,
//! [`sssp`](super::sssp) one per bucket. Each worker reaches its own property inline (it is its
//! trustee); the graph's rows are shared read-only with it (`Arc`).
//!
//! This module holds what both kernels share: the property, its set-up (every worker's trust
//! all-gathered into every property, so that a closure can delegate onward from where it runs)
//! and its release. The kernels' steps are `impl Owned` blocks in `bfs.rs` and `sssp.rs`.

use std::sync::Arc;

use gossamer::{Trust, WorkerId, entrust};

use super::comm::Comm;
use crate::dist::Exchange;
use crate::dist::graph::{LocalGraph, Partition};
use crate::kronecker::Vertex;

/// The tag of the messages that hand out the properties' trusts.
const TRUSTS_TAG: u64 = 0x6735_3030_0001;

/// What one worker owns during a search.
#[derive(Default)]
pub struct Owned {
    pub(super) g: Arc<LocalGraph>,
    pub(super) part: Partition,
    /// Every worker's property, by worker index (this one's included).
    pub(super) trusts: Vec<Trust<Owned>>,
    pub(super) parent: Vec<Vertex>,
    pub(super) dist: Vec<f32>,
    /// SSSP: the distance each vertex's edges were last relaxed from.
    pub(super) done_at: Vec<f32>,
    /// BFS: remote vertices this worker has sent a visit this search (one bit each).
    pub(super) sent_bits: Vec<u64>,
    /// SSSP: the lowest distance this worker has sent each remote vertex this search.
    pub(super) sent: Vec<f32>,
    pub(super) frontier: Vec<u32>,
    pub(super) next: Vec<u32>,
    /// Work for each other worker, sent as one delegated closure per worker and step.
    pub(super) outbox: Vec<Vec<u32>>,
    pub(super) buckets: Vec<Vec<u32>>,
    pub(super) stack: Vec<u32>,
    pub(super) current: usize,
    pub(super) delta: f32,
}

/// The delegation kernels of one worker: its own property, made at the first search.
#[derive(Debug, Default)]
pub struct Delegation {
    me: Option<Trust<Owned>>,
}

impl std::fmt::Debug for Owned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owned")
            .field("part", &self.part)
            .finish_non_exhaustive()
    }
}

impl Delegation {
    /// This worker's property (collective the first time: every worker's trust goes to every
    /// property).
    pub(super) fn owned(&mut self, comm: &Comm, g: &Arc<LocalGraph>) -> &Trust<Owned> {
        if self.me.is_none() {
            let me = entrust(Owned {
                g: g.clone(),
                part: *g.partition(),
                ..Owned::default()
            });
            // One copy of this trust to every worker, by message: a serialised trust is read
            // once, so an all-gather of one encoding cannot hand it out.
            for w in 0..comm.size() {
                gossamer::send(WorkerId::new(w), TRUSTS_TAG, me.clone());
            }
            gossamer::flush();
            let trusts: Vec<Trust<Owned>> = (0..comm.size())
                .map(|w| gossamer::recv(WorkerId::new(w), TRUSTS_TAG))
                .collect();
            me.apply_with(trusts, |o, t| {
                o.outbox = vec![Vec::new(); t.len()];
                o.trusts = t;
            });
            // No closure may reach a property before its trusts are in.
            comm.barrier();
            self.me = Some(me);
        }
        self.me.as_ref().expect("made above")
    }
}

impl Drop for Delegation {
    /// Lets the properties go: each holds a trust to every other one.
    fn drop(&mut self) {
        if let Some(me) = self.me.take() {
            let _ = me.try_apply(|o| o.trusts.clear());
        }
    }
}
