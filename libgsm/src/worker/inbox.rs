//! The inbox: one worker's incoming rings, a request ring and a response ring from each worker
//! that has one to it, looked at by the worker's poll. A request batch is served record by record, each
//! handed to its trampoline (`entry.rs`), which hands it to the kind's serve function (`trust/
//! serve.rs`, `spawn.rs`, `mail.rs`); a response batch is completed against the pending table;
//! large records are reassembled or read from the sender's memory. It does not decode records
//! (`wire::record` does), decide when the rings are looked at (`poll.rs` does), nor stage
//! anything but the refusals and releases it owes (the outbox does the staging).

use std::cell::{Cell, RefCell};

use super::entry;
use super::*;

/// An incoming ring end: `None` until made, or for this worker itself, whose records come
/// through the loopback queue of the outbox. Boxed: an end is two cache lines, and most pairs
/// of a large rank never talk.
type Ring = RefCell<Option<Box<Consumer>>>;

/// The rings a fabric made from one worker of another rank to this one, and the large records
/// being reassembled from them.
struct FromRemote {
    /// The producing worker's global id.
    from: usize,
    requests: Ring,
    responses: Ring,
    partial_req: RefCell<Option<Partial>>,
    partial_resp: RefCell<Option<Partial>>,
}

/// One worker's incoming rings and what it keeps while serving them.
pub(crate) struct Inbox {
    /// This worker's global id, and its index in its rank.
    me: usize,
    local: usize,
    /// Global id of this rank's first worker.
    base: usize,
    /// Request rings from each client of this rank, response rings from each trustee of this
    /// rank, by local index: made on first use and looked at when their summary bit says so
    /// (`lanes.rs`).
    requests: Box<[Ring]>,
    responses: Box<[Ring]>,
    /// The rings from workers of other ranks, looked at on every poll: only those a fabric made,
    /// not a place per worker of the job.
    remote: Vec<FromRemote>,
    /// Request records served, in all (the fibers' share of a poll is counted from it).
    served: Cell<u32>,
    /// Whether the batch being served came from another process: then an argument is taken
    /// only from its encoding, never by its bytes (`trust::take_arg`).
    serving_foreign: Cell<bool>,
    /// The last code offset from another process found to be a delegation entry, and its
    /// address: a peer's batches mostly name the same few, so most skip the table's search.
    last_entry: Cell<Option<(u64, usize)>>,
    /// Slots consumed from other ranks (mirrored into `Shared` by [`publish_received`]).
    ///
    /// [`publish_received`]: Inbox::publish_received
    received: Cell<u64>,
    /// The most batches taken from one ring in one poll.
    budget: usize,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("me", &self.me)
            .field("served", &self.served.get())
            .finish_non_exhaustive()
    }
}

/// Whether an incoming ring holds a published batch (one header load). A ring being served
/// (borrowed mutably) counts as empty.
///
/// Without a `RefCell` guard: an inline apply looks at every ring every `INLINE_POLL` applies,
/// and a guard's stores to the borrow count cost more than the header load there.
#[inline]
fn ring_has_data(ring: &Ring) -> bool {
    // SAFETY: the reference lives only for the header load below, during which nothing can
    // borrow the ring mutably (this thread alone uses it).
    matches!(unsafe { ring.try_borrow_unguarded() }, Ok(Some(c)) if c.has_data())
}

/// A ring or record from worker `peer` to worker `core` broke the protocol: the job cannot go on
/// safely.
#[cold]
fn ring_broken(core: &WorkerCore, peer: usize, detail: &str) {
    core.shared.ring_broken(core.id, peer, detail);
}

impl Inbox {
    /// The inbox of worker `me` (local index `local`) over the consumer ends the fabrics made
    /// from other ranks' workers (`(global id, lane, end)`), taking at most `budget` batches from
    /// a ring per poll.
    pub(crate) fn new(
        (me, local): (usize, usize),
        place: &Place,
        inc: Vec<(usize, Lane, Consumer)>,
        budget: usize,
    ) -> Self {
        let mut remote: Vec<FromRemote> = Vec::new();
        let mut inc = inc;
        inc.retain(|e| !place.is_local(e.0) && e.0 < place.total);
        inc.sort_by_key(|e| e.0);
        for (g, lane, c) in inc {
            if remote.last().is_none_or(|r| r.from != g) {
                remote.push(FromRemote {
                    from: g,
                    requests: RefCell::new(None),
                    responses: RefCell::new(None),
                    partial_req: RefCell::new(None),
                    partial_resp: RefCell::new(None),
                });
            }
            if let Some(r) = remote.last_mut() {
                let ring = match lane {
                    Lane::Request => &mut r.requests,
                    Lane::Response => &mut r.responses,
                };
                *ring.get_mut() = Some(Box::new(c));
            }
        }
        let empty = || (0..place.local).map(|_| RefCell::new(None)).collect();
        Inbox {
            me,
            local,
            base: place.base,
            requests: empty(),
            responses: empty(),
            remote,
            served: Cell::new(0),
            serving_foreign: Cell::new(false),
            last_entry: Cell::new(None),
            received: Cell::new(0),
            budget,
        }
    }

    /// Whether a ring to this worker holds a published batch: a look at the summaries of this
    /// rank's rings, one header load per ring from another rank.
    pub(crate) fn waiting(&self, lanes: &Lanes) -> bool {
        lanes.any(self.local)
            || self
                .remote
                .iter()
                .any(|r| ring_has_data(&r.requests) || ring_has_data(&r.responses))
    }

    /// A marked ring whose end this worker has not taken yet: its producer left the end before
    /// marking, but after this poll's first look at the ends.
    #[inline]
    fn find_end(&self, lanes: &Lanes, ring: &Ring) {
        if ring.borrow().is_none() {
            self.install(lanes);
        }
    }

    /// Takes the ring ends other workers of this rank made to this one since the last poll.
    fn install(&self, lanes: &Lanes) {
        for (request, from, c) in lanes.arrivals(self.local) {
            let v = if request {
                &self.requests
            } else {
                &self.responses
            };
            *v[from - self.base].borrow_mut() = Some(Box::new(c));
        }
    }

    /// Request records served so far (wrapping).
    #[inline]
    pub(crate) fn served(&self) -> u32 {
        self.served.get()
    }

    /// Whether the batch being served came from another process (`trust::take_arg`).
    #[inline]
    pub(crate) fn serving_foreign(&self) -> bool {
        self.serving_foreign.get()
    }

    /// Mirrors this worker's count of slots consumed from other ranks into `Shared` for the
    /// termination waves, only when it changed (a Release store, as the outbox's).
    #[inline]
    pub(crate) fn publish_received(&self, shared: &Shared) {
        let (r, rr) = (self.received.get(), &shared.received[self.local].0);
        if rr.load(Ordering::Relaxed) != r {
            rr.store(r, Ordering::Release);
        }
    }

    /// Serves the request rings from every client and the loopback queue, up to `budget`
    /// batches each, and publishes each client's responses right after its ring: they are
    /// complete, and it may be waiting for nothing else. Whether any batch was served.
    pub(crate) fn serve_all(&self, core: &WorkerCore) -> bool {
        let mut work = false;
        for _ in 0..self.budget {
            let Some(b) = core.outbox.take_loopback(true) else {
                break;
            };
            work = true;
            self.serve_batch(core, self.me, &b, true);
            core.outbox.recycle_loopback(true, b);
        }
        let lanes = &core.shared.lanes;
        self.install(lanes);
        for r in &self.remote {
            work |= self.serve_ring(core, r.from, &r.requests, Some(&r.partial_req));
        }
        lanes.take(self.local, true, |c| {
            let ring = &self.requests[c - self.base];
            self.find_end(lanes, ring);
            work |= self.serve_ring(core, c, ring, None);
        });
        work
    }

    /// Serves up to `budget` batches from the request ring of client `c`, then publishes its
    /// responses. A ring of this rank left with batches is marked again, for the next poll.
    /// `partial`: the client is in another rank, and this is where its large records are
    /// reassembled.
    fn serve_ring(
        &self,
        core: &WorkerCore,
        c: usize,
        ring: &Ring,
        partial: Option<&RefCell<Option<Partial>>>,
    ) -> bool {
        let mut work = false;
        {
            let mut cons = ring.borrow_mut();
            let Some(cons) = cons.as_mut() else {
                return false;
            };
            for _ in 0..self.budget {
                let slot = match cons.try_poll() {
                    Ok(Some(slot)) => slot,
                    Ok(None) => break,
                    Err(e) => {
                        ring_broken(core, c, &e.to_string());
                        break;
                    }
                };
                work = true;
                if let Some(p) = partial {
                    self.received.set(self.received.get() + 1);
                    self.serve_remote(core, c, slot.bytes_uninit(), p);
                } else {
                    self.serve_batch(core, c, slot.bytes_uninit(), true);
                }
                slot.release();
            }
            if partial.is_none() && cons.has_data() {
                core.shared.lanes.mark(c, self.me, true);
            }
        }
        core.outbox.flush_to(c, false);
        work
    }

    /// Completes the response rings from every trustee and the loopback queue, up to `budget`
    /// batches each. Whether any batch was completed.
    pub(crate) fn complete_all(&self, core: &WorkerCore) -> bool {
        let mut work = false;
        for _ in 0..self.budget {
            let Some(b) = core.outbox.take_loopback(false) else {
                break;
            };
            work = true;
            self.complete_batch(core, self.me, &b, true);
            core.outbox.recycle_loopback(false, b);
        }
        let lanes = &core.shared.lanes;
        self.install(lanes);
        for r in &self.remote {
            work |= self.complete_ring(core, r.from, &r.responses, Some(&r.partial_resp));
        }
        lanes.take(self.local, false, |t| {
            let ring = &self.responses[t - self.base];
            self.find_end(lanes, ring);
            work |= self.complete_ring(core, t, ring, None);
        });
        work
    }

    /// Completes up to `budget` batches from the response ring of trustee `t`. A ring of this
    /// rank left with batches is marked again, for the next poll. `partial` as for
    /// [`serve_ring`](Self::serve_ring).
    fn complete_ring(
        &self,
        core: &WorkerCore,
        t: usize,
        ring: &Ring,
        partial: Option<&RefCell<Option<Partial>>>,
    ) -> bool {
        let mut work = false;
        let mut cons = ring.borrow_mut();
        let Some(cons) = cons.as_mut() else {
            return false;
        };
        for _ in 0..self.budget {
            let slot = match cons.try_poll() {
                Ok(Some(slot)) => slot,
                Ok(None) => break,
                Err(e) => {
                    ring_broken(core, t, &e.to_string());
                    break;
                }
            };
            work = true;
            if let Some(p) = partial {
                self.received.set(self.received.get() + 1);
                self.complete_remote(core, t, slot.bytes_uninit(), p);
            } else {
                self.complete_batch(core, t, slot.bytes_uninit(), true);
            }
            slot.release();
        }
        if partial.is_none() && cons.has_data() {
            core.shared.lanes.mark(t, self.me, false);
        }
        work
    }

    /// Serves one request batch. `pointers`: the batch comes from this process, so its large
    /// records may carry heap pointers (never true for a ring from another rank).
    pub(crate) fn serve_batch(
        &self,
        core: &WorkerCore,
        client: usize,
        bytes: &[Byte],
        pointers: bool,
    ) {
        // SAFETY: batches in our rings and loopback queue are written by an `OutQueue` of this
        // build (this process, or a peer rank running the same binary, which the bootstrap
        // checked), and each is served exactly once (the slot is released / the buffer recycled
        // right after). Pointer-carrying large records are accepted only from this process.
        let Some(reader) = (unsafe { RequestReader::new(bytes, pointers) }) else {
            ring_broken(core, client, "a request batch whose header is malformed");
            return;
        };
        // The batch's code table resolved once (a small table on the stack: most batches name
        // one or two functions). A record's function index reaches at most `MAX_TABLE` entries:
        // a longer table is no batch of this build (a peer's would cost a look-up per entry).
        let ntab = reader.table.len() / 8;
        if ntab > MAX_TABLE {
            ring_broken(
                core,
                client,
                &format!(
                    "a request batch whose code table has {ntab} entries, more than a batch can index"
                ),
            );
            return;
        }
        let mut small = [0usize; 16];
        let mut big = Vec::new();
        let fns: &mut [usize] = if ntab <= small.len() {
            &mut small[..ntab]
        } else {
            big.resize(ntab, 0);
            &mut big
        };
        self.serving_foreign.set(!pointers);
        for (i, f) in fns.iter_mut().enumerate() {
            let code = reader.code(i as u8);
            if pointers {
                *f = code.and_then(codeptr::address_of).unwrap_or(0);
            } else {
                // From another process: only the exact entry of a delegation kind is called.
                match code.and_then(|c| self.foreign_entry(c)) {
                    Some(a) => *f = a,
                    None => return self.no_entry(core, client, code),
                }
            }
        }
        let mut reader = reader;
        // `ref`: the record is used where `next` left it. Moved into a binding of its own, it was
        // copied in 8-byte words that straddled the narrower stores `next` had just made, and
        // every record waited for those stores to retire before the copy could load them (a
        // failed store-to-load forward).
        while let Some(ref rec) = reader.next() {
            let f = fns.get(rec.fidx as usize).copied().unwrap_or(0);
            self.dispatch(core, client, f, rec, &mut reader);
        }
        self.served
            .set(self.served.get().wrapping_add(reader.taken));
        // Requests cannot be skipped unseen: their clients would wait for answers forever.
        if let Some(why) = reader.malformed() {
            ring_broken(core, client, why);
        }
    }

    /// Runs one request record whose trampoline is at address `f` (0: not in our text).
    ///
    /// Inlined into the serve loop with only the common case (a trampoline of this binary, the
    /// body in the batch): as a call of its own it cost a call and a frame per record served.
    #[inline(always)]
    fn dispatch(
        &self,
        core: &WorkerCore,
        client: usize,
        f: usize,
        rec: &Request<'_>,
        more: &mut RequestReader<'_>,
    ) {
        // `RELEASE` and `CONTROL` are the two highest function indexes.
        const { assert!(RELEASE == u8::MAX - 1 && CONTROL == u8::MAX) };
        if f == 0 || rec.fidx >= RELEASE || matches!(rec.body, Body::Far { .. }) {
            self.dispatch_other(core, client, f, rec);
            return;
        }
        // SAFETY: `f` lies in this binary's text and was encoded by `send_request` from a
        // function pointer of type `Trampoline` (every code offset we encode is one; a peer rank
        // runs the same build, so its offsets name the same functions).
        let tramp: Trampoline = unsafe { std::mem::transmute::<usize, Trampoline>(f) };
        // SAFETY: the record was written for this trampoline by its monomorphic sender, and so
        // were the records of the same first header word that it may take from `more` (the
        // word includes the function index, which names the same code within one batch).
        unsafe { tramp(core, client, rec, more) };
    }

    /// [`dispatch`](Self::dispatch) for the other records: a body parked in the client's
    /// memory, a release or trust-id toggle, code outside this binary's text.
    #[cold]
    #[inline(never)]
    fn dispatch_other(&self, core: &WorkerCore, client: usize, f: usize, rec: &Request<'_>) {
        if let Body::Far {
            addr,
            len,
            token,
            key,
        } = rec.body
        {
            self.dispatch_far(core, client, f, rec, (addr, len, key), token);
            return;
        }
        if rec.fidx == RELEASE {
            core.outbox.release(client, control_id(rec.cap()));
            return;
        }
        if rec.fidx == CONTROL {
            let Some((id, word)) = control_words(rec.cap()) else {
                ring_broken(
                    core,
                    client,
                    "a reference-counting record of the wrong length",
                );
                return;
            };
            let what = if rec.req == CONTROL_RELEASE {
                Toggle::Release { made: word }
            } else {
                Toggle::Register { parent: word }
            };
            core.toggle(client, rec.idx, rec.gn, id, what);
            return;
        }
        core.outbox.respond_raw(
            client,
            rec.req,
            status::PANICKED,
            Src::slice(
                b"gossamer: the request names code outside this binary's text; it was refused",
            ),
        );
    }

    pub(crate) fn complete_batch(
        &self,
        core: &WorkerCore,
        from: usize,
        bytes: &[Byte],
        pointers: bool,
    ) {
        // SAFETY: as in `serve_batch`, for response batches.
        let Some(mut reader) = (unsafe { ResponseReader::new(bytes, pointers) }) else {
            ring_broken(core, from, "a response batch whose header is malformed");
            return;
        };
        // A short batch (a blocking apply's answer, say) is completed as it is read: its few
        // slots gain nothing from a prefetch, and holding records back delays the answer a
        // fiber waits for.
        if bytes.len() < AHEAD * 32 {
            for (req, st, body) in reader.by_ref() {
                if !pointers && st == status::OK {
                    return self.result_by_its_bytes(core, from, req);
                }
                self.complete_one(core, from, req, st, body);
            }
            self.check_responses_read(core, from, &reader);
            return;
        }
        // Completing a record touches its pending slot, which was written thousands of requests
        // ago (a full ring of batches is in flight) and has left the L1 cache by now: each
        // record's slot is prefetched when the record is read and completed `AHEAD` records
        // later, in the same order.
        let mut held: [Option<(u32, u8, Body<'_>)>; AHEAD] = Default::default();
        let mut i = 0usize;
        for (req, st, body) in reader.by_ref() {
            if !pointers && st == status::OK {
                return self.result_by_its_bytes(core, from, req);
            }
            core.pending.prefetch(req);
            if let Some((r, s, b)) = held[i % AHEAD].replace((req, st, body)) {
                self.complete_one(core, from, r, s, b);
            }
            i += 1;
        }
        for k in 0..AHEAD {
            if let Some((r, s, b)) = held[(i + k) % AHEAD].take() {
                self.complete_one(core, from, r, s, b);
            }
        }
        self.check_responses_read(core, from, &reader);
    }

    /// Responses cannot be skipped unseen either: their fibers would wait forever.
    #[inline]
    fn check_responses_read(&self, core: &WorkerCore, from: usize, reader: &ResponseReader<'_>) {
        if let Some(why) = reader.malformed() {
            ring_broken(core, from, why);
        }
    }

    /// Completes pending request `req` (runs its completer as a callback). Returns `false`, and
    /// does nothing, if no request `req` is waiting for an answer from worker `from`.
    #[inline]
    #[must_use]
    fn complete(&self, core: &WorkerCore, from: usize, req: u32, st: u8, body: &[Byte]) -> bool {
        let Some((c, mut data)) = core.pending.take(from, req) else {
            return false;
        };
        let r = core.context.caught(CALLBACK, || {
            // SAFETY: `c` and `data` were registered together by `Pending::add`, and the entry
            // is completed once (`take` took it out). `st`/`body` are the response to it.
            unsafe { c(core, &mut data, st, body) }
        });
        if let Err(e) = r {
            std::panic::resume_unwind(e);
        }
        true
    }

    /// Completes request `req` with a response from worker `from`; a response that no request
    /// is waiting for (an unknown id, or one answered already) breaks the protocol: answers
    /// cannot be matched any more, so the job ends with a report rather than go on unsure.
    #[inline(always)]
    fn complete_from(&self, core: &WorkerCore, from: usize, req: u32, st: u8, body: &[Byte]) {
        if !self.complete(core, from, req, st, body) {
            self.unexpected_response(core, from, req);
        }
    }

    #[cold]
    #[inline(never)]
    fn unexpected_response(&self, core: &WorkerCore, from: usize, req: u32) {
        ring_broken(
            core,
            from,
            &format!("a response to request {req}, which is not waiting for one from it"),
        );
    }

    /// Completes one response record (fetching a far body first).
    #[inline(always)]
    fn complete_one(&self, core: &WorkerCore, from: usize, req: u32, st: u8, body: Body<'_>) {
        if let Body::Far {
            addr,
            len,
            token,
            key,
        } = body
        {
            // Only ever on a ring from another rank (`pointers` is false there and the
            // sender parks bodies only for ranks that can read it).
            if let Some(b) = self.fetch_far(&core.shared, from, addr, len, key) {
                self.send_release(&core.outbox, from, token);
                self.complete_from(core, from, req, st, &b);
            }
            return;
        }
        self.complete_from(core, from, req, st, body.bytes());
        drop::<Body<'_>>(body);
    }

    /// Runs a request whose body is parked in the client's memory: reads it in one copy, runs
    /// it, and tells the client it may free the body.
    #[cold]
    fn dispatch_far(
        &self,
        core: &WorkerCore,
        client: usize,
        f: usize,
        rec: &Request<'_>,
        (addr, len, key): (u64, u64, u64),
        token: u64,
    ) {
        let Some(body) = self.fetch_far(&core.shared, client, addr, len, key) else {
            return;
        };
        self.send_release(&core.outbox, client, token);
        let local = Request {
            fidx: rec.fidx,
            flags: rec.flags,
            req: rec.req,
            idx: rec.idx,
            gn: rec.gn,
            cap_len: rec.cap_len,
            body: Body::Large(body),
        };
        self.dispatch(core, client, f, &local, &mut RequestReader::empty());
    }

    /// Tells worker `sender` that the body it parked under `token` has been read.
    fn send_release(&self, outbox: &Outbox, sender: usize, token: u64) {
        outbox.push_release(sender, token);
    }

    /// Reads `len` bytes at `addr` in the process of worker `from`'s rank (`process_vm_readv`
    /// on this host, else an RMA read with `key` over the one-sided fabric that reaches it).
    /// On failure the job fails with the reason (the record cannot be had any other way).
    fn fetch_far(
        &self,
        shared: &Shared,
        from: usize,
        addr: u64,
        len: u64,
        key: u64,
    ) -> Option<Box<[Byte]>> {
        let place = &shared.place;
        let rank = place.rank_of(from);
        if let Some(rma) = place.rma.as_ref().filter(|r| r.reaches(rank)) {
            return match rma.read(rank, addr, key, len) {
                Ok(b) => Some(b),
                Err(e) => {
                    shared.ring_broken(
                        self.me,
                        from,
                        &format!("cannot read a {len}-byte record from rank {rank} by RMA: {e}"),
                    );
                    None
                }
            };
        }
        if place.reads.get(rank as usize) != Some(&true) {
            shared.ring_broken(
                self.me,
                from,
                "a record parked in its process's memory, which this rank does not read from \
                 that rank (another host, or no single-copy probe); it was refused",
            );
            return None;
        }
        let pid = place.pids.get(rank as usize).copied().unwrap_or(0);
        match crate::wire::far::read(pid, addr, len) {
            Ok(b) => Some(b),
            Err(e) => {
                shared.ring_broken(
                    self.me,
                    from,
                    &format!("cannot read a {len}-byte record from its process (pid {pid}): {e}"),
                );
                None
            }
        }
    }

    /// Serves one slot from another rank: a batch, or a piece of a large record.
    fn serve_remote(
        &self,
        core: &WorkerCore,
        client: usize,
        bytes: &[Byte],
        partial: &RefCell<Option<Partial>>,
    ) {
        match classify(bytes) {
            Large::Batch => self.serve_batch(core, client, bytes, false),
            piece => {
                let done = {
                    let mut p = partial.borrow_mut();
                    Partial::feed(&mut p, piece, true)
                };
                match done {
                    Ok(None) => {}
                    Ok(Some(done)) => {
                        let Some(f) = self.foreign_entry(done.code) else {
                            return self.no_entry(core, client, Some(done.code));
                        };
                        let rec = done.into_request();
                        self.serving_foreign.set(true);
                        self.dispatch(core, client, f, &rec, &mut RequestReader::empty());
                    }
                    Err(e) => ring_broken(core, client, e),
                }
            }
        }
    }

    /// Completes one slot from another rank: a batch, or a piece of a large response.
    fn complete_remote(
        &self,
        core: &WorkerCore,
        trustee: usize,
        bytes: &[Byte],
        partial: &RefCell<Option<Partial>>,
    ) {
        match classify(bytes) {
            Large::Batch => self.complete_batch(core, trustee, bytes, false),
            piece => {
                let done = {
                    let mut p = partial.borrow_mut();
                    Partial::feed(&mut p, piece, false)
                };
                match done {
                    Ok(None) => {}
                    Ok(Some(done)) => {
                        let (req, st, body) = done.into_response();
                        if st == status::OK {
                            return self.result_by_its_bytes(core, trustee, req);
                        }
                        self.complete_from(core, trustee, req, st, &body);
                    }
                    Err(e) => ring_broken(core, trustee, e),
                }
            }
        }
    }

    /// The address of code offset `code` from another process, if it is exactly a delegation
    /// entry (`entry::foreign_entry`), through a one-entry cache of the last one found.
    #[inline]
    fn foreign_entry(&self, code: u64) -> Option<usize> {
        match self.last_entry.get() {
            Some((c, a)) if c == code => Some(a),
            _ => {
                let a = entry::foreign_entry(code)?;
                self.last_entry.set(Some((code, a)));
                Some(a)
            }
        }
    }

    /// A batch from another process names code that is no delegation entry of this program: a
    /// protocol error that ends the job (the records cannot be served, nor skipped unseen).
    #[cold]
    #[inline(never)]
    fn no_entry(&self, core: &WorkerCore, client: usize, code: Option<u64>) {
        let what = match code {
            Some(c) => {
                format!("code at offset {c:#x}, which is no delegation entry of this program")
            }
            None => "a function index past its batch's code table".to_string(),
        };
        ring_broken(
            core,
            client,
            &format!("a request batch naming {what}; it was refused"),
        );
    }

    /// A response from another process carries its result as the bytes of its type, which only
    /// a worker of this process may send (a pointer inside would be read as one here): refused.
    #[cold]
    #[inline(never)]
    fn result_by_its_bytes(&self, core: &WorkerCore, trustee: usize, req: u32) {
        ring_broken(
            core,
            trustee,
            &format!(
                "a response to request {req} whose result is the bytes of its type, not an \
                 encoding; it was refused"
            ),
        );
    }
}
