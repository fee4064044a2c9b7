//! Large records, bigger than a slot, both ways. The sender streams one to another rank as a
//! start piece and "more" pieces (laid out by [`request_start`] and [`response_start`], cut by
//! [`cut`]), or parks its body for a peer on this host to read in one copy ([`Parking`], which
//! each `OutQueue` owns); the receiver sorts each slot from another rank by kind ([`classify`])
//! and reassembles the pieces ([`Partial`]). See the parent module for the format.
//!
//! It does not queue the pieces (`stage`'s `OutQueue` does, and calls down into this module),
//! read the parked body (`wire::far` does) nor run the record. See `wire/README.md`.

use std::collections::HashMap;
use std::sync::Arc;

use super::bytes::{Src, arg_len32, cap_len16, put, put_bytes, set_bytes};
use super::layout::{
    ARG, Byte, CONTROL, FAR_WORDS, HEADER, KIND_BATCH, KIND_MORE, KIND_REQ_START, KIND_RESP_START,
    LARGE, REQ_HEADER, bytes_at, request_header, u32_at, u64_at,
};
use super::read::{Body, Request};
use crate::wire::far::Rendezvous;

/// The smallest body sent by the single-copy path; smaller large records are streamed through
/// the rings, which measured faster below about half a MiB (figures in docs/performance-log.md).
pub(super) const FAR_MIN: usize = 512 << 10;

/// The largest body a peer may announce for a streamed record (1 TiB): a bound so that a
/// corrupt length is an error, not an attempt to allocate it.
const MAX_STREAMED: u64 = 1 << 40;

/// The bit that marks the token of a body parked by a queue of responses. A destination releases
/// the bodies of requests and of responses with the same record, so the two queues to it must
/// not hand out the same token: numbered alike from 1, the release of response 1 freed request
/// 1's body while the destination had yet to read it (it then read freed memory of this process).
const RESPONSE_TOKEN: u64 = 1 << 63;

/// Whether `token` names a body parked by a queue of responses (else one of requests).
#[inline]
pub(crate) fn parked_by_responses(token: u64) -> bool {
    token & RESPONSE_TOKEN != 0
}

/// The bodies one queue has parked for its destination to read in one copy
/// (`process_vm_readv` on this host, or an RMA read from memory a one-sided fabric registered),
/// by token, until the destination releases them. Off until the queue's owner allows it.
#[derive(Debug)]
pub(crate) struct Parking {
    /// The destination can read this process's memory: large bodies are parked here.
    far: bool,
    /// The smallest body parked rather than streamed (with `far`).
    far_min: usize,
    /// The one-sided fabric's rendezvous that registers parked bodies, if the destination
    /// reads them by RMA.
    rma: Option<Arc<dyn Rendezvous>>,
    /// Bodies parked for the destination to read, by token, until it releases them.
    parked: HashMap<u64, ParkedBody>,
    next_token: u64,
}

impl Parking {
    /// Parking off: every large body to the destination is streamed.
    pub(super) fn new() -> Parking {
        Parking {
            far: false,
            far_min: FAR_MIN,
            rma: None,
            parked: HashMap::new(),
            next_token: 1,
        }
    }

    /// Parks bodies from [`FAR_MIN`] bytes on when `remote` (a destination in another process
    /// of this host); `responses`: the tokens are those of a queue of responses (see
    /// [`parked_by_responses`]).
    pub(super) fn allow(&mut self, remote: bool, responses: bool) {
        self.far = remote;
        self.next_token = if responses { RESPONSE_TOKEN | 1 } else { 1 };
    }

    /// As [`allow`](Self::allow), for every body too large for a slot, registered with `rma`
    /// for the destination's RMA reads.
    pub(super) fn allow_rma(&mut self, remote: bool, responses: bool, rma: Arc<dyn Rendezvous>) {
        self.allow(remote, responses);
        self.far_min = 0;
        self.rma = Some(rma);
    }

    /// Whether a large body of `len` bytes is parked rather than streamed.
    #[inline]
    pub(super) fn takes(&self, len: usize) -> bool {
        self.far && len >= self.far_min
    }

    /// Frees a body the destination has read (deregistering it first). Unknown tokens are
    /// ignored.
    pub(super) fn release(&mut self, token: u64) -> bool {
        self.parked.remove(&token).is_some()
    }

    /// The bodies parked now, by token (tests only).
    #[cfg(test)]
    pub(super) fn parked(&self) -> &HashMap<u64, ParkedBody> {
        &self.parked
    }

    /// Parks `body` for the destination to read and returns its `[addr][len][token][key]`;
    /// the body back if the fabric would not register it (the caller streams it instead).
    pub(super) fn park(&mut self, body: Vec<Byte>) -> Result<[u8; FAR_WORDS], Box<[Byte]>> {
        let bytes = body.into_boxed_slice();
        let len = bytes.len() as u64;
        let (addr, key, registration) = match &self.rma {
            None => (bytes.as_ptr() as usize as u64, 0, None),
            Some(rma) => {
                // SAFETY: the box is neither freed nor written until the registration drops
                // (`ParkedBody` drops it first); moving the box does not move its bytes.
                match unsafe { rma.park(bytes.as_ptr().cast(), bytes.len()) } {
                    Ok(p) => (
                        p.addr,
                        p.key,
                        Some(Registration {
                            rma: rma.clone(),
                            id: p.id,
                        }),
                    ),
                    Err(e) => {
                        tracing::warn!(
                            target: "gossamer::fabric",
                            len,
                            error = %e,
                            "cannot register a large body for RMA; streaming it through the rings"
                        );
                        return Err(bytes);
                    }
                }
            }
        };
        let token = self.next_token;
        self.next_token += 1;
        self.parked.insert(
            token,
            ParkedBody {
                registration,
                bytes,
            },
        );
        let mut w = [0u8; FAR_WORDS];
        w[..8].copy_from_slice(&addr.to_le_bytes());
        w[8..16].copy_from_slice(&len.to_le_bytes());
        w[16..24].copy_from_slice(&token.to_le_bytes());
        w[24..].copy_from_slice(&key.to_le_bytes());
        Ok(w)
    }
}

/// A streamed request's start piece (after the 8-byte piece header, without body) and its body,
/// the captured bytes then the argument's.
#[allow(clippy::too_many_arguments)]
pub(super) fn request_start(
    code: Option<u64>,
    idx: u32,
    gn: u32,
    req: u32,
    cap: Src<'_>,
    arg: Option<Src<'_>>,
    extra_flags: u8,
) -> (Vec<u8>, Vec<Byte>) {
    let mut flags = extra_flags | LARGE;
    if arg.is_some() {
        flags |= ARG;
    }
    let mut start = Vec::with_capacity(REQ_HEADER + 12);
    let fidx = if code.is_some() { 0 } else { CONTROL };
    let cap_len = cap_len16(cap.len());
    start.extend_from_slice(&request_header(fidx, flags, cap_len, req, idx, gn));
    if let Some(a) = arg {
        start.extend_from_slice(&arg_len32(a.len()).to_le_bytes());
    }
    let mut body = Vec::with_capacity(cap.len() + arg.map_or(0, |a| a.len()));
    put(&mut body, cap);
    if let Some(a) = arg {
        put(&mut body, a);
    }
    start.extend_from_slice(&(body.len() as u64).to_le_bytes());
    (start, body)
}

/// A streamed response's start piece (after the 8-byte piece header, without body) and its body.
pub(super) fn response_start(req: u32, status: u8, body: Src<'_>) -> (Vec<u8>, Vec<Byte>) {
    let mut start = Vec::with_capacity(16);
    start.extend_from_slice(&req.to_le_bytes());
    start.extend_from_slice(&[status, 0, 0, 0]);
    start.extend_from_slice(&(body.len() as u64).to_le_bytes());
    let mut b = Vec::with_capacity(body.len());
    put(&mut b, body);
    (start, b)
}

/// Cuts a streamed large record into slot pieces of at most `cap` bytes and hands each to
/// `emit`, in order: the start piece (kind `kind`: `start`, as much of `body` as fits, then
/// `table`, the start piece's code table, `None` for responses) and "more" pieces with the rest.
/// Each piece is written into a buffer from `spare`, which holds the piece header's room.
pub(super) fn cut(
    kind: u16,
    start: &[u8],
    body: &[Byte],
    table: Option<u64>,
    cap: usize,
    mut spare: impl FnMut() -> Vec<Byte>,
    mut emit: impl FnMut(Vec<Byte>),
) {
    let tab = if table.is_some() { 8 } else { 0 };
    let mut b = spare();
    put_bytes(&mut b, start);
    let room = cap.saturating_sub(b.len() + tab);
    let first = room.min(body.len());
    b.extend_from_slice(&body[..first]);
    let end = b.len() as u32;
    if let Some(code) = table {
        put_bytes(&mut b, &code.to_le_bytes());
    }
    set_bytes(&mut b, 0, &end.to_le_bytes());
    set_bytes(&mut b, 4, &u16::from(table.is_some()).to_le_bytes());
    set_bytes(&mut b, 6, &kind.to_le_bytes());
    emit(b);
    let mut at = first;
    while at < body.len() {
        let mut b = spare();
        let n = (cap - HEADER).min(body.len() - at);
        b.extend_from_slice(&body[at..at + n]);
        at += n;
        let end = b.len() as u32;
        set_bytes(&mut b, 0, &end.to_le_bytes());
        set_bytes(&mut b, 6, &KIND_MORE.to_le_bytes());
        emit(b);
    }
}

/// What one slot from another rank holds.
#[derive(Debug)]
pub(crate) enum Large<'a> {
    /// An ordinary batch of records.
    Batch,
    /// The first piece of a streamed request.
    ReqStart {
        code: u64,
        fidx: u8,
        flags: u8,
        cap_len: usize,
        req: u32,
        idx: u32,
        gn: u32,
        total: u64,
        chunk: &'a [Byte],
    },
    /// The first piece of a streamed response.
    RespStart {
        req: u32,
        status: u8,
        total: u64,
        chunk: &'a [Byte],
    },
    /// A later piece.
    More(&'a [Byte]),
    /// Not a slot any sender of this build writes.
    Bad(&'static str),
}

/// Sorts a slot from another rank by its kind and parses a start piece's header. Every length is
/// checked against the slot; the body bytes are never interpreted here.
pub(crate) fn classify(b: &[Byte]) -> Large<'_> {
    // SAFETY: slots from a peer are bytes another process wrote into shared memory or a socket
    // delivered; all of them are initialised from this process's point of view, and every read
    // is bounds-checked (`get`). The same holds for every `*_at` read below.
    let Some(end) = (unsafe { u32_at(b, 0) }) else {
        return Large::Bad("a slot shorter than its header");
    };
    let end = end as usize;
    // SAFETY: as above.
    let kind = match unsafe { bytes_at::<2>(b, 6) } {
        Some(k) => u16::from_le_bytes(k),
        None => return Large::Bad("a slot shorter than its header"),
    };
    if kind == KIND_BATCH {
        return Large::Batch;
    }
    if end < HEADER || end > b.len() {
        return Large::Bad("a piece whose end lies outside its slot");
    }
    match kind {
        KIND_MORE => Large::More(&b[HEADER..end]),
        KIND_REQ_START => {
            // SAFETY: as above.
            let Some(h) = (unsafe { bytes_at::<REQ_HEADER>(b, HEADER) }) else {
                return Large::Bad("a truncated start piece");
            };
            let flags = h[1];
            let mut q = HEADER + REQ_HEADER;
            if flags & ARG != 0 {
                q += 4;
            }
            // SAFETY: as above.
            let (Some(total), Some(code)) = (unsafe { u64_at(b, q) }, unsafe { u64_at(b, end) })
            else {
                return Large::Bad("a truncated start piece");
            };
            q += 8;
            if q > end {
                return Large::Bad("a truncated start piece");
            }
            Large::ReqStart {
                code,
                fidx: h[0],
                flags,
                cap_len: u16::from_le_bytes([h[2], h[3]]) as usize,
                req: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
                idx: u32::from_le_bytes([h[8], h[9], h[10], h[11]]),
                gn: u32::from_le_bytes([h[12], h[13], h[14], h[15]]),
                total,
                chunk: &b[q..end],
            }
        }
        KIND_RESP_START => {
            // SAFETY: as above.
            let (Some(req), Some(st), Some(total)) = (
                unsafe { u32_at(b, HEADER) },
                unsafe { bytes_at::<1>(b, HEADER + 4) },
                unsafe { u64_at(b, HEADER + 8) },
            ) else {
                return Large::Bad("a truncated start piece");
            };
            if HEADER + 16 > end {
                return Large::Bad("a truncated start piece");
            }
            Large::RespStart {
                req,
                status: st[0],
                total,
                chunk: &b[HEADER + 16..end],
            }
        }
        _ => Large::Bad("a slot of an unknown kind"),
    }
}

/// A streamed record being reassembled from its pieces.
#[derive(Debug)]
pub(crate) struct Partial {
    head: PartialHead,
    buf: Vec<Byte>,
    total: usize,
}

#[derive(Debug, Clone, Copy)]
enum PartialHead {
    Req {
        code: u64,
        fidx: u8,
        flags: u8,
        cap_len: usize,
        req: u32,
        idx: u32,
        gn: u32,
    },
    Resp {
        req: u32,
        status: u8,
    },
}

/// A reassembled record.
#[derive(Debug)]
pub(crate) struct Done {
    /// The request's code offset (0 for responses).
    pub code: u64,
    head: PartialHead,
    body: Box<[Byte]>,
}

impl Done {
    /// The request it carries (call only for a request stream).
    pub(crate) fn into_request(self) -> Request<'static> {
        match self.head {
            PartialHead::Req {
                fidx,
                flags,
                cap_len,
                req,
                idx,
                gn,
                ..
            } => Request {
                fidx,
                flags,
                req,
                idx,
                gn,
                cap_len,
                body: Body::Large(self.body),
            },
            PartialHead::Resp { req, .. } => Request {
                fidx: CONTROL,
                flags: 0,
                req,
                idx: 0,
                gn: 0,
                cap_len: 0,
                body: Body::Large(self.body),
            },
        }
    }

    /// `(req, status, body)` of the response it carries (call only for a response stream).
    pub(crate) fn into_response(self) -> (u32, u8, Box<[Byte]>) {
        match self.head {
            PartialHead::Resp { req, status } => (req, status, self.body),
            PartialHead::Req { req, .. } => (req, 0xFF, self.body),
        }
    }
}

impl Partial {
    /// Feeds one piece to the reassembly state of one ring. Returns the record when its last
    /// piece arrived, or what is wrong (a piece out of order, a body longer than announced, a
    /// start of the wrong lane, an impossible length).
    pub(crate) fn feed(
        state: &mut Option<Partial>,
        piece: Large<'_>,
        request_lane: bool,
    ) -> Result<Option<Done>, &'static str> {
        let chunk = match piece {
            Large::Batch => return Err("a batch in the middle of a streamed record"),
            Large::Bad(e) => return Err(e),
            Large::More(chunk) => {
                if state.is_none() {
                    return Err("a continuation piece without a start");
                }
                chunk
            }
            Large::ReqStart { .. } | Large::RespStart { .. } if state.is_some() => {
                return Err("a new streamed record before the previous one ended");
            }
            Large::ReqStart {
                code,
                fidx,
                flags,
                cap_len,
                req,
                idx,
                gn,
                total,
                chunk,
            } => {
                if !request_lane {
                    return Err("a request piece on a response ring");
                }
                if (cap_len as u64) > total {
                    return Err("captured bytes longer than the whole record");
                }
                let head = PartialHead::Req {
                    code,
                    fidx,
                    flags,
                    cap_len,
                    req,
                    idx,
                    gn,
                };
                *state = Some(Partial::start(head, total)?);
                chunk
            }
            Large::RespStart {
                req,
                status,
                total,
                chunk,
            } => {
                if request_lane {
                    return Err("a response piece on a request ring");
                }
                *state = Some(Partial::start(PartialHead::Resp { req, status }, total)?);
                chunk
            }
        };
        let Some(p) = state.as_mut() else {
            return Err("a continuation piece without a start");
        };
        if p.buf.len() + chunk.len() > p.total {
            *state = None;
            return Err("a streamed record longer than its announced length");
        }
        p.buf.extend_from_slice(chunk);
        if p.buf.len() < p.total {
            return Ok(None);
        }
        let Some(p) = state.take() else {
            return Err("a continuation piece without a start");
        };
        let code = match p.head {
            PartialHead::Req { code, .. } => code,
            PartialHead::Resp { .. } => 0,
        };
        Ok(Some(Done {
            code,
            head: p.head,
            body: p.buf.into_boxed_slice(),
        }))
    }

    fn start(head: PartialHead, total: u64) -> Result<Partial, &'static str> {
        if total > MAX_STREAMED {
            return Err("a streamed record announced as larger than 1 TiB");
        }
        let total = total as usize;
        let mut buf = Vec::new();
        buf.try_reserve_exact(total)
            .map_err(|_| "not enough memory to receive a streamed record")?;
        Ok(Partial { head, buf, total })
    }
}

/// A body parked for a destination to read, and its registration with a one-sided fabric (which
/// is dropped, so deregistered, before the bytes are freed).
#[derive(Debug)]
#[allow(
    dead_code,
    reason = "held for their drops: deregistration first, then the bytes"
)]
pub(crate) struct ParkedBody {
    pub(super) registration: Option<Registration>,
    pub(super) bytes: Box<[Byte]>,
}

/// A body's registration with a [`Rendezvous`](crate::wire::far::Rendezvous); undone on drop.
#[derive(Debug)]
pub(crate) struct Registration {
    pub(super) rma: Arc<dyn Rendezvous>,
    pub(super) id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.rma.unpark(self.id);
    }
}
