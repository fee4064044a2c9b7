//! Symmetric allocation: every rank of a set (a team of ranks) exports a segment of the same
//! size with the same rights for the others, and every member gets every member's handle. The
//! handles are exchanged as tagged messages between the first workers of the ranks (tags with
//! bits 63..61 = `010`, reserved for this module; `gossamer::stream` uses `011`), so the call is also a barrier: when it returns
//! on any rank, every member's segment exists.
//!
//! One fiber per rank calls it, on any worker, in the same order on every member for the same
//! set. It does not know `gsm-collectives`' teams of workers: pass their ranks.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{Access, Rights, Segment, SegmentError, SegmentRef, export};
use crate::WorkerId;

/// A symmetric allocation: this rank's segment and every member's handle. Dropping it frees this
/// rank's segment only (the others' handles to it are then refused as freed): drop it on every
/// member once they agree that nobody uses it any more (after a barrier, say).
#[derive(Debug)]
pub struct Symmetric {
    local: Segment,
    ranks: Vec<usize>,
    refs: Vec<SegmentRef>,
}

impl Symmetric {
    /// This rank's segment.
    pub fn local(&self) -> &Segment {
        &self.local
    }

    /// The member ranks, ascending.
    pub fn ranks(&self) -> &[usize] {
        &self.ranks
    }

    /// Rank `rank`'s segment.
    ///
    /// # Panics
    /// If `rank` is not a member.
    pub fn on(&self, rank: usize) -> SegmentRef {
        match self.ranks.binary_search(&rank) {
            Ok(i) => self.refs[i],
            Err(_) => panic!(
                "gossamer::segment: rank {rank} is not a member of this allocation (members: {:?})",
                self.ranks
            ),
        }
    }
}

/// Calls so far per set of ranks, for the tags.
static SEQ: Mutex<Option<HashMap<u64, u64>>> = Mutex::new(None);

/// Allocates `len` bytes on every rank of `ranks` (this rank must be one), granting `rights` to
/// the members. Collective over the members; see the module docs.
pub fn alloc_symmetric(
    ranks: &[usize],
    len: usize,
    rights: Rights,
) -> Result<Symmetric, SegmentError> {
    let mut ranks = ranks.to_vec();
    ranks.sort_unstable();
    ranks.dedup();
    let me = crate::rank();
    let n = crate::rank_count();
    if ranks.binary_search(&me).is_err() || ranks.iter().any(|&r| r >= n) {
        return Err(SegmentError::Alloc(format!(
            "alloc_symmetric over ranks {ranks:?} called on rank {me} of a job of {n} ranks: every member must exist and the caller must be one"
        )));
    }
    let local = export(len, rights, Access::Ranks(&ranks))?;
    let team = ranks.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &r| {
        (h ^ r as u64).wrapping_mul(0x100_0000_01b3)
    });
    let seq = {
        let mut m = SEQ.lock().unwrap_or_else(|p| p.into_inner());
        let c = m.get_or_insert_with(HashMap::new).entry(team).or_insert(0);
        *c += 1;
        *c
    };
    let tag = 1u64 << 62 | (team & 0x1fff_ffff) << 32 | (seq & 0xffff_ffff);
    let first = WorkerId::new(crate::workers_of_rank(me).start);
    let refs = crate::spawn_on_with(
        first,
        (ranks.clone(), local.handle(), tag),
        |(ranks, mine, tag): (Vec<usize>, SegmentRef, u64)| {
            for &r in &ranks {
                crate::send(WorkerId::new(crate::workers_of_rank(r).start), tag, mine);
            }
            crate::flush();
            ranks
                .iter()
                .map(|&r| {
                    crate::recv::<SegmentRef>(WorkerId::new(crate::workers_of_rank(r).start), tag)
                })
                .collect::<Vec<SegmentRef>>()
        },
    )
    .join();
    for (&r, h) in ranks.iter().zip(&refs) {
        if h.rank() != r || h.len() != len {
            return Err(SegmentError::Alloc(format!(
                "alloc_symmetric: rank {r} allocated {} bytes as rank {}, not {len} (the members' calls do not match)",
                h.len(),
                h.rank()
            )));
        }
    }
    Ok(Symmetric { local, ranks, refs })
}
