//! Incoming batches: serving a request batch record by record through its trampolines, and
//! completing a response batch against the pending table; large and far records. It does not
//! decode records (`wire::record` does) nor decide when a ring is looked at (`poll.rs` does). See
//! ARCHITECTURE.md.

use super::entry;
use super::*;

impl WorkerCore {
    /// Serves one request batch. `pointers`: the batch comes from this process, so its large
    /// records may carry heap pointers (never true for a ring from another rank).
    pub(super) fn serve_batch(&self, client: usize, bytes: &[Byte], pointers: bool) {
        // SAFETY: batches in our rings and loopback queue are written by an `OutQueue` of this
        // build (this process, or a peer rank running the same binary, which the bootstrap
        // checked), and each is served exactly once (the slot is released / the buffer recycled
        // right after). Pointer-carrying large records are accepted only from this process.
        let Some(reader) = (unsafe { RequestReader::new(bytes, pointers) }) else {
            self.ring_broken(client, "a request batch whose header is malformed");
            return;
        };
        // The batch's code table resolved once (a small table on the stack: most batches name
        // one or two functions). A record's function index reaches at most `MAX_TABLE` entries:
        // a longer table is no batch of this build (a peer's would cost a look-up per entry).
        let ntab = reader.table.len() / 8;
        if ntab > MAX_TABLE {
            self.ring_broken(
                client,
                &format!("a request batch whose code table has {ntab} entries, more than a batch can index"),
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
                    None => return self.no_entry(client, code),
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
            self.dispatch(client, f, rec, &mut reader);
        }
        self.served
            .set(self.served.get().wrapping_add(reader.taken));
        // Requests cannot be skipped unseen: their clients would wait for answers forever.
        if let Some(why) = reader.malformed() {
            self.ring_broken(client, why);
        }
    }

    /// Runs one request record whose trampoline is at address `f` (0: not in our text).
    ///
    /// Inlined into the serve loop with only the common case (a trampoline of this binary, the
    /// body in the batch): as a call of its own it cost a call and a frame per record served.
    #[inline(always)]
    pub(super) fn dispatch(
        &self,
        client: usize,
        f: usize,
        rec: &Request<'_>,
        more: &mut RequestReader<'_>,
    ) {
        // `RELEASE` and `CONTROL` are the two highest function indexes.
        const { assert!(RELEASE == u8::MAX - 1 && CONTROL == u8::MAX) };
        if f == 0 || rec.fidx >= RELEASE || matches!(rec.body, Body::Far { .. }) {
            self.dispatch_other(client, f, rec);
            return;
        }
        // SAFETY: `f` lies in this binary's text and was encoded by `send_request` from a
        // function pointer of type `Trampoline` (every code offset we encode is one; a peer rank
        // runs the same build, so its offsets name the same functions).
        let tramp: Trampoline = unsafe { std::mem::transmute::<usize, Trampoline>(f) };
        // SAFETY: the record was written for this trampoline by its monomorphic sender, and so
        // were the records of the same first header word that it may take from `more` (the
        // word includes the function index, which names the same code within one batch).
        unsafe { tramp(self, client, rec, more) };
    }

    /// [`dispatch`](Self::dispatch) for the other records: a body parked in the client's
    /// memory, a release or trust-id toggle, code outside this binary's text.
    #[cold]
    #[inline(never)]
    pub(super) fn dispatch_other(&self, client: usize, f: usize, rec: &Request<'_>) {
        if let Body::Far {
            addr,
            len,
            token,
            key,
        } = rec.body
        {
            self.dispatch_far(client, f, rec, (addr, len, key), token);
            return;
        }
        if rec.fidx == RELEASE {
            let token = control_id(rec.cap());
            let q = if parked_by_responses(token) {
                &self.out_resp[client]
            } else {
                &self.out_req[client]
            };
            q.borrow_mut().release(token);
            return;
        }
        if rec.fidx == CONTROL {
            let Some((id, word)) = control_words(rec.cap()) else {
                self.ring_broken(client, "a reference-counting record of the wrong length");
                return;
            };
            let what = if rec.req == CONTROL_RELEASE {
                Toggle::Release { made: word }
            } else {
                Toggle::Register { parent: word }
            };
            self.toggle(client, rec.idx, rec.gn, id, what);
            return;
        }
        self.respond_raw(
            client,
            rec.req,
            status::PANICKED,
            Src::slice(
                b"gossamer: the request names code outside this binary's text; it was refused",
            ),
        );
    }

    pub(super) fn complete_batch(&self, from: usize, bytes: &[Byte], pointers: bool) {
        // SAFETY: as in `serve_batch`, for response batches.
        let Some(mut reader) = (unsafe { ResponseReader::new(bytes, pointers) }) else {
            self.ring_broken(from, "a response batch whose header is malformed");
            return;
        };
        // A short batch (a blocking apply's answer, say) is completed as it is read: its few
        // slots gain nothing from a prefetch, and holding records back delays the answer a
        // fiber waits for.
        if bytes.len() < AHEAD * 32 {
            for (req, st, body) in reader.by_ref() {
                if !pointers && st == status::OK {
                    return self.result_by_its_bytes(from, req);
                }
                self.complete_one(from, req, st, body);
            }
            self.check_responses_read(from, &reader);
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
                return self.result_by_its_bytes(from, req);
            }
            self.pending.prefetch(req);
            if let Some((r, s, b)) = held[i % AHEAD].replace((req, st, body)) {
                self.complete_one(from, r, s, b);
            }
            i += 1;
        }
        for k in 0..AHEAD {
            if let Some((r, s, b)) = held[(i + k) % AHEAD].take() {
                self.complete_one(from, r, s, b);
            }
        }
        self.check_responses_read(from, &reader);
    }

    /// Responses cannot be skipped unseen either: their fibers would wait forever.
    #[inline]
    pub(super) fn check_responses_read(&self, from: usize, reader: &ResponseReader<'_>) {
        if let Some(why) = reader.malformed() {
            self.ring_broken(from, why);
        }
    }

    /// Completes pending request `req` (runs its completer as a callback). Returns `false`, and
    /// does nothing, if no request `req` is waiting for an answer from worker `from`.
    #[inline]
    #[must_use]
    pub(crate) fn complete(&self, from: usize, req: u32, st: u8, body: &[Byte]) -> bool {
        let Some((c, mut data)) = self.pending.take(from, req) else {
            return false;
        };
        // SAFETY: `c` and `data` were registered together by `Pending::add`, and the entry is
        // completed once (`take` took it out). `st`/`body` are the response to it.
        let r = self
            .context
            .caught(CALLBACK, || unsafe { c(self, &mut data, st, body) });
        if let Err(e) = r {
            std::panic::resume_unwind(e);
        }
        true
    }

    /// Completes request `req` with a response from worker `from`; a response that no request
    /// is waiting for (an unknown id, or one answered already) breaks the protocol: answers
    /// cannot be matched any more, so the job ends with a report rather than go on unsure.
    #[inline(always)]
    pub(super) fn complete_from(&self, from: usize, req: u32, st: u8, body: &[Byte]) {
        if !self.complete(from, req, st, body) {
            self.unexpected_response(from, req);
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn unexpected_response(&self, from: usize, req: u32) {
        self.ring_broken(
            from,
            &format!("a response to request {req}, which is not waiting for one from it"),
        );
    }

    /// Completes one response record (fetching a far body first).
    #[inline(always)]
    pub(super) fn complete_one(&self, from: usize, req: u32, st: u8, body: Body<'_>) {
        if let Body::Far {
            addr,
            len,
            token,
            key,
        } = body
        {
            // Only ever on a ring from another rank (`pointers` is false there and the
            // sender parks bodies only for ranks that can read it).
            if let Some(b) = self.fetch_far(from, addr, len, key) {
                self.send_release(from, token);
                self.complete_from(from, req, st, &b);
            }
            return;
        }
        self.complete_from(from, req, st, body.bytes());
        drop::<Body<'_>>(body);
    }

    /// Runs a request whose body is parked in the client's memory: reads it in one copy, runs
    /// it, and tells the client it may free the body.
    #[cold]
    pub(super) fn dispatch_far(
        &self,
        client: usize,
        f: usize,
        rec: &Request<'_>,
        (addr, len, key): (u64, u64, u64),
        token: u64,
    ) {
        let Some(body) = self.fetch_far(client, addr, len, key) else {
            return;
        };
        self.send_release(client, token);
        let local = Request {
            fidx: rec.fidx,
            flags: rec.flags,
            req: rec.req,
            idx: rec.idx,
            gn: rec.gn,
            cap_len: rec.cap_len,
            body: Body::Large(body),
        };
        self.dispatch(client, f, &local, &mut RequestReader::empty());
    }

    /// Tells worker `sender` that the body it parked under `token` has been read.
    pub(super) fn send_release(&self, sender: usize, token: u64) {
        self.out_req[sender].borrow_mut().push_release(token);
    }

    /// Reads `len` bytes at `addr` in the process of worker `from`'s rank (`process_vm_readv`
    /// on this host, else an RMA read with `key` over the one-sided fabric that reaches it).
    /// On failure the job fails with the reason (the record cannot be had any other way).
    pub(super) fn fetch_far(
        &self,
        from: usize,
        addr: u64,
        len: u64,
        key: u64,
    ) -> Option<Box<[Byte]>> {
        let place = &self.shared.place;
        let rank = place.rank_of(from);
        if let Some(rma) = place.rma.as_ref().filter(|r| r.reaches(rank)) {
            return match rma.read(rank, addr, key, len) {
                Ok(b) => Some(b),
                Err(e) => {
                    self.ring_broken(
                        from,
                        &format!("cannot read a {len}-byte record from rank {rank} by RMA: {e}"),
                    );
                    None
                }
            };
        }
        if place.reads.get(rank as usize) != Some(&true) {
            self.ring_broken(
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
                self.ring_broken(
                    from,
                    &format!("cannot read a {len}-byte record from its process (pid {pid}): {e}"),
                );
                None
            }
        }
    }

    /// Serves one slot from another rank: a batch, or a piece of a large record.
    pub(super) fn serve_remote(&self, client: usize, bytes: &[Byte]) {
        match classify(bytes) {
            Large::Batch => self.serve_batch(client, bytes, false),
            piece => {
                let done = {
                    let mut p = self.partial_req[client].borrow_mut();
                    Partial::feed(&mut p, piece, true)
                };
                match done {
                    Ok(None) => {}
                    Ok(Some(done)) => {
                        let Some(f) = self.foreign_entry(done.code) else {
                            return self.no_entry(client, Some(done.code));
                        };
                        let rec = done.into_request();
                        self.serving_foreign.set(true);
                        self.dispatch(client, f, &rec, &mut RequestReader::empty());
                    }
                    Err(e) => self.ring_broken(client, e),
                }
            }
        }
    }

    /// Completes one slot from another rank: a batch, or a piece of a large response.
    pub(super) fn complete_remote(&self, trustee: usize, bytes: &[Byte]) {
        match classify(bytes) {
            Large::Batch => self.complete_batch(trustee, bytes, false),
            piece => {
                let done = {
                    let mut p = self.partial_resp[trustee].borrow_mut();
                    Partial::feed(&mut p, piece, false)
                };
                match done {
                    Ok(None) => {}
                    Ok(Some(done)) => {
                        let (req, st, body) = done.into_response();
                        if st == status::OK {
                            return self.result_by_its_bytes(trustee, req);
                        }
                        self.complete_from(trustee, req, st, &body);
                    }
                    Err(e) => self.ring_broken(trustee, e),
                }
            }
        }
    }

    /// Toggles a trust id on a local property, on behalf of worker `from`, and drops the
    /// property if that left no trust. A toggle that names a dead property ends the job with a
    /// report ([`Error::TrustCount`]): the counts of that property's trusts no longer hold, so
    /// it could be freed while a trust still names it, or never.
    pub(crate) fn toggle(&self, from: usize, idx: u32, gn: u32, id: u64, what: Toggle) {
        let dead = match self.props.borrow_mut().toggle(idx, gn, id, what) {
            Ok(dead) => dead,
            Err(_) => {
                self.count_broken(from, idx, gn, id, what);
                return;
            }
        };
        if let Some(v) = dead {
            let r = self.context.caught(DELEGATED, move || drop(v));
            if let Err(e) = r {
                std::panic::resume_unwind(e);
            }
        }
    }

    /// The address of code offset `code` from another process, if it is exactly a delegation
    /// entry (`entry::foreign_entry`), through a one-entry cache of the last one found.
    #[inline]
    pub(super) fn foreign_entry(&self, code: u64) -> Option<usize> {
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
    pub(super) fn no_entry(&self, client: usize, code: Option<u64>) {
        let what = match code {
            Some(c) => {
                format!("code at offset {c:#x}, which is no delegation entry of this program")
            }
            None => "a function index past its batch's code table".to_string(),
        };
        self.ring_broken(
            client,
            &format!("a request batch naming {what}; it was refused"),
        );
    }

    /// A response from another process carries its result as the bytes of its type, which only
    /// a worker of this process may send (a pointer inside would be read as one here): refused.
    #[cold]
    #[inline(never)]
    pub(super) fn result_by_its_bytes(&self, trustee: usize, req: u32) {
        self.ring_broken(
            trustee,
            &format!(
                "a response to request {req} whose result is the bytes of its type, not an \
                 encoding; it was refused"
            ),
        );
    }
}
