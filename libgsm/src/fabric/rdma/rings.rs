//! The ring protocol's state on one rank and its turn ([`Rings::turn`]): published shadow slots
//! become writes, arrived writes become published headers (in ring order), consumed slots
//! become credit writes. It also makes the ring ends and bells the runtime gets. The protocol
//! is in the parent module's docs; who turns is `drive.rs`'s.
//!
//! It does not read records; it sees headers, lengths and the words `plan.rs` places.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

use super::plan::{Arrivals, Imm, Plan, credit_imm, header_offset, read_imm, slot_imm, tag};
use super::region::Region;
use super::{Event, Transport};
use crate::fabric::{Bell, FabricError, Hooks, InLink, Links, OutLink, Topology};
use crate::sys::net;
use crate::wire::ring::{RingLayout, RingMemory};

/// What the fabric, its bells and whoever turns share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The job is ending: failures from now on are expected.
    pub closing: AtomicBool,
    pub(crate) stop: AtomicBool,
    pub(crate) sleeping: AtomicBool,
    pub(crate) eventfd: OwnedFd,
    /// Credit writes posted so far (the tests check they are coalesced).
    pub(crate) credits: AtomicU64,
}

impl Shared {
    /// Tells the thread to stop.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        net::eventfd_signal(self.eventfd.as_fd());
    }

    /// A bell: a slot was published; wakes the thread if it sleeps.
    pub(crate) fn ring(&self) {
        // Pairs with the fence in the thread's sleep: either it sees the header, or we see it
        // asleep.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            net::eventfd_signal(self.eventfd.as_fd());
        }
    }
}

/// A peer as its card describes it (plan order): where this rank writes.
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    /// RMA address of its region (0 where the transport takes offsets).
    pub base: u64,
    /// Offset there of this rank's section of incoming rings.
    pub rings: u64,
    /// Offset there of this rank's section of credit words.
    pub credits: u64,
    /// Number there of that section's first ring.
    pub first: u32,
}

/// The bit of a token that marks a credit write (else `slot_imm` of the ring and slot).
const CREDIT_TOKEN: u64 = 1 << 31;

/// A shadow ring this rank's worker publishes into, and its twin in a peer.
struct Out {
    ring: *mut u8,
    peer: usize,
    /// The peer's number for its twin (what the immediate names).
    twin: u32,
    /// RMA address of the twin ring.
    remote: u64,
    /// Next position to write.
    sent: u64,
    /// Positions below this are complete here.
    done: u64,
    /// Completed out of order (index = slot).
    finished: Vec<bool>,
    /// The peer consumer's `released`, as last credited.
    credit: u64,
    /// What the shadow ring's `released` says.
    released: u64,
}

/// An incoming ring this rank's worker consumes.
struct In {
    ring: *mut u8,
    peer: usize,
    local: u32,
    /// The peer's number for its shadow twin (what the credit's immediate names).
    twin: u32,
    /// RMA address of the peer's credit word for the twin.
    remote_credit: u64,
    /// This rank's word the credit is written from.
    src: *mut u64,
    /// Arrived writes and the next position to publish.
    arr: Arrivals,
    /// Credit the peer has.
    credited: u64,
    /// Credit in flight.
    in_flight: Option<u64>,
}

/// What one [`Rings::turn`] did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Turned {
    /// Anything at all (a completion, a write posted, a credit returned).
    pub work: bool,
    /// Published a slot into one of this rank's incoming rings.
    pub delivered: bool,
}

/// The protocol's state: the transport, the plan, the region and every ring's bookkeeping.
pub(crate) struct Rings<T: Transport> {
    /// Dropped first: the transport's registration ends before the region may be freed.
    transport: T,
    plan: Plan,
    region: Arc<Region>,
    hooks: Hooks,
    topo: Topology,
    layout: RingLayout,
    outs: Vec<Out>,
    ins: Vec<In>,
    shared: Arc<Shared>,
    failed: bool,
    /// Slot writes to post again: (shadow ring, slot).
    retries: Vec<(usize, u64)>,
    /// Failed operations per peer so far.
    attempts: Vec<u32>,
    /// Scratch for completions.
    events: Vec<Event>,
    /// The current turn published a slot into an incoming ring.
    delivered: bool,
}

// SAFETY: the raw pointers point into `region`, which the state keeps alive; the transport is
// used by whoever holds the state (one thread at a time, under `drive.rs`'s lock).
unsafe impl<T: Transport> Send for Rings<T> {}

fn word(p: *mut u8) -> &'static AtomicU64 {
    // SAFETY: every word passed is 8-aligned inside the region, which outlives the state; ring
    // words are only accessed atomically by every party here, and the transport writes a word
    // only before the completion that says so.
    unsafe { AtomicU64::from_ptr(p.cast()) }
}

/// What [`build`] needs besides the transport.
pub(crate) struct Parts {
    pub plan: Plan,
    pub region: Arc<Region>,
    pub hooks: Hooks,
    pub topo: Topology,
    /// Each peer, in plan order.
    pub remotes: Vec<Remote>,
}

/// Builds the ring ends, the bells and the protocol's state.
pub(crate) fn build<T: Transport>(
    transport: T,
    parts: Parts,
) -> Result<(Links, Arc<Shared>, Rings<T>), FabricError> {
    let Parts {
        plan,
        region,
        hooks,
        topo,
        remotes,
    } = parts;
    let eventfd = net::eventfd().map_err(|e| os::<T>("creating an eventfd", &e))?;
    let shared = Arc::new(Shared {
        closing: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        sleeping: AtomicBool::new(false),
        eventfd,
        credits: AtomicU64::new(0),
    });
    let layout = plan.layout;
    let mut links = Links::default();
    let (mut outs, mut ins) = (Vec::new(), Vec::new());
    for (p, s) in plan.peers.iter().enumerate() {
        let r = &remotes[p];
        for i in 0..s.rings(plan.local) {
            let number = s.first + i;
            let keep: Arc<dyn std::any::Any + Send + Sync> = region.clone();
            // Outgoing ring i: this rank's worker `l` to the peer's worker `pw`.
            let (l, pw, lane) = Plan::unindex(i, s.workers);
            let out = region.at(plan.ring_out(number));
            // SAFETY: the ring lies in the region (plan), zeroed, 128-aligned, kept alive by
            // `keep`; its only producer is made here and its only other writer is the turn,
            // which follows the protocol (releases, and the header of a slot it is sending).
            let mem = Arc::new(unsafe { RingMemory::in_mapping(out, layout, keep.clone()) });
            links.outgoing.push(OutLink {
                local: l,
                remote: s.first_worker + pw,
                lane,
                producer: mem.producer().expect("a fresh ring"),
            });
            outs.push(Out {
                ring: out,
                peer: p,
                twin: r.first + i,
                remote: r.base + r.rings + u64::from(i) * plan.ring_bytes as u64,
                sent: 0,
                done: 0,
                finished: vec![false; layout.slots as usize],
                credit: 0,
                released: 0,
            });
            // Incoming ring i: the peer's worker `pw` to this rank's worker `l`.
            let (pw, l, lane) = Plan::unindex(i, plan.local);
            let inr = region.at(plan.ring_in(number));
            // SAFETY: as above; its only consumer is made here, its slots are written only by
            // the peer's transport within the credit this rank grants, its headers published
            // only by the turn.
            let mem = Arc::new(unsafe { RingMemory::in_mapping(inr, layout, keep) });
            links.incoming.push(InLink {
                local: l,
                remote: s.first_worker + pw,
                lane,
                consumer: mem.consumer().expect("a fresh ring"),
            });
            ins.push(In {
                ring: inr,
                peer: p,
                local: l,
                twin: r.first + i,
                remote_credit: r.base + r.credits + u64::from(i) * 8,
                src: region.at(plan.credit_out(number)).cast(),
                arr: Arrivals::new(layout.slots),
                credited: 0,
                in_flight: None,
            });
        }
        for pw in 0..s.workers {
            let sh = shared.clone();
            links
                .bells
                .push((s.first_worker + pw, Bell::Call(Arc::new(move || sh.ring()))));
        }
    }
    let peers = plan.peers.len();
    let rings = Rings {
        transport,
        layout,
        outs,
        ins,
        plan,
        region,
        hooks,
        topo,
        shared: shared.clone(),
        failed: false,
        retries: Vec::new(),
        attempts: vec![0; peers],
        events: Vec::with_capacity(64),
        delivered: false,
    };
    Ok((links, shared, rings))
}

/// An operating-system failure of fabric `T`, worded for the user.
pub(crate) fn os<T: Transport>(what: &str, e: &std::io::Error) -> FabricError {
    FabricError::Os {
        fabric: T::KIND,
        what: what.into(),
        detail: e.to_string(),
    }
}

impl<T: Transport> Rings<T> {
    /// One pass: published slots, the adapter's own work, completions (which also drive a
    /// provider's progress), credits. What it did, for the caller's backoff.
    pub(crate) fn turn(&mut self) -> Turned {
        self.delivered = false;
        // Writes first: a provider may only push a posted write out in its progress, which
        // reading the completions drives.
        let mut work = self.send_all();
        match self.transport.turn() {
            Ok(w) => work |= w,
            Err((p, why)) => {
                self.lost(p, why);
                work = true;
            }
        }
        work |= self.complete();
        work |= self.credit_all();
        Turned {
            work,
            delivered: self.delivered,
        }
    }

    /// The transport (for the adapter's own operations between turns).
    pub(crate) fn transport(&mut self) -> &mut T {
        &mut self.transport
    }

    /// The transport, to read.
    pub(crate) fn transport_ref(&self) -> &T {
        &self.transport
    }

    /// Whether the job failed here or the fabric is stopping (what the adapter's operations
    /// then fail with).
    #[cfg_attr(
        not(feature = "ofi"),
        allow(dead_code, reason = "for ofi's rendezvous")
    )]
    pub(crate) fn ending(&self) -> bool {
        self.failed || self.shared.stop.load(Ordering::Acquire)
    }

    /// The rank of each peer, in peer order.
    #[cfg_attr(
        not(feature = "ofi"),
        allow(dead_code, reason = "for ofi's rendezvous")
    )]
    pub(crate) fn peer_ranks(&self) -> Vec<u32> {
        self.plan.peers.iter().map(|s| s.rank).collect()
    }

    /// Whether a published slot waits to be written (checked before sleeping).
    pub(crate) fn unsent(&self) -> bool {
        !self.retries.is_empty() || self.outs.iter().any(|o| self.published(o).is_some())
    }

    /// Whether a consumer holds enough uncredited slots that releasing them makes a credit due
    /// (its release word needs watching: freeing a slot rings nothing).
    pub(crate) fn watching(&self) -> bool {
        let half = u64::from(self.layout.slots / 2).max(1);
        self.ins.iter().any(|i| i.arr.next - i.credited >= half)
    }

    /// The length of the next unsent slot of `o`, if published.
    fn published(&self, o: &Out) -> Option<u32> {
        let mask = u64::from(self.layout.slots) - 1;
        // SAFETY: the header offset lies inside the ring (slot < slots).
        let h = word(unsafe { o.ring.add(header_offset(self.layout, o.sent & mask)) })
            .load(Ordering::Acquire);
        ((h >> 32) as u32 == tag(o.sent, self.layout.slots)).then_some(h as u32)
    }

    /// Reads and handles completions; `true` if there were any. It stops after a read that did
    /// not fill a batch instead of reading again until one finds nothing: each read of an empty
    /// queue is a pass of a provider's progress, on every hop's path. What arrives meanwhile is
    /// the next turn's.
    fn complete(&mut self) -> bool {
        let mut events = std::mem::take(&mut self.events);
        let mut any = false;
        loop {
            events.clear();
            let more = self.transport.poll(&mut events);
            any |= !events.is_empty();
            for e in events.drain(..) {
                self.handle(e);
            }
            if !more {
                break;
            }
        }
        self.events = events;
        any
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::Done(token) if token & CREDIT_TOKEN != 0 => {
                let n = (token & !CREDIT_TOKEN) as usize;
                if let Some(i) = self.ins.get_mut(n) {
                    if let Some(v) = i.in_flight.take() {
                        i.credited = v;
                    }
                }
            }
            Event::Done(token) => {
                let slots = u64::from(self.layout.slots);
                let (n, slot) = ((token / slots) as usize, (token % slots) as usize);
                let Some(o) = self.outs.get_mut(n) else {
                    return self.protocol(None, format!("a completion of unknown write {token}"));
                };
                o.finished[slot] = true;
                let mask = slots - 1;
                while o.done < o.sent && o.finished[(o.done & mask) as usize] {
                    o.finished[(o.done & mask) as usize] = false;
                    o.done += 1;
                }
                Self::update_release(o);
            }
            Event::Failed(token, detail) => self.failed_write(token, detail),
            Event::Arrived { imm, peer } => match read_imm(imm, self.layout.slots) {
                Imm::Slot(number, slot) => self.slot_arrived(peer, number, slot),
                Imm::Credit(number) => self.credit_arrived(peer, number),
            },
            Event::Trouble(p, detail) => {
                self.attempt(p, detail);
            }
            Event::Other => {}
            Event::Unknown(detail) => self.protocol(None, detail),
        }
    }

    fn update_release(o: &mut Out) {
        let r = o.credit.min(o.done);
        if r > o.released {
            o.released = r;
            word(o.ring).store(r, Ordering::Release);
        }
    }

    /// The peer that owns ring `number`, if it exists and `peer` (when the transport knows who
    /// wrote) is that one; else the protocol error is reported.
    fn owner(&mut self, peer: Option<usize>, number: u32, what: &str) -> Option<usize> {
        match self.plan.owner(number) {
            Some((p, _)) if peer.is_none_or(|q| q == p) => Some(p),
            _ => {
                let detail = format!("a {what} names ring {number}, which is not one of its rings");
                self.protocol(peer, detail);
                None
            }
        }
    }

    /// A peer's write of slot `slot` of ring `number` landed: its header word holds the length.
    fn slot_arrived(&mut self, peer: Option<usize>, number: u32, slot: u32) {
        let Some(p) = self.owner(peer, number, "write") else {
            return;
        };
        let i = &mut self.ins[number as usize];
        // SAFETY: the header of a slot of this ring (slot < slots, as `read_imm` divides).
        let head = word(unsafe { i.ring.add(header_offset(self.layout, u64::from(slot))) });
        let landed = head.load(Ordering::Acquire);
        let released = word(i.ring).load(Ordering::Acquire);
        if let Err(e) = i.arr.arrive(slot, landed, released, self.layout.slot_size) {
            return self.protocol(Some(p), format!("ring {number}: {e}"));
        }
        let mut published = false;
        while let Some((s, header)) = i.arr.pop() {
            // SAFETY: the header of a slot of this ring (s < slots).
            word(unsafe { i.ring.add(header_offset(self.layout, s)) })
                .store(header, Ordering::Release);
            published = true;
        }
        if published {
            self.delivered = true;
            (self.hooks.wake)(i.local);
        }
    }

    fn credit_arrived(&mut self, peer: Option<usize>, number: u32) {
        let Some(p) = self.owner(peer, number, "credit") else {
            return;
        };
        let v = word(self.region.at(self.plan.credit_in(number))).load(Ordering::Acquire);
        let o = &mut self.outs[number as usize];
        if v < o.credit || v > o.sent {
            let detail = format!(
                "credit {v} for ring {number}, which had {} and was sent {}",
                o.credit, o.sent
            );
            return self.protocol(Some(p), detail);
        }
        o.credit = v;
        Self::update_release(o);
    }

    /// Posts slot `slot` of shadow ring `n` (`len` bytes, its header word rewritten already):
    /// the header word and the payload, into its twin.
    fn write_slot(&mut self, n: usize, slot: u64, len: u32) -> Result<bool, String> {
        let o = &self.outs[n];
        let off = header_offset(self.layout, slot);
        let slots = self.layout.slots;
        let imm = slot_imm(o.twin, slots, slot as u32);
        let token = u64::from(slot_imm(n as u32, slots, slot as u32));
        // SAFETY: the header word and payload lie in the registered shadow ring, and the
        // producer does not reuse the slot before `released` passes it, which waits for this
        // write's completion (`done`).
        unsafe {
            let src = o.ring.add(off);
            let dst = o.remote + off as u64;
            self.transport
                .write(o.peer, src, 8 + len as usize, dst, imm, token)
        }
    }

    /// Writes every published, unsent slot, and first the writes to post again; `true` if any
    /// was written.
    fn send_all(&mut self) -> bool {
        let mut any = false;
        while let Some(&(n, slot)) = self.retries.first() {
            // SAFETY: the header of a slot of this shadow ring; the turn rewrote it before the
            // first post and it keeps that value until the slot is released.
            let h = word(unsafe { self.outs[n].ring.add(header_offset(self.layout, slot)) })
                .load(Ordering::Acquire);
            let (peer, res) = (self.outs[n].peer, self.write_slot(n, slot, h as u32));
            if !self.went_out(peer, res) {
                return any;
            }
            self.retries.remove(0);
            any = true;
        }
        let mask = u64::from(self.layout.slots) - 1;
        for n in 0..self.outs.len() {
            while let Some(len) = self.published(&self.outs[n]) {
                let o = &self.outs[n];
                let slot = o.sent & mask;
                // SAFETY: the header of a slot of this shadow ring.
                let head = word(unsafe { o.ring.add(header_offset(self.layout, slot)) });
                let tag = tag(o.sent, self.layout.slots);
                let as_sent = (u64::from(tag.wrapping_sub(1)) << 32) | u64::from(len);
                head.store(as_sent, Ordering::Release);
                let (peer, res) = (o.peer, self.write_slot(n, slot, len));
                if !self.went_out(peer, res) {
                    // Not posted: the slot is published again, for the next turn.
                    head.store((u64::from(tag) << 32) | u64::from(len), Ordering::Release);
                    return any;
                }
                self.outs[n].sent += 1;
                any = true;
            }
        }
        any
    }

    /// Whether a posted write went out. If not, the pass stops: the queue is full (the next
    /// pass tries again) or the peer is reported lost.
    fn went_out(&mut self, peer: usize, res: Result<bool, String>) -> bool {
        match res {
            Ok(posted) => posted,
            Err(e) => {
                self.lost(peer, e);
                false
            }
        }
    }

    /// Returns credit where a consumer freed half a ring; `true` if any was sent.
    ///
    /// Only then, not when the consumer catches up: a producer with half a ring uncredited still
    /// has half a ring to publish into, so it never waits on a credit not yet due, and a round
    /// trip of one request at a time costs no credit write at all (one per half ring), instead
    /// of one more write, remote completion and local completion per hop.
    fn credit_all(&mut self) -> bool {
        let mut any = false;
        let half = u64::from(self.layout.slots / 2).max(1);
        for n in 0..self.ins.len() {
            let i = &self.ins[n];
            if i.arr.next - i.credited < half || i.in_flight.is_some() {
                continue;
            }
            let r = word(i.ring).load(Ordering::Acquire);
            if r <= i.credited || r - i.credited < half {
                continue;
            }
            let (peer, src, dst, imm) = (i.peer, i.src, i.remote_credit, credit_imm(i.twin));
            // SAFETY: the source word is in the registered region and not written again until
            // this write completes (`in_flight`).
            let res = unsafe {
                src.write_volatile(r);
                self.transport
                    .write(peer, src.cast(), 8, dst, imm, CREDIT_TOKEN | n as u64)
            };
            if !self.went_out(peer, res) {
                return any;
            }
            self.ins[n].in_flight = Some(r);
            self.shared.credits.fetch_add(1, Ordering::Relaxed);
            any = true;
        }
        any
    }

    /// A failed write: posted again up to `T::RETRIES` times, then the peer is reported lost.
    fn failed_write(&mut self, token: u64, detail: String) {
        let slots = u64::from(self.layout.slots);
        let credit = token & CREDIT_TOKEN != 0;
        let peer = if credit {
            self.ins
                .get((token & !CREDIT_TOKEN) as usize)
                .map(|i| i.peer)
        } else {
            self.outs.get((token / slots) as usize).map(|o| o.peer)
        };
        let Some(p) = peer else {
            return self.protocol(None, format!("a failed write {token}: {detail}"));
        };
        if !self.attempt(p, detail) {
            return;
        }
        if credit {
            self.ins[(token & !CREDIT_TOKEN) as usize].in_flight = None;
        } else {
            self.retries.push(((token / slots) as usize, token % slots));
        }
    }

    /// Counts a failed operation towards peer `p`; `false` once the peer is reported lost.
    fn attempt(&mut self, p: usize, detail: String) -> bool {
        self.attempts[p] += 1;
        if self.attempts[p] > T::RETRIES {
            self.lost(p, detail);
            return false;
        }
        tracing::debug!(
            target: "gossamer::fabric",
            fabric = %T::KIND,
            peer = self.plan.peers[p].rank,
            detail = %detail,
            "RMA write failed; trying again"
        );
        true
    }

    fn host(&self, rank: u32) -> String {
        self.topo
            .hosts
            .get(rank as usize)
            .cloned()
            .unwrap_or_default()
    }

    fn lost(&mut self, p: usize, detail: String) {
        self.transport.lost(p, &detail);
        if self.failed || self.shared.closing.load(Ordering::Acquire) {
            return;
        }
        self.failed = true;
        let rank = self.plan.peers[p].rank;
        (self.hooks.fail)(FabricError::PeerLost {
            peer: rank,
            host: self.host(rank),
            detail: format!("{} failed: {detail}", self.transport.describe()),
        });
    }

    fn protocol(&mut self, p: Option<usize>, detail: String) {
        if self.failed || self.shared.closing.load(Ordering::Acquire) {
            return;
        }
        self.failed = true;
        let rank = p.map_or(u32::MAX, |p| self.plan.peers[p].rank);
        (self.hooks.fail)(FabricError::Protocol {
            fabric: T::KIND,
            peer: rank,
            host: self.host(rank),
            detail,
        });
    }
}
