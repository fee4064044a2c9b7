//! The format of a segment: its name, where everything sits in it, and the words of its header
//! and ring table. Arithmetic only (overflow-checked): it maps nothing and trusts nothing; the
//! segment is written by `segment` and checked by `validate`.
//!
//! **Layout** (native endianness: every mapper is on this host; offsets in bytes):
//!
//! ```text
//! 0      header, 128 bytes: magic u64 @0, version u32 @8, rank u32 @12, slots u32 @16,
//!        slot_size u32 @20, local workers L u32 @24, ring count R u32 @28, bells offset u64 @32,
//!        table offset u64 @40, table length in bytes u64 @48, segment bytes u64 @56,
//!        ready u32 @64 (stored last, with Release, once all else is written), board offset
//!        u64 @72, board bytes u64 @80
//! 128    L doorbells, one per 64-byte line: futex word u32 @0, gate u64 @8 (`wire::doorbell`)
//! T      ring table (T = 128 + 64·L rounded up to 64): R entries of 32 bytes:
//!        consumer local worker u32, producer global worker u32, lane u32 (0 request,
//!        1 response), zero u32, ring offset u64, ring bytes u64
//! G      rings (G = T + 32·R rounded up to 128), each RingLayout::bytes() long, one after the
//!        other, each aligned to RingLayout::align(): for every local worker l, for every shm
//!        peer p in rank order, for every worker g of p, the request ring (g's requests to
//!        trustee l), then the response ring (g's answers to client l)
//! B      the rank's host board (B = end of the rings rounded up to 4096), BOARD_BYTES long:
//!        zero at creation, never touched by the runtime (see `crate::board`)
//! ```
//!
//! **Memory.** With `B = 128 + slots × (slot_size + 64)` bytes per ring (a multiple of 128) and
//! `Wₚ` workers on shm peer `p`, a rank with `L` workers holds `R = 2·L·ΣWₚ` rings, so its segment
//! is `align4096(align128(align64(128 + 64·L) + 32·R) + R·B) + 4 MiB` bytes (the last term is
//! the board), dominated by `R·B`. Every rank's segment is reserved in full at creation
//! (`posix_fallocate`), so a `/dev/shm` that is too small is a clear error at set-up rather than
//! a `SIGBUS` in the middle of the job. With the default
//! 16 slots of 4 KiB (`B` = 66 688 bytes): 2 ranks × 16 workers on one host, `R` = 512 rings and
//! ~37 MiB per rank; 8 ranks × 16 workers, `R` = 3 584 and ~232 MiB per rank (~1.8 GiB for the
//! host): lower the slot size or count for many ranks per host.

use crate::board::BOARD_BYTES;
use crate::fabric::Lane;
use crate::wire::ring::RingLayout;

/// "GSM_SHM1" as a little-endian word: the first 8 bytes of every segment.
pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"GSM_SHM1");
/// Format version; any change of the layout above changes it.
pub(super) const VERSION: u32 = 3;
/// The value of the ready word once the segment is complete ("REDY").
pub(super) const READY: u32 = u32::from_le_bytes(*b"REDY");

/// Bytes of the header.
pub(super) const HEADER_BYTES: usize = 128;
/// Distance between two doorbell words.
pub(super) const BELL_STRIDE: usize = 64;
/// Bytes of one ring-table entry.
pub(super) const ENTRY_BYTES: usize = 32;

// Header field offsets.
pub(super) const H_MAGIC: usize = 0;
pub(super) const H_VERSION: usize = 8;
pub(super) const H_RANK: usize = 12;
pub(super) const H_SLOTS: usize = 16;
pub(super) const H_SLOT_SIZE: usize = 20;
pub(super) const H_WORKERS: usize = 24;
pub(super) const H_RINGS: usize = 28;
pub(super) const H_BELLS: usize = 32;
pub(super) const H_TABLE: usize = 40;
pub(super) const H_TABLE_LEN: usize = 48;
pub(super) const H_TOTAL: usize = 56;
pub(super) const H_READY: usize = 64;
pub(super) const H_BOARD: usize = 72;
pub(super) const H_BOARD_LEN: usize = 80;

// Table entry field offsets.
pub(super) const E_CONSUMER: usize = 0;
pub(super) const E_PRODUCER: usize = 4;
pub(super) const E_LANE: usize = 8;
pub(super) const E_ZERO: usize = 12;
pub(super) const E_OFFSET: usize = 16;
pub(super) const E_BYTES: usize = 24;

/// The longest job id accepted: the segment name must fit `NAME_MAX` (255) with `-r{rank}`.
pub(super) const MAX_JOB_ID: usize = 240;

/// The name of `rank`'s segment in job `job_id`, without the leading slash: the file name under
/// `/dev/shm`, as the launch contract names it (`gsmrun` removes such files after a crash).
pub use gsm_contract::contract::segment_name;

/// Where the segment appears in the file system (for messages).
pub(super) fn segment_path(name: &str) -> String {
    format!("/dev/shm/{name}")
}

pub(super) fn lane_code(lane: Lane) -> u32 {
    match lane {
        Lane::Request => 0,
        Lane::Response => 1,
    }
}

pub(super) fn lane_of(code: u32) -> Option<Lane> {
    match code {
        0 => Some(Lane::Request),
        1 => Some(Lane::Response),
        _ => None,
    }
}

pub(super) const fn align_up(x: usize, a: usize) -> Option<usize> {
    match x.checked_add(a - 1) {
        Some(y) => Some(y / a * a),
        None => None,
    }
}

/// Where everything sits in a segment of `workers` doorbells and `rings` rings of `layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Geometry {
    pub(super) bells: usize,
    pub(super) table: usize,
    pub(super) table_len: usize,
    pub(super) rings: usize,
    pub(super) stride: usize,
    pub(super) board: usize,
    pub(super) total: usize,
}

impl Geometry {
    /// `None` if the sizes overflow.
    pub(super) fn new(layout: RingLayout, workers: u32, rings: u32) -> Option<Geometry> {
        let bells = HEADER_BYTES;
        let table = align_up(
            bells.checked_add((workers as usize).checked_mul(BELL_STRIDE)?)?,
            64,
        )?;
        let table_len = (rings as usize).checked_mul(ENTRY_BYTES)?;
        let first = align_up(table.checked_add(table_len)?, RingLayout::align())?;
        let stride = align_up(layout.bytes(), RingLayout::align())?;
        let end = first.checked_add((rings as usize).checked_mul(stride)?)?;
        let board = align_up(end, 4096)?;
        let total = board.checked_add(BOARD_BYTES)?;
        if total > isize::MAX as usize {
            return None;
        }
        Some(Geometry {
            bells,
            table,
            table_len,
            rings: first,
            stride,
            board,
            total,
        })
    }

    pub(super) fn bell(&self, local: u32) -> usize {
        self.bells + local as usize * BELL_STRIDE
    }

    pub(super) fn entry(&self, i: usize) -> usize {
        self.table + i * ENTRY_BYTES
    }

    pub(super) fn ring(&self, i: usize) -> usize {
        self.rings + i * self.stride
    }
}

/// One ring of a segment, as its table describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    /// Consuming worker, index within the segment's rank.
    pub(super) consumer: u32,
    /// Producing worker, global id.
    pub(super) producer: u32,
    pub(super) lane: Lane,
    /// Offset of the ring in the segment.
    pub(super) offset: usize,
}
