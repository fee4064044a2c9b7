//! Segment operations as RMA: on a fabric with one-sided operations (the `ofi` fabric installs
//! a [`Port`]), `get`, `put` and the atomics of a rank that fabric serves are libfabric
//! reads, writes and fetching atomics on the owner's registered memory; no code of the owner
//! runs for them, not even the runtime's handler. An atomic whose type and operation the
//! provider does not do itself (`Port::native`, from `fi_fetch_atomicvalid`) is delegated to
//! the owner's handler instead.
//!
//! **What stands for the target's check.** The owner registers the segment's data once per
//! right that any other rank holds (a read region with `FI_REMOTE_READ`, a write region with
//! `FI_REMOTE_WRITE`, an atomic region with both and `FI_ATOMIC`), each the data's exact length
//! and under a random 64-bit key. A rank gets the keys of its own rights only, from the owner's
//! handler (a `KEYS` request, answered by the ring's rank, never a field of the request), for
//! the current generation only, and the owner records it as a holder. So rights are which keys
//! a rank holds, bounds are the regions' length (the provider refuses beyond it), and the
//! caller refuses before posting what its keys show: a right it lacks, bounds, alignment, with
//! the same errors as the owner's check.
//!
//! **Generation.** A provider that meets a bad key does not answer an error: on `tcp` and on
//! verbs it breaks the connection, which would end the job. So no stale key is ever posted:
//! [`retire`] (a revocation or a free) first tells every holder to forget the segment's keys
//! (an `INVALIDATE` request each; the holder drops them under the same lock it posts under, so
//! whatever it posted with them went out before its answer), and closes the old regions only
//! after every answer. The next operation with an old handle asks for keys again, and the owner
//! answers `Stale`. An operation posted before the holder's answer may still complete, as an
//! operation that passed its check just before a revocation does on the other paths. This
//! leans on the provider delivering one peer's operations in order (`tcp;ofi_rxm` carries them
//! on one connection): the invalidation's answer cannot overtake an earlier read or write.
//!
//! It does not carry notifications (`put_notify` stays a delegated request) and is not used
//! when the provider needs local registration (`FI_MR_LOCAL`; the port is then not installed).
//! See `segment/README.md`, "RMA on `ofi`".

use std::sync::atomic::{AtomicU64, Ordering};

use super::keys::{Held, Keys, RIGHTS, Regions, index};
use super::{Op, Owned, Right, SegmentError, SegmentRef, remote};
use crate::fabric::rma::{NotPosted, Port, Posted, port};

static OPS: AtomicU64 = AtomicU64::new(0);

/// Segment operations this process performed by RMA so far (see [`crate::segment::rma_operations`]).
pub(crate) fn operations() -> u64 {
    OPS.load(Ordering::Relaxed)
}

/// Registers `own`'s data once per right another rank holds in `table` (rights per rank).
pub(super) fn expose(own: &Owned, table: &[u8]) {
    let Some(port) = port() else { return };
    let me = crate::rank();
    let granted = table
        .iter()
        .enumerate()
        .filter(|&(r, _)| r != me)
        .fold(0u8, |a, (_, &b)| a | b);
    own.rma.install(port, |port| regions(own, port, granted));
}

fn regions(own: &Owned, port: &dyn Port, granted: u8) -> Regions {
    let mut out = [None; 3];
    if own.len == 0 {
        return out;
    }
    for r in RIGHTS {
        if granted & r.bit() == 0 || (r == Right::Atomic && !port.word_atomics()) {
            continue;
        }
        // SAFETY: the data lies in the owner's mapping, which `Owned` keeps until it is
        // dropped, after `retire` closed every region (the segment's drop).
        let p = unsafe { own.file.base().as_ptr().add(own.data_at) };
        let (read, write) = (r != Right::Write, r != Right::Read);
        // SAFETY: as above: mapped until unexposed.
        match unsafe { port.expose(p, own.len as usize, read, write) } {
            Ok(g) => out[index(r)] = Some(g),
            Err(e) => tracing::debug!(
                target: "gossamer::segment",
                error = %e,
                "a segment region could not be registered; its operations are delegated"
            ),
        }
    }
    out
}

/// A revocation (`again`: new regions with new keys for the new generation) or a free: every
/// holder forgets the old keys, then the old regions close. Outside a fiber (a segment dropped
/// after its run) nobody is told: no operation of that run can still be posted.
pub(super) fn retire(own: &Owned, again: bool) {
    let make = |port: &dyn Port, granted: u8| regions(own, port, granted);
    let Some(retired) = own.rma.retire(again, make) else {
        return;
    };
    let in_fiber =
        crate::worker::core().is_some_and(|c| c.can_block() && c.current_fiber().is_some());
    if in_fiber {
        for rank in retired.holders {
            // A holder that cannot be reached is being lost with the job; its keys die with it.
            let _ = remote::invalidate(rank as usize, own.id);
        }
    }
    for g in retired.old.into_iter().flatten() {
        retired.port.unexpose(g.handle);
    }
}

/// Whether `rank`'s segments are reached by RMA.
pub(super) fn serves(rank: usize) -> bool {
    port().is_some_and(|p| p.serves(rank))
}

/// The caller's check on what its keys show (the owner's check, `layout::check`, in the same
/// order: rights, bounds, alignment).
fn check(k: &Keys, seg: &SegmentRef, offset: u64, op: &Op<'_>) -> Result<(), SegmentError> {
    let (right, len) = (op.right(), op.len());
    if k.rights & right.bit() == 0 {
        return Err(SegmentError::Denied {
            seg: seg.name(),
            offset,
            right,
            rank: crate::rank() as u32,
        });
    }
    if offset.checked_add(len).is_none_or(|end| end > k.len) {
        return Err(SegmentError::OutOfBounds {
            seg: seg.name(),
            offset,
            len,
            size: k.len,
            right,
        });
    }
    let align = op.align();
    if offset % align != 0 {
        return Err(SegmentError::Misaligned {
            seg: seg.name(),
            offset,
            align,
            right,
        });
    }
    Ok(())
}

fn posted(op: &Op<'_>) -> Posted {
    match op {
        Op::Get(b) => Posted::Read { len: b.len() },
        Op::Put(d) => Posted::Write { data: d.to_vec() },
        Op::Atomic(kind, a, b) => Posted::Word {
            kind: *kind,
            words: [*a, *b, 0],
        },
    }
}

/// Performs `op` on `seg` (of a rank the port serves) by RMA, or, where no region serves it,
/// by a delegated request.
pub(super) fn run(seg: &SegmentRef, offset: u64, op: Op<'_>) -> Result<u64, SegmentError> {
    let Some(port) = port() else {
        return remote::run(seg, offset, op, None);
    };
    let key = (seg.rank, seg.id);
    let done = loop {
        let mut held = Held::lock();
        let Some(k) = held.get(key, seg.generation) else {
            let asked = held.invalidations();
            drop(held);
            let k = remote::keys(seg, offset, op.right())?;
            // An invalidation served while the answer travelled may have withdrawn these very
            // keys (its request and this answer come on different rings): ask again.
            Held::lock().remember(key, k, asked);
            continue;
        };
        check(&k, seg, offset, &op)?;
        let region = k.regions[index(op.right())];
        let native = match &op {
            Op::Atomic(kind, ..) => port.native(*kind),
            _ => true,
        };
        let Some((base, rkey)) = region.filter(|_| native) else {
            drop(held);
            return remote::run(seg, offset, op, None);
        };
        match port.post(seg.rank as usize, base + offset, rkey, posted(&op)) {
            Ok(d) => break d,
            Err(NotPosted::Busy) => {
                drop(held);
                crate::yield_now();
            }
            Err(NotPosted::Failed(e)) => {
                return Err(SegmentError::Unreachable {
                    seg: seg.name(),
                    what: e,
                });
            }
        }
    };
    let core = crate::worker::core_or_panic("a segment operation");
    core.wait_in_flight(&mut || done.finished());
    OPS.fetch_add(1, Ordering::Relaxed);
    let (bytes, word) = done.take().map_err(|e| SegmentError::Unreachable {
        seg: seg.name(),
        what: format!("the RMA operation on rank {} failed: {e}", seg.rank),
    })?;
    if let Op::Get(buf) = op {
        if bytes.len() != buf.len() {
            return Err(SegmentError::Unreachable {
                seg: seg.name(),
                what: format!("an RMA read of {} bytes gave {}", buf.len(), bytes.len()),
            });
        }
        buf.copy_from_slice(&bytes);
    }
    Ok(word)
}
