//! The `ofi` fabric's turn ([`State::turn`]): it turns published shadow slots into RMA writes,
//! arrived writes into published headers (in ring order), and returns credits. Who turns, and
//! when the progress thread (`gsm-ofi`) sleeps on the completion queue's wait descriptor and an
//! eventfd the bells poke, is `drive.rs`'s.
//!
//! It does not read records; it sees headers, lengths and the words `layout.rs` places. The
//! protocol is in the parent module's docs. See ARCHITECTURE.md.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

use super::layout::{CREDIT_BIT, Plan, header_offset, payload_offset, read_slot_data, slot_data};
use super::rendezvous::{Ended, READ_CTX, Reads};
use super::setup::{self, Created, Remote};
use crate::fabric::rma::{Done, NotPosted, Posted, Word};
use crate::fabric::{Bell, FabricError, FabricKind, InLink, Links, OutLink};
use crate::sys::net;
use crate::sys::ofi::{self as fi, Completion, CqFailure, Stack, WordAtomic, bits};
use crate::wire::ring::{RingLayout, RingMemory};

/// What the fabric and its bells share with the progress thread.
#[derive(Debug)]
pub(super) struct Shared {
    /// The provider (for the fabric's queries once the thread has the stack).
    pub provider: String,
    /// The job is ending: failures from now on are expected.
    pub closing: AtomicBool,
    pub(super) stop: AtomicBool,
    pub(super) sleeping: AtomicBool,
    pub(super) eventfd: OwnedFd,
    /// Credit writes posted so far (the tests check they are coalesced).
    pub(super) credits: AtomicU64,
}

impl Shared {
    /// Tells the thread to stop.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        net::eventfd_signal(self.eventfd.as_fd());
    }

    /// A bell: a slot was published; wakes the thread if it sleeps.
    pub(super) fn ring(&self) {
        // Pairs with the fence in `sleep`: either the thread sees the header, or we see it asleep.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            net::eventfd_signal(self.eventfd.as_fd());
        }
    }
}

/// Context kinds of the operations the thread posts: the top three bits (`RMA_CTX` below,
/// `READ_CTX` in `rendezvous.rs`; the hello's contexts of `setup.rs` leave bits 62-63 clear).
const DATA_CTX: usize = 2 << 61;
const CREDIT_CTX: usize = 4 << 61;
const KIND_MASK: usize = 7 << 61;

/// A shadow ring this rank's worker publishes into, and its twin in a peer.
struct Out {
    ring: *mut u8,
    peer: usize,
    /// The peer's number for its twin (what the slot data names).
    twin: u32,
    /// RMA address of the twin ring.
    remote: u64,
    /// Next position to write.
    sent: u64,
    /// Positions below this are complete locally.
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
    /// The peer's number for its shadow twin (what the credit data names).
    twin: u32,
    /// RMA address of the peer's credit word for the twin.
    remote_credit: u64,
    /// This rank's word the credit is written from.
    src: *mut u64,
    /// Next position whose header to publish.
    next: u64,
    /// Arrived writes not yet published (index = slot; length + 1, or 0).
    arrived: Vec<u32>,
    /// Credit the peer has.
    credited: u64,
    /// Credit in flight.
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
    /// Slot writes to issue again: (shadow ring, slot).
    retries: Vec<(usize, u64)>,
    /// Failed operations per peer so far.
    attempts: Vec<u32>,
    /// Scratch for completions.
    done: Vec<Completion>,
    /// The current turn published a slot into an incoming ring.
    delivered: bool,
    /// Segment RMA operations in flight (`rma.rs`).
    pub(super) rma: RmaTable,
    /// The rendezvous's reads and registrations (`rendezvous.rs`).
    reads: Reads,
    /// Bodies parked for peers to read and not yet unparked.
    parked: usize,
}

/// What one [`State::turn`] did.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Turned {
    /// Anything at all (a completion, a write posted, a credit returned).
    pub work: bool,
    /// Published a slot into one of this rank's incoming rings.
    pub delivered: bool,
}

// SAFETY: the raw pointers point into `created.region`, which the state keeps alive; the stack is used
// only by this thread once moved here.
unsafe impl Send for State {}

fn word(p: *mut u8) -> &'static AtomicU64 {
    // SAFETY: every word passed is 8-aligned inside the region, which outlives the thread (the
    // state holds it); ring words are only accessed atomically by every party.
    unsafe { AtomicU64::from_ptr(p.cast()) }
}

/// Builds the ring ends, the bells and the turn's state; `drive.rs` then makes the hooks and
/// starts the thread (for the returned number of local workers).
pub(super) fn build(
    stack: Stack,
    c: Created,
    remotes: Vec<Remote>,
) -> Result<(Links, Arc<Shared>, State, u32), FabricError> {
    let eventfd = net::eventfd().map_err(|e| os("creating an eventfd", &e))?;
    let shared = Arc::new(Shared {
        provider: stack.offer.provider.clone(),
        closing: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        sleeping: AtomicBool::new(false),
        eventfd,
        credits: AtomicU64::new(0),
    });
    let layout = c.plan.layout;
    let mut links = Links::default();
    let (mut outs, mut ins) = (Vec::new(), Vec::new());
    for (p, s) in c.plan.peers.iter().enumerate() {
        let r = &remotes[p];
        for i in 0..c.plan.local * s.workers * 2 {
            let number = s.first + i;
            let keep: Arc<dyn std::any::Any + Send + Sync> = c.region.clone();
            // Outgoing ring i: this rank's worker `l` to the peer's worker `pw`.
            let (l, pw, lane) = Plan::unindex(i, s.workers);
            let out = c.region.at(c.plan.ring_out(number));
            // SAFETY: the ring lies in the region (plan), zeroed, 128-aligned, kept alive by
            // `keep`; its only producer is made here and its only other writer is this
            // fabric's thread, which follows the protocol (releases only).
            let mem = Arc::new(unsafe { RingMemory::in_mapping(out, layout, keep.clone()) });
            let producer = mem.producer().expect("a fresh ring");
            links.outgoing.push(OutLink {
                local: l,
                remote: s.first_worker + pw,
                lane,
                producer,
            });
            outs.push(Out {
                ring: out,
                peer: p,
                twin: r.first + i,
                remote: r.base + r.rings + u64::from(i) * c.plan.ring_bytes as u64,
                sent: 0,
                done: 0,
                finished: vec![false; layout.slots as usize],
                credit: 0,
                released: 0,
            });
            // Incoming ring i: the peer's worker `pw` to this rank's worker `l`.
            let (pw, l, lane) = Plan::unindex(i, c.plan.local);
            let inr = c.region.at(c.plan.ring_in(number));
            // SAFETY: as above; its only consumer is made here, and its payloads are written
            // only by the peer's RMA within the credit this thread grants, its headers only by
            // this thread.
            let mem = Arc::new(unsafe { RingMemory::in_mapping(inr, layout, keep) });
            let consumer = mem.consumer().expect("a fresh ring");
            links.incoming.push(InLink {
                local: l,
                remote: s.first_worker + pw,
                lane,
                consumer,
            });
            ins.push(In {
                ring: inr,
                peer: p,
                local: l,
                twin: r.first + i,
                remote_credit: r.base + r.credits + u64::from(i) * 8,
                src: c.region.at(c.plan.credit_out(number)).cast(),
                next: 0,
                arrived: vec![0; layout.slots as usize],
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
        provider = %stack.offer.provider,
        peers = c.plan.peers.len(),
        rings = c.plan.rings * 2,
        region_bytes = c.region.len(),
        waits_on_cq = stack.can_wait(),
        "ofi fabric attached"
    );
    let peers = c.plan.peers.len();
    let local = c.plan.local;
    let state = State {
        stack,
        layout,
        remotes,
        outs,
        ins,
        created: c,
        shared: shared.clone(),
        failed: false,
        retries: Vec::new(),
        attempts: vec![0; peers],
        done: Vec::with_capacity(64),
        delivered: false,
        rma: RmaTable::default(),
        reads: Reads::default(),
        parked: 0,
    };
    Ok((links, shared, state, local))
}

pub(super) fn os(what: &str, e: &std::io::Error) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Ofi,
        what: what.into(),
        detail: e.to_string(),
    }
}

/// The context kind of segment operations (`fabric/ofi/rma.rs` posts them).
pub(super) const RMA_CTX: usize = 6 << 61;

/// Segment operations in flight, by the index their context carries.
#[derive(Default)]
pub(super) struct RmaTable {
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
}

struct InFlight {
    buf: Vec<u8>,
    words: Box<[u64; 3]>,
    read: bool,
    done: Arc<Done>,
}

impl RmaTable {
    /// Posts `op` to `dest`'s memory at `addr` (key `key`).
    pub(super) fn post(
        &mut self,
        stack: &mut Stack,
        dest: u64,
        addr: u64,
        key: u64,
        op: Posted,
    ) -> Result<Arc<Done>, NotPosted> {
        let n = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let ctx = RMA_CTX | n;
        let done = Arc::new(Done::default());
        let mut f = InFlight {
            buf: Vec::new(),
            words: Box::new([0; 3]),
            read: false,
            done: done.clone(),
        };
        // SAFETY: the buffers are heap memory owned by `f`, which the table keeps (moving `f`
        // does not move them) until `finish` reads this context's completion.
        let r = unsafe {
            match op {
                Posted::Read { len } => {
                    f.buf = vec![0; len];
                    f.read = true;
                    stack.read(
                        f.buf.as_mut_ptr(),
                        len,
                        std::ptr::null_mut(),
                        dest,
                        addr,
                        key,
                        ctx,
                    )
                }
                Posted::Write { data } => {
                    f.buf = data;
                    stack.write_unregistered(f.buf.as_ptr(), f.buf.len(), dest, addr, key, ctx)
                }
                Posted::Word { kind, words } => {
                    *f.words = words;
                    let kind = match kind {
                        Word::Add => WordAtomic::Add,
                        Word::Cas => WordAtomic::Cas,
                        Word::Swap => WordAtomic::Swap,
                    };
                    let w: *mut [u64; 3] = &mut *f.words;
                    stack.word_atomic(kind, w, dest, addr, key, ctx)
                }
            }
        };
        match r {
            Ok(()) => {
                self.slots[n] = Some(f);
                Ok(done)
            }
            Err(e) => {
                self.free.push(n);
                Err(if e.code == fi::EAGAIN {
                    NotPosted::Busy
                } else {
                    NotPosted::Failed(e.to_string())
                })
            }
        }
    }

    /// Operation `n` completed (or failed with the provider's words).
    pub(super) fn finish(&mut self, n: usize, r: Result<(), String>) {
        let Some(f) = self.slots.get_mut(n).and_then(Option::take) else {
            return;
        };
        self.free.push(n);
        let bytes = if f.read { f.buf } else { Vec::new() };
        f.done.finish(r.map(|()| (bytes, f.words[2])));
    }
}

/// Failed operations towards one peer before it is reported lost.
const ATTEMPTS: u32 = 8;

impl State {
    /// One pass: completions (which also drive the provider's progress), published slots,
    /// credits. What it did, for the caller's backoff.
    pub(super) fn turn(&mut self) -> Turned {
        let mut done = std::mem::take(&mut self.done);
        self.delivered = false;
        // Writes first: the provider may only push a posted write out in its progress, which
        // reading the completions drives.
        let mut work = self.send_all();
        work |= self.post_reads();
        work |= self.complete(&mut done);
        self.done = done;
        work |= self.credit_all();
        Turned {
            work,
            delivered: self.delivered,
        }
    }

    /// The endpoint and the segment operations in flight, for `rma.rs`'s posts.
    pub(super) fn rma_parts(&mut self) -> (&mut Stack, &mut RmaTable) {
        (&mut self.stack, &mut self.rma)
    }

    /// (rank, address) of every peer, and whether the provider wants local buffers registered.
    pub(super) fn peer_addresses(&self) -> (Vec<(usize, u64)>, bool) {
        let v = self
            .created
            .plan
            .peers
            .iter()
            .zip(&self.remotes)
            .map(|(p, r)| (p.rank as usize, r.addr))
            .collect();
        (v, self.stack.offer.mr_mode & bits::MR_LOCAL != 0)
    }

    /// Whether a published slot waits to be written (checked before sleeping).
    pub(super) fn unsent(&self) -> bool {
        self.outs.iter().any(|o| self.published(o).is_some())
    }

    /// Whether a consumer holds enough uncredited slots that releasing them makes a credit due
    /// (its release word needs watching: freeing a slot rings nothing).
    pub(super) fn watching(&self) -> bool {
        let half = u64::from(self.layout.slots / 2);
        self.ins.iter().any(|i| i.next - i.credited >= half.max(1))
    }

    /// The completion queue's wait descriptor, if the provider has one.
    pub(super) fn cq_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.stack.cq_fd()
    }

    /// Whether the completion queue has a wait descriptor at all.
    pub(super) fn can_wait(&self) -> bool {
        self.stack.can_wait()
    }

    /// `fi_trywait`: may the caller sleep on the CQ's descriptor (always, without one).
    pub(super) fn may_sleep(&mut self) -> bool {
        !self.stack.can_wait() || self.stack.trywait()
    }

    /// The length of the next unsent slot of `o`, if published.
    fn published(&self, o: &Out) -> Option<u32> {
        let mask = u64::from(self.layout.slots) - 1;
        let shift = self.layout.slots.trailing_zeros();
        // SAFETY: the header offset lies inside the ring (slot < slots).
        let h = word(unsafe { o.ring.add(header_offset(self.layout, o.sent & mask)) })
            .load(Ordering::Acquire);
        let tag = ((o.sent >> shift) as u32).wrapping_add(1);
        ((h >> 32) as u32 == tag).then_some(h as u32)
    }

    /// Reads and handles completions; `true` if there were any.
    ///
    /// It stops after a read that did not fill the buffer instead of reading again until one
    /// finds nothing: each read of an empty queue is a pass of the provider's progress (under
    /// `tcp;ofi_rxm` a poll of its sockets and its wait object's wake-up), and that extra pass
    /// was on every hop's path (measured: docs/performance-log.md). What arrives meanwhile is the
    /// next turn's.
    fn complete(&mut self, done: &mut Vec<Completion>) -> bool {
        let mut any = false;
        loop {
            done.clear();
            match self.stack.poll(done) {
                Ok(0) => return any,
                Ok(n) => {
                    any = true;
                    for e in done.iter() {
                        self.handle(*e);
                    }
                    if n < fi::CQ_BATCH {
                        return any;
                    }
                }
                Err(f) => {
                    any = true;
                    self.failed_op(&f);
                }
            }
        }
    }

    fn handle(&mut self, e: Completion) {
        if e.flags & bits::REMOTE_CQ_DATA != 0 && e.flags & bits::REMOTE_WRITE != 0 {
            if e.data & CREDIT_BIT != 0 {
                self.credit_arrived((e.data & !CREDIT_BIT) as u32);
            } else {
                self.slot_arrived(e.data);
            }
            return;
        }
        let n = e.context & !KIND_MASK;
        match e.context & KIND_MASK {
            DATA_CTX => {
                let (number, slot) = (n >> 24, n & 0xFF_FFFF);
                let o = &mut self.outs[number];
                o.finished[slot] = true;
                let mask = self.layout.slots as u64 - 1;
                while o.done < o.sent && o.finished[(o.done & mask) as usize] {
                    o.finished[(o.done & mask) as usize] = false;
                    o.done += 1;
                }
                Self::update_release(o, self.layout);
            }
            CREDIT_CTX => {
                let i = &mut self.ins[n];
                if let Some(v) = i.in_flight.take() {
                    i.credited = v;
                }
            }
            RMA_CTX => self.rma.finish(n, Ok(())),
            READ_CTX => self.reads.completed(e.context),
            _ => self.repeated_hello(e),
        }
    }

    /// A peer sent its hello again (it has not heard this rank's): answer it.
    fn repeated_hello(&mut self, e: Completion) {
        let Some(buf) = setup::hello_buffer(e.context) else {
            return; // a hello send completing
        };
        let r = setup::repost(&mut self.stack, &self.created, buf)
            .and_then(|()| setup::resend(&mut self.stack, &self.created, buf));
        if let Err(err) = r {
            self.protocol(Some(buf), err.to_string());
        }
    }

    fn update_release(o: &mut Out, layout: RingLayout) {
        let r = o.credit.min(o.done);
        if r > o.released {
            o.released = r;
            let _ = layout;
            word(o.ring).store(r, Ordering::Release);
        }
    }

    fn slot_arrived(&mut self, data: u64) {
        let slots = self.layout.slots;
        let (number, slot, len) = read_slot_data(data, slots);
        let Some((p, _)) = self.created.plan.owner(number) else {
            return self.protocol(
                None,
                format!("a write names ring {number}, which does not exist"),
            );
        };
        if len > self.layout.slot_size {
            return self.protocol(
                Some(p),
                format!(
                    "a write of {len} bytes into a slot of {}",
                    self.layout.slot_size
                ),
            );
        }
        let i = &mut self.ins[number as usize];
        if i.arrived[slot as usize] != 0 {
            return self.protocol(
                Some(p),
                format!("two writes into slot {slot} of ring {number}"),
            );
        }
        i.arrived[slot as usize] = len + 1;
        let mask = u64::from(slots) - 1;
        let shift = slots.trailing_zeros();
        let released = word(i.ring).load(Ordering::Acquire);
        let mut published = false;
        while i.arrived[(i.next & mask) as usize] != 0 {
            if i.next >= released + u64::from(slots) {
                let detail = format!(
                    "wrote ring {number} at position {} before its release",
                    i.next
                );
                return self.protocol(Some(p), detail);
            }
            let s = (i.next & mask) as usize;
            let len = i.arrived[s] - 1;
            i.arrived[s] = 0;
            let tag = ((i.next >> shift) as u32).wrapping_add(1);
            // SAFETY: the header of a slot of this ring (slot < slots).
            word(unsafe { i.ring.add(header_offset(self.layout, s as u64)) })
                .store((u64::from(tag) << 32) | u64::from(len), Ordering::Release);
            i.next += 1;
            published = true;
        }
        if published {
            self.delivered = true;
            (self.created.hooks.wake)(i.local);
        }
    }

    fn credit_arrived(&mut self, number: u32) {
        let Some((p, _)) = self.created.plan.owner(number) else {
            return self.protocol(
                None,
                format!("a credit names ring {number}, which does not exist"),
            );
        };
        // SAFETY: the credit word of an existing ring, in the region; the peer's write of it
        // completed (this completion says so).
        let v = word(self.plan_credit_in(number)).load(Ordering::Acquire);
        let o = &mut self.outs[number as usize];
        if v < o.credit || v > o.sent {
            let detail = format!(
                "credit {v} for ring {number}, which had {} and was sent {}",
                o.credit, o.sent
            );
            return self.protocol(Some(p), detail);
        }
        o.credit = v;
        Self::update_release(o, self.layout);
    }

    fn plan_credit_in(&self, number: u32) -> *mut u8 {
        self.created.region.at(self.created.plan.credit_in(number))
    }

    /// Writes slot `slot` of shadow ring `n` (`len` bytes) into its twin.
    fn write_slot(&mut self, n: usize, slot: u64, len: u32) -> Result<(), fi::FiError> {
        let o = &self.outs[n];
        let r = &self.remotes[o.peer];
        let off = payload_offset(self.layout, slot) as u64;
        let data = slot_data(o.twin, self.layout.slots, slot as u32, len);
        let ctx = DATA_CTX | n << 24 | slot as usize;
        // SAFETY: the payload lies in the registered shadow ring, and the producer does not
        // reuse the slot before `released` passes it, which waits for this write's completion
        // (`done`).
        unsafe {
            let buf = o.ring.add(off as usize);
            let (addr, key) = (r.addr, r.key);
            self.stack.write(
                buf,
                len as usize,
                Some(data),
                addr,
                o.remote + off,
                key,
                ctx,
            )
        }
    }

    /// Writes every published, unsent slot, and first the writes to try again; `true` if any
    /// was written.
    fn send_all(&mut self) -> bool {
        let mut any = false;
        while let Some(&(n, slot)) = self.retries.first() {
            // SAFETY: the header of a slot of this shadow ring; it keeps its value until the
            // slot is released, which waits for this write.
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
                let slot = self.outs[n].sent & mask;
                let (peer, res) = (self.outs[n].peer, self.write_slot(n, slot, len));
                if !self.went_out(peer, res) {
                    return any;
                }
                self.outs[n].sent += 1;
                any = true;
            }
        }
        any
    }

    /// Whether a posted write went out. If not, the pass stops: the provider's queue is full
    /// (`EAGAIN`; the next pass tries again) or the peer is reported lost.
    fn went_out(&mut self, peer: usize, res: Result<(), fi::FiError>) -> bool {
        match res {
            Ok(()) => true,
            Err(e) if e.code == fi::EAGAIN => false,
            Err(e) => {
                self.lost(peer, e.to_string());
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
            if i.next - i.credited < half || i.in_flight.is_some() {
                continue;
            }
            let r = word(i.ring).load(Ordering::Acquire);
            if r <= i.credited || r - i.credited < half {
                continue;
            }
            let rem = &self.remotes[i.peer];
            // SAFETY: the source word is in the registered region and not written again until
            // this write completes (`in_flight`).
            let res = unsafe {
                i.src.write_volatile(r);
                self.stack.write(
                    i.src.cast(),
                    8,
                    Some(CREDIT_BIT | u64::from(i.twin)),
                    rem.addr,
                    i.remote_credit,
                    rem.key,
                    CREDIT_CTX | n,
                )
            };
            let peer = self.ins[n].peer;
            if !self.went_out(peer, res) {
                return any;
            }
            self.ins[n].in_flight = Some(r);
            self.shared.credits.fetch_add(1, Ordering::Relaxed);
            any = true;
        }
        any
    }

    /// A failed write: tried again up to [`ATTEMPTS`] times (rxm in libfabric 1.17 can fail a
    /// write while a connection is being made), then the peer is reported lost.
    fn failed_op(&mut self, f: &CqFailure) {
        let n = f.context & !KIND_MASK;
        if f.context & KIND_MASK == RMA_CTX {
            // A segment operation's own failure: its caller gets the error (a peer that is
            // really gone fails the ring writes too).
            return self.rma.finish(n, Err(f.detail.clone()));
        }
        let peer = match f.context & KIND_MASK {
            DATA_CTX => self.outs.get(n >> 24).map(|o| o.peer),
            CREDIT_CTX => self.ins.get(n).map(|i| i.peer),
            // Posted again by the next turn (`Reads::failed` queued it).
            READ_CTX => match self.reads.failed(f.context) {
                Some(p) => Some(p),
                None => return,
            },
            // A repeated hello that failed: the peer will repeat its own.
            _ if setup::is_hello_send(f.context) => return,
            _ => None,
        };
        let Some(p) = peer else {
            return self.protocol(None, format!("a failed operation: {}", f.detail));
        };
        self.attempts[p] += 1;
        if self.attempts[p] > ATTEMPTS {
            return self.lost(p, f.detail.clone());
        }
        tracing::debug!(
            target: "gossamer::fabric",
            peer = self.created.plan.peers[p].rank,
            detail = %f.detail,
            "ofi write failed; trying again"
        );
        match f.context & KIND_MASK {
            DATA_CTX => self.retries.push((n >> 24, (n & 0xFF_FFFF) as u64)),
            READ_CTX => {}
            _ => self.ins[n].in_flight = None,
        }
    }

    /// Posts the rendezvous's read pieces; `true` if any was posted.
    fn post_reads(&mut self) -> bool {
        match self.reads.post(&mut self.stack) {
            Ok(any) => any,
            Err((peer, e)) => {
                self.lost(peer, e.to_string());
                true
            }
        }
    }

    /// The rank of each peer, in peer order.
    pub(super) fn peer_ranks(&self) -> Vec<u32> {
        self.created.plan.peers.iter().map(|s| s.rank).collect()
    }

    /// Registers a body for peers to read (`Rendezvous::park`).
    ///
    /// # Safety
    /// As `Rendezvous::park`.
    pub(super) unsafe fn park(
        &mut self,
        ptr: *const u8,
        len: usize,
    ) -> Result<crate::fabric::Parked, String> {
        // SAFETY: the caller's.
        let p = unsafe { self.reads.park(&mut self.stack, ptr, len) }?;
        self.parked += 1;
        Ok(p)
    }

    /// Deregisters a parked body.
    pub(super) fn unpark(&mut self, id: u64) {
        self.stack.deregister(id);
        self.parked = self.parked.saturating_sub(1);
    }

    /// Whether a body is parked for peers to read: its bytes move only as this rank's progress
    /// sends them (`tcp;ofi_rxm`), so the thread then turns without napping.
    pub(super) fn serving(&self) -> bool {
        self.parked > 0
    }

    /// Starts reading `len` bytes at `addr` (key `key`) of peer `peer` into `dst`; the turns
    /// post it.
    ///
    /// # Safety
    /// As `Reads::start`.
    pub(super) unsafe fn start_read(
        &mut self,
        peer: usize,
        addr: u64,
        key: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<u64, String> {
        let src = self.remotes[peer].addr;
        // SAFETY: the caller's.
        unsafe {
            self.reads
                .start(&mut self.stack, (peer, src), addr, key, dst, len)
        }
    }

    /// How read `n` ended, if it did; every read fails once the job fails or stops.
    pub(super) fn read_ended(&mut self, n: u64) -> Option<Ended> {
        if self.failed || self.shared.stop.load(Ordering::Acquire) {
            self.reads
                .fail_all("the job is ending (a failure elsewhere)");
        }
        self.reads.ended(&mut self.stack, n)
    }

    fn host(&self, rank: u32) -> String {
        self.created
            .topo
            .hosts
            .get(rank as usize)
            .cloned()
            .unwrap_or_default()
    }

    fn lost(&mut self, p: usize, detail: String) {
        self.reads.lost(p, &detail);
        if self.failed || self.shared.closing.load(Ordering::Acquire) {
            return;
        }
        self.failed = true;
        let rank = self.created.plan.peers[p].rank;
        (self.created.hooks.fail)(FabricError::PeerLost {
            peer: rank,
            host: self.host(rank),
            detail: format!("{} RMA failed: {detail}", self.shared.provider),
        });
    }

    fn protocol(&mut self, p: Option<usize>, detail: String) {
        if self.failed || self.shared.closing.load(Ordering::Acquire) {
            return;
        }
        self.failed = true;
        let rank = p.map_or(u32::MAX, |p| self.created.plan.peers[p].rank);
        (self.created.hooks.fail)(FabricError::Protocol {
            fabric: FabricKind::Ofi,
            peer: rank,
            host: self.host(rank),
            detail,
        });
    }
}
