//! Algorithm switch points: which algorithm a collective uses for which size, with defaults,
//! environment overrides, and the measurements behind the defaults.
//!
//! | field | env | default | below | at or above |
//! |---|---|---|---|---|
//! | [`hierarchical`](Tuning::hierarchical) | `GSM_COLL_HIERARCHICAL` (`0`/`1`) | on | — | — |
//! | [`allreduce_ring_min`](Tuning::allreduce_ring_min) | `GSM_COLL_ALLREDUCE_RING` (bytes) | 64 KiB | recursive doubling | ring reduce-scatter + allgather |
//! | [`bcast_pipeline_min`](Tuning::bcast_pipeline_min) | `GSM_COLL_BCAST_PIPELINE` (bytes) | 512 KiB | binomial tree | pipelined chain (≥ 3 ranks) |
//! | [`bcast_chunk`](Tuning::bcast_chunk) | `GSM_COLL_BCAST_CHUNK` (bytes) | 64 KiB | — | chunk of the chain |
//!
//! Sizes accept `K`/`M` suffixes. The sizes compared are the bytes one member contributes.
//!
//! **How the defaults were measured**: `gsm-bench collectives --sweep` (see
//! `benches/src/collectives.rs`) times each algorithm of a switch alone, forced with these
//! variables (`GSM_COLL_ALLREDUCE_RING=0` forces the ring, a huge value forces recursive
//! doubling), over sizes from 8 B to 4 MiB, under `gsmrun -np 2` and `-np 3 --oversubscribe`
//! on the 2-core development machine, and the default is the smallest size from which the second
//! algorithm is not slower. With 2 ranks the ring and recursive doubling move the same bytes;
//! the ring halves the arithmetic, which pays once the vectors leave the cache. The pipelined
//! chain only pays with at least 3 ranks (with 2 it is one message either way).
//!
//! This module does not look at the team: the same tuning holds for every size of team.

use std::sync::OnceLock;

/// Switch points between algorithms (see the module docs for the table and how they were
/// measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Combine the workers of each rank first (their messages move by pointer), then one leader
    /// per rank across ranks, then fan back out. Off: every member takes part in the algorithm
    /// across the team directly (the tests use this to run the inter-rank algorithms on odd
    /// numbers of members within one process).
    pub hierarchical: bool,
    /// Allreduce contributions of at least this many bytes use the ring (Patarasuk & Yuan's
    /// bandwidth-optimal reduce-scatter + allgather; Rabenseifner's algorithm with a ring in both
    /// halves), smaller ones recursive doubling (Thakur, Rabenseifner & Gropp 2005, with the
    /// fold of the members beyond a power of two).
    pub allreduce_ring_min: usize,
    /// Broadcasts of at least this many bytes across at least 3 ranks are pipelined along a
    /// chain in chunks of `bcast_chunk` bytes; smaller ones use a binomial tree.
    pub bcast_pipeline_min: usize,
    /// The chunk of the pipelined broadcast, in bytes.
    pub bcast_chunk: usize,
    /// Vectors sent to another rank by the reductions and the binomial broadcast travel in
    /// pieces of at most this many bytes (each piece is combined or forwarded as it arrives).
    pub piece: usize,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            hierarchical: true,
            allreduce_ring_min: 64 << 10,
            bcast_pipeline_min: 512 << 10,
            bcast_chunk: 256 << 10,
            piece: 256 << 10,
        }
    }
}

/// An environment variable of [`Tuning::from_env`] that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("gsm-collectives: {name}={value:?} is not valid: expected {expected}")]
pub struct TuningError {
    /// The variable.
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// What it should look like.
    pub expected: &'static str,
}

fn size(name: &'static str) -> Result<Option<usize>, TuningError> {
    let Ok(v) = std::env::var(name) else {
        return Ok(None);
    };
    let t = v.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1usize << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1 << 20),
        _ => (t, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .map(Some)
        .ok_or(TuningError {
            name,
            value: v,
            expected: "a number of bytes, optionally with a K or M suffix",
        })
}

impl Tuning {
    /// The defaults, overridden by the `GSM_COLL_*` variables of the module docs.
    pub fn from_env() -> Result<Tuning, TuningError> {
        let mut t = Tuning::default();
        if let Ok(v) = std::env::var("GSM_COLL_HIERARCHICAL") {
            t.hierarchical = match v.trim() {
                "1" | "on" | "true" => true,
                "0" | "off" | "false" => false,
                _ => {
                    return Err(TuningError {
                        name: "GSM_COLL_HIERARCHICAL",
                        value: v,
                        expected: "1/on/true or 0/off/false",
                    });
                }
            };
        }
        if let Some(n) = size("GSM_COLL_ALLREDUCE_RING")? {
            t.allreduce_ring_min = n;
        }
        if let Some(n) = size("GSM_COLL_BCAST_PIPELINE")? {
            t.bcast_pipeline_min = n;
        }
        if let Some(n) = size("GSM_COLL_BCAST_CHUNK")? {
            t.bcast_chunk = n.max(1);
        }
        if let Some(n) = size("GSM_COLL_PIECE")? {
            t.piece = n.max(1);
        }
        Ok(t)
    }

    /// [`Tuning::from_env`], read once per process.
    ///
    /// # Panics
    /// If a variable is malformed (the message names it).
    pub(crate) fn cached() -> Tuning {
        static T: OnceLock<Result<Tuning, TuningError>> = OnceLock::new();
        match T.get_or_init(Tuning::from_env) {
            Ok(t) => *t,
            Err(e) => panic!("{e}"),
        }
    }
}
