//! What a segment operation can fail with: the target's refusals (bounds, alignment, rights,
//! generation), each naming the segment, the offset and the right; and failures to reach it.
//! It does not decide anything: `layout::check` and the operations build these.

use serde::{Deserialize, Serialize};

/// A segment as errors name it: its owner rank, its id there, and the generation the handle had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SegmentName {
    /// The rank that owns it.
    pub rank: u32,
    /// Its id on that rank.
    pub id: u64,
    /// The generation the handle named.
    pub generation: u64,
}

impl std::fmt::Display for SegmentName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "segment {} of rank {} (generation {})",
            self.id, self.rank, self.generation
        )
    }
}

/// The rights an operation needs and an export grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Right {
    /// `get`.
    Read,
    /// `put`, `put_notify`.
    Write,
    /// `compare_exchange`, `fetch_add`, `swap`.
    Atomic,
}

impl Right {
    /// The bit of this right in a rights byte.
    pub(crate) fn bit(self) -> u8 {
        match self {
            Right::Read => 1,
            Right::Write => 2,
            Right::Atomic => 4,
        }
    }
}

impl std::fmt::Display for Right {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Right::Read => "read",
            Right::Write => "write",
            Right::Atomic => "atomic",
        })
    }
}

/// Why a segment operation did not happen. In every case the target's data is untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum SegmentError {
    /// The range is not inside the segment.
    #[error(
        "{seg}: {right} of {len} bytes at offset {offset} is out of bounds (the segment has {size} bytes)"
    )]
    OutOfBounds {
        /// The segment.
        seg: SegmentName,
        /// The first byte asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// The segment's length.
        size: u64,
        /// The right the operation needed.
        right: Right,
    },
    /// An atomic at an offset that is not a multiple of its type's size.
    #[error("{seg}: {right} operation at offset {offset} is not aligned to {align} bytes")]
    Misaligned {
        /// The segment.
        seg: SegmentName,
        /// The offset asked for.
        offset: u64,
        /// The alignment the operation needs (its type's size).
        align: u64,
        /// The right the operation needed.
        right: Right,
    },
    /// The owner did not grant this rank the right.
    #[error("{seg}: rank {rank} has no {right} right (offset {offset})")]
    Denied {
        /// The segment.
        seg: SegmentName,
        /// The offset asked for.
        offset: u64,
        /// The right the operation needed.
        right: Right,
        /// The rank that asked.
        rank: u32,
    },
    /// The handle's generation is not the segment's: it was revoked or freed.
    #[error("{seg}: {right} at offset {offset} refused: the segment was {} (its generation is now {current})", if *current == 0 { "freed" } else { "revoked" })]
    Stale {
        /// The segment.
        seg: SegmentName,
        /// The offset asked for.
        offset: u64,
        /// The right the operation needed.
        right: Right,
        /// The segment's generation now (0: freed).
        current: u64,
    },
    /// The segment could not be reached (its owner's file could not be opened, or the request to
    /// its rank failed).
    #[error("{seg}: {what}")]
    Unreachable {
        /// The segment.
        seg: SegmentName,
        /// What went wrong.
        what: String,
    },
    /// A segment could not be made.
    #[error("segment allocation failed: {0}")]
    Alloc(String),
}
