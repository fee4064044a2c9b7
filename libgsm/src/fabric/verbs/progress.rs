//! The `verbs` fabric's progress thread (`gsm-verbs`) and its turn ([`State::turn`]): published
//! shadow slots become a payload WRITE and a header WRITE WITH IMMEDIATE on the peer's queue
//! pair, arrived immediates become published headers (in ring order), consumed slots become
//! credit writes. The thread sleeps on the completion channel and an eventfd the bells poke.
//!
//! It does not read records; it sees headers, lengths and the words `layout.rs` places. The
//! protocol is in the parent module's docs. See ARCHITECTURE.md.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

use super::layout::{Arrivals, CREDIT_BIT, Imm, Plan, header_offset, payload_offset, read_imm};
use super::layout::{slot_imm, tag};
use super::setup::{Created, Remote, host};
use crate::fabric::{Bell, FabricError, FabricKind, InLink, Links, OutLink};
use crate::sys::net::{self, Epoll, Events, ready};
use crate::sys::verbs::{Completion, Stack, Write};
use crate::wire::ring::{RingLayout, RingMemory};

/// What the fabric and its bells share with the thread.
#[derive(Debug)]
pub(super) struct Shared {
    /// The job is ending: failures from now on are expected.
    pub closing: AtomicBool,
    stop: AtomicBool,
    sleeping: AtomicBool,
    eventfd: OwnedFd,
}

impl Shared {
    /// Tells the thread to stop.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        net::eventfd_signal(self.eventfd.as_fd());
    }

    /// A bell: a slot was published; wakes the thread if it sleeps.
    fn ring(&self) {
        // Pairs with the fence in `run`: either the thread sees the header, or we see it asleep.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            net::eventfd_signal(self.eventfd.as_fd());
        }
    }
}

/// Kinds of work-request ids.
const DATA: u64 = 1 << 62;
const CREDIT: u64 = 2 << 62;
const KIND: u64 = 3 << 62;

/// A shadow ring this rank's worker publishes into, and its twin in a peer.
struct Out {
    ring: *mut u8,
    peer: usize,
    /// The peer's number for the twin (what the immediate names).
    twin: u32,
    /// Address of the twin ring, and of its staged headers, in the peer's region.
    remote: u64,
    remote_staged: u64,
    /// Next position to write; positions below `done` completed here.
    sent: u64,
    done: u64,
    /// The peer consumer's `released`, as last credited; what the shadow's `released` says.
    credit: u64,
    released: u64,
}

/// An incoming ring this rank's worker consumes.
struct In {
    ring: *mut u8,
    peer: usize,
    local: u32,
    twin: u32,
    /// Address of the peer's credit word for the twin.
    remote_credit: u64,
    /// This rank's word the credit is written from.
    src: *mut u64,
    /// Arrived writes and the next position to publish.
    arr: Arrivals,
    credited: u64,
    in_flight: Option<u64>,
}

/// The thread's state.
pub(super) struct State {
    stack: Stack,
    created: Created,
    layout: RingLayout,
    remotes: Vec<Remote>,
    outs: Vec<Out>,
    ins: Vec<In>,
    shared: Arc<Shared>,
    failed: bool,
    /// Send-queue entries in use, per peer.
    sq_used: Vec<u32>,
    done: Vec<Completion>,
}

// SAFETY: the raw pointers point into `created.region`, which the state keeps alive; the stack
// is used only by the thread the state moves to.
unsafe impl Send for State {}

fn word(p: *mut u8) -> &'static AtomicU64 {
    // SAFETY: every word passed is 8-aligned inside the region, which outlives the thread (the
    // state holds it); ring words are only accessed atomically by every party here, and the
    // adapter writes a word only before the completion that says so.
    unsafe { AtomicU64::from_ptr(p.cast()) }
}

/// Builds the ring ends, the bells and the thread's state.
pub(super) fn build(
    stack: Stack,
    c: Created,
    remotes: Vec<Remote>,
) -> Result<(Links, Arc<Shared>, State), FabricError> {
    let eventfd = net::eventfd().map_err(|e| os("creating an eventfd", &e))?;
    let shared = Arc::new(Shared {
        closing: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        sleeping: AtomicBool::new(false),
        eventfd,
    });
    let layout = c.plan.layout;
    let mut links = Links::default();
    let (mut outs, mut ins) = (Vec::new(), Vec::new());
    for (p, s) in c.plan.peers.iter().enumerate() {
        let r = &remotes[p];
        for i in 0..s.rings(c.plan.local) {
            let number = s.first + i;
            let keep: Arc<dyn std::any::Any + Send + Sync> = c.region.clone();
            let (l, pw, lane) = Plan::unindex(i, s.workers);
            let out = c.region.at(c.plan.ring_out(number));
            // SAFETY: the ring lies in the region (plan), zeroed, 128-aligned, kept alive by
            // `keep`; its only producer is made here and its only other writer is this
            // fabric's thread, which follows the protocol (releases only).
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
                remote: r.base + r.rings + u64::from(i) * c.plan.ring_bytes as u64,
                remote_staged: r.base + r.staged + u64::from(i * layout.slots) * 8,
                sent: 0,
                done: 0,
                credit: 0,
                released: 0,
            });
            let (pw, l, lane) = Plan::unindex(i, c.plan.local);
            let inr = c.region.at(c.plan.ring_in(number));
            // SAFETY: as above; its payloads are written only by the peer's adapter within the
            // credit this thread grants, its headers only by this thread.
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
                src: c.region.at(c.plan.credit_out(number)).cast(),
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
    tracing::info!(
        target: "gossamer::fabric",
        device = %stack.port.device,
        peers = c.plan.peers.len(),
        queue_pairs = c.plan.peers.len(),
        rings = c.plan.rings * 2,
        region_bytes = c.region.len(),
        "verbs fabric attached"
    );
    let peers = c.plan.peers.len();
    let state = State {
        stack,
        layout,
        remotes,
        outs,
        ins,
        created: c,
        shared: shared.clone(),
        failed: false,
        sq_used: vec![0; peers],
        done: Vec::with_capacity(32),
    };
    Ok((links, shared, state))
}

pub(super) fn os(what: &str, e: &std::io::Error) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Verbs,
        what: what.into(),
        detail: e.to_string(),
    }
}

/// Idle turns the thread spins before it sleeps.
const SPIN: u32 = 256;

/// The thread: turns while there is work, then arms the CQ and sleeps on its channel and the
/// bells' eventfd (20 ms at most; 1 ms while a consumer holds uncredited slots, since freeing a
/// slot rings nothing).
pub(super) fn run(mut st: State) {
    let Ok(ep) = Epoll::new() else {
        return st.fail_os("creating an epoll instance");
    };
    let shared = st.shared.clone();
    if ep.add(shared.eventfd.as_fd(), ready::IN, 0).is_err()
        || ep.add(st.stack.channel_fd(), ready::IN, 1).is_err()
    {
        return st.fail_os("watching the completion channel");
    }
    let mut events = Events::with_capacity(4);
    let mut idle = 0u32;
    while !shared.stop.load(Ordering::Acquire) {
        if st.turn() {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < SPIN {
            std::hint::spin_loop();
            continue;
        }
        // Arm, then look once more: a completion between the last poll and the arming would
        // otherwise not make the channel readable.
        if let Err(e) = st.stack.arm() {
            return st.fail_os(&e.to_string());
        }
        shared.sleeping.store(true, Ordering::Relaxed);
        // Pairs with `Shared::ring`: either we see the header, or the bell sees us asleep.
        fence(Ordering::SeqCst);
        if !st.turn() && !st.unsent() {
            let ms = if st.watching() { 1 } else { 20 };
            ep.wait(&mut events, ms);
        }
        shared.sleeping.store(false, Ordering::Relaxed);
        net::eventfd_drain(shared.eventfd.as_fd());
        while st.stack.take_event() {}
        idle = 0;
    }
}

impl State {
    /// One pass: completions, published slots, credits; whether it did anything.
    fn turn(&mut self) -> bool {
        let mut work = self.complete();
        work |= self.send_all();
        work |= self.credit_all();
        work
    }

    fn unsent(&self) -> bool {
        self.outs.iter().any(|o| self.published(o).is_some())
    }

    fn watching(&self) -> bool {
        self.ins.iter().any(|i| i.arr.next > i.credited)
    }

    /// The length of the next unsent slot of `o`, if published.
    fn published(&self, o: &Out) -> Option<u32> {
        let mask = u64::from(self.layout.slots) - 1;
        // SAFETY: the header offset lies inside the ring (slot < slots).
        let h = word(unsafe { o.ring.add(header_offset(self.layout, o.sent & mask)) })
            .load(Ordering::Acquire);
        ((h >> 32) as u32 == tag(o.sent, self.layout.slots)).then_some(h as u32)
    }

    fn complete(&mut self) -> bool {
        let mut done = std::mem::take(&mut self.done);
        let mut any = false;
        loop {
            match self.stack.poll(&mut done) {
                Ok(0) => break,
                Ok(_) => {
                    any = true;
                    for c in &done {
                        self.handle(*c);
                    }
                }
                Err(e) => {
                    self.fail_os(&e.to_string());
                    break;
                }
            }
        }
        self.done = done;
        any
    }

    fn handle(&mut self, c: Completion) {
        let peer = match c.wr_id & KIND {
            DATA => self
                .outs
                .get(((c.wr_id & !KIND) >> 24) as usize)
                .map(|o| o.peer),
            CREDIT => self.ins.get((c.wr_id & !KIND) as usize).map(|i| i.peer),
            _ => Some(c.wr_id as usize).filter(|&p| p < self.remotes.len()),
        };
        let Some(p) = peer else {
            return self.protocol(None, format!("a completion with unknown id {:#x}", c.wr_id));
        };
        if let Some(status) = c.failed {
            // After the first error the queue pair flushes every outstanding request.
            let what = if c.flushed { "flushed" } else { status };
            return self.lost(p, format!("RDMA write failed: {what}"));
        }
        match (c.wr_id & KIND, c.imm) {
            (DATA, _) => {
                self.sq_used[p] = self.sq_used[p].saturating_sub(2);
                let o = &mut self.outs[((c.wr_id & !KIND) >> 24) as usize];
                // One queue pair completes its requests in order, so slots complete in order.
                o.done += 1;
                Self::update_release(o);
            }
            (CREDIT, _) => {
                self.sq_used[p] = self.sq_used[p].saturating_sub(1);
                let i = &mut self.ins[(c.wr_id & !KIND) as usize];
                if let Some(v) = i.in_flight.take() {
                    i.credited = v;
                }
            }
            (_, Some(imm)) => {
                if let Err(e) = self.stack.post_recvs(p, 1, p as u64) {
                    return self.lost(p, e.to_string());
                }
                match read_imm(imm, self.layout.slots) {
                    Imm::Slot(number, slot) => self.slot_arrived(p, number, slot),
                    Imm::Credit(number) => self.credit_arrived(p, number),
                }
            }
            _ => self.protocol(Some(p), "a receive completed without an immediate".into()),
        }
    }

    fn update_release(o: &mut Out) {
        let r = o.credit.min(o.done);
        if r > o.released {
            o.released = r;
            word(o.ring).store(r, Ordering::Release);
        }
    }

    /// Peer `p` wrote slot `slot` of ring `number` and then its header into the staged word;
    /// RC placed the payload before the immediate completed here.
    fn slot_arrived(&mut self, p: usize, number: u32, slot: u32) {
        if self.created.plan.owner(number).map(|o| o.0) != Some(p) {
            let detail = format!("a write names ring {number}, which is not one of its rings");
            return self.protocol(Some(p), detail);
        }
        let staged = self
            .created
            .region
            .at(self.created.plan.staged(number, slot));
        let h = word(staged).load(Ordering::Acquire);
        let i = &mut self.ins[number as usize];
        let released = word(i.ring).load(Ordering::Acquire);
        if let Err(e) = i.arr.arrive(slot, h, released, self.layout.slot_size) {
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
            (self.created.hooks.wake)(i.local);
        }
    }

    fn credit_arrived(&mut self, p: usize, number: u32) {
        if self.created.plan.owner(number).map(|o| o.0) != Some(p) {
            let detail = format!("a credit names ring {number}, which is not one of its rings");
            return self.protocol(Some(p), detail);
        }
        let v = word(self.created.region.at(self.created.plan.credit_in(number)))
            .load(Ordering::Acquire);
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

    /// Whether peer `p`'s send queue has room for `n` more requests.
    fn room(&self, p: usize, n: u32) -> bool {
        self.sq_used[p] + n <= self.created.depths[p].send
    }

    /// Writes every published, unsent slot: the payload, then its header with the immediate,
    /// on one queue pair (one chain, so in that order); `true` if any was written.
    fn send_all(&mut self) -> bool {
        let mut any = false;
        let mask = u64::from(self.layout.slots) - 1;
        for n in 0..self.outs.len() {
            while let Some(len) = self.published(&self.outs[n]) {
                let o = &self.outs[n];
                let p = o.peer;
                if !self.room(p, 2) {
                    break;
                }
                let slot = o.sent & mask;
                let rkey = self.remotes[p].rkey;
                let pay = payload_offset(self.layout, slot);
                let head = header_offset(self.layout, slot);
                let chain = [
                    Write {
                        local: o.ring.wrapping_add(pay),
                        len,
                        remote: o.remote + pay as u64,
                        rkey,
                        imm: None,
                        signaled: false,
                        wr_id: 0,
                    },
                    Write {
                        local: o.ring.wrapping_add(head),
                        len: 8,
                        remote: o.remote_staged + slot * 8,
                        rkey,
                        imm: Some(slot_imm(o.twin, self.layout.slots, slot as u32)),
                        signaled: true,
                        wr_id: DATA | (n as u64) << 24 | slot,
                    },
                ];
                // SAFETY: both ranges lie in the registered shadow ring, and the producer does
                // not reuse the slot before `released` passes it, which waits for this chain's
                // completion (`done`).
                if let Err(e) = unsafe { self.stack.write(p, &chain) } {
                    self.lost(p, e.to_string());
                    return any;
                }
                self.sq_used[p] += 2;
                self.outs[n].sent += 1;
                any = true;
            }
        }
        any
    }

    /// Returns credit where a consumer freed half a ring or caught up; `true` if any was sent.
    fn credit_all(&mut self) -> bool {
        let mut any = false;
        let half = u64::from(self.layout.slots / 2);
        for n in 0..self.ins.len() {
            let i = &self.ins[n];
            if i.arr.next == i.credited || i.in_flight.is_some() || !self.room(i.peer, 1) {
                continue;
            }
            let r = word(i.ring).load(Ordering::Acquire);
            if r <= i.credited || (r - i.credited < half && r != i.arr.next) {
                continue;
            }
            let p = i.peer;
            let w = Write {
                local: i.src.cast(),
                len: 8,
                remote: i.remote_credit,
                rkey: self.remotes[p].rkey,
                imm: Some(CREDIT_BIT | i.twin),
                signaled: true,
                wr_id: CREDIT | n as u64,
            };
            // SAFETY: the source word is in the registered region and not written again until
            // this write completes (`in_flight`).
            let res = unsafe {
                i.src.write_volatile(r);
                self.stack.write(p, &[w])
            };
            if let Err(e) = res {
                self.lost(p, e.to_string());
                return any;
            }
            self.sq_used[p] += 1;
            self.ins[n].in_flight = Some(r);
            any = true;
        }
        any
    }

    fn fail_os(&mut self, what: &str) {
        if self.failed || self.shared.closing.load(Ordering::Acquire) {
            return;
        }
        self.failed = true;
        (self.created.hooks.fail)(FabricError::Os {
            fabric: FabricKind::Verbs,
            what: "progress thread".into(),
            detail: what.into(),
        });
    }

    fn lost(&mut self, p: usize, detail: String) {
        if self.failed || self.shared.closing.load(Ordering::Acquire) {
            return;
        }
        self.failed = true;
        let rank = self.created.plan.peers[p].rank;
        (self.created.hooks.fail)(FabricError::PeerLost {
            peer: rank,
            host: host(&self.created.topo, rank),
            detail: format!("verbs queue pair on {}: {detail}", self.stack.port.device),
        });
    }

    fn protocol(&mut self, p: Option<usize>, detail: String) {
        if self.failed || self.shared.closing.load(Ordering::Acquire) {
            return;
        }
        self.failed = true;
        let rank = p.map_or(u32::MAX, |p| self.created.plan.peers[p].rank);
        (self.created.hooks.fail)(FabricError::Protocol {
            fabric: FabricKind::Verbs,
            peer: rank,
            host: host(&self.created.topo, rank),
            detail,
        });
    }
}
