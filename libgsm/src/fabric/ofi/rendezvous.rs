//! The `ofi` fabric's rendezvous for records larger than a slot: the sender registers the body
//! where it lies ([`Handle::park`]) and sends its address and key in the record; the receiver
//! reads it with `fi_read` straight into a buffer of its own ([`Handle::read`]), then sends a
//! release record, upon which the sender deregisters and frees the body. Nothing of the body
//! passes through the rings, and the sender's buffer outlives every read of it.
//!
//! A read is split into pieces of [`PIECE`] bytes, all posted at once (as many as the provider
//! takes; the rest on later turns). The reading worker drives the rank's progress itself while
//! it waits (the turn posts the pieces and reads their completions), as it does while it polls.
//! A failed piece is posted again, like a failed slot write, up to the same number of failures
//! per peer; then the peer is reported lost and the read fails, which ends the job. Its buffer is
//! then leaked if pieces are still in flight, since the provider may still write it.
//!
//! This module keeps the reads and registrations (under the progress state's lock); `handle.rs`
//! is what the runtime calls. It does not know records (`wire::record` makes and reads the
//! references) or rings.
//! See the rendezvous in `README.md` beside this file.

use std::collections::HashMap;
use std::ffi::c_void;

use crate::fabric::Parked;
use crate::sys::ofi::{self as fi, Stack};

/// Context kind of a read's piece (the other kinds are `progress.rs`'s; all three top bits,
/// so `!READ_CTX` also clears the kind).
pub(super) const READ_CTX: usize = 7 << 61;
/// Bits of a read piece's context that number the piece (the rest, below the kind, the read).
const PIECE_BITS: u32 = 24;
/// The bytes one `fi_read` moves at most: pieces of a large body travel side by side.
const PIECE: usize = 4 << 20;

/// One read in flight.
struct Read {
    peer: usize,
    /// The peer's `fi_addr_t`.
    src: u64,
    dst: *mut u8,
    len: usize,
    addr: u64,
    key: u64,
    /// Local descriptor and registration id of `dst` (`FI_MR_LOCAL` providers only).
    desc: *mut c_void,
    local: Option<u64>,
    /// Next piece never posted.
    next: usize,
    /// Pieces to post again.
    again: Vec<usize>,
    /// Posted and not completed.
    in_flight: usize,
    /// Completed.
    done: usize,
    failed: Option<String>,
}

impl Read {
    fn pieces(&self) -> usize {
        self.len.div_ceil(PIECE).max(1)
    }
}

/// The reads and registrations of one rank (kept in the progress state, under its lock).
#[derive(Default)]
pub(super) struct Reads {
    reads: HashMap<u64, Read>,
    next_read: u64,
    /// The next registration id (also its requested key; the region has key 1).
    next_id: u64,
}

/// How a read ended.
pub(super) enum Ended {
    Done,
    /// Failed; `in_flight`: pieces may still land in the buffer.
    Failed {
        why: String,
        in_flight: bool,
    },
}

impl Reads {
    fn id(&mut self) -> u64 {
        self.next_id = self.next_id.max(1) + 1;
        self.next_id
    }

    /// Registers a body for peers' reads.
    ///
    /// # Safety
    /// As [`Rendezvous::park`].
    pub(super) unsafe fn park(
        &mut self,
        stack: &mut Stack,
        ptr: *const u8,
        len: usize,
    ) -> Result<Parked, String> {
        let id = self.id();
        // SAFETY: the caller's (the body stays until `unpark`).
        let (reg, _) =
            unsafe { stack.register_more(id, ptr, len, true) }.map_err(|e| e.to_string())?;
        Ok(Parked {
            addr: reg.base,
            key: reg.key,
            id,
        })
    }

    /// Starts reading `len` bytes at `addr` (key `key`) of peer `peer` (at `src`) into `dst`.
    ///
    /// # Safety
    /// `dst..dst + len` is writable and left alone until the read ends (and forever if it ends
    /// with pieces in flight).
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn start(
        &mut self,
        stack: &mut Stack,
        (peer, src): (usize, u64),
        addr: u64,
        key: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<u64, String> {
        let (mut desc, mut local) = (std::ptr::null_mut(), None);
        if stack.local_mr() {
            let id = self.id();
            // SAFETY: `dst` stays valid until the read ends (the caller's), and is deregistered
            // then (or closed with the stack when leaked).
            let (_, d) =
                unsafe { stack.register_more(id, dst, len, false) }.map_err(|e| e.to_string())?;
            (desc, local) = (d, Some(id));
        }
        self.next_read += 1;
        let n = self.next_read;
        self.reads.insert(
            n,
            Read {
                peer,
                src,
                dst,
                len,
                addr,
                key,
                desc,
                local,
                next: 0,
                again: Vec::new(),
                in_flight: 0,
                done: 0,
                failed: None,
            },
        );
        Ok(n)
    }

    /// Posts the pieces not yet posted (those to post again first); `Ok(true)` if any was.
    /// Stops at `EAGAIN`; another error names the peer.
    pub(super) fn post(&mut self, stack: &mut Stack) -> Result<bool, (usize, fi::FiError)> {
        let mut any = false;
        for (&n, r) in self.reads.iter_mut().filter(|(_, r)| r.failed.is_none()) {
            loop {
                let piece = match r.again.last() {
                    Some(&p) => p,
                    None if r.next < r.pieces() => r.next,
                    None => break,
                };
                let at = piece * PIECE;
                let len = PIECE.min(r.len - at);
                let ctx = READ_CTX | (n as usize) << PIECE_BITS | piece;
                // SAFETY: the piece lies in `dst`, which stays valid and untouched until the
                // read ends (`start`'s contract), registered with `desc` when the provider
                // asks.
                let res = unsafe {
                    stack.read(
                        r.dst.add(at),
                        len,
                        r.desc,
                        r.src,
                        r.addr + at as u64,
                        r.key,
                        ctx,
                    )
                };
                match res {
                    Ok(()) => {}
                    Err(e) if e.code == fi::EAGAIN => return Ok(any),
                    Err(e) => return Err((r.peer, e)),
                }
                if r.again.pop().is_none() {
                    r.next += 1;
                }
                r.in_flight += 1;
                any = true;
            }
        }
        Ok(any)
    }

    /// A piece completed (pieces of reads already given up are ignored).
    pub(super) fn completed(&mut self, ctx: usize) {
        if let Some(r) = self.reads.get_mut(&read_of(ctx)) {
            r.in_flight -= 1;
            r.done += 1;
        }
    }

    /// A piece failed: it is posted again. Returns the peer, if the read is still known.
    pub(super) fn failed(&mut self, ctx: usize) -> Option<usize> {
        let r = self.reads.get_mut(&read_of(ctx))?;
        r.in_flight -= 1;
        r.again.push(ctx & ((1 << PIECE_BITS) - 1));
        Some(r.peer)
    }

    /// Fails every read from peer `peer`.
    pub(super) fn lost(&mut self, peer: usize, why: &str) {
        for r in self.reads.values_mut().filter(|r| r.peer == peer) {
            r.failed.get_or_insert_with(|| why.to_owned());
        }
    }

    /// Fails every read (the job ends).
    pub(super) fn fail_all(&mut self, why: &str) {
        for r in self.reads.values_mut() {
            r.failed.get_or_insert_with(|| why.to_owned());
        }
    }

    /// How read `n` ended, if it did (it is then forgotten).
    pub(super) fn ended(&mut self, stack: &mut Stack, n: u64) -> Option<Ended> {
        let r = self.reads.get(&n)?;
        let end = match &r.failed {
            None if r.done == r.pieces() => Ended::Done,
            None => return None,
            Some(why) => Ended::Failed {
                why: why.clone(),
                in_flight: r.in_flight > 0,
            },
        };
        let r = self.reads.remove(&n)?;
        if let (
            Some(id),
            Ended::Done
            | Ended::Failed {
                in_flight: false, ..
            },
        ) = (r.local, &end)
        {
            stack.deregister(id);
        }
        Some(end)
    }
}

fn read_of(ctx: usize) -> u64 {
    ((ctx & !READ_CTX) >> PIECE_BITS) as u64
}
