//! Staging: the per-destination [`OutQueue`] that appends request and response records to the
//! batch being filled, seals full batches and copies them into free ring slots (or leaves them
//! for the worker's loopback queue). Small records take inlined fast paths; continuations are
//! written here (see the parent module for the format).
//!
//! It does not read records (`read`). Records too large for a slot are queued here, but cut into
//! pieces and laid out by `large`, and parked bodies are `large`'s [`Parking`], which the queue
//! owns. It does not touch ring internals: a sealed batch is copied into a reserved slot and
//! published.

use std::collections::VecDeque;
use std::mem::MaybeUninit;

use super::bytes::{Src, arg_len32, cap_len16, put, put_bytes, put_small, set_bytes};
use super::large::{self, Parking};
use super::layout::{
    ARG, Byte, CONT, CONT_HEADER, CONTROL, FAR, FAR_STATUS, FAR_WORDS, HEADER, KIND_REQ_START,
    KIND_RESP_START, LARGE, LARGE_STATUS, MAX_TABLE, RELEASE, REQ_HEADER, RESP_CONT,
    RESP_CONT_HEADER, RESP_HEADER, request_header, response_header,
};
use crate::wire::ring::{Producer, RingError};

/// The code of an unset `OutQueue::last`/`prev` entry (no code offset is this large).
const NO_CODE: usize = usize::MAX;
/// Spare staging buffers kept per destination (enough for a full back-pressure backlog, so the
/// hot path does not allocate).
const POOL: usize = 64;

/// Bodies up to this many bytes take the inlined fast paths of `push_request`/`push_response`.
pub(crate) const SMALL: usize = 64;

/// Appends the large-message form of a body: the body moves into a heap box whose address and
/// length go on the record, and the receiver takes ownership of the box. Within one process only;
/// to another rank a large body is streamed or parked instead.
fn put_large(b: &mut Vec<Byte>, body: Vec<Byte>) {
    let boxed: Box<[Byte]> = body.into_boxed_slice();
    let len = boxed.len() as u64;
    let ptr = Box::into_raw(boxed) as *mut Byte as usize as u64;
    put_bytes(b, &ptr.to_le_bytes());
    put_bytes(b, &len.to_le_bytes());
}

/// A staging buffer with its header room.
/// The first batch buffer of a queue: it grows to `cap` when first used (most queues of a
/// large rank never are).
fn first() -> Vec<Byte> {
    vec![MaybeUninit::new(0); HEADER]
}

fn fresh(cap: usize) -> Vec<Byte> {
    let mut v = Vec::with_capacity(cap);
    v.resize(HEADER, MaybeUninit::new(0));
    v
}

/// A cleared buffer with its header room, from `pool` when possible.
fn spare(pool: &mut Vec<Vec<Byte>>, cap: usize) -> Vec<Byte> {
    match pool.pop() {
        Some(mut v) => {
            v.clear();
            v.resize(HEADER, MaybeUninit::new(0));
            v
        }
        None => fresh(cap),
    }
}

/// Where sealed batches go: a ring to another worker, or the worker's own loopback queue (requests
/// a worker sends to itself from contexts where running them inline is not allowed).
#[derive(Debug)]
pub(crate) enum Sink {
    Ring(Box<Producer>),
    Loopback,
    /// A ring to a worker of this process, not made yet: batches wait in `queued` until the
    /// owner makes it ([`OutQueue::make_ring`]).
    Later,
}

/// Staging for one destination: the batch being filled, sealed batches waiting for ring space,
/// and spare buffers.
#[derive(Debug)]
pub(crate) struct OutQueue {
    pub(super) buf: Vec<Byte>,
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
    pub(super) cap: usize,
    pub(crate) queued: VecDeque<Vec<Byte>>,
    pool: Vec<Vec<Byte>>,
    pub(crate) sink: Sink,
    /// The destination is in another process: large records are streamed (or parked, when
    /// `parking` takes them), never pointers.
    remote: bool,
    /// The bodies parked for the destination to read in one copy, if it can read this
    /// process's memory (`large`).
    pub(super) parking: Parking,
    /// A large argument's vector given by [`offer`](Self::offer), and its room for the
    /// captured bytes.
    offered: Option<(Vec<Byte>, usize)>,
}

impl OutQueue {
    pub(crate) fn new(cap: usize, sink: Sink, remote: bool) -> Self {
        OutQueue {
            buf: first(),
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
            parking: Parking::new(),
            offered: None,
        }
    }

    /// Lets large bodies to this destination be read from this process's memory (when it is
    /// in another process); `responses`: this is the queue of responses to that destination,
    /// whose tokens are numbered apart from those of the requests to it
    /// ([`parked_by_responses`](super::parked_by_responses)).
    pub(crate) fn allow_far(&mut self, responses: bool) {
        self.parking.allow(self.remote, responses);
    }

    /// Lets every body too large for a slot to this destination be read by RMA from memory
    /// registered with `rma` (the rendezvous of a one-sided fabric), instead of being streamed
    /// through the rings; `responses` as for [`allow_far`](Self::allow_far).
    pub(crate) fn allow_rma(
        &mut self,
        responses: bool,
        rma: std::sync::Arc<dyn crate::wire::far::Rendezvous>,
    ) {
        self.parking.allow_rma(self.remote, responses, rma);
    }

    /// Frees a body the destination has read (deregistering it first). Unknown tokens are
    /// ignored.
    pub(crate) fn release(&mut self, token: u64) -> bool {
        self.parking.release(token)
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

    /// Takes `body`, `[room][argument's encoding]`, for the next request whose argument bytes
    /// are exactly its encoding and whose captured bytes are `room` long: if that body is
    /// parked, the captured bytes are written into the room and the vector itself is parked,
    /// with no copy of the argument (`OutArg::offer`). A request that does not match leaves it
    /// (the argument it was offered for may still be staged); the next offer replaces it.
    pub(crate) fn offer(&mut self, body: Vec<Byte>, room: usize) {
        self.offered = Some((body, room));
    }

    /// Takes the offered vector if `cap` and `arg` are the captured bytes and the argument it
    /// was offered for.
    fn take_offered(&mut self, cap: Src<'_>, arg: Option<Src<'_>>) -> Option<Vec<Byte>> {
        let (v, room) = self.offered.as_ref()?;
        let a = arg?;
        let fits = *room == cap.len()
            && v.len() == room + a.len()
            && std::ptr::eq(v[*room..].as_ptr().cast::<u8>(), a.as_ptr());
        fits.then(|| self.offered.take().map(|(v, _)| v))?
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
    pub(super) fn room(&self, extra_table: usize) -> usize {
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
        let next = spare(&mut self.pool, self.cap);
        let full = std::mem::replace(&mut self.buf, next);
        self.queued.push_back(full);
    }

    /// Whether this queue's ring is still to be made ([`Sink::Later`]).
    #[inline]
    pub(crate) fn unmade(&self) -> bool {
        matches!(self.sink, Sink::Later)
    }

    /// Gives a [`Sink::Later`] queue the producing end of its ring, just made.
    pub(crate) fn make_ring(&mut self, prod: Producer) {
        debug_assert!(self.unmade(), "a queue given a second ring");
        self.sink = Sink::Ring(Box::new(prod));
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
    /// lookups) would otherwise miss on every other record and take the general path.
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
    pub(super) fn push_request_general(
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
        // The argument's own vector, if it was offered for this request: parked as the body
        // when it is parked, else kept to the end of this call (`arg` points into it).
        let mut offered = self.take_offered(cap, arg);
        let mut _keep = None;
        let parked = if large && self.remote && self.parking.takes(body) {
            let v = match offered.take() {
                Some(mut v) => {
                    // SAFETY: `cap` is valid for `cap.len()` reads, the room in front of the
                    // argument's bytes is that long (`take_offered`), and `cap` does not lie in
                    // `v`; an untyped copy, as in `put`.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            cap.as_ptr(),
                            v.as_mut_ptr().cast::<u8>(),
                            cap.len(),
                        );
                    }
                    v
                }
                None => {
                    let mut v: Vec<Byte> = Vec::with_capacity(body);
                    crate::sys::mem::advise_huge(v.as_ptr().cast(), body);
                    put(&mut v, cap);
                    if let Some(a) = arg {
                        put(&mut v, a);
                    }
                    v
                }
            };
            self.parking.park(v).map_err(|v| _keep = Some(v)).ok()
        } else {
            None
        };
        if large && self.remote && parked.is_none() {
            self.stream_request(code, idx, gn, req, cap, arg, extra_flags);
            return;
        }
        let need = head
            + if large {
                if self.remote { FAR_WORDS } else { 16 }
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
        if let Some(w) = parked {
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

    /// Streams a request record too large for one slot to another rank (`large` lays out its
    /// start piece and cuts the pieces).
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
        let (start, body) = large::request_start(code, idx, gn, req, cap, arg, extra_flags);
        self.stream(KIND_REQ_START, &start, &body, Some(code.unwrap_or(0)));
    }

    /// Queues a streamed large record, after the batch being filled: its start piece (`start`,
    /// with as much of `body` as fits) and "more" pieces, cut by [`large::cut`] into buffers
    /// of this queue's pool.
    fn stream(&mut self, kind: u16, start: &[u8], body: &[Byte], table: Option<u64>) {
        self.seal();
        let (cap, pool, queued) = (self.cap, &mut self.pool, &mut self.queued);
        large::cut(
            kind,
            start,
            body,
            table,
            cap,
            || spare(pool, cap),
            |piece| queued.push_back(piece),
        );
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

    /// Appends a response record with `status` whose body is `body` itself (an encoding made
    /// in its own vector, `codec::encode_spliced`): parked as it is when the destination reads
    /// parked bodies, else copied like any body.
    pub(crate) fn push_response_owned(&mut self, req: u32, status: u8, body: Vec<Byte>) {
        let large = RESP_HEADER + body.len() + HEADER > self.cap || body.len() >= 1 << 24;
        let body: Box<[Byte]> = if large && self.remote && self.parking.takes(body.len()) {
            match self.parking.park(body) {
                Ok(w) => return self.push_far_response(req, status, &w),
                Err(b) => b,
            }
        } else {
            body.into_boxed_slice()
        };
        self.push_response_general(req, status, Src::uninit(&body));
    }

    /// Appends the record of a response whose body is parked (`w`, from `Parking::park`).
    fn push_far_response(&mut self, req: u32, status: u8, w: &[u8; FAR_WORDS]) {
        if self.room(0) < RESP_HEADER + FAR_WORDS {
            self.seal();
        }
        put_bytes(
            &mut self.buf,
            &response_header(req, status | FAR_STATUS, FAR_WORDS as u32),
        );
        put_bytes(&mut self.buf, w);
    }

    /// [`push_response`](Self::push_response) for every record.
    #[inline(never)]
    pub(super) fn push_response_general(&mut self, req: u32, status: u8, body: Src<'_>) {
        let large = RESP_HEADER + body.len() + HEADER > self.cap || body.len() >= 1 << 24;
        if large && self.remote && self.parking.takes(body.len()) {
            let mut v: Vec<Byte> = Vec::with_capacity(body.len());
            crate::sys::mem::advise_huge(v.as_ptr().cast(), body.len());
            put(&mut v, body);
            if let Ok(w) = self.parking.park(v) {
                self.push_far_response(req, status, &w);
                return;
            }
        }
        if large && self.remote {
            let (start, b) = large::response_start(req, status, body);
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
