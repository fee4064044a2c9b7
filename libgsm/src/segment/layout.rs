//! The format of a segment's memory file and the check every operation passes before it touches
//! the data: bounds, alignment (an atomic's width), the caller's rights and the generation, read from the header the
//! owner wrote, never from the caller's handle.
//!
//! ```text
//! offset 0    magic "GSMSEG01"         written once by the owner
//!        8    generation                0 = freed; bumped by a revocation (owner only)
//!       16    data length in bytes
//!       24    owner rank (u32), owner pid (u32)
//!       32    segment id
//!       64    rights: one byte per rank of the job (READ 1, WRITE 2, ATOMIC 4)
//!  data_at    the data, page-aligned: round_up(64 + ranks, 4096)
//! ```
//!
//! It does not map files or move data (`memfile.rs`, `mod.rs`). See `segment/README.md`.

use super::error::{Right, SegmentError, SegmentName};
use super::memfile::MemFile;
use std::sync::atomic::Ordering;

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"GSMSEG01");
const GEN: usize = 8;
const LEN: usize = 16;
const OWNER: usize = 24;
const ID: usize = 32;
const RIGHTS: usize = 64;

/// Where the data starts in a segment of a job of `ranks` ranks.
pub(crate) fn data_at(ranks: usize) -> usize {
    (RIGHTS + ranks).div_ceil(4096) * 4096
}

/// Writes a fresh header: generation 1, `rights[r]` for each rank.
pub(crate) fn init(f: &MemFile, len: u64, rank: u32, pid: u32, id: u64, rights: &[u8]) {
    f.word(LEN).store(len, Ordering::Relaxed);
    f.word(OWNER)
        .store(u64::from(rank) | u64::from(pid) << 32, Ordering::Relaxed);
    f.word(ID).store(id, Ordering::Relaxed);
    for (r, &b) in rights.iter().enumerate() {
        // SAFETY: `RIGHTS + r` is inside the header (`data_at` sized it for every rank); the
        // owner writes it before any peer learns the file exists.
        unsafe { f.base().as_ptr().add(RIGHTS + r).write(b) };
    }
    f.word(GEN).store(1, Ordering::Relaxed);
    f.word(0).store(MAGIC, Ordering::Release);
}

/// The current generation (0: freed).
pub(crate) fn generation(f: &MemFile) -> u64 {
    f.word(GEN).load(Ordering::Acquire)
}

/// Sets the generation (owner only): a revocation or a free.
pub(crate) fn set_generation(f: &MemFile, g: u64) {
    f.word(GEN).store(g, Ordering::Release);
}

/// Checks that a file another process handed us is the segment `name` says (magic, owner, id)
/// and that its data fits in what is mapped. Returns the data's offset and length.
pub(crate) fn validate(
    f: &MemFile,
    name: &SegmentName,
    pid: u32,
    ranks: usize,
) -> Result<(usize, u64), String> {
    let at = data_at(ranks);
    if f.len() < at {
        return Err(format!(
            "its file is {} bytes, smaller than a header",
            f.len()
        ));
    }
    if f.word(0).load(Ordering::Acquire) != MAGIC {
        return Err("its file is not a segment (no magic)".into());
    }
    let owner = f.word(OWNER).load(Ordering::Relaxed);
    if owner != u64::from(name.rank) | u64::from(pid) << 32
        || f.word(ID).load(Ordering::Relaxed) != name.id
    {
        return Err("its file now holds another segment (it was freed)".into());
    }
    let len = f.word(LEN).load(Ordering::Relaxed);
    if (at as u64)
        .checked_add(len)
        .is_none_or(|end| end > f.len() as u64)
    {
        return Err(format!(
            "its header claims {len} bytes, more than its file holds"
        ));
    }
    Ok((at, len))
}

/// The rights byte of rank `from` (0 for a rank beyond the table).
pub(crate) fn rights_of(f: &MemFile, data_at: usize, from: usize) -> u8 {
    if RIGHTS + from < data_at {
        // SAFETY: inside the header, which the owner wrote before publishing the file.
        unsafe { f.base().as_ptr().add(RIGHTS + from).read_volatile() }
    } else {
        0
    }
}

/// The check of one operation (data at `data_at`, `data_len` bytes long) by rank `from` on `[offset, offset + len)` needing `right`.
/// `align`: the alignment the operation needs (an atomic's width; 1 for a copy).
#[allow(clippy::too_many_arguments)]
pub(crate) fn check(
    f: &MemFile,
    name: &SegmentName,
    data_at: usize,
    data_len: u64,
    from: usize,
    offset: u64,
    len: u64,
    right: Right,
    align: u64,
) -> Result<(), SegmentError> {
    let g = generation(f);
    if g == 0 || g != name.generation {
        return Err(SegmentError::Stale {
            seg: *name,
            offset,
            right,
            current: g,
        });
    }
    let rights = rights_of(f, data_at, from);
    if rights & right.bit() == 0 {
        return Err(SegmentError::Denied {
            seg: *name,
            offset,
            right,
            rank: from as u32,
        });
    }
    if offset.checked_add(len).is_none_or(|end| end > data_len) {
        return Err(SegmentError::OutOfBounds {
            seg: *name,
            offset,
            len,
            size: data_len,
            right,
        });
    }
    if offset % align.max(1) != 0 {
        return Err(SegmentError::Misaligned {
            seg: *name,
            offset,
            align,
            right,
        });
    }
    Ok(())
}
