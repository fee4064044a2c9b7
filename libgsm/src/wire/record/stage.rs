//! Staging: the per-destination [`OutQueue`] that appends request and response records to the
//! batch being filled, seals full batches and copies them into free ring slots (or leaves them
//! for the worker's loopback queue). Small records take inlined fast paths; continuations are
//! written here (see the parent module for the format).
//!
//! It does not read records (`read`), and records too large for a slot are split into pieces or
//! parked by the methods in `large`. It does not touch ring internals: a sealed batch is copied
//! into a reserved slot and published.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use super::layout::{
    ARG, Byte, CONT, CONT_HEADER, CONTROL, FAR, FAR_STATUS, FAR_WORDS, HEADER, KIND_RESP_START,
    LARGE, LARGE_STATUS, MAX_TABLE, REQ_HEADER, RESP_CONT, RESP_CONT_HEADER, RESP_HEADER,
    request_header, response_header,
};
use crate::wire::ring::{Producer, RingError};

/// The smallest body sent by the single-copy path; smaller large records are streamed through
/// the rings, which measured faster below about half a MiB (figures in docs/performance-log.md).
pub(super) const FAR_MIN: usize = 512 << 10;
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
pub(super) fn cap_len16(n: usize) -> u16 {
    u16::try_from(n).expect("gossamer: a capture of more than 65 535 bytes reached the encoder")
}

/// An argument's length for its 32-bit field: an argument of 4 GiB or more cannot be moved in
/// one record, and is refused with that reason rather than cut.
pub(super) fn arg_len32(n: usize) -> u32 {
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
pub(super) fn put(b: &mut Vec<Byte>, s: Src<'_>) {
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
pub(super) fn put_bytes(b: &mut Vec<Byte>, v: &[u8]) {
    put(b, Src::slice(v));
}

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

#[inline]
pub(super) fn set_bytes(b: &mut [Byte], at: usize, v: &[u8]) {
    for (d, s) in b[at..at + v.len()].iter_mut().zip(v) {
        *d = MaybeUninit::new(*s);
    }
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
    /// The destination is in another process: large records are streamed (or parked, with
    /// `far`), never pointers.
    pub(super) remote: bool,
    /// The destination can read this process's memory (`process_vm_readv`, or an RMA read
    /// when `rma` is set): large bodies are parked here and read by the receiver in one copy.
    pub(super) far: bool,
    /// The smallest body parked rather than streamed (with `far`).
    pub(super) far_min: usize,
    /// The one-sided fabric's rendezvous that registers parked bodies, if the destination
    /// reads them by RMA.
    pub(super) rma: Option<std::sync::Arc<dyn crate::wire::far::Rendezvous>>,
    /// Bodies parked for the destination to read, by token, until it releases them.
    pub(super) parked: std::collections::HashMap<u64, ParkedBody>,
    pub(super) next_token: u64,
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
            far: false,
            far_min: FAR_MIN,
            rma: None,
            parked: std::collections::HashMap::new(),
            next_token: 1,
            offered: None,
        }
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
            && std::ptr::eq(v[*room..].as_ptr().cast::<u8>(), a.ptr);
        fits.then(|| self.offered.take().map(|(v, _)| v))?
    }

    /// A cleared buffer with its header room, from the pool when possible.
    pub(super) fn spare(&mut self) -> Vec<Byte> {
        match self.pool.pop() {
            Some(mut v) => {
                v.clear();
                v.resize(HEADER, MaybeUninit::new(0));
                v
            }
            None => fresh(self.cap),
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
        let parked = if large && self.remote && self.far && body >= self.far_min {
            let v = match offered.take() {
                Some(mut v) => {
                    // SAFETY: `cap` is valid for `cap.len()` reads, the room in front of the
                    // argument's bytes is that long (`take_offered`), and `cap` does not lie in
                    // `v`; an untyped copy, as in `put`.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            cap.ptr,
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
            self.put_far(v).map_err(|v| _keep = Some(v)).ok()
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
        let body: Box<[Byte]> = if large && self.remote && self.far && body.len() >= self.far_min {
            match self.put_far(body) {
                Ok(w) => return self.push_far_response(req, status, &w),
                Err(b) => b,
            }
        } else {
            body.into_boxed_slice()
        };
        let src = Src {
            ptr: body.as_ptr().cast::<u8>(),
            len: body.len(),
            _borrow: PhantomData,
        };
        self.push_response_general(req, status, src);
    }

    /// Appends the record of a response whose body is parked (`w`, from `put_far`).
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
        if large && self.remote && self.far && body.len() >= self.far_min {
            let mut v: Vec<Byte> = Vec::with_capacity(body.len());
            crate::sys::mem::advise_huge(v.as_ptr().cast(), body.len());
            put(&mut v, body);
            if let Ok(w) = self.put_far(v) {
                self.push_far_response(req, status, &w);
                return;
            }
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
    pub(super) rma: std::sync::Arc<dyn crate::wire::far::Rendezvous>,
    pub(super) id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.rma.unpark(self.id);
    }
}
