//! Batch encoding: how request and response records are laid out in one slot, and the
//! per-destination staging queue that fills batches and hands them to a ring.
//!
//! A **request batch** is `[u32 table_pos][u16 ntab][u16 0]`, then the records, then the code
//! table (`ntab` little-endian `u64` code offsets, see `codeptr`). A request record is
//! `[u8 fn][u8 flags][u16 cap_len][u32 req][u32 idx][u32 gn]` (16 bytes), then
//! `[u32 arg_len]` if `flags & ARG`, then the captured bytes and the argument bytes. `fn` indexes
//! the batch's table; `fn == CONTROL` marks a trust-id toggle (the 8 captured bytes are the id).
//! A *plain* record (no argument, captured bytes inline) that repeats the function, flags,
//! capture length and property of the plain record right before it is written as a
//! *continuation*, `[u8 CONT][u32 req]` and its captured bytes: a loop of `apply_then`s to one
//! trust sends 5 bytes per request instead of 16 (plus the captures).
//! A **response batch** is `[u32 0][u16 0][u16 0]` then records `[u32 req][u32 len << 8 | status]`
//! followed by `len` body bytes; an inline response of the same status and length as the
//! inline response right before it is a continuation, `[u32 req | RESP_CONT]` and its body (12
//! bytes instead of 16 for a `u64` result).
//!
//! Both kinds of continuation cut the bytes that cross between the two cores (gsm-bench local,
//! A/B alternated processes: the `apply_then` counter +1 to +2% in all and worker 1's share of it
//! +15 to +20%, blocking `apply` with 64 fibers per worker +7%, the sharded map +5%, the one-trust
//! map +2 to +15%; with continuations of requests alone the `apply_then` counter lost 2 to 8%:
//! worker 1 then sent more requests for worker 0 to serve, and answering them cost as before).
//!
//! The batch header's last `u16` is the batch *kind*: 0 for a batch of records, or a piece of a
//! large record (below).
//!
//! **Large records** (bigger than a slot) take one of two paths; nothing is truncated either way:
//! - *Within a process*, with `flags & LARGE` (requests) or `status & LARGE_STATUS` (responses),
//!   the record carries a `u64` pointer and a `u64` length of a heap `Box<[u8]>` holding the body;
//!   its ownership moves with the record and the receiver frees it. Readers accept this form only
//!   from batches of their own process (`pointers = true`).
//! - *To another rank* (an `OutQueue` made with `remote = true`), the record is streamed through
//!   the ring as consecutive slots: a *start* slot (kind [`KIND_REQ_START`] or
//!   [`KIND_RESP_START`]) with the record's header, the body's total length and the first bytes,
//!   then *more* slots (kind [`KIND_MORE`]) with the rest. A ring has one producer and is FIFO, so
//!   the pieces arrive in order and back to back; the receiver reassembles them ([`Partial`]) and
//!   only then runs the record. The slots are ordinary ring slots, so this works unchanged on every
//!   fabric, and a full ring slows the sender down instead of growing memory on the receiver.
//!
//! - *To another rank on this host that can read this process* (`OutQueue::allow_far`; tested at
//!   set-up), the body is *parked* in the sender's memory and the record carries `[u64 addr]
//!   [u64 len][u64 token]` with flag [`FAR`] (requests) or status bit [`FAR_STATUS`]
//!   (responses); the receiver reads it with one `process_vm_readv` (`wire::far`) and sends back
//!   a [`RELEASE`] record with the token, on which the sender frees it.
//!
//! Layouts: request start = `[u32 end][u16 1][u16 KIND_REQ_START]`, the 16-byte record header,
//! `[u32 arg_len]` if `ARG`, `[u64 total]`, body bytes up to `end`, then the one-entry code table.
//! Response start = `[u32 end][u16 0][u16 KIND_RESP_START][u32 req][u8 status][3 × 0][u64 total]`,
//! body bytes up to `end`. More = `[u32 end][u16 0][u16 KIND_MORE]`, body bytes up to `end`.
//!
//! Arguments and results that cross a process are `postcard` encodings (request flag [`SER`],
//! response status bit [`SER_STATUS`]); within a process they are moved by bytes.
//!
//! Values moved by bytes (captures, arguments, results) may contain padding, i.e. uninitialised
//! bytes. So record bytes are only ever copied untyped (`ptr::copy_nonoverlapping` from a
//! [`Src`]) and viewed as `MaybeUninit<u8>` (staging buffers, ring slots, bodies); only the
//! headers and tables, which the encoder writes as whole initialised words, are read as integers,
//! and a moved value is read back with `read_unaligned` as its own type.
//!
//! This module does not know what a record means; `worker.rs` and `trust.rs` do. It does not
//! touch ring internals either: a sealed batch is copied into a reserved slot and published.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use crate::wire::ring::{Producer, RingError};

/// A byte that may be uninitialised (padding of a value moved by bytes).
pub(crate) type Byte = MaybeUninit<u8>;

pub(crate) const HEADER: usize = 8;
pub(crate) const REQ_HEADER: usize = 16;
pub(crate) const RESP_HEADER: usize = 8;
pub(crate) const ARG: u8 = 1;
pub(crate) const LARGE: u8 = 2;
/// Request flag: the argument bytes are a `postcard` encoding.
pub(crate) const SER: u8 = 4;
/// Response status bit: the body is a `postcard` encoding.
pub(crate) const SER_STATUS: u8 = 0x40;
/// Request flag / response status bit: the body stays in the sender's memory, to be read with
/// one `process_vm_readv` (same host, see `Far`).
pub(crate) const FAR: u8 = 8;
pub(crate) const FAR_STATUS: u8 = 0x20;
/// The smallest body sent by the single-copy path; smaller large records are streamed through
/// the rings, which measured faster below about half a MiB (2 ranks on one host: 5 KB took
/// 1.4 µs streamed and 6.6 µs read across; 256 KiB 180 µs and 221 µs; 1 MiB 323 µs and 267 µs).
const FAR_MIN: usize = 512 << 10;
/// Function index of a record that tells a sender it may free a body it parked for `FAR`.
pub(crate) const RELEASE: u8 = 0xFE;
/// Batch kinds (the header's last `u16`).
pub(crate) const KIND_BATCH: u16 = 0;
pub(crate) const KIND_REQ_START: u16 = 1;
pub(crate) const KIND_MORE: u16 = 2;
pub(crate) const KIND_RESP_START: u16 = 3;
/// The largest body a peer may announce for a streamed record (1 TiB): a bound so that a
/// corrupt length is an error, not an attempt to allocate it.
const MAX_STREAMED: u64 = 1 << 40;
pub(crate) const CONTROL: u8 = 0xFF;
/// Function index of a *continuation*: a plain request of the same kind, property and flags as
/// the record before it, written as `[u8 CONT][u32 req]` and the captured bytes.
pub(crate) const CONT: u8 = 0xFD;
/// Bytes of a continuation before its captured bytes.
pub(crate) const CONT_HEADER: usize = 5;
/// The bit of a response record's first word that makes it a continuation: `[u32 req |
/// RESP_CONT]` and a body of the status and length of the record before it. Request ids are
/// pending-table indexes, kept below this bit (`WorkerCore::add_pending`), so a response's id
/// never has it.
pub(crate) const RESP_CONT: u32 = 1 << 31;
/// Bytes of a response continuation before its body.
const RESP_CONT_HEADER: usize = 4;
/// Code table entries per batch: indexes 0 to 252, below `CONT`, `RELEASE` and `CONTROL`.
pub(crate) const MAX_TABLE: usize = CONT as usize;
pub(crate) const LARGE_STATUS: u8 = 0x80;
/// The code of an unset `OutQueue::last`/`prev` entry (no code offset is this large).
const NO_CODE: usize = usize::MAX;
/// Spare staging buffers kept per destination (enough for a full back-pressure backlog, so the
/// hot path does not allocate).
const POOL: usize = 64;

/// Bytes to copy into a record: the object representation of a value (padding included, which
/// is why this is a pointer and a length and never a `&[u8]`), or a plain byte slice.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Src<'a> {
    ptr: *const u8,
    len: usize,
    _borrow: PhantomData<&'a ()>,
}

/// A capture's length for its 16-bit header field. `Src::closure` refuses closures of more than
/// 65 535 bytes when the program is built, so a longer capture here is a bug, not data to cut.
fn cap_len16(n: usize) -> u16 {
    u16::try_from(n).expect("gossamer: a capture of more than 65 535 bytes reached the encoder")
}

/// An argument's length for its 32-bit field: an argument of 4 GiB or more cannot be moved in
/// one record, and is refused with that reason rather than cut.
fn arg_len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| {
        panic!("gossamer: an argument of {n} bytes (4 GiB or more) cannot be sent in one request")
    })
}

impl<'a> Src<'a> {
    /// The `size_of::<V>()` bytes of `v`, padding included.
    #[inline]
    pub(crate) fn of<V>(v: &'a V) -> Self {
        Src {
            ptr: (v as *const V).cast::<u8>(),
            len: std::mem::size_of::<V>(),
            _borrow: PhantomData,
        }
    }

    /// The bytes of a closure `f` as a request record's captured bytes, whose length field is
    /// 16 bits: a closure that captures more than 65 535 bytes is refused when the program is
    /// built (the capture of a delegated closure is `Copy` data; a large value travels as an
    /// `apply_with` argument instead, which has no such limit).
    #[inline]
    pub(crate) fn closure<F>(f: &'a F) -> Self {
        const {
            assert!(
                std::mem::size_of::<F>() <= u16::MAX as usize,
                "gossamer: a delegated closure captures more than 65 535 bytes; pass large data \
                 as the argument of apply_with (or spawn_on_with) instead"
            )
        };
        Src::of(f)
    }

    /// The bytes of a slice.
    #[inline]
    pub(crate) fn slice(b: &'a [u8]) -> Self {
        Src {
            ptr: b.as_ptr(),
            len: b.len(),
            _borrow: PhantomData,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Appends `s` to `b` with an untyped copy (uninitialised source bytes stay uninitialised).
#[inline]
fn put(b: &mut Vec<Byte>, s: Src<'_>) {
    b.reserve(s.len);
    // SAFETY: `s.ptr` is valid for `s.len` reads for `'a` (it came from a live reference or
    // slice); the destination is the reserved spare capacity, which cannot overlap it (`b` is
    // uniquely borrowed). `copy_nonoverlapping` is an untyped copy, so padding may be copied;
    // `MaybeUninit<u8>` elements may hold any byte, so `set_len` exposes no invalid value.
    unsafe {
        std::ptr::copy_nonoverlapping(s.ptr, b.as_mut_ptr().add(b.len()).cast::<u8>(), s.len);
        b.set_len(b.len() + s.len);
    }
}

/// A request record's header: `[u8 fn][u8 flags][u16 cap_len][u32 req][u32 idx][u32 gn]`.
#[inline(always)]
fn request_header(
    fidx: u8,
    flags: u8,
    cap_len: u16,
    req: u32,
    idx: u32,
    gn: u32,
) -> [u8; REQ_HEADER] {
    let mut h = [0u8; REQ_HEADER];
    h[0] = fidx;
    h[1] = flags;
    h[2..4].copy_from_slice(&cap_len.to_le_bytes());
    h[4..8].copy_from_slice(&req.to_le_bytes());
    h[8..12].copy_from_slice(&idx.to_le_bytes());
    h[12..16].copy_from_slice(&gn.to_le_bytes());
    h
}

/// A response record's header: `[u32 req][u32 len << 8 | status]`.
#[inline(always)]
fn response_header(req: u32, status: u8, len: u32) -> [u8; RESP_HEADER] {
    let mut h = [0u8; RESP_HEADER];
    h[0..4].copy_from_slice(&req.to_le_bytes());
    h[4..8].copy_from_slice(&((len << 8) | u32::from(status)).to_le_bytes());
    h
}

/// Bodies up to this many bytes take the inlined fast paths of `push_request`/`push_response`.
pub(crate) const SMALL: usize = 64;

/// Appends a record header and a small body. Inlined with constant sizes, the copies become a few
/// moves instead of `memcpy` calls.
#[inline(always)]
fn put_small<const N: usize>(b: &mut Vec<Byte>, head: &[u8; N], body: Src<'_>) {
    b.reserve(N + body.len);
    // SAFETY: `reserve` left at least `N + body.len` bytes of spare capacity after `len`;
    // `body.ptr` is valid for `body.len` reads and cannot overlap the spare capacity of the
    // uniquely borrowed `b`. Untyped copies, as in `put`.
    unsafe {
        let at = b.as_mut_ptr().add(b.len()).cast::<u8>();
        std::ptr::copy_nonoverlapping(head.as_ptr(), at, N);
        std::ptr::copy_nonoverlapping(body.ptr, at.add(N), body.len);
        b.set_len(b.len() + N + body.len);
    }
}

#[inline]
fn put_bytes(b: &mut Vec<Byte>, v: &[u8]) {
    put(b, Src::slice(v));
}

/// Appends the large-message form of a body: the body moves into a heap box whose address and
/// length go on the record, and the receiver takes ownership of the box. Within one process only;
/// the fabrics of the next issue replace this with their own large-message path.
fn put_large(b: &mut Vec<Byte>, body: Vec<Byte>) {
    let boxed: Box<[Byte]> = body.into_boxed_slice();
    let len = boxed.len() as u64;
    let ptr = Box::into_raw(boxed) as *mut Byte as usize as u64;
    put_bytes(b, &ptr.to_le_bytes());
    put_bytes(b, &len.to_le_bytes());
}

#[inline]
fn set_bytes(b: &mut [Byte], at: usize, v: &[u8]) {
    for (d, s) in b[at..at + v.len()].iter_mut().zip(v) {
        *d = MaybeUninit::new(*s);
    }
}

/// A staging buffer with its header room.
fn fresh(cap: usize) -> Vec<Byte> {
    let mut v = Vec::with_capacity(cap);
    v.resize(HEADER, MaybeUninit::new(0));
    v
}

/// Where sealed batches go: a ring to another worker, or the worker's own loopback queue (requests
/// a worker sends to itself from contexts where running them inline is not allowed).
#[derive(Debug)]
pub(crate) enum Sink {
    Ring(Producer),
    Loopback,
}

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

/// Staging for one destination: the batch being filled, sealed batches waiting for ring space,
/// and spare buffers.
#[derive(Debug)]
pub(crate) struct OutQueue {
    buf: Vec<Byte>,
    table: Vec<u64>,
    /// The code used last and the one before, with their table indexes; `NO_CODE` when unset.
    last: (usize, u8),
    prev: (usize, u8),
    /// The plain request written last in this batch, as `(code, idx, gn, cap_len, flags)`, and
    /// where it ends: the next request with the same five, written right there, is a
    /// continuation. `run_end` is 0 when there is none (a new batch).
    run: (usize, u32, u32, usize, u8),
    run_end: usize,
    /// The same for responses: the status and body length of the inline response written last,
    /// and where it ends.
    resp_run: (u8, usize),
    resp_end: usize,
    cap: usize,
    pub(crate) queued: VecDeque<Vec<Byte>>,
    pool: Vec<Vec<Byte>>,
    pub(crate) sink: Sink,
    /// The destination is in another process: large records are streamed (or parked, with
    /// `far`), never pointers.
    remote: bool,
    /// The destination can read this process's memory (`process_vm_readv`): large bodies are
    /// parked here and read by the receiver in one copy.
    far: bool,
    /// Bodies parked for the destination to read, by token, until it releases them.
    parked: std::collections::HashMap<u64, Box<[Byte]>>,
    next_token: u64,
}

impl OutQueue {
    pub(crate) fn new(cap: usize, sink: Sink, remote: bool) -> Self {
        OutQueue {
            buf: fresh(cap),
            table: Vec::new(),
            last: (NO_CODE, 0),
            prev: (NO_CODE, 0),
            run: (NO_CODE, 0, 0, 0, 0),
            run_end: 0,
            resp_run: (0, 0),
            resp_end: 0,
            cap,
            queued: VecDeque::new(),
            pool: Vec::new(),
            sink,
            remote,
            far: false,
            parked: std::collections::HashMap::new(),
            next_token: 1,
        }
    }

    /// Lets large bodies to this destination be read from this process's memory; `responses`:
    /// this is the queue of responses to that destination, whose tokens are numbered apart from
    /// those of the requests to it (see [`parked_by_responses`]).
    pub(crate) fn allow_far(&mut self, responses: bool) {
        self.far = self.remote;
        self.next_token = if responses { RESPONSE_TOKEN | 1 } else { 1 };
    }

    /// Frees a body the destination has read. Unknown tokens are ignored.
    pub(crate) fn release(&mut self, token: u64) -> bool {
        self.parked.remove(&token).is_some()
    }

    /// Parks `body` for the destination to read and appends its `[addr][len][token]`.
    fn put_far(&mut self, body: Vec<Byte>) -> [u8; 24] {
        let boxed = body.into_boxed_slice();
        let (addr, len) = (boxed.as_ptr() as usize as u64, boxed.len() as u64);
        let token = self.next_token;
        self.next_token += 1;
        self.parked.insert(token, boxed);
        let mut w = [0u8; 24];
        w[..8].copy_from_slice(&addr.to_le_bytes());
        w[8..16].copy_from_slice(&len.to_le_bytes());
        w[16..].copy_from_slice(&token.to_le_bytes());
        w
    }

    /// Appends a release record for `token` (to the sender that parked it).
    pub(crate) fn push_release(&mut self, token: u64) {
        let need = REQ_HEADER + 8;
        if self.room(0) < need {
            self.seal();
        }
        put_bytes(&mut self.buf, &request_header(RELEASE, 0, 8, 0, 0, 0));
        put_bytes(&mut self.buf, &token.to_le_bytes());
    }

    /// A cleared buffer with its header room, from the pool when possible.
    fn spare(&mut self) -> Vec<Byte> {
        match self.pool.pop() {
            Some(mut v) => {
                v.clear();
                v.resize(HEADER, MaybeUninit::new(0));
                v
            }
            None => fresh(self.cap),
        }
    }

    /// Queues `body` as a streamed large record: `start` (a start slot's bytes after its 8-byte
    /// header, without body) goes first with as much of the body as fits, then "more" slots.
    /// `table` is the start slot's code table (empty for responses).
    fn stream(&mut self, kind: u16, start: &[u8], body: &[Byte], table: Option<u64>) {
        self.seal();
        let tab = if table.is_some() { 8 } else { 0 };
        let mut b = self.spare();
        put_bytes(&mut b, start);
        let room = self.cap.saturating_sub(b.len() + tab);
        let first = room.min(body.len());
        b.extend_from_slice(&body[..first]);
        let end = b.len() as u32;
        if let Some(code) = table {
            put_bytes(&mut b, &code.to_le_bytes());
        }
        set_bytes(&mut b, 0, &end.to_le_bytes());
        set_bytes(&mut b, 4, &u16::from(table.is_some()).to_le_bytes());
        set_bytes(&mut b, 6, &kind.to_le_bytes());
        self.queued.push_back(b);
        let mut at = first;
        while at < body.len() {
            let mut b = self.spare();
            let n = (self.cap - HEADER).min(body.len() - at);
            b.extend_from_slice(&body[at..at + n]);
            at += n;
            let end = b.len() as u32;
            set_bytes(&mut b, 0, &end.to_le_bytes());
            set_bytes(&mut b, 6, &KIND_MORE.to_le_bytes());
            self.queued.push_back(b);
        }
    }

    /// Whether anything is staged or waiting.
    #[inline]
    pub(crate) fn is_dirty(&self) -> bool {
        self.buf.len() > HEADER || !self.queued.is_empty()
    }

    /// Sealed batches waiting for ring space (back-pressure signal).
    #[inline]
    pub(crate) fn backlog(&self) -> usize {
        self.queued.len()
    }

    #[inline]
    fn room(&self, extra_table: usize) -> usize {
        self.cap
            .saturating_sub(self.buf.len() + (self.table.len() + extra_table) * 8)
    }

    /// Closes the batch being filled (appends its table) and queues it.
    pub(crate) fn seal(&mut self) {
        if self.buf.len() <= HEADER {
            return;
        }
        let pos = self.buf.len() as u32;
        let ntab = self.table.len() as u16;
        for off in &self.table {
            put_bytes(&mut self.buf, &off.to_le_bytes());
        }
        set_bytes(&mut self.buf, 0, &pos.to_le_bytes());
        set_bytes(&mut self.buf, 4, &ntab.to_le_bytes());
        self.table.clear();
        self.last = (NO_CODE, 0);
        self.prev = (NO_CODE, 0);
        self.run_end = 0;
        self.resp_end = 0;
        let next = match self.pool.pop() {
            Some(mut v) => {
                v.clear();
                v.resize(HEADER, MaybeUninit::new(0));
                v
            }
            None => fresh(self.cap),
        };
        let full = std::mem::replace(&mut self.buf, next);
        self.queued.push_back(full);
    }

    /// Copies queued batches into free ring slots. Returns how many were published. For the
    /// loopback sink nothing moves: the owner pops `queued` itself.
    pub(crate) fn flush(&mut self) -> usize {
        self.seal();
        self.flush_sealed()
    }

    /// Copies already sealed batches into free ring slots, leaving the batch being filled alone
    /// (so that it keeps filling). Returns how many were published.
    pub(crate) fn flush_sealed(&mut self) -> usize {
        let Sink::Ring(prod) = &mut self.sink else {
            return 0;
        };
        let mut n = 0;
        while let Some(front) = self.queued.front() {
            let Some(mut w) = prod.try_reserve() else {
                break;
            };
            // SAFETY: the runtime's rings are read only through `SlotReader::bytes_uninit` and
            // written only through this method (the worker's `poll`/`has_incoming` and this
            // function are their only users).
            let dst = unsafe { w.buf_uninit() };
            debug_assert!(front.len() <= dst.len());
            dst[..front.len()].copy_from_slice(front);
            w.publish(front.len() as u32);
            n += 1;
            if let Some(b) = self.queued.pop_front() {
                if self.pool.len() < POOL {
                    self.pool.push(b);
                }
            }
        }
        n
    }

    /// Why the ring this queue publishes to will take no more slots, if its consumer broke the
    /// protocol (a release counter it cannot have written; see `Producer::poisoned`). Its
    /// batches then wait for ever, looking like back-pressure, so the worker must end the job.
    pub(crate) fn broken(&self) -> Option<&RingError> {
        match &self.sink {
            Sink::Ring(prod) => prod.poisoned(),
            _ => None,
        }
    }

    /// The release word of the ring this queue publishes to (tests only).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn release_word(&self) -> Option<&std::sync::atomic::AtomicU64> {
        match &self.sink {
            Sink::Ring(prod) => Some(prod.release_word()),
            _ => None,
        }
    }

    pub(crate) fn recycle(&mut self, b: Vec<Byte>) {
        if self.pool.len() < POOL {
            self.pool.push(b);
        }
    }

    #[inline]
    fn fn_index(&mut self, code: u64) -> Option<u8> {
        if self.recent(code as usize) {
            return Some(self.last.1);
        }
        if let Some(i) = self.table.iter().position(|&c| c == code) {
            self.prev = self.last;
            self.last = (code as usize, i as u8);
            return Some(i as u8);
        }
        None
    }

    /// Whether `code` is one of the two codes used last in this batch; if so it becomes `last`.
    /// Two, because a loop that issues two kinds of request in turn (a map's inserts and
    /// lookups) would otherwise miss on every other record and take the general path (gsm-bench
    /// local, sharded map, A/B within each process: +4 to +7%).
    #[inline(always)]
    fn recent(&mut self, code: usize) -> bool {
        if self.last.0 == code {
            return true;
        }
        if self.prev.0 == code {
            std::mem::swap(&mut self.last, &mut self.prev);
            return true;
        }
        false
    }

    /// Appends a request record. `cap`/`arg` bytes are copied (the caller then forgets the
    /// originals: their ownership moved into the record). `code` is `None` for control records.
    ///
    /// The common case (a small record without argument whose code is one of the two the batch
    /// used last, with room left) is inlined into the caller, so that the capture's copy has the
    /// constant size of its type; everything else goes through [`push_request_general`].
    ///
    /// [`push_request_general`]: Self::push_request_general
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_request(
        &mut self,
        code: Option<u64>,
        idx: u32,
        gn: u32,
        req: u32,
        cap: Src<'_>,
        arg: Option<Src<'_>>,
        extra_flags: u8,
    ) {
        if let (Some(c), None) = (code, arg) {
            let run = (c as usize, idx, gn, cap.len(), extra_flags);
            if self.run_end == self.buf.len()
                && self.run == run
                && self.room(0) >= CONT_HEADER + cap.len()
            {
                let mut h = [CONT, 0, 0, 0, 0];
                h[1..].copy_from_slice(&req.to_le_bytes());
                put_small(&mut self.buf, &h, cap);
                self.run_end = self.buf.len();
                return;
            }
            let need = REQ_HEADER + cap.len();
            if cap.len() <= SMALL && self.room(0) >= need && self.recent(c as usize) {
                let h = request_header(self.last.1, extra_flags, cap.len() as u16, req, idx, gn);
                put_small(&mut self.buf, &h, cap);
                self.run = run;
                self.run_end = self.buf.len();
                return;
            }
        }
        self.push_request_general(code, idx, gn, req, cap, arg, extra_flags);
    }

    /// [`push_request`](Self::push_request) for every record.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn push_request_general(
        &mut self,
        code: Option<u64>,
        idx: u32,
        gn: u32,
        req: u32,
        cap: Src<'_>,
        arg: Option<Src<'_>>,
        extra_flags: u8,
    ) {
        let body = cap.len() + arg.map_or(0, |a| a.len());
        let head = REQ_HEADER + if arg.is_some() { 4 } else { 0 };
        let large = head + 16 + 8 + HEADER > self.cap
            || head + body + 8 + HEADER > self.cap
            || cap.len() > u16::MAX as usize;
        let far = large && self.remote && self.far && body >= FAR_MIN;
        if large && self.remote && !far {
            self.stream_request(code, idx, gn, req, cap, arg, extra_flags);
            return;
        }
        let need = head
            + if large {
                if self.remote { 24 } else { 16 }
            } else {
                body
            };
        let mut fidx = match code {
            None => Some(CONTROL),
            Some(c) => self.fn_index(c),
        };
        let new_entry = usize::from(fidx.is_none());
        if self.room(new_entry) < need || (new_entry == 1 && self.table.len() >= MAX_TABLE) {
            self.seal();
            fidx = code.map_or(Some(CONTROL), |c| self.fn_index(c));
        }
        let fidx = match fidx {
            Some(i) => i,
            None => {
                let c = code.unwrap_or_default();
                self.table.push(c);
                let i = (self.table.len() - 1) as u8;
                self.prev = self.last;
                self.last = (c as usize, i);
                i
            }
        };
        let mut flags = extra_flags | if arg.is_some() { ARG } else { 0 };
        if large {
            flags |= LARGE;
            if self.remote {
                flags |= FAR;
            }
        }
        let b = &mut self.buf;
        put_bytes(
            b,
            &request_header(fidx, flags, cap_len16(cap.len()), req, idx, gn),
        );
        if let Some(a) = arg {
            put_bytes(b, &arg_len32(a.len()).to_le_bytes());
        }
        if large && self.remote {
            let mut v = Vec::with_capacity(body);
            put(&mut v, cap);
            if let Some(a) = arg {
                put(&mut v, a);
            }
            let w = self.put_far(v);
            put_bytes(&mut self.buf, &w);
        } else if large {
            let mut v = Vec::with_capacity(body);
            put(&mut v, cap);
            if let Some(a) = arg {
                put(&mut v, a);
            }
            put_large(b, v);
        } else {
            put(b, cap);
            if let Some(a) = arg {
                put(b, a);
            }
            if let (Some(c), None) = (code, arg) {
                // A plain record: the next one of its kind may continue it.
                self.run = (c as usize, idx, gn, cap.len(), extra_flags);
                self.run_end = self.buf.len();
            }
        }
    }

    /// Streams a request record too large for one slot to another rank (see the module docs).
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn stream_request(
        &mut self,
        code: Option<u64>,
        idx: u32,
        gn: u32,
        req: u32,
        cap: Src<'_>,
        arg: Option<Src<'_>>,
        extra_flags: u8,
    ) {
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
        self.stream(KIND_REQ_START, &start, &body, Some(code.unwrap_or(0)));
    }

    /// Appends a response record with `status` and `body` (copied; ownership of moved values
    /// passes with the bytes). A small body with room left is inlined into the caller (a copy of
    /// constant size); everything else goes through [`push_response_general`].
    ///
    /// [`push_response_general`]: Self::push_response_general
    #[inline(always)]
    pub(crate) fn push_response(&mut self, req: u32, status: u8, body: Src<'_>) {
        if body.len() <= SMALL {
            if self.continues_responses(req, status, body.len())
                && self.room(0) >= RESP_CONT_HEADER + body.len()
            {
                put_small(&mut self.buf, &(req | RESP_CONT).to_le_bytes(), body);
                self.resp_end = self.buf.len();
                return;
            }
            if self.room(0) >= RESP_HEADER + body.len() {
                let h = response_header(req, status, body.len() as u32);
                put_small(&mut self.buf, &h, body);
                self.resp_run = (status, body.len());
                self.resp_end = self.buf.len();
                return;
            }
        }
        self.push_response_general(req, status, body);
    }

    /// Whether a response `(req, status, len)` written now would be a continuation of the one
    /// before it.
    #[inline(always)]
    fn continues_responses(&self, req: u32, status: u8, len: usize) -> bool {
        debug_assert!(req < RESP_CONT, "a request id with the continuation bit");
        self.resp_end == self.buf.len() && self.resp_run == (status, len)
    }

    /// Appends one response of `status` per `(req, value)` of `group`, in order: each value's
    /// bytes move into its record (the caller must not drop them; they are in `ManuallyDrop` for
    /// that). Within a process only (values are moved by bytes, not encoded). When they all fit
    /// in the batch being filled, the room is checked once and the records are written in one
    /// pass; otherwise each goes through [`push_response`](Self::push_response).
    #[inline(always)]
    pub(crate) fn push_value_responses<U>(
        &mut self,
        status: u8,
        group: &[(u32, std::mem::ManuallyDrop<U>)],
    ) {
        let size = std::mem::size_of::<U>();
        let each = RESP_HEADER + size;
        let need = each * group.len();
        if size > SMALL || self.room(0) < need {
            for (req, u) in group {
                self.push_response(*req, status, Src::of(&**u));
            }
            return;
        }
        self.buf.reserve(need);
        let len = self.buf.len();
        // SAFETY: `reserve` left `need` bytes of spare capacity after `len`, and the records are
        // written one after the other from `len`, each at most `each` bytes long (a continuation
        // is shorter), so every write stays inside that spare capacity, which nothing else
        // references; the values are read untyped (they may hold padding), as `put` does.
        // `set_len` then covers exactly the bytes written.
        unsafe {
            let mut rec = self.buf.as_mut_ptr().add(len).cast::<u8>();
            let first = self.continues_responses(group.first().map_or(0, |g| g.0), status, size);
            for (i, (req, u)) in group.iter().enumerate() {
                if i > 0 || first {
                    let w = (*req | RESP_CONT).to_le_bytes();
                    std::ptr::copy_nonoverlapping(w.as_ptr(), rec, 4);
                    rec = rec.add(4);
                } else {
                    let h = response_header(*req, status, size as u32);
                    std::ptr::copy_nonoverlapping(h.as_ptr(), rec, RESP_HEADER);
                    rec = rec.add(RESP_HEADER);
                }
                std::ptr::copy_nonoverlapping((&raw const **u).cast::<u8>(), rec, size);
                rec = rec.add(size);
            }
            let end = rec.offset_from(self.buf.as_ptr().cast::<u8>()) as usize;
            self.buf.set_len(end);
        }
        if !group.is_empty() {
            self.resp_run = (status, size);
            self.resp_end = self.buf.len();
        }
    }

    /// [`push_response`](Self::push_response) for every record.
    #[inline(never)]
    fn push_response_general(&mut self, req: u32, status: u8, body: Src<'_>) {
        let large = RESP_HEADER + body.len() + HEADER > self.cap || body.len() >= 1 << 24;
        if large && self.remote && self.far && body.len() >= FAR_MIN {
            if self.room(0) < RESP_HEADER + 24 {
                self.seal();
            }
            let mut v = Vec::with_capacity(body.len());
            put(&mut v, body);
            let w = self.put_far(v);
            put_bytes(
                &mut self.buf,
                &response_header(req, status | FAR_STATUS, 24),
            );
            put_bytes(&mut self.buf, &w);
            return;
        }
        if large && self.remote {
            let mut start = Vec::with_capacity(16);
            start.extend_from_slice(&req.to_le_bytes());
            start.extend_from_slice(&[status, 0, 0, 0]);
            start.extend_from_slice(&(body.len() as u64).to_le_bytes());
            let mut b = Vec::with_capacity(body.len());
            put(&mut b, body);
            self.stream(KIND_RESP_START, &start, &b, None);
            return;
        }
        let need = RESP_HEADER + if large { 16 } else { body.len() };
        if self.room(0) < need {
            self.seal();
        }
        let b = &mut self.buf;
        if large {
            put_bytes(b, &response_header(req, status | LARGE_STATUS, 16));
            let mut v = Vec::with_capacity(body.len());
            put(&mut v, body);
            put_large(b, v);
        } else {
            put_bytes(b, &response_header(req, status, body.len() as u32));
            put(b, body);
        }
    }
}

/// A body that is either in the slot or in a large-message box now owned by the reader. Its
/// bytes may include padding, so it is only ever viewed as `MaybeUninit<u8>`.
#[derive(Debug)]
pub(crate) enum Body<'a> {
    Inline(&'a [Byte]),
    Large(Box<[Byte]>),
    /// A body parked in the sender's memory (`FAR`): `len` bytes at `addr` in the sender's
    /// process, released with `token`. It must be fetched before use; until then it has no bytes.
    Far {
        addr: u64,
        len: u64,
        token: u64,
    },
}

impl Body<'_> {
    #[inline]
    pub(crate) fn bytes(&self) -> &[Byte] {
        match self {
            Body::Inline(b) => b,
            Body::Large(b) => b,
            Body::Far { .. } => &[],
        }
    }
}

/// # Safety
/// `ptr`/`len` must come from `Box::into_raw` of a `Box<[Byte]>` written by `OutQueue` and not
/// yet reclaimed; each large record is reclaimed exactly once.
unsafe fn take_large(ptr: u64, len: u64) -> Box<[Byte]> {
    let slice = std::ptr::slice_from_raw_parts_mut(ptr as usize as *mut Byte, len as usize);
    // SAFETY: per the contract, this is the raw pointer of a live `Box<[Byte]>` of this length.
    unsafe { Box::from_raw(slice) }
}

/// One decoded request record.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub fidx: u8,
    pub flags: u8,
    pub req: u32,
    pub idx: u32,
    pub gn: u32,
    pub cap_len: usize,
    pub body: Body<'a>,
}

impl Request<'_> {
    /// The first header word that records of the same kind as this one share, if this record
    /// is *plain*: no argument, its captured bytes inline (not large, not parked). A run of
    /// records with this word can be served without the general decoding
    /// ([`RequestReader::next_plain`]).
    #[inline(always)]
    pub(crate) fn plain_head(&self) -> Option<u32> {
        if self.flags & (ARG | LARGE | FAR) != 0 || !matches!(self.body, Body::Inline(_)) {
            return None;
        }
        let cap_len = u16::try_from(self.cap_len).ok()?;
        Some(u32::from_le_bytes([self.fidx, self.flags, 0, 0]) | (u32::from(cap_len) << 16))
    }

    #[inline]
    pub(crate) fn cap(&self) -> &[Byte] {
        &self.body.bytes()[..self.cap_len]
    }
    #[inline]
    pub(crate) fn arg(&self) -> &[Byte] {
        &self.body.bytes()[self.cap_len..]
    }
}

/// Reads `N` initialised bytes at `at`.
///
/// # Safety
/// The bytes `at..at + N` of `b`, if in range, must be initialised (header bytes written by our
/// encoder always are).
#[inline]
unsafe fn bytes_at<const N: usize>(b: &[Byte], at: usize) -> Option<[u8; N]> {
    let s = b.get(at..at + N)?;
    // SAFETY: `s` has exactly `N` elements, initialised per the contract; `[u8; N]` has
    // alignment 1, so the unaligned read of `N` bytes is a plain copy.
    Some(unsafe { std::ptr::read_unaligned(s.as_ptr().cast::<[u8; N]>()) })
}

/// # Safety
/// As for [`bytes_at`].
#[inline]
unsafe fn u32_at(b: &[Byte], at: usize) -> Option<u32> {
    // SAFETY: forwarded contract.
    unsafe { bytes_at::<4>(b, at) }.map(u32::from_le_bytes)
}

/// # Safety
/// As for [`bytes_at`].
#[inline]
unsafe fn u64_at(b: &[Byte], at: usize) -> Option<u64> {
    // SAFETY: forwarded contract.
    unsafe { bytes_at::<8>(b, at) }.map(u64::from_le_bytes)
}

/// Reads a request batch. Iteration stops at the first malformed record, and
/// [`malformed`](Self::malformed) then says what was wrong, so that the server can report it
/// instead of dropping the rest of the batch unseen.
#[derive(Debug)]
pub(crate) struct RequestReader<'a> {
    b: &'a [Byte],
    pos: usize,
    end: usize,
    pointers: bool,
    /// The batch's code table.
    pub table: &'a [Byte],
    /// Records handed out so far (by `next` and `next_plain`).
    pub taken: u32,
    /// The plain record handed out last, which a continuation repeats: `(first header word,
    /// idx, gn)`; `None` after any other record and at the start.
    run: Option<(u32, u32, u32)>,
    /// Why iteration stopped before the end of the batch, where a record said so itself.
    broken: Option<&'static str>,
}

impl<'a> RequestReader<'a> {
    /// # Safety
    /// The batch's header, record headers and table must be initialised bytes (true of every
    /// batch an `OutQueue` wrote, in this process or, through a ring, in a peer). If `pointers`
    /// is true the batch must have been written by `OutQueue::push_request` of *this* process
    /// (large-record pointers inside it are reclaimed by `next`) and be read at most once; with
    /// `pointers` false, pointer-carrying records end the iteration instead.
    pub(crate) unsafe fn new(b: &'a [Byte], pointers: bool) -> Option<Self> {
        // SAFETY: the batch header is initialised (contract).
        let end = unsafe { u32_at(b, 0) }? as usize;
        // SAFETY: as above.
        let ntab = u16::from_le_bytes(unsafe { bytes_at::<2>(b, 4) }?) as usize;
        // SAFETY: as above.
        let kind = u16::from_le_bytes(unsafe { bytes_at::<2>(b, 6) }?);
        let table = b.get(end..end + ntab * 8)?;
        (end >= HEADER && kind == KIND_BATCH).then_some(RequestReader {
            b,
            pos: HEADER,
            end,
            pointers,
            table,
            taken: 0,
            run: None,
            broken: None,
        })
    }

    /// The code offset of table entry `i`.
    pub(crate) fn code(&self, i: u8) -> Option<u64> {
        // SAFETY: the table is initialised (contract of `new`).
        unsafe { u64_at(self.table, i as usize * 8) }
    }

    /// A reader with no records, for a record that did not come out of a batch (a reassembled
    /// or fetched one): its trampoline finds no run behind it.
    pub(crate) fn empty() -> RequestReader<'static> {
        RequestReader {
            b: &[],
            pos: 0,
            end: 0,
            pointers: false,
            table: &[],
            taken: 0,
            run: None,
            broken: None,
        }
    }

    /// Once iteration has ended: `None` if every record of the batch was read, else what was
    /// wrong with the record it stopped at (a batch our encoder wrote is never malformed).
    pub(crate) fn malformed(&self) -> Option<&'static str> {
        self.broken
            .or((self.pos < self.end).then_some("a record runs past the end of its batch"))
    }

    /// Ends iteration at a malformed record, for `why`.
    #[cold]
    fn stop(&mut self, why: &'static str) -> Option<Request<'a>> {
        self.pos = self.end;
        self.broken = Some(why);
        None
    }

    /// The next record if it is of the same kind as the record that started a run (its first
    /// header word equals `head`: the same function index, flags and capture length, see
    /// [`Request::plain_head`]), or a continuation of it: `(req, idx, gn, captured bytes)`.
    /// Otherwise `None`, and the reader stays where it is, for the general path to read that
    /// record.
    ///
    /// A plain record's body is its captured bytes, inline, so this reads no length or pointer
    /// word: one compare decides, and a trampoline can serve a run of records of its own kind in
    /// a loop of its own (`WorkerCore::serve_run`).
    #[inline(always)]
    pub(crate) fn next_plain(&mut self, head: u32) -> Option<(u32, u32, u32, &'a [Byte])> {
        let p = self.pos;
        if p >= self.end {
            return None;
        }
        // SAFETY: record headers are initialised bytes (contract of `new`), and `p < end` is a
        // record boundary.
        if unsafe { bytes_at::<1>(self.b, p) }?[0] == CONT {
            let (h, idx, gn) = self.run?;
            if h != head {
                return None;
            }
            let (req, cap) = self.take_continuation(p, head)?;
            return Some((req, idx, gn, cap));
        }
        let q = p + REQ_HEADER + (head >> 16) as usize;
        if q > self.end {
            return None;
        }
        // SAFETY: a record header is initialised bytes (contract of `new`); `p` is a record
        // boundary and `p + REQ_HEADER <= q <= end` lies within the batch.
        let h: [u8; REQ_HEADER] = unsafe { bytes_at(self.b, p) }?;
        if u32::from_le_bytes([h[0], h[1], h[2], h[3]]) != head {
            return None;
        }
        let req = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        let idx = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        let gn = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        let cap = self.b.get(p + REQ_HEADER..q)?;
        self.pos = q;
        self.taken += 1;
        self.run = Some((head, idx, gn));
        Some((req, idx, gn, cap))
    }

    /// Whether the plain record handed out last had first header word `head` and named the
    /// property `(idx, gn)`: then every continuation right behind it is such a request too, and
    /// [`next_continuation`](Self::next_continuation) can hand them out without the compares.
    #[inline(always)]
    pub(crate) fn continues(&self, head: u32, idx: u32, gn: u32) -> bool {
        self.run == Some((head, idx, gn))
    }

    /// The next record if it is a continuation: `(req, captured bytes)`, of the run the last
    /// plain record started (see [`continues`](Self::continues)). Otherwise `None`, and the
    /// reader stays where it is.
    #[inline(always)]
    pub(crate) fn next_continuation(&mut self) -> Option<(u32, &'a [Byte])> {
        let p = self.pos;
        if p >= self.end {
            return None;
        }
        // SAFETY: record headers are initialised bytes (contract of `new`), and `p < end` is a
        // record boundary.
        if unsafe { bytes_at::<1>(self.b, p) }?[0] != CONT {
            return None;
        }
        let (head, _, _) = self.run?;
        self.take_continuation(p, head)
    }

    /// The continuation at `p` of the last plain record, as a request of its own; `None` (and
    /// the batch reported malformed) if no plain record came right before it, which our
    /// encoder never writes.
    #[cold]
    fn continuation(&mut self, p: usize) -> Option<Request<'a>> {
        let Some((head, idx, gn)) = self.run else {
            return self.stop("a continuation that follows no plain record");
        };
        let (req, cap) = self.take_continuation(p, head)?;
        Some(Request {
            fidx: head as u8,
            flags: (head >> 8) as u8,
            req,
            idx,
            gn,
            cap_len: cap.len(),
            body: Body::Inline(cap),
        })
    }

    /// Reads the continuation at record boundary `p` of a run whose first header word is
    /// `head`: its request id and captured bytes. `None` (the reader stays) if it does not fit
    /// in the batch.
    #[inline(always)]
    fn take_continuation(&mut self, p: usize, head: u32) -> Option<(u32, &'a [Byte])> {
        let q = p + CONT_HEADER + (head >> 16) as usize;
        if q > self.end {
            return None;
        }
        // SAFETY: a continuation's `CONT_HEADER` bytes are initialised (contract of `new`), and
        // `p + CONT_HEADER <= q <= end` lies within the batch.
        let req = unsafe { u32_at(self.b, p + 1) }?;
        let cap = self.b.get(p + CONT_HEADER..q)?;
        self.pos = q;
        self.taken += 1;
        Some((req, cap))
    }
}

impl<'a> Iterator for RequestReader<'a> {
    type Item = Request<'a>;
    #[inline(always)]
    fn next(&mut self) -> Option<Request<'a>> {
        if self.pos >= self.end {
            return None;
        }
        let b = &self.b[..self.end];
        let p = self.pos;
        // SAFETY: record headers, argument lengths and large-record words are initialised bytes
        // written by our encoder (contract of `new`); `p` and `q` walk record boundaries.
        if unsafe { bytes_at::<1>(b, p) }?[0] == CONT {
            return self.continuation(p);
        }
        // SAFETY: as above.
        let h: [u8; REQ_HEADER] = unsafe { bytes_at(b, p) }?;
        let (fidx, flags) = (h[0], h[1]);
        let cap_len = u16::from_le_bytes([h[2], h[3]]) as usize;
        let req = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        let idx = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        let gn = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        let mut q = p + REQ_HEADER;
        let mut arg_len = 0;
        if flags & ARG != 0 {
            // SAFETY: as above.
            arg_len = unsafe { u32_at(b, q) }? as usize;
            q += 4;
        }
        let body = if flags & LARGE != 0 && flags & FAR != 0 {
            // SAFETY: as above.
            let (addr, len, token) =
                unsafe { (u64_at(b, q)?, u64_at(b, q + 8)?, u64_at(b, q + 16)?) };
            q += 24;
            if len != (cap_len + arg_len) as u64 {
                return self.stop("a parked record whose length disagrees with its header");
            }
            Body::Far { addr, len, token }
        } else if flags & LARGE != 0 {
            if !self.pointers {
                return self.stop("a record that carries a pointer from another process");
            }
            // SAFETY: as above.
            let (ptr, len) = unsafe { (u64_at(b, q)?, u64_at(b, q + 8)?) };
            q += 16;
            if len as usize != cap_len + arg_len {
                return self.stop("a large record whose length disagrees with its header");
            }
            // SAFETY: per `new`'s contract this large record was written by our encoder and is
            // read exactly once.
            Body::Large(unsafe { take_large(ptr, len) })
        } else {
            let s = b.get(q..q + cap_len + arg_len)?;
            q += cap_len + arg_len;
            Body::Inline(s)
        };
        self.pos = q;
        self.taken += 1;
        let rec = Request {
            fidx,
            flags,
            req,
            idx,
            gn,
            cap_len,
            body,
        };
        self.run = rec.plain_head().map(|h| (h, idx, gn));
        Some(rec)
    }
}

/// Reads a response batch: `(req, status, body)`.
#[derive(Debug)]
pub(crate) struct ResponseReader<'a> {
    b: &'a [Byte],
    pos: usize,
    pointers: bool,
    /// The status and body length of the last inline record, which a continuation repeats.
    last: Option<(u8, usize)>,
    /// Why iteration stopped before the end of the batch, where a record said so itself.
    broken: Option<&'static str>,
}

impl<'a> ResponseReader<'a> {
    /// # Safety
    /// As for [`RequestReader::new`], for response batches.
    pub(crate) unsafe fn new(b: &'a [Byte], pointers: bool) -> Option<Self> {
        // SAFETY: the batch header is initialised (contract).
        let end = unsafe { u32_at(b, 0) }? as usize;
        // SAFETY: as above.
        let kind = u16::from_le_bytes(unsafe { bytes_at::<2>(b, 6) }?);
        // `then`, not `then_some`: the slice may be taken only once `end` is known to fit (a
        // peer's length word past the batch panicked here, in the poller).
        (end >= HEADER && end <= b.len() && kind == KIND_BATCH).then(|| ResponseReader {
            b: &b[..end],
            pos: HEADER,
            pointers,
            last: None,
            broken: None,
        })
    }

    /// Once iteration has ended: `None` if every record of the batch was read, else what was
    /// wrong with the record it stopped at (a batch our encoder wrote is never malformed).
    pub(crate) fn malformed(&self) -> Option<&'static str> {
        self.broken
            .or((self.pos < self.b.len()).then_some("a record runs past the end of its batch"))
    }

    /// Ends iteration at a malformed record, for `why`.
    #[cold]
    fn stop(&mut self, why: &'static str) -> Option<(u32, u8, Body<'a>)> {
        self.pos = self.b.len();
        self.broken = Some(why);
        None
    }
}

impl<'a> Iterator for ResponseReader<'a> {
    type Item = (u32, u8, Body<'a>);
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let p = self.pos;
        // SAFETY: record headers are initialised bytes written by our encoder (contract of
        // `new`), and `p` walks record boundaries.
        let req = unsafe { u32_at(self.b, p)? };
        if req & RESP_CONT != 0 {
            let Some((status, len)) = self.last else {
                return self.stop("a continuation that follows no inline response");
            };
            let body = self.b.get(p + 4..p + 4 + len)?;
            self.pos = p + 4 + len;
            return Some((req & !RESP_CONT, status, Body::Inline(body)));
        }
        // SAFETY: as above.
        let w = unsafe { u32_at(self.b, p + 4)? };
        let (len, status) = ((w >> 8) as usize, (w & 0xFF) as u8);
        let body = self.b.get(p + 8..p + 8 + len)?;
        self.pos = p + 8 + len;
        self.last = None;
        if status & FAR_STATUS != 0 {
            // SAFETY: a far response's body is three initialised words.
            let (Some(addr), Some(n), Some(token)) =
                (unsafe { (u64_at(body, 0), u64_at(body, 8), u64_at(body, 16)) })
            else {
                return self.stop("a parked response shorter than its three words");
            };
            return Some((
                req,
                status & !FAR_STATUS,
                Body::Far {
                    addr,
                    len: n,
                    token,
                },
            ));
        }
        if status & LARGE_STATUS != 0 {
            if !self.pointers {
                return self.stop("a response that carries a pointer from another process");
            }
            // SAFETY: a large response's body is the pointer and length words, initialised.
            let (Some(ptr), Some(n)) = (unsafe { (u64_at(body, 0), u64_at(body, 8)) }) else {
                return self.stop("a large response shorter than its two words");
            };
            // SAFETY: written by our encoder as a large response, read once (contract of `new`).
            Some((
                req,
                status & !LARGE_STATUS,
                Body::Large(unsafe { take_large(ptr, n) }),
            ))
        } else {
            self.last = Some((status, len));
            Some((req, status, Body::Inline(body)))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn init(b: &[Byte]) -> Vec<u8> {
        // SAFETY: these tests only encode initialised bytes.
        b.iter().map(|x| unsafe { x.assume_init() }).collect()
    }

    fn sealed(q: &mut OutQueue) -> Vec<Byte> {
        q.seal();
        q.queued.pop_front().expect("a sealed batch")
    }

    /// Every batch of `q`, sealed, as initialised bytes.
    fn all_batches(q: &mut OutQueue) -> Vec<Vec<u8>> {
        q.seal();
        q.queued.drain(..).map(|b| init(&b)).collect()
    }

    /// The code (`None` for control records) and request id of every record in `batches`.
    fn codes_and_ids(batches: &[Vec<u8>]) -> Vec<(Option<u64>, u32)> {
        let mut out = Vec::new();
        for b in batches {
            let b: Vec<Byte> = b.iter().map(|&x| MaybeUninit::new(x)).collect();
            // SAFETY: a batch of our encoder, without large records, read once.
            let r = unsafe { RequestReader::new(&b, false) }.expect("a request batch");
            let codes: Vec<Option<u64>> = (0..=u8::MAX).map(|i| r.code(i)).collect();
            out.extend(r.map(|rec| {
                let code =
                    (rec.fidx != CONTROL).then(|| codes[rec.fidx as usize].expect("in the table"));
                (code, rec.req)
            }));
        }
        out
    }

    #[test]
    fn fast_paths_encode_exactly_as_the_general_paths() {
        for remote in [false, true] {
            fast_paths_match_general(remote);
        }
    }

    /// Captures and bodies around the fast path's limit; repeated codes, two codes in turn (the
    /// two cached table entries), a third code and code 0 (no sentinel may pass for it); an
    /// argument and a control record in between; and a small slot so that
    /// batches fill up and seal mid-sequence; to this process or to another rank (`remote`).
    fn fast_paths_match_general(remote: bool) {
        let sizes = [0usize, 1, 8, 63, 64, 65, 8, 0];
        let data = [0x5Au8; 80];
        let (mut fast, mut general) = (
            OutQueue::new(192, Sink::Loopback, remote),
            OutQueue::new(192, Sink::Loopback, remote),
        );
        let mut sent = Vec::new();
        for round in 0..6u32 {
            for (i, &n) in sizes.iter().enumerate() {
                let code = [0x100, 0x100, 0x300, 0x100, 0x300, 0x500, 0, 0x300][i];
                let args = (Some(code), round, i as u32, 7 * round + i as u32);
                sent.push((args.0, args.3));
                let arg = (i == 3).then(|| Src::slice(&data[..5]));
                let cap = Src::slice(&data[..n]);
                fast.push_request(
                    args.0,
                    args.1,
                    args.2,
                    args.3,
                    cap,
                    arg,
                    SER * (i as u8 & 1),
                );
                general.push_request_general(
                    args.0,
                    args.1,
                    args.2,
                    args.3,
                    cap,
                    arg,
                    SER * (i as u8 & 1),
                );
            }
            let id = 42u64.to_le_bytes();
            fast.push_request(None, 1, 1, 0, Src::slice(&id), None, 0);
            general.push_request_general(None, 1, 1, 0, Src::slice(&id), None, 0);
            sent.push((None, 0));
        }
        let batches = all_batches(&mut fast);
        assert!(
            batches.len() > 3,
            "the sequence should span several batches"
        );
        // Both encoders share the table lookup, so also check each record's code on its own.
        assert_eq!(codes_and_ids(&batches), sent);
        assert_eq!(batches, all_batches(&mut general));

        let (mut fast, mut general) = (
            OutQueue::new(160, Sink::Loopback, remote),
            OutQueue::new(160, Sink::Loopback, remote),
        );
        for round in 0..6u32 {
            for (i, &n) in sizes.iter().enumerate() {
                let body = Src::slice(&data[..n]);
                fast.push_response(round * 10 + i as u32, i as u8, body);
                general.push_response_general(round * 10 + i as u32, i as u8, body);
            }
        }
        let batches = all_batches(&mut fast);
        assert!(
            batches.len() > 3,
            "the sequence should span several batches"
        );
        assert_eq!(batches, all_batches(&mut general));
    }

    #[test]
    fn requests_round_trip_with_table_and_large_records() {
        let mut q = OutQueue::new(256, Sink::Loopback, false);
        q.push_request(Some(0x100), 1, 2, 3, Src::slice(&[9; 8]), None, 0);
        q.push_request(
            Some(0x200),
            4,
            5,
            6,
            Src::slice(&[]),
            Some(Src::slice(&[7; 3])),
            0,
        );
        q.push_request(Some(0x100), 7, 8, 9, Src::slice(&[1]), None, 0);
        q.push_request(None, 1, 1, 0, Src::slice(&42u64.to_le_bytes()), None, 0);
        let big = vec![0xAB; 1000];
        q.push_request(
            Some(0x100),
            1,
            1,
            10,
            Src::slice(&[5; 4]),
            Some(Src::slice(&big)),
            0,
        );
        let b1 = sealed(&mut q);
        // SAFETY: written by our encoder, read once.
        let r = unsafe { RequestReader::new(&b1, true) }.unwrap();
        assert_eq!(r.code(0), Some(0x100));
        assert_eq!(r.code(1), Some(0x200));
        let v: Vec<_> = r
            .map(|r| (r.fidx, r.req, r.idx, r.gn, init(r.cap()), init(r.arg())))
            .collect();
        assert_eq!(v[0], (0, 3, 1, 2, vec![9; 8], vec![]));
        assert_eq!(v[1], (1, 6, 4, 5, vec![], vec![7; 3]));
        assert_eq!(v[2], (0, 9, 7, 8, vec![1], vec![]));
        assert_eq!(v[3].0, CONTROL);
        assert_eq!(v[4].4, vec![5; 4]);
        assert_eq!(v[4].5, big);
        assert_eq!(v.len(), 5);
    }

    #[test]
    fn batches_split_when_full_and_nothing_is_lost() {
        let mut q = OutQueue::new(256, Sink::Loopback, false);
        for i in 0..100u32 {
            q.push_request(
                Some(0x100 + u64::from(i % 3) * 8),
                i,
                0,
                i,
                Src::slice(&i.to_le_bytes()),
                None,
                0,
            );
        }
        q.seal();
        let mut seen = Vec::new();
        while let Some(b) = q.queued.pop_front() {
            assert!(b.len() <= 256);
            // SAFETY: written by our encoder, read once.
            let r = unsafe { RequestReader::new(&b, true) }.unwrap();
            let codes: Vec<u64> = (0..3).filter_map(|i| r.code(i)).collect();
            for rec in r {
                assert_eq!(codes[rec.fidx as usize], 0x100 + u64::from(rec.req % 3) * 8);
                seen.push(u32::from_le_bytes(init(rec.cap()).try_into().unwrap()));
            }
        }
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    #[cfg(not(loom))]
    fn a_ring_whose_consumer_broke_the_protocol_is_reported_not_taken_for_back_pressure() {
        use crate::wire::ring::{RingLayout, RingMemory};
        use std::sync::Arc;
        let layout = RingLayout::new(2, 256).expect("a ring layout");
        let mut region = vec![0u64; layout.bytes().div_ceil(8) + 16];
        // Aligned as the ring asks (`RingLayout::align`, 128 bytes).
        let bytes = region.as_mut_ptr().cast::<u8>();
        let off = bytes.align_offset(RingLayout::align());
        // SAFETY: `off` is less than 128 bytes, within the 16 spare words of the allocation.
        let base = unsafe { bytes.add(off) };
        // SAFETY: `layout.bytes()` zeroed, aligned bytes that outlive the ring (`region` lives
        // to the end of the test, after `q` and `mem`).
        let mem = Arc::new(unsafe { RingMemory::from_raw(base, layout) });
        let (prod, _cons) = mem.split();
        let mut q = OutQueue::new(256, Sink::Ring(prod), true);
        for i in 0..2u32 {
            q.push_request(Some(1), 1, 1, i, Src::slice(&[0; 8]), None, 0);
            assert_eq!(q.flush(), 1);
        }
        assert!(q.broken().is_none());
        // The consumer writes a release counter past what was published.
        // SAFETY: the release counter is the region's first word (the ring's layout).
        unsafe { std::ptr::write_volatile(base.cast::<u64>(), 99) };
        q.push_request(Some(1), 1, 1, 7, Src::slice(&[0; 8]), None, 0);
        assert_eq!(q.flush(), 0);
        assert_eq!(q.backlog(), 1);
        assert!(
            q.broken().is_some(),
            "the corrupt ring looks like back-pressure"
        );
        drop(q);
    }

    #[test]
    fn values_with_padding_move_by_bytes() {
        // (u8, u64, u16) has padding bytes: they are copied untyped and the value is read back
        // as its own type, never viewed as `u8`.
        #[derive(Debug, Clone, Copy, PartialEq)]
        struct Padded(u8, u64, u16);
        let v = Padded(7, u64::MAX - 3, 513);
        let big = [Padded(1, 2, 3); 64];
        let mut q = OutQueue::new(256, Sink::Loopback, false);
        q.push_request(Some(0x100), 1, 1, 1, Src::of(&v), Some(Src::of(&big)), 0);
        let b = sealed(&mut q);
        // SAFETY: written by our encoder, read once.
        let rec = unsafe { RequestReader::new(&b, true) }
            .unwrap()
            .next()
            .unwrap();
        // SAFETY: the captured bytes are one `Padded`, the argument bytes one `[Padded; 64]`.
        let (got, got_big) = unsafe {
            (
                std::ptr::read_unaligned(rec.cap().as_ptr().cast::<Padded>()),
                std::ptr::read_unaligned(rec.arg().as_ptr().cast::<[Padded; 64]>()),
            )
        };
        assert_eq!((got, got_big), (v, big));
    }

    #[test]
    fn responses_round_trip_including_large() {
        let mut q = OutQueue::new(256, Sink::Loopback, false);
        q.push_response(1, 0, Src::slice(&[1, 2, 3]));
        q.push_response(2, 3, Src::slice(b"boom"));
        let big = vec![0x5A; 10_000];
        q.push_response(3, 0, Src::slice(&big));
        let b = sealed(&mut q);
        // SAFETY: written by our encoder, read once.
        let v: Vec<_> = unsafe { ResponseReader::new(&b, true) }
            .unwrap()
            .map(|(r, s, b)| (r, s, init(b.bytes())))
            .collect();
        assert_eq!(
            v,
            vec![(1, 0, vec![1, 2, 3]), (2, 3, b"boom".to_vec()), (3, 0, big)]
        );
    }

    #[test]
    fn grouped_responses_encode_exactly_as_single_ones_span_batches_and_continue() {
        // Slots small enough that a group of 16 does not fit in what is left of a batch, so the
        // fallback path runs too; values of 8 and of 3 bytes (`[u8; 3]`: odd lengths).
        fn read(batches: &[Vec<u8>]) -> Vec<(u32, u8, Vec<u8>)> {
            let mut out = Vec::new();
            for b in batches {
                let b: Vec<Byte> = b.iter().map(|&x| MaybeUninit::new(x)).collect();
                // SAFETY: a batch of our encoder, without large records, read once.
                let r = unsafe { ResponseReader::new(&b, false) }.expect("a response batch");
                out.extend(r.map(|(req, st, body)| (req, st, init(body.bytes()))));
            }
            out
        }
        fn check<U: Copy>(values: &[U], cap: usize) {
            let mut grouped = OutQueue::new(cap, Sink::Loopback, false);
            let mut single = OutQueue::new(cap, Sink::Loopback, false);
            grouped.push_response(900, 3, Src::slice(b"first"));
            single.push_response(900, 3, Src::slice(b"first"));
            for (g, chunk) in values.chunks(16).enumerate() {
                let group: Vec<(u32, std::mem::ManuallyDrop<U>)> = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| ((g * 16 + i) as u32, std::mem::ManuallyDrop::new(v)))
                    .collect();
                grouped.push_value_responses(0, &group);
                for (req, v) in &group {
                    single.push_response(*req, 0, Src::of(&**v));
                }
            }
            let (a, b) = (all_batches(&mut grouped), all_batches(&mut single));
            assert!(a.len() > 1, "the test should span batches");
            assert_eq!(a, b);
            // Each batch holds one full record of each length and status (its first), the rest
            // are continuations.
            let bytes: usize = a.iter().map(Vec::len).sum();
            let full = values.len() * (RESP_HEADER + std::mem::size_of::<U>());
            assert!(bytes < full, "{bytes} bytes, without continuations {full}");
            let read = read(&a);
            assert_eq!(read.len(), values.len() + 1);
            assert_eq!(read[0], (900, 3, b"first".to_vec()));
            for (i, v) in values.iter().enumerate() {
                // SAFETY: the test's values have no padding: every byte is initialised.
                let bytes = unsafe {
                    std::slice::from_raw_parts((v as *const U).cast::<u8>(), size_of::<U>())
                };
                assert_eq!(read[i + 1], (i as u32, 0, bytes.to_vec()), "value {i}");
            }
        }
        let words: Vec<u64> = (0..1000u64).map(|i| i * 0x0101_0101 + 7).collect();
        check(&words, 256);
        check(&words, 4096);
        let triples: Vec<[u8; 3]> = (0..100u8).map(|i| [i, i ^ 0x55, 3]).collect();
        check(&triples, 200);
    }

    #[test]
    fn next_plain_takes_only_records_of_the_same_first_word_and_leaves_the_rest() {
        let mut q = OutQueue::new(4096, Sink::Loopback, false);
        let push = |q: &mut OutQueue, code: u64, req: u32, cap: &[u8], arg: Option<&[u8]>| {
            q.push_request(
                Some(code),
                req,
                req + 1000,
                req,
                Src::slice(cap),
                arg.map(Src::slice),
                0,
            );
        };
        push(&mut q, 10, 1, &[1, 2], None);
        push(&mut q, 10, 2, &[3, 4], None);
        push(&mut q, 10, 3, &[5, 6], None);
        push(&mut q, 10, 4, &[7], None); // another capture length
        push(&mut q, 10, 5, &[8, 9], Some(&[1])); // an argument
        push(&mut q, 11, 6, &[8, 9], None); // another function
        push(&mut q, 10, 7, &[10, 11], None);
        push(&mut q, 10, 8, &[12, 13], None);
        let b = sealed(&mut q);
        // SAFETY: written by our encoder, without large records, read once.
        let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
        let mut seen = Vec::new();
        while let Some(first) = r.next() {
            let mut run = vec![(first.req, first.idx, first.gn, init(first.cap()))];
            if let Some(head) = first.plain_head() {
                while let Some((req, idx, gn, cap)) = r.next_plain(head) {
                    run.push((req, idx, gn, init(cap)));
                }
            }
            seen.push(run);
        }
        let rec = |req: u32, cap: &[u8]| (req, req, req + 1000, cap.to_vec());
        assert_eq!(
            seen,
            vec![
                vec![rec(1, &[1, 2]), rec(2, &[3, 4]), rec(3, &[5, 6])],
                vec![rec(4, &[7])],
                vec![rec(5, &[8, 9])],
                vec![rec(6, &[8, 9])],
                vec![rec(7, &[10, 11]), rec(8, &[12, 13])],
            ]
        );
        // An empty reader (a record that came out of no batch) has no run to give.
        assert!(RequestReader::empty().next_plain(0x0002_0000).is_none());
    }

    /// A plain request of the same function, property, flags and capture length as the one
    /// written right before it is a continuation (5 bytes and the capture instead of 16), and
    /// reads back as the full record would, through `next`, `next_plain` and
    /// `next_continuation` alike; any other record in between, or a new batch, starts afresh.
    #[test]
    fn runs_of_requests_are_written_as_continuations_and_read_back_in_full() {
        // (code, idx, gn, req, capture, argument)
        type Rec = (u64, u32, u32, u32, Vec<u8>, Option<Vec<u8>>);
        let plain = |code: u64, idx: u32, req: u32, cap: &[u8]| -> Rec {
            (code, idx, 7, req, cap.to_vec(), None)
        };
        let recs: Vec<Rec> = vec![
            plain(10, 1, 1, &[1, 2]),
            plain(10, 1, 2, &[3, 4]),              // continuation
            plain(10, 1, 3, &[5, 6]),              // continuation
            plain(10, 2, 4, &[7, 8]),              // another property
            plain(10, 2, 5, &[9, 9]),              // continuation
            plain(10, 2, 6, &[1]),                 // another capture length
            (10, 2, 7, 7, vec![2], Some(vec![5])), // an argument
            plain(10, 2, 8, &[3]),                 // not after a plain record of its kind: in full
            plain(11, 2, 9, &[3]),                 // another function
            plain(11, 2, 10, &[4]),                // continuation
        ];
        let mut q = OutQueue::new(4096, Sink::Loopback, false);
        let mut full = 0;
        for (code, idx, gn, req, cap, arg) in &recs {
            let before = q.buf.len();
            q.push_request(
                Some(*code),
                *idx,
                *gn,
                *req,
                Src::slice(cap),
                arg.as_deref().map(Src::slice),
                0,
            );
            if q.buf.len() - before == CONT_HEADER + cap.len() {
                // SAFETY: the record's first byte was written just now.
                assert_eq!(unsafe { q.buf[before].assume_init() }, CONT);
            } else {
                full += 1;
            }
        }
        assert_eq!(full, 6, "records 2, 3, 5 and 10 should be continuations");
        // A control record breaks a run, and so does the next batch.
        q.push_request(None, 2, 7, 0, Src::slice(&5u64.to_le_bytes()), None, 0);
        let before = q.buf.len();
        q.push_request(Some(11), 2, 7, 11, Src::slice(&[4]), None, 0);
        assert_eq!(q.buf.len() - before, REQ_HEADER + 1);
        q.seal();
        let before = q.buf.len();
        q.push_request(Some(11), 2, 7, 12, Src::slice(&[4]), None, 0);
        assert_eq!(q.buf.len() - before, REQ_HEADER + 1);
        let batches = all_batches(&mut q);
        assert_eq!(batches.len(), 2);
        // `runs`: take runs through `next_plain`; `conts`: and take the continuations behind
        // each record of a run through `next_continuation`, as `serve_run` does.
        let read = |runs: bool, conts: bool| {
            let mut seen = Vec::new();
            for b in &batches {
                let b: Vec<Byte> = b.iter().map(|&x| MaybeUninit::new(x)).collect();
                // SAFETY: a batch of our encoder, without large records, read once.
                let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
                while let Some(rec) = r.next() {
                    let code = r.code(rec.fidx);
                    let arg = (rec.flags & ARG != 0).then(|| init(rec.arg()));
                    seen.push((code, rec.idx, rec.gn, rec.req, init(rec.cap()), arg));
                    let Some(head) = rec.plain_head().filter(|_| runs) else {
                        continue;
                    };
                    let (mut idx, mut gn) = (rec.idx, rec.gn);
                    loop {
                        if conts {
                            assert!(r.continues(head, idx, gn));
                            assert!(
                                !r.continues(head, idx + 1, gn) && !r.continues(head + 1, idx, gn)
                            );
                            while let Some((req, cap)) = r.next_continuation() {
                                seen.push((code, idx, gn, req, init(cap), None));
                            }
                        }
                        let Some((req, i, g, cap)) = r.next_plain(head) else {
                            break;
                        };
                        seen.push((code, i, g, req, init(cap), None));
                        (idx, gn) = (i, g);
                    }
                }
            }
            seen
        };
        let mut expected: Vec<_> = recs
            .into_iter()
            .map(|(c, i, g, r, cap, arg)| (Some(c), i, g, r, cap, arg))
            .collect();
        expected.push((None, 2, 7, 0, 5u64.to_le_bytes().to_vec(), None));
        expected.push((Some(11), 2, 7, 11, vec![4], None));
        expected.push((Some(11), 2, 7, 12, vec![4], None));
        assert_eq!(read(false, false), expected);
        assert_eq!(read(true, false), expected);
        assert_eq!(read(true, true), expected);
    }

    /// A response continues the one before it only with the same status and body length, right
    /// after it in the same batch; whatever the mix, every response reads back as written.
    #[test]
    fn responses_continue_only_their_own_status_and_length() {
        let mut q = OutQueue::new(4096, Sink::Loopback, false);
        let recs: Vec<(u32, u8, Vec<u8>, bool)> = vec![
            (1, 0, vec![1; 8], false),
            (2, 0, vec![2; 8], true),
            (3, 1, vec![3; 8], false), // another status
            (4, 1, vec![4; 3], false), // another length
            (5, 1, vec![5; 3], true),
            (6, 1, vec![6; 3], true),
            (7, 1, vec![7; 3], true),
            (8, 0, vec![], false),
            (9, 0, vec![], true),
        ];
        for (req, st, body, cont) in &recs {
            let before = q.buf.len();
            q.push_response(*req, *st, Src::slice(body));
            let head = q.buf.len() - before - body.len();
            assert_eq!(head, if *cont { 4 } else { RESP_HEADER }, "response {req}");
        }
        q.seal();
        let before = q.buf.len();
        q.push_response(10, 0, Src::slice(&[]));
        assert_eq!(
            q.buf.len() - before,
            RESP_HEADER,
            "a new batch starts afresh"
        );
        let b = sealed(&mut q);
        // SAFETY: written by our encoder, no large records, read once.
        let read: Vec<_> = unsafe { ResponseReader::new(&b, false) }
            .unwrap()
            .map(|(req, st, body)| (req, st, init(body.bytes())))
            .collect();
        let written: Vec<_> = recs.iter().map(|r| (r.0, r.1, r.2.clone())).collect();
        assert_eq!(read, written);
    }

    /// A continuation with no plain record right before it (never written by our encoder: a
    /// corrupt batch) ends the reading of its batch instead of borrowing some other header.
    #[test]
    fn a_continuation_that_follows_no_plain_record_ends_the_batch_as_malformed() {
        let mut q = OutQueue::new(4096, Sink::Loopback, false);
        q.push_request(
            Some(10),
            1,
            1,
            1,
            Src::slice(&[1]),
            Some(Src::slice(&[2])),
            0,
        );
        let mut b = sealed(&mut q);
        // Splice a continuation in after the record with an argument, before the table.
        let end = init(&b[..4]);
        let end = u32::from_le_bytes([end[0], end[1], end[2], end[3]]) as usize;
        let cont = [CONT, 2, 0, 0, 0, 9];
        for (i, &x) in cont.iter().enumerate() {
            b.insert(end + i, MaybeUninit::new(x));
        }
        let new_end = ((end + cont.len()) as u32).to_le_bytes();
        for (i, &x) in new_end.iter().enumerate() {
            b[i] = MaybeUninit::new(x);
        }
        // SAFETY: initialised bytes, no large records, read once.
        let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
        let reqs: Vec<u32> = r.by_ref().map(|rec| rec.req).collect();
        assert_eq!(reqs, vec![1]);
        assert_eq!(
            r.malformed(),
            Some("a continuation that follows no plain record")
        );
        // The same for a response continuation at the start of a batch.
        let mut q = OutQueue::new(4096, Sink::Loopback, false);
        q.push_response(3, 0, Src::slice(&[1, 2]));
        let mut b = sealed(&mut q);
        b[HEADER + 3] = MaybeUninit::new(0x80);
        // SAFETY: as above.
        let mut r = unsafe { ResponseReader::new(&b, false) }.unwrap();
        assert_eq!(r.by_ref().count(), 0);
        assert_eq!(
            r.malformed(),
            Some("a continuation that follows no inline response")
        );
    }

    /// A batch whose last record is cut short is read up to that record and then reported,
    /// on both lanes; a whole batch reports nothing.
    #[test]
    fn a_record_cut_short_is_reported_and_a_whole_batch_is_not() {
        let mut q = OutQueue::new(4096, Sink::Loopback, false);
        for req in 0..3 {
            q.push_request(Some(10), 1, 1, req, Src::slice(&[7; 8]), None, 0);
        }
        let b = sealed(&mut q);
        // SAFETY: initialised bytes, no large records, read once.
        let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
        assert_eq!(r.by_ref().count(), 3);
        assert_eq!(r.malformed(), None);
        // The batch's end moved back by 3 bytes: the last record (a continuation) no longer
        // fits. The code table moves with it, so it is cut out of the copy too.
        let end = u32::from_le_bytes(init(&b[..4]).try_into().unwrap()) as usize;
        let mut cut = b[..end - 3].to_vec();
        cut.extend_from_slice(&b[end..]);
        set_bytes(&mut cut, 0, &((end - 3) as u32).to_le_bytes());
        // SAFETY: as above.
        let mut r = unsafe { RequestReader::new(&cut, false) }.unwrap();
        assert_eq!(
            r.by_ref().map(|rec| rec.req).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(
            r.malformed(),
            Some("a record runs past the end of its batch")
        );

        let mut q = OutQueue::new(4096, Sink::Loopback, false);
        for req in 0..3 {
            q.push_response(req, 0, Src::slice(&[1, 2, 3, 4]));
        }
        let b = sealed(&mut q);
        // SAFETY: as above.
        let mut r = unsafe { ResponseReader::new(&b, false) }.unwrap();
        assert_eq!(r.by_ref().count(), 3);
        assert_eq!(r.malformed(), None);
        let end = u32::from_le_bytes(init(&b[..4]).try_into().unwrap()) as usize;
        let mut cut = b[..end - 1].to_vec();
        set_bytes(&mut cut, 0, &((end - 1) as u32).to_le_bytes());
        // SAFETY: as above.
        let mut r = unsafe { ResponseReader::new(&cut, false) }.unwrap();
        assert_eq!(
            r.by_ref().map(|(req, ..)| req).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(
            r.malformed(),
            Some("a record runs past the end of its batch")
        );
    }

    fn reassemble(q: &mut OutQueue, request_lane: bool) -> Done {
        q.seal();
        let mut state = None;
        let mut done = None;
        let mut slots = 0;
        while let Some(b) = q.queued.pop_front() {
            assert!(b.len() <= 256, "a piece larger than the slot");
            slots += 1;
            let r = Partial::feed(&mut state, classify(&b), request_lane).unwrap();
            if let Some(d) = r {
                assert!(done.is_none());
                done = Some(d);
            }
        }
        assert!(slots > 2, "a large record must take several slots");
        done.expect("the record was reassembled")
    }

    #[test]
    fn large_records_to_another_rank_stream_through_slots() {
        let mut q = OutQueue::new(256, Sink::Loopback, true);
        let big: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        q.push_request(
            Some(0x4321),
            5,
            6,
            7,
            Src::slice(&[1, 2, 3]),
            Some(Src::slice(&big)),
            SER,
        );
        let d = reassemble(&mut q, true);
        assert_eq!(d.code, 0x4321);
        let rec = d.into_request();
        assert_eq!((rec.req, rec.idx, rec.gn, rec.flags & SER), (7, 5, 6, SER));
        assert_eq!(init(rec.cap()), vec![1, 2, 3]);
        assert_eq!(init(rec.arg()), big);

        let mut q = OutQueue::new(256, Sink::Loopback, true);
        q.push_response(9, SER_STATUS, Src::slice(&big));
        let (req, st, body) = reassemble(&mut q, false).into_response();
        assert_eq!((req, st), (9, SER_STATUS));
        assert_eq!(init(&body), big);
    }

    #[test]
    fn a_release_frees_the_body_it_names_whether_a_request_or_a_response_parked_it() {
        // One worker's two queues to the same peer in another process, each parking a large
        // body; the peer releases both kinds with the same record, by token alone.
        let mut requests = OutQueue::new(4096, Sink::Loopback, true);
        let mut responses = OutQueue::new(4096, Sink::Loopback, true);
        requests.allow_far(false);
        responses.allow_far(true);
        let big = vec![0xA5u8; FAR_MIN];
        requests.push_request(
            Some(0x4321),
            1,
            2,
            3,
            Src::slice(&[9]),
            Some(Src::slice(&big)),
            SER,
        );
        responses.push_response(4, 0, Src::slice(&big));
        let token = |q: &OutQueue| -> u64 {
            assert_eq!(q.parked.len(), 1, "the body was not parked");
            *q.parked.keys().next().unwrap()
        };
        let (req_token, resp_token) = (token(&requests), token(&responses));
        assert_ne!(
            req_token, resp_token,
            "both queues handed out token {req_token}"
        );
        assert!(!parked_by_responses(req_token));
        assert!(parked_by_responses(resp_token));
        // The response's release leaves the request's body, which the peer has yet to read.
        assert!(!requests.release(resp_token));
        assert!(responses.release(resp_token));
        assert_eq!(requests.parked.len(), 1);
        assert!(requests.release(req_token));
    }

    #[test]
    fn broken_streams_are_errors_not_crashes() {
        let mut q = OutQueue::new(256, Sink::Loopback, true);
        q.push_response(1, 0, Src::slice(&[7u8; 1000]));
        q.seal();
        let pieces: Vec<Vec<Byte>> = q.queued.drain(..).collect();
        // A continuation without its start.
        assert!(Partial::feed(&mut None, classify(&pieces[1]), false).is_err());
        // A response piece on a request ring.
        assert!(Partial::feed(&mut None, classify(&pieces[0]), true).is_err());
        // A start piece whose announced length is absurd.
        let mut bad = pieces[0].clone();
        set_bytes(&mut bad, HEADER + 8, &u64::MAX.to_le_bytes());
        assert!(Partial::feed(&mut None, classify(&bad), false).is_err());
        // A piece that claims to end beyond its slot.
        let mut bad = pieces[1].clone();
        set_bytes(&mut bad, 0, &100_000u32.to_le_bytes());
        assert!(matches!(classify(&bad), Large::Bad(_)));
        // Pointer-carrying records are refused from other ranks.
        let mut q = OutQueue::new(256, Sink::Loopback, false);
        q.push_request(Some(1), 1, 1, 1, Src::slice(&[0; 1000]), None, 0);
        let b = sealed(&mut q);
        // SAFETY: written by our encoder; read with `pointers = false`, so the pointer is ignored.
        let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
        assert_eq!(r.by_ref().count(), 0);
        assert_eq!(
            r.malformed(),
            Some("a record that carries a pointer from another process")
        );
        // SAFETY: written by our encoder in this process, read once: reclaims the box.
        assert_eq!(unsafe { RequestReader::new(&b, true) }.unwrap().count(), 1);
    }
}
