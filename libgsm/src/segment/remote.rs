//! Segment operations on a rank of another host: a delegated request to a worker of the owner
//! rank, served by [`Serve`], this module's handler (runtime code; the owner's program runs
//! nothing), which looks the segment up by id, checks the operation against the owner's header
//! and applies it, and answers with the result or the refusal. A `put_notify` carries its data and
//! its notification in one request, so the notification is queued after the data is written.
//! A notification after a put through shared memory is a request of its own ([`notify`]). On an
//! RMA fabric it also hands out keys (`KEYS`) and carries an owner's invalidation (`INVALIDATE`)
//! for `rma.rs`.
//!
//! Requests and answers are `postcard` encodings checked on arrival; the caller's rank is the
//! ring's, never a field of the request. It does not choose the path (`mod.rs` does). See
//! `segment/README.md`.

use serde::{Deserialize, Serialize};

use super::{Notification, Op, SegmentError, SegmentRef, exported};
use crate::error::DelegationError;
use crate::fabric::rma::Atomic;
use crate::trust::{block_on, captured};
use crate::wire::record::{Request, RequestReader, Src};
use crate::worker::WorkerCore;
use crate::worker::entry::{Delegated, trampoline};

const GET: u8 = 1;
const PUT: u8 = 2;
/// A typed atomic: `len` is its `Atomic::code`, `a` and `b` its operands' bits.
const ATOMIC: u8 = 3;
const NOTE: u8 = 6;
/// The caller's keys on an RMA fabric (`rma.rs`); `a` names the right the operation needs.
const KEYS: u8 = 7;
/// From an owner: forget the keys of segment `id` (`rma.rs`).
const INVALIDATE: u8 = 8;

/// What a request carries besides a put's data (plain integers: any bytes are some `Ask`).
#[derive(Clone, Copy)]
#[repr(C)]
struct Ask {
    id: u64,
    generation: u64,
    offset: u64,
    len: u64,
    a: u64,
    b: u64,
    kind: u8,
    notify: u8,
}

/// The answer: an old word, or the bytes of a get.
#[derive(Debug, Serialize, Deserialize)]
struct Answer {
    word: u64,
    bytes: Vec<u8>,
    keys: Option<super::keys::Keys>,
}

/// The worker of `rank` that serves this caller's requests: spread over the owner's workers by
/// the caller's worker, so that several callers do not queue on one.
fn server(rank: usize, core: &WorkerCore) -> usize {
    let ws = crate::workers_of_rank(rank);
    ws.start + core.id % ws.len().max(1)
}

fn ask(seg: &SegmentRef, kind: u8, offset: u64) -> Ask {
    Ask {
        id: seg.id,
        generation: seg.generation,
        offset,
        len: 0,
        a: 0,
        b: 0,
        kind,
        notify: 0,
    }
}

fn failed(seg: &SegmentRef, e: DelegationError) -> SegmentError {
    SegmentError::Unreachable {
        seg: seg.name(),
        what: format!("the request to rank {} failed: {e}", seg.rank),
    }
}

/// The argument bytes of a request whose sender wrote them from a `&[u8]` ([`call`], and the
/// stream's chunks): read as they are, with no encoding around them (any bytes are some bytes).
pub(crate) fn raw_arg<'a>(rec: &'a Request<'_>) -> &'a [u8] {
    let arg = rec.arg();
    // SAFETY: the bytes were copied from a `&[u8]` (this process) or written by the fabric from
    // another process's bytes: initialised either way; `MaybeUninit<u8>` has the layout of `u8`.
    unsafe { std::slice::from_raw_parts(arg.as_ptr().cast::<u8>(), arg.len()) }
}

/// Sends `a` (with `data` for a put, as raw bytes) to the owner rank and waits for the answer.
fn call(seg: &SegmentRef, a: Ask, data: Option<&[u8]>) -> Result<Answer, SegmentError> {
    let core = crate::worker::core_or_panic("a segment operation");
    let dest = server(seg.rank as usize, core);
    let tramp = trampoline::<Serve>();
    let r: Result<Result<Answer, SegmentError>, DelegationError> = match data {
        Some(d) => block_on(
            core,
            dest,
            tramp,
            0,
            0,
            Src::of(&a),
            Some(Src::slice(d)),
            true,
        ),
        None => block_on(core, dest, tramp, 0, 0, Src::of(&a), None, false),
    };
    r.map_err(|e| failed(seg, e))?
}

/// Performs `op` on the owner's side; `notify`: queue a notification with that word after a put.
pub(super) fn run(
    seg: &SegmentRef,
    offset: u64,
    op: Op<'_>,
    notify: Option<u64>,
) -> Result<u64, SegmentError> {
    let mut a = ask(seg, 0, offset);
    if let Some(w) = notify {
        a.notify = 1;
        a.b = w;
    }
    match op {
        Op::Get(buf) => {
            a.kind = GET;
            a.len = buf.len() as u64;
            let ans = call(seg, a, None)?;
            if ans.bytes.len() != buf.len() {
                return Err(SegmentError::Unreachable {
                    seg: seg.name(),
                    what: format!(
                        "rank {} answered {} bytes for a get of {}",
                        seg.rank,
                        ans.bytes.len(),
                        buf.len()
                    ),
                });
            }
            buf.copy_from_slice(&ans.bytes);
            Ok(0)
        }
        Op::Put(d) => {
            a.kind = PUT;
            a.len = d.len() as u64;
            call(seg, a, Some(d)).map(|x| x.word)
        }
        Op::Atomic(kind, x, y) => {
            (a.kind, a.len, a.a, a.b) = (ATOMIC, kind.code().into(), x, y);
            call(seg, a, None).map(|x| x.word)
        }
    }
}

/// Asks the owner for this rank's keys of `seg` (on an RMA fabric); `offset` and `right` are
/// the operation's, for a refusal to name.
pub(super) fn keys(
    seg: &SegmentRef,
    offset: u64,
    right: super::Right,
) -> Result<super::keys::Keys, SegmentError> {
    let mut a = ask(seg, KEYS, offset);
    a.a = right.bit().into();
    let ans = call(seg, a, None)?;
    ans.keys.ok_or_else(|| SegmentError::Unreachable {
        seg: seg.name(),
        what: format!("rank {} answered a key request without keys", seg.rank),
    })
}

/// Tells `rank` to forget its keys of this rank's segment `id` and waits for its answer.
pub(super) fn invalidate(rank: usize, id: u64) -> Result<(), SegmentError> {
    let seg = SegmentRef {
        rank: rank as u32,
        pid: 0,
        fd: 0,
        id,
        generation: 0,
        len: 0,
    };
    call(&seg, ask(&seg, INVALIDATE, 0), None).map(drop)
}

/// Delivers `n` to the owner's queue (the data is already in its memory).
pub(super) fn notify(seg: &SegmentRef, n: Notification) -> Result<(), SegmentError> {
    let mut a = ask(seg, NOTE, n.offset);
    (a.len, a.b) = (n.len, n.word);
    call(seg, a, None).map(drop)
}

fn right_of_bit(b: u64) -> super::Right {
    match b {
        1 => super::Right::Read,
        2 => super::Right::Write,
        _ => super::Right::Atomic,
    }
}

/// The handler of segment requests on the owner's worker.
pub(crate) struct Serve;

impl Serve {
    fn answer(
        core: &WorkerCore,
        client: usize,
        a: Ask,
        data: &[u8],
    ) -> Result<Answer, SegmentError> {
        let from = core.shared.place.rank_of(client) as usize;
        let seg = super::SegmentName {
            rank: crate::rank() as u32,
            id: a.id,
            generation: a.generation,
        };
        if a.kind == INVALIDATE {
            // The ring's rank is the owner that sends it: no rank can drop another's keys.
            super::keys::forget(from, a.id);
            return Ok(Answer {
                word: 0,
                bytes: Vec::new(),
                keys: None,
            });
        }
        let Some(own) = exported(a.id) else {
            let right = match a.kind {
                GET => super::Right::Read,
                PUT | NOTE => super::Right::Write,
                KEYS => right_of_bit(a.a),
                _ => super::Right::Atomic,
            };
            return Err(SegmentError::Stale {
                seg,
                offset: a.offset,
                right,
                current: 0,
            });
        };
        if a.kind == KEYS {
            let k = super::keys::keys_for(&own, from, &seg, a.offset, right_of_bit(a.a))?;
            return Ok(Answer {
                word: 0,
                bytes: Vec::new(),
                keys: Some(k),
            });
        }
        let view = own.view(seg);
        let mut bytes = Vec::new();
        let word = match a.kind {
            GET => {
                let len = usize::try_from(a.len)
                    .ok()
                    .filter(|&l| l as u64 <= view.data_len)
                    .ok_or(SegmentError::OutOfBounds {
                        seg,
                        offset: a.offset,
                        len: a.len,
                        size: view.data_len,
                        right: super::Right::Read,
                    })?;
                bytes = vec![0u8; len];
                view.perform(from, a.offset, Op::Get(&mut bytes))?
            }
            PUT => {
                let d = data;
                let w = view.perform(from, a.offset, Op::Put(d))?;
                if a.notify != 0 {
                    own.notify(Notification {
                        source: from,
                        offset: a.offset,
                        len: d.len() as u64,
                        word: a.b,
                    });
                }
                w
            }
            ATOMIC => {
                // A number that names no atomic (a float's bitwise op, say) is refused, not
                // guessed at.
                let kind = Atomic::decode(a.len).ok_or_else(|| SegmentError::Unreachable {
                    seg,
                    what: format!(
                        "rank {from} asked for atomic number {}, which is none",
                        a.len
                    ),
                })?;
                view.perform(from, a.offset, Op::Atomic(kind, a.a, a.b))?
            }
            NOTE => {
                // The same checks as the put it follows: a notification names bytes the notifier
                // may write.
                crate::segment::layout::check(
                    &own.file,
                    &seg,
                    own.data_at,
                    own.len,
                    from,
                    a.offset,
                    a.len,
                    super::Right::Write,
                    1,
                )?;
                own.notify(Notification {
                    source: from,
                    offset: a.offset,
                    len: a.len,
                    word: a.b,
                });
                0
            }
            k => {
                return Err(SegmentError::Unreachable {
                    seg,
                    what: format!("unknown segment operation {k}"),
                });
            }
        };
        Ok(Answer {
            word,
            bytes,
            keys: None,
        })
    }
}

impl Delegated for Serve {
    /// # Safety
    /// `rec` must be a record encoded by `call` (captured bytes: one `Ask`; argument, for a put:
    /// the data's raw bytes).
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        _more: &mut RequestReader<'_>,
    ) {
        // SAFETY: `call` copied one `Ask` into the captured bytes (size checked by `captured`;
        // any bytes of that size are an `Ask`).
        let a = match unsafe { captured::<Ask>(rec) } {
            Ok(a) => a,
            Err(e) => {
                return core.outbox().respond::<Result<Answer, SegmentError>>(
                    client,
                    rec.req,
                    Err(e),
                );
            }
        };
        let data = if a.kind == PUT { raw_arg(rec) } else { &[] };
        let r = Serve::answer(core, client, a, data);
        core.outbox().respond(client, rec.req, Ok(r));
    }
}
