//! Staging requests and responses for other workers, and the bounds on what waits unanswered.
//! Only a batch that filled its slot leaves from here; when partly filled batches are published
//! is the poller's choice (`poll.rs`). See ARCHITECTURE.md.

use super::*;

impl WorkerCore {
    /// Counts `n` slots just published to `dest` and wakes it.
    #[inline]
    pub(super) fn published(&self, dest: usize, n: usize) {
        if n > 0 {
            if self.remote[dest] {
                self.sent.set(self.sent.get() + n as u64);
            }
            self.ring_for(dest);
        }
    }

    /// Stages a request record to `dest` (the loopback queue when `dest` is this worker).
    /// `ser`: the argument bytes are a `postcard` encoding (to another rank), not a moved value.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_request(
        &self,
        dest: usize,
        code: Option<u64>,
        idx: u32,
        gn: u32,
        req: u32,
        cap: Src<'_>,
        arg: Option<Src<'_>>,
        ser: bool,
    ) {
        if dest == self.id {
            self.loopback_pending();
        } else {
            // Staged for another worker: the looks of inline applies publish it in time.
            self.door.close_gate();
        }
        let backlog = {
            let mut q = self.out_req[dest].borrow_mut();
            q.push_request(code, idx, gn, req, cap, arg, if ser { SER } else { 0 });
            if q.backlog() > 0 && dest != self.id {
                let n = q.flush_sealed();
                self.published(dest, n);
                q.backlog()
            } else {
                0
            }
        };
        if backlog > self.backlog_limit && self.can_block() {
            self.wait_for_room(|| self.out_req[dest].borrow().backlog() <= self.backlog_limit);
        }
    }

    /// Gives the queue to `dest` a large argument encoded in its own vector behind `room` bytes
    /// (`OutArg::offer`): the request staged next with that argument parks the vector itself.
    pub(crate) fn offer_body(
        &self,
        dest: usize,
        body: Vec<crate::wire::record::Byte>,
        room: usize,
    ) {
        self.out_req[dest].borrow_mut().offer(body, room);
    }

    /// Counts an `apply_then` request about to be staged; past [`MAX_THEN_IN_FLIGHT`] unanswered
    /// ones, a fiber that may block waits until fewer are.
    #[inline]
    pub(crate) fn then_issued(&self) {
        if self.pending.then_issued() && self.can_block() {
            self.wait_for_room(|| self.pending.then_room());
        }
    }

    /// Back-pressure for a fiber that issues faster than its requests are taken or answered:
    /// polls (which publishes what is staged, serves, and completes answers) and yields until
    /// `room` holds or the runtime stops. When nothing moves it gives the thread away: on an
    /// oversubscribed machine the trustee may need this core.
    #[cold]
    #[inline(never)]
    pub(super) fn wait_for_room(&self, room: impl Fn() -> bool) {
        while !room() && !self.stopping() {
            if !self.guarded(true, || self.poll()) {
                std::thread::yield_now();
            }
            self.yield_fiber();
        }
    }

    /// Stages a response record to `client`.
    #[inline(always)]
    pub(crate) fn respond_raw(&self, client: usize, req: u32, st: u8, body: Src<'_>) {
        self.out_resp[client]
            .borrow_mut()
            .push_response(req, st, body);
    }

    /// Stages the results `done` of requests of `client` in this rank, moved (status OK).
    #[inline(always)]
    pub(crate) fn respond_values<U>(&self, client: usize, done: &[(u32, ManuallyDrop<U>)]) {
        self.out_resp[client]
            .borrow_mut()
            .push_value_responses(status::OK, done);
    }

    /// Stages the response carrying `r` to `client`: the bytes of `U` moved (same rank), or its
    /// `postcard` encoding (another rank).
    #[inline(always)]
    pub(crate) fn respond<U: serde::Serialize + 'static>(
        &self,
        client: usize,
        req: u32,
        r: Result<U, DelegationError>,
    ) {
        match r {
            Ok(u) if req != NO_REPLY && !self.remote[client] => {
                // Ownership moves to the record: the original is never dropped.
                let u = std::mem::ManuallyDrop::new(u);
                self.respond_raw(client, req, status::OK, Src::of(&*u));
            }
            r => self.respond_otherwise(client, req, r),
        }
    }

    /// [`respond`](Self::respond) for a one-way request, a client in another rank (the result
    /// is encoded) or a failure. Out of line, so that a trampoline keeps only the common case:
    /// with these paths inlined it saved six registers and reserved 136 bytes of stack on every
    /// request it served.
    #[cold]
    #[inline(never)]
    pub(super) fn respond_otherwise<U: serde::Serialize + 'static>(
        &self,
        client: usize,
        req: u32,
        r: Result<U, DelegationError>,
    ) {
        if req == NO_REPLY {
            if let Err(e) = r {
                self.shared.fail(Error::Delegation(e));
            }
            return;
        }
        let r = match r.map(|u| crate::wire::codec::encode_spliced(u, 0)) {
            Ok(Ok(body)) => {
                // A large byte vector: encoded in its own allocation, parked as it is.
                self.out_resp[client].borrow_mut().push_response_owned(
                    req,
                    status::OK | SER_STATUS,
                    body,
                );
                return;
            }
            Ok(Err(u)) => Ok(u),
            Err(e) => Err(e),
        };
        match r {
            Ok(u) => match crate::wire::codec::encode(&u) {
                Ok(bytes) => {
                    drop(u);
                    self.respond_raw(client, req, status::OK | SER_STATUS, Src::slice(&bytes));
                }
                Err(e) => {
                    // The closure ran to its end: a wire failure, not a panic (the property is
                    // not poisoned). postcard's error drops the type's own message; name it.
                    let msg = format!(
                        "gossamer: the result (a `{}`) could not be serialised for another rank: {e}",
                        std::any::type_name::<U>()
                    );
                    self.respond_raw(client, req, status::WIRE, Src::slice(msg.as_bytes()));
                }
            },
            Err(e) => {
                let (st, msg) = error_to_status(&e);
                self.respond_raw(client, req, st, Src::slice(msg.as_bytes()));
            }
        }
    }
}
