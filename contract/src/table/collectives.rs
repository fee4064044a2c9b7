//! The collectives' switch points between algorithms (`gsm-collectives`'s `Tuning`). Sizes are
//! the bytes one member contributes; `gsm-bench collectives --sweep` measures both sides of each.

use crate::setting::{Fallback, Kind, Layer, Setting};

/// A switch point in bytes: 0 (always the larger algorithm) allowed.
const POINT: Kind = Kind::Size {
    min: 0,
    max: u64::MAX,
    multiple: 1,
};

/// A piece or chunk in bytes: at least one.
const PIECE: Kind = Kind::Size {
    min: 1,
    max: u64::MAX,
    multiple: 1,
};

/// Hierarchical collectives.
pub const COLL_HIERARCHICAL: Setting = Setting {
    name: "GSM_COLL_HIERARCHICAL",
    kind: Kind::Switch,
    default: Fallback::Value("on"),
    doc: "The workers of each rank combine first, then one leader per rank runs the algorithm \
          across ranks; off: every member takes part across the team directly.",
    layer: Layer::Collectives,
};

/// The host board for leaders of one host.
pub const COLL_BOARD: Setting = Setting {
    name: "GSM_COLL_BOARD",
    kind: Kind::Switch,
    default: Fallback::Value("on"),
    doc: "Leaders of ranks on one host meet on the host board (shared memory) instead of \
          sending messages.",
    layer: Layer::Collectives,
};

/// Single copies on the board.
pub const COLL_COPY: Setting = Setting {
    name: "GSM_COLL_COPY",
    kind: POINT,
    default: Fallback::Value("32K"),
    doc: "On the board, broadcasts and allreduces from this size copy straight between the \
          leaders' buffers instead of in board steps.",
    layer: Layer::Collectives,
};

/// The piece of a single-copy allreduce.
pub const COLL_COPY_PIECE: Setting = Setting {
    name: "GSM_COLL_COPY_PIECE",
    kind: PIECE,
    default: Fallback::Value("256K"),
    doc: "The piece a single-copy allreduce reads, combines and hands on at a time.",
    layer: Layer::Collectives,
};

/// The ring allreduce's switch point.
pub const COLL_ALLREDUCE_RING: Setting = Setting {
    name: "GSM_COLL_ALLREDUCE_RING",
    kind: POINT,
    default: Fallback::Value("256K"),
    doc: "Allreduces from this size use the ring (reduce-scatter then allgather), smaller ones \
          recursive doubling.",
    layer: Layer::Collectives,
};

/// The pipelined broadcast's switch point.
pub const COLL_BCAST_PIPELINE: Setting = Setting {
    name: "GSM_COLL_BCAST_PIPELINE",
    kind: POINT,
    default: Fallback::Value("64K"),
    doc: "Broadcasts from this size across at least 3 ranks are pipelined along a chain, \
          smaller ones use a binomial tree.",
    layer: Layer::Collectives,
};

/// The pipelined broadcast's chunk.
pub const COLL_BCAST_CHUNK: Setting = Setting {
    name: "GSM_COLL_BCAST_CHUNK",
    kind: PIECE,
    default: Fallback::Value("256K"),
    doc: "The chunk of the pipelined broadcast.",
    layer: Layer::Collectives,
};

/// The piece of vectors sent to another rank.
pub const COLL_PIECE: Setting = Setting {
    name: "GSM_COLL_PIECE",
    kind: PIECE,
    default: Fallback::Value("64K"),
    doc: "Vectors sent to another rank by the reductions and the binomial broadcast travel in \
          pieces of at most this size.",
    layer: Layer::Collectives,
};

/// The rendezvous switch point.
pub const COLL_RENDEZVOUS: Setting = Setting {
    name: "GSM_COLL_RENDEZVOUS",
    kind: POINT,
    default: Fallback::Value("64K"),
    doc: "Broadcasts and reduces from this size wait for the receiver's acknowledgement across \
          ranks instead of returning once the data is sent.",
    layer: Layer::Collectives,
};
