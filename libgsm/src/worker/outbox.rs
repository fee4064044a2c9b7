//! The outbox: one worker's outgoing batches, a request queue and a response queue per worker of
//! the job (its own two are the loopback queue), staging records into them, publishing them to
//! their rings and ringing what must be rung after. It decides neither when partly filled
//! batches go out (the worker's poll and the inline applies' looks do) nor how a fiber waits for
//! room; it encodes records with `wire::record` and never reads one.

use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{NO_REPLY, Shared, status};
use crate::error::{DelegationError, Error};
use crate::fabric::Bell;
use crate::wire::record::{Byte, OutQueue, SER, SER_STATUS, Sink, Src, parked_by_responses};
use crate::wire::ring::Producer;

/// What a flush of every queue did ([`Outbox::flush_all`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flushed {
    /// Some slot was published.
    pub(crate) any: bool,
    /// Something staged is left for a later flush (its ring was full).
    pub(crate) left: bool,
}

/// One worker's outgoing batches, by global worker id.
pub(crate) struct Outbox {
    /// This worker's global id: its queues are the loopback queue.
    me: usize,
    /// This worker's index in its rank (its traffic counter in `Shared`).
    local: usize,
    requests: Vec<RefCell<OutQueue>>,
    responses: Vec<RefCell<OutQueue>>,
    /// By global id: whether that worker is in another rank (results go to it encoded).
    remote: Vec<bool>,
    /// By global worker: a bell only this worker rings after publishing to it (a fabric's
    /// `Links::worker_bells`), before the rank's shared one (`Shared::bells`). Empty: none.
    own_bells: Vec<Option<Bell>>,
    /// By global id: whether that worker's queues are in `active`.
    known: Vec<Cell<bool>>,
    /// The other workers this one has staged anything for, in the order first used: what a
    /// flush or a look at the queues visits, so that its cost follows the peers this worker
    /// talks to, not the size of the job.
    active: RefCell<Vec<usize>>,
    /// Slots published to other ranks (mirrored into `Shared` by [`publish_sent`]).
    ///
    /// [`publish_sent`]: Outbox::publish_sent
    sent: Cell<u64>,
    shared: Arc<Shared>,
}

impl Outbox {
    /// The queues of worker `me` (local index `local`) over the producer ends of its rings
    /// (`None`: the loopback queue, or no ring), each `slot_cap` bytes a batch.
    pub(crate) fn new(
        (me, local): (usize, usize),
        shared: Arc<Shared>,
        (req_out, resp_out): (Vec<Option<Producer>>, Vec<Option<Producer>>),
        own_bells: Vec<Option<Bell>>,
        slot_cap: usize,
    ) -> Self {
        let place = &shared.place;
        let remote: Vec<bool> = (0..place.total).map(|g| !place.is_local(g)).collect();
        let mk = |v: Vec<Option<Producer>>| -> Vec<RefCell<OutQueue>> {
            v.into_iter()
                .enumerate()
                .map(|(g, p)| {
                    let sink = match p {
                        Some(p) => Sink::Ring(Box::new(p)),
                        // A worker of this rank: its ring is made on first use (`lanes.rs`).
                        None if g != me && !remote[g] => Sink::Later,
                        None => Sink::Loopback,
                    };
                    RefCell::new(OutQueue::new(slot_cap, sink, remote[g]))
                })
                .collect()
        };
        let (requests, responses) = (mk(req_out), mk(resp_out));
        for g in (0..place.total).filter(|&g| remote[g]) {
            let rank = place.rank_of(g);
            if place.far.get(rank as usize) == Some(&true) {
                requests[g].borrow_mut().allow_far(false);
                responses[g].borrow_mut().allow_far(true);
            } else if let Some(rma) = place.rma.as_ref().filter(|r| r.reaches(rank)) {
                requests[g].borrow_mut().allow_rma(false, rma.clone());
                responses[g].borrow_mut().allow_rma(true, rma.clone());
            }
        }
        Outbox {
            me,
            local,
            requests,
            responses,
            known: (0..place.total).map(|g| Cell::new(g == me)).collect(),
            active: RefCell::new(Vec::new()),
            remote,
            own_bells,
            sent: Cell::new(0),
            shared,
        }
    }

    /// Whether global worker `w` is in another rank.
    #[inline(always)]
    pub(crate) fn is_remote(&self, w: usize) -> bool {
        self.remote[w]
    }

    /// Lists `dest` among the workers this one stages for, the first time.
    #[inline(always)]
    fn touch(&self, dest: usize) {
        if !self.known[dest].get() {
            self.first_touch(dest);
        }
    }

    #[cold]
    #[inline(never)]
    fn first_touch(&self, dest: usize) {
        self.known[dest].set(true);
        self.active.borrow_mut().push(dest);
    }

    /// Makes the ring of a queue to a worker of this rank when it is first to publish: the
    /// consuming end goes to that worker (`lanes.rs`).
    #[inline]
    fn ready(&self, q: &mut OutQueue, dest: usize, requests: bool) {
        if q.unmade() {
            q.make_ring(self.shared.lanes.make(self.me, dest, requests));
        }
    }

    /// After `n` slots were published to `dest` on a lane: a worker of this rank finds the ring
    /// by its summary bit, which is set after the slots (and before the bell).
    #[inline]
    fn mark(&self, dest: usize, requests: bool, n: usize) {
        if n > 0 && !self.remote[dest] {
            self.shared.lanes.mark(self.me, dest, requests);
        }
    }

    /// Counts `n` slots just published to `dest` and rings what must be rung after: this
    /// worker's own bell for it if a fabric gave one, else the rank's.
    #[inline]
    fn published(&self, dest: usize, n: usize) {
        if n > 0 {
            if self.remote[dest] {
                self.sent.set(self.sent.get() + n as u64);
            }
            match self.own_bells.get(dest) {
                Some(Some(b)) => b.ring(),
                _ => self.shared.wake(dest),
            }
        }
    }

    /// Stages a request record to `dest` (the loopback queue when `dest` is this worker), and
    /// publishes the batches it sealed if batches for `dest` already wait for room. Returns how
    /// many batches still wait for room (0 for the loopback queue). `ser`: the argument bytes
    /// are a `postcard` encoding (to another rank), not a moved value.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_request(
        &self,
        dest: usize,
        code: Option<u64>,
        idx: u32,
        gn: u32,
        req: u32,
        cap: Src<'_>,
        arg: Option<Src<'_>>,
        ser: bool,
    ) -> usize {
        self.touch(dest);
        let mut q = self.requests[dest].borrow_mut();
        q.push_request(code, idx, gn, req, cap, arg, if ser { SER } else { 0 });
        if q.backlog() > 0 && dest != self.me {
            self.ready(&mut q, dest, true);
            let n = q.flush_sealed();
            self.mark(dest, true, n);
            self.published(dest, n);
            q.backlog()
        } else {
            0
        }
    }

    /// Request batches to `dest` waiting for room in its ring.
    #[inline]
    pub(crate) fn backlog(&self, dest: usize) -> usize {
        self.requests[dest].borrow().backlog()
    }

    /// Gives the queue to `dest` a large argument encoded in its own vector behind `room` bytes
    /// (`OutArg::offer`): the request staged next with that argument parks the vector itself.
    pub(crate) fn offer(&self, dest: usize, body: Vec<Byte>, room: usize) {
        self.touch(dest);
        self.requests[dest].borrow_mut().offer(body, room);
    }

    /// Tells worker `sender` that the body it parked under `token` has been read.
    pub(crate) fn push_release(&self, sender: usize, token: u64) {
        self.touch(sender);
        self.requests[sender].borrow_mut().push_release(token);
    }

    /// Frees the body this worker parked for `client` under `token`, which it has read.
    pub(crate) fn release(&self, client: usize, token: u64) {
        let q = if parked_by_responses(token) {
            &self.responses[client]
        } else {
            &self.requests[client]
        };
        q.borrow_mut().release(token);
    }

    /// Stages a response record to `client`.
    #[inline(always)]
    pub(crate) fn respond_raw(&self, client: usize, req: u32, st: u8, body: Src<'_>) {
        self.touch(client);
        self.responses[client]
            .borrow_mut()
            .push_response(req, st, body);
    }

    /// Stages the results `done` of requests of `client` in this rank, moved (status OK).
    #[inline(always)]
    pub(crate) fn respond_values<U>(&self, client: usize, done: &[(u32, ManuallyDrop<U>)]) {
        self.touch(client);
        self.responses[client]
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
                let u = ManuallyDrop::new(u);
                self.respond_raw(client, req, status::OK, Src::of(&*u));
            }
            r => self.respond_otherwise(client, req, r),
        }
    }

    /// [`respond`](Self::respond) for a one-way request, a client in another rank (the result
    /// is encoded) or a failure. Out of line, so that a trampoline keeps only the common case:
    /// with these paths inlined it saved six registers and reserved stack on every request it
    /// served.
    #[cold]
    #[inline(never)]
    fn respond_otherwise<U: serde::Serialize + 'static>(
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
                self.touch(client);
                self.responses[client].borrow_mut().push_response_owned(
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

    /// The next batch of the loopback queue, requests (`requests`) or responses, sealing the
    /// one being filled; give it back with [`recycle_loopback`](Self::recycle_loopback).
    #[inline]
    pub(crate) fn take_loopback(&self, requests: bool) -> Option<Vec<Byte>> {
        let mut q = self.queue(self.me, requests).borrow_mut();
        q.seal();
        q.queued.pop_front()
    }

    /// Gives back a served batch of the loopback queue, for reuse.
    #[inline]
    pub(crate) fn recycle_loopback(&self, requests: bool, b: Vec<Byte>) {
        self.queue(self.me, requests).borrow_mut().recycle(b);
    }

    /// Whether the loopback queue holds requests or responses.
    pub(crate) fn loopback_dirty(&self) -> bool {
        self.requests[self.me].borrow().is_dirty() || self.responses[self.me].borrow().is_dirty()
    }

    /// Whether anything is staged or queued for any worker, this one included.
    pub(crate) fn any_dirty(&self) -> bool {
        self.loopback_dirty()
            || self.active.borrow().iter().any(|&d| {
                self.requests[d].borrow().is_dirty() || self.responses[d].borrow().is_dirty()
            })
    }

    /// Whether batches to some worker wait for room in its ring.
    pub(crate) fn has_backlog(&self) -> bool {
        self.active.borrow().iter().any(|&d| {
            self.requests[d].borrow().backlog() > 0 || self.responses[d].borrow().backlog() > 0
        })
    }

    fn queue(&self, dest: usize, requests: bool) -> &RefCell<OutQueue> {
        if requests {
            &self.requests[dest]
        } else {
            &self.responses[dest]
        }
    }

    /// Publishes what is staged for worker `dest`: its responses (`requests` false) or requests.
    #[inline]
    pub(crate) fn flush_to(&self, dest: usize, requests: bool) {
        let n = {
            let mut q = self.queue(dest, requests).borrow_mut();
            if !q.is_dirty() {
                return;
            }
            self.ready(&mut q, dest, requests);
            q.flush()
        };
        self.mark(dest, requests, n);
        self.published(dest, n);
    }

    /// Publishes the staged batches to every other worker (request batches only if
    /// `requests`). A ring that takes nothing while batches wait for it, and says it is
    /// broken, ends the job.
    pub(crate) fn flush_all(&self, requests: bool) -> Flushed {
        let mut done = Flushed {
            any: false,
            left: false,
        };
        // By index: the list only grows, and nothing here stages (so nothing lists a worker).
        let count = self.active.borrow().len();
        for i in 0..count {
            let d = self.active.borrow()[i];
            let mut n = 0;
            let mut broken = None;
            for (lane, q, go) in [
                (true, &self.requests[d], requests),
                (false, &self.responses[d], true),
            ] {
                if !go {
                    continue;
                }
                let mut q = q.borrow_mut();
                if q.is_dirty() {
                    self.ready(&mut q, d, lane);
                    let k = q.flush();
                    self.mark(d, lane, k);
                    // Nothing went out while batches wait: back-pressure, or a broken ring.
                    if k == 0 && q.backlog() > 0 {
                        broken = broken.or_else(|| q.broken().map(|e| e.to_string()));
                    }
                    done.left |= q.is_dirty();
                    n += k;
                }
            }
            self.published(d, n);
            done.any |= n > 0;
            if let Some(e) = broken {
                self.shared.ring_broken(
                    self.me,
                    d,
                    &format!("the ring to it takes no more slots: {e}"),
                );
            }
        }
        done
    }

    /// Mirrors this worker's count of slots sent to other ranks into `Shared` for the
    /// termination waves, only when it changed (a Release store: the wave reads it after this
    /// worker's SeqCst quiet report, which the store precedes).
    #[inline]
    pub(crate) fn publish_sent(&self) {
        let (s, ss) = (self.sent.get(), &self.shared.sent[self.local].0);
        if ss.load(Ordering::Relaxed) != s {
            ss.store(s, Ordering::Release);
        }
    }

    /// The queue of requests (`requests`) or responses to `dest`, for tests that corrupt or
    /// inspect it.
    #[cfg(test)]
    pub(crate) fn queue_for_tests(&self, dest: usize, requests: bool) -> &RefCell<OutQueue> {
        self.queue(dest, requests)
    }
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("me", &self.me)
            .field("sent", &self.sent.get())
            .finish_non_exhaustive()
    }
}

fn error_to_status(e: &DelegationError) -> (u8, String) {
    match e {
        DelegationError::Panicked(m) => (status::PANICKED, m.clone()),
        DelegationError::Poisoned => (status::POISONED, String::new()),
        DelegationError::DeadProperty => (status::DEAD, String::new()),
        DelegationError::BlockingInDelegatedContext => (status::BLOCKING, String::new()),
        DelegationError::Stopped => (status::STOPPED, String::new()),
        DelegationError::Wire(m) => (status::WIRE, m.clone()),
    }
}
