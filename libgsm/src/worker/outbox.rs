//! The outbox: one worker's outgoing batches, a request queue and a response queue per worker it
//! has staged for (its own two are the loopback queue), staging records into them, publishing
//! them to their rings and ringing what must be rung after. It decides neither when partly
//! filled batches go out (the worker's poll and the inline applies' looks do) nor how a fiber
//! waits for room; it encodes records with `wire::record` and never reads one.
//!
//! A destination's queues are made on its first use (`places.rs`): a worker of a large job keeps
//! queues for the peers it talks to, not for every worker of the job. The ring ends a fabric made
//! at start for another rank's worker wait in a sorted list until then.

use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::places::Places;
use super::{NO_REPLY, Shared, status};
use crate::error::{DelegationError, Error};
use crate::fabric::{Bell, Lane};
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

/// What this worker keeps for one destination.
struct Dest {
    requests: RefCell<OutQueue>,
    responses: RefCell<OutQueue>,
    /// A bell only this worker rings after publishing to it (a fabric's `Links::worker_bells`),
    /// before the rank's shared one (`Shared::bells`).
    bell: Option<Bell>,
}

/// Ring ends and a bell a fabric made at start for another rank's worker, kept until this worker
/// first stages for it.
#[derive(Default)]
struct Spare {
    requests: Option<Producer>,
    responses: Option<Producer>,
    bell: Option<Bell>,
}

/// One worker's outgoing batches, by global worker id.
pub(crate) struct Outbox {
    /// This worker's global id: its queues are the loopback queue.
    me: usize,
    /// This worker's index in its rank (its traffic counter in `Shared`).
    local: usize,
    /// The bytes of a batch.
    slot_cap: usize,
    /// The queues of every worker this one has staged for, made on first use.
    places: Places<Dest>,
    /// By global id, sorted: what the fabrics made for other ranks' workers and no queue has
    /// taken yet.
    spare: RefCell<Vec<(usize, Spare)>>,
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
    /// The queues of worker `me` (local index `local`), each `slot_cap` bytes a batch, over the
    /// producer ends the fabrics made to other ranks' workers (`(global id, lane, end)`) and the
    /// bells only this worker rings (`(global id, bell)`).
    pub(crate) fn new(
        (me, local): (usize, usize),
        shared: Arc<Shared>,
        out: Vec<(usize, Lane, Producer)>,
        bells: Vec<(usize, Bell)>,
        slot_cap: usize,
    ) -> Self {
        let place = &shared.place;
        let mut spare: std::collections::BTreeMap<usize, Spare> = Default::default();
        for (g, lane, p) in out {
            let s = spare.entry(g).or_default();
            match lane {
                Lane::Request => s.requests = Some(p),
                Lane::Response => s.responses = Some(p),
            }
        }
        for (g, b) in bells {
            spare.entry(g).or_default().bell = Some(b);
        }
        let outbox = Outbox {
            me,
            local,
            slot_cap,
            places: Places::new(place.base, place.local, place.total),
            spare: RefCell::new(spare.into_iter().collect()),
            active: RefCell::new(Vec::new()),
            sent: Cell::new(0),
            shared: shared.clone(),
        };
        outbox.dest(me);
        outbox
    }

    /// Whether global worker `w` is in another rank.
    #[inline(always)]
    pub(crate) fn is_remote(&self, w: usize) -> bool {
        !self.places.is_local(w)
    }

    /// The queues to `dest`, made (and listed among the workers this one stages for) on first
    /// use.
    #[inline(always)]
    fn dest(&self, dest: usize) -> &Dest {
        self.places.get_or(dest, || self.make_dest(dest))
    }

    #[cold]
    fn make_dest(&self, g: usize) -> Dest {
        let remote = self.is_remote(g);
        let s = if remote {
            self.take_spare(g)
        } else {
            Spare::default()
        };
        let sink = |p: Option<Producer>| match p {
            Some(p) => Sink::Ring(Box::new(p)),
            None if g == self.me => Sink::Loopback,
            // A worker of this rank: its ring is made on first publish (`lanes.rs`); another
            // rank's without a ring from its fabric is refused there too.
            None => Sink::Later,
        };
        let mut requests = OutQueue::new(self.slot_cap, sink(s.requests), remote);
        let mut responses = OutQueue::new(self.slot_cap, sink(s.responses), remote);
        if remote {
            let place = &self.shared.place;
            let rank = place.rank_of(g);
            if place.far.get(rank as usize) == Some(&true) {
                requests.allow_far(false);
                responses.allow_far(true);
            } else if let Some(rma) = place.rma.as_ref().filter(|r| r.reaches(rank)) {
                requests.allow_rma(false, rma.clone());
                responses.allow_rma(true, rma.clone());
            }
        }
        if g != self.me {
            self.active.borrow_mut().push(g);
        }
        Dest {
            requests: RefCell::new(requests),
            responses: RefCell::new(responses),
            bell: s.bell,
        }
    }

    /// Takes what the fabrics made for worker `g` of another rank (nothing if none did).
    fn take_spare(&self, g: usize) -> Spare {
        let mut spare = self.spare.borrow_mut();
        match spare.binary_search_by_key(&g, |e| e.0) {
            Ok(i) => std::mem::take(&mut spare[i].1),
            Err(_) => Spare::default(),
        }
    }

    /// Makes the ring of a queue to a worker of this rank when it is first to publish: the
    /// consuming end goes to that worker (`lanes.rs`). A queue to another rank's worker has its
    /// ring from the start; one without (a fabric that made none) ends the job.
    #[inline]
    fn ready(&self, q: &mut OutQueue, dest: usize, requests: bool) {
        if q.unmade() {
            if self.is_remote(dest) {
                self.no_ring(dest);
            } else {
                q.make_ring(self.shared.lanes.make(self.me, dest, requests));
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn no_ring(&self, dest: usize) {
        self.shared
            .ring_broken(self.me, dest, "no fabric made a ring to it at start");
    }

    /// After `n` slots were published to `dest` on a lane: a worker of this rank finds the ring
    /// by its summary bit, which is set after the slots (and before the bell).
    #[inline]
    fn mark(&self, dest: usize, requests: bool, n: usize) {
        if n > 0 && !self.is_remote(dest) {
            self.shared.lanes.mark(self.me, dest, requests);
        }
    }

    /// Counts `n` slots just published to `dest` and rings what must be rung after: this
    /// worker's own bell for it if a fabric gave one, else the rank's.
    #[inline]
    fn published(&self, d: &Dest, dest: usize, n: usize) {
        if n > 0 {
            if self.is_remote(dest) {
                self.sent.set(self.sent.get() + n as u64);
            }
            match &d.bell {
                Some(b) => b.ring(),
                None => self.shared.wake(dest),
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
        let d = self.dest(dest);
        let mut q = d.requests.borrow_mut();
        q.push_request(code, idx, gn, req, cap, arg, if ser { SER } else { 0 });
        if q.backlog() > 0 && dest != self.me {
            self.ready(&mut q, dest, true);
            let n = q.flush_sealed();
            self.mark(dest, true, n);
            self.published(d, dest, n);
            q.backlog()
        } else {
            0
        }
    }

    /// Request batches to `dest` waiting for room in its ring.
    #[inline]
    pub(crate) fn backlog(&self, dest: usize) -> usize {
        self.places
            .get(dest)
            .map_or(0, |d| d.requests.borrow().backlog())
    }

    /// Gives the queue to `dest` a large argument encoded in its own vector behind `room` bytes
    /// (`OutArg::offer`): the request staged next with that argument parks the vector itself.
    pub(crate) fn offer(&self, dest: usize, body: Vec<Byte>, room: usize) {
        self.dest(dest).requests.borrow_mut().offer(body, room);
    }

    /// Tells worker `sender` that the body it parked under `token` has been read.
    pub(crate) fn push_release(&self, sender: usize, token: u64) {
        self.dest(sender).requests.borrow_mut().push_release(token);
    }

    /// Frees the body this worker parked for `client` under `token`, which it has read (a
    /// worker it never staged for parked nothing: unknown tokens are ignored).
    pub(crate) fn release(&self, client: usize, token: u64) {
        if let Some(d) = self.places.get(client) {
            let q = if parked_by_responses(token) {
                &d.responses
            } else {
                &d.requests
            };
            q.borrow_mut().release(token);
        }
    }

    /// Stages a response record to `client`.
    #[inline(always)]
    pub(crate) fn respond_raw(&self, client: usize, req: u32, st: u8, body: Src<'_>) {
        self.dest(client)
            .responses
            .borrow_mut()
            .push_response(req, st, body);
    }

    /// Stages the results `done` of requests of `client` in this rank, moved (status OK).
    #[inline(always)]
    pub(crate) fn respond_values<U>(&self, client: usize, done: &[(u32, ManuallyDrop<U>)]) {
        self.dest(client)
            .responses
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
            Ok(u) if req != NO_REPLY && !self.is_remote(client) => {
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
                self.dest(client)
                    .responses
                    .borrow_mut()
                    .push_response_owned(req, status::OK | SER_STATUS, body);
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
        self.dest(self.me).dirty()
    }

    /// Whether anything is staged or queued for any worker, this one included.
    pub(crate) fn any_dirty(&self) -> bool {
        self.loopback_dirty()
            || self
                .active
                .borrow()
                .iter()
                .any(|&d| self.places.get(d).is_some_and(Dest::dirty))
    }

    /// Whether batches to some worker wait for room in its ring.
    pub(crate) fn has_backlog(&self) -> bool {
        self.active.borrow().iter().any(|&d| {
            self.places.get(d).is_some_and(|d| {
                d.requests.borrow().backlog() > 0 || d.responses.borrow().backlog() > 0
            })
        })
    }

    fn queue(&self, dest: usize, requests: bool) -> &RefCell<OutQueue> {
        self.dest(dest).queue(requests)
    }

    /// Publishes what is staged for worker `dest`: its responses (`requests` false) or requests.
    #[inline]
    pub(crate) fn flush_to(&self, dest: usize, requests: bool) {
        // Nothing was ever staged for a worker without queues.
        let Some(d) = self.places.get(dest) else {
            return;
        };
        let n = {
            let mut q = d.queue(requests).borrow_mut();
            if !q.is_dirty() {
                return;
            }
            self.ready(&mut q, dest, requests);
            q.flush()
        };
        self.mark(dest, requests, n);
        self.published(d, dest, n);
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
            let g = self.active.borrow()[i];
            let Some(d) = self.places.get(g) else {
                continue;
            };
            let mut n = 0;
            let mut broken = None;
            for (lane, q, go) in [(true, &d.requests, requests), (false, &d.responses, true)] {
                if !go {
                    continue;
                }
                let mut q = q.borrow_mut();
                if q.is_dirty() {
                    self.ready(&mut q, g, lane);
                    let k = q.flush();
                    self.mark(g, lane, k);
                    // Nothing went out while batches wait: back-pressure, or a broken ring.
                    if k == 0 && q.backlog() > 0 {
                        broken = broken.or_else(|| q.broken().map(|e| e.to_string()));
                    }
                    done.left |= q.is_dirty();
                    n += k;
                }
            }
            self.published(d, g, n);
            done.any |= n > 0;
            if let Some(e) = broken {
                self.shared.ring_broken(
                    self.me,
                    g,
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

impl Dest {
    fn queue(&self, requests: bool) -> &RefCell<OutQueue> {
        if requests {
            &self.requests
        } else {
            &self.responses
        }
    }

    fn dirty(&self) -> bool {
        self.requests.borrow().is_dirty() || self.responses.borrow().is_dirty()
    }
}

impl Outbox {
    /// Destinations with queues so far, and the bytes their places hold (not the queues' own
    /// buffers), for the tests of memory that follows use.
    #[cfg(test)]
    pub(crate) fn places_for_tests(&self) -> (usize, usize) {
        (self.places.made(), self.places.heap_bytes())
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
