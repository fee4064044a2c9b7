//! The `verbs` fabric's set-up steps after the device is open: the completion queue, the
//! registered region, one RC queue pair per peer rank moved to INIT with its receives posted and
//! this rank's cards (`create`, which waits for nobody), then the peers' cards checked and each
//! queue pair moved to RTR and RTS (`accept`).
//!
//! It does not move slots or credits; `progress.rs` does, from the tables built here. See
//! ARCHITECTURE.md.

use std::alloc;
use std::ptr::NonNull;
use std::sync::Arc;

use super::layout::Plan;
use super::wire::{self, CARD, Card, Endpoint, Expect};
use crate::fabric::{FabricError, FabricKind, Hooks, Peer, Topology};
use crate::sys::verbs::{Stack, Transition, VerbsError};

/// The region's memory: zeroed, page-aligned, freed when the last holder (the fabric's state,
/// a ring end) drops it; its registration ends before (the stack is dropped first).
#[derive(Debug)]
pub(super) struct Region {
    ptr: NonNull<u8>,
    layout: alloc::Layout,
}

// SAFETY: plain memory; who writes which bytes when is the ring protocol's and the progress
// thread's business, through atomics and completions.
unsafe impl Send for Region {}
// SAFETY: as for Send.
unsafe impl Sync for Region {}

impl Region {
    fn new(bytes: usize) -> Region {
        let layout = alloc::Layout::from_size_align(bytes, 4096).expect("region size checked");
        // SAFETY: a non-zero size (at least one page).
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(p) else {
            alloc::handle_alloc_error(layout)
        };
        Region { ptr, layout }
    }

    /// Address of byte `offset`.
    pub(super) fn at(&self, offset: usize) -> *mut u8 {
        assert!(
            offset < self.layout.size(),
            "offset {offset} outside the region"
        );
        // SAFETY: inside the allocation (checked).
        unsafe { self.ptr.as_ptr().add(offset) }
    }

    /// Bytes.
    pub(super) fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// Work requests each peer's queue pair is sized for, capped at the device's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Depths {
    /// Send queue: two writes per slot of every outgoing ring, one credit per incoming ring.
    pub send: u32,
    /// Receive queue: one per slot of every incoming ring, one per credit towards this rank.
    pub recv: u32,
}

/// The queue depths towards a peer with `rings` rings each way of `slots` slots, capped at
/// `max_wr`. A capped send queue only makes writes wait for a turn; a capped receive queue
/// makes the peer's adapter retry (RNR) until this rank reposts, never lose a write.
pub(super) fn depths(rings: u32, slots: u32, max_wr: u32) -> Depths {
    let r = u64::from(rings);
    let s = u64::from(slots);
    let cap = |n: u64| n.min(u64::from(max_wr)).max(1) as u32;
    Depths {
        send: cap(r * s * 2 + r),
        recv: cap(r * s + r),
    }
}

/// What `create` made for `accept` and `attach`.
#[derive(Debug)]
pub(super) struct Created {
    pub plan: Plan,
    pub region: Arc<Region>,
    /// Each peer's endpoint (plan order).
    pub endpoints: Vec<Endpoint>,
    pub depths: Vec<Depths>,
    pub cards: Vec<u8>,
    pub hooks: Hooks,
    pub topo: Topology,
}

/// A peer as its card describes it (plan order).
#[derive(Debug, Clone)]
pub(super) struct Remote {
    pub base: u64,
    pub rkey: u32,
    pub rings: u64,
    pub credits: u64,
    pub staged: u64,
    pub first: u32,
}

pub(super) fn host(topo: &Topology, r: u32) -> String {
    topo.hosts.get(r as usize).cloned().unwrap_or_default()
}

pub(super) fn call_error(e: VerbsError) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Verbs,
        what: e.what,
        detail: e.detail,
    }
}

fn protocol(topo: &Topology, rank: u32, detail: String) -> FabricError {
    FabricError::Protocol {
        fabric: FabricKind::Verbs,
        peer: rank,
        host: host(topo, rank),
        detail,
    }
}

/// Sizes the CQ, registers the region, makes and readies each peer's queue pair, writes cards.
pub(super) fn create(
    stack: &mut Stack,
    mine: &Endpoint,
    topo: &Topology,
    peers: &[Peer],
    hooks: Hooks,
) -> Result<Created, FabricError> {
    let me = topo.rank;
    let mut list = Vec::with_capacity(peers.len());
    let mut endpoints = Vec::with_capacity(peers.len());
    for p in peers {
        if p.rank >= topo.ranks() || p.rank == me {
            return Err(FabricError::Choice {
                value: format!("peer rank {}", p.rank),
                reason: "a verbs peer must be another rank of the job",
            });
        }
        let e = Endpoint::decode(&p.endpoint).map_err(|d| protocol(topo, p.rank, d))?;
        if e.link_layer != mine.link_layer {
            return Err(protocol(
                topo,
                p.rank,
                format!(
                    "its port {} of {} has link layer {}, this rank's {} of {} has {}: \
                     InfiniBand and RoCE ports cannot talk (GSM_VERBS_DEVICE chooses the device)",
                    e.port, e.device, e.link_layer, mine.port, mine.device, mine.link_layer
                ),
            ));
        }
        endpoints.push(e);
        list.push((
            p.rank,
            topo.workers[p.rank as usize],
            topo.first_worker(p.rank),
        ));
    }
    let plan = Plan::new(topo.layout, topo.local_workers(), &list).map_err(|reason| {
        FabricError::Choice {
            value: format!("{} ranks of {:?}", topo.ranks(), topo.workers),
            reason,
        }
    })?;
    let max_wr = stack.port.max_qp_wr;
    let depths: Vec<Depths> = plan
        .peers
        .iter()
        .map(|s| depths(s.rings(plan.local), plan.layout.slots, max_wr))
        .collect();
    let cqe: u64 = depths
        .iter()
        .map(|d| u64::from(d.send) + u64::from(d.recv))
        .sum();
    if cqe > u64::from(stack.port.max_cqe) {
        return Err(FabricError::Choice {
            value: format!("{cqe} completion-queue entries on {}", stack.port.device),
            reason: "more than the device allows: use fewer workers per rank or slots per ring \
                     (GSM_SLOTS)",
        });
    }
    stack.create_cq(cqe.max(1) as u32).map_err(call_error)?;
    let region = Arc::new(Region::new(plan.total));
    // SAFETY: the region stays allocated while the stack lives: the progress state holds both
    // and drops the stack first.
    let (_lkey, rkey) =
        unsafe { stack.register(region.at(0), region.len()) }.map_err(call_error)?;
    let mut cards = Vec::with_capacity(peers.len() * CARD);
    for (p, s) in plan.peers.iter().enumerate() {
        let (qp, qpn) = stack
            .create_qp(depths[p].send, depths[p].recv)
            .map_err(call_error)?;
        debug_assert_eq!(qp, p);
        stack
            .modify(qp, &Transition::Init { port: mine.port })
            .map_err(call_error)?;
        stack
            .post_recvs(qp, depths[p].recv, p as u64)
            .map_err(call_error)?;
        let card = Card {
            key: topo.key,
            from: me,
            to: s.rank,
            slots: plan.layout.slots,
            slot_size: plan.layout.slot_size,
            workers: plan.local,
            qpn,
            psn: wire::psn(&topo.key, me, s.rank),
            first: s.first,
            base: region.at(0) as u64,
            rkey,
            len: region.len() as u64,
            rings: plan.ring_in(s.first) as u64,
            credits: plan.credit_in(s.first) as u64,
            staged: plan.staged(s.first, 0) as u64,
        };
        cards.extend_from_slice(&card.encode());
    }
    Ok(Created {
        plan,
        region,
        endpoints,
        depths,
        cards,
        hooks,
        topo: topo.clone(),
    })
}

/// Checks each peer's card to this rank (from `gathered`, every rank's cards by rank) and moves
/// its queue pair to RTR, then RTS.
pub(super) fn accept(
    stack: &mut Stack,
    mine: &Endpoint,
    c: &Created,
    gathered: &[Vec<u8>],
) -> Result<Vec<Remote>, FabricError> {
    let me = c.topo.rank;
    let mut remotes = Vec::with_capacity(c.plan.peers.len());
    for (p, s) in c.plan.peers.iter().enumerate() {
        let refuse = |d: String| protocol(&c.topo, s.rank, format!("its verbs card: {d}"));
        let blob = gathered
            .get(s.rank as usize)
            .ok_or_else(|| refuse("missing from the exchange".into()))?;
        let card = wire::card_for(blob, me).map_err(refuse)?;
        let want = Expect {
            key: c.topo.key,
            from: s.rank,
            to: me,
            slots: c.plan.layout.slots,
            slot_size: c.plan.layout.slot_size,
            workers: s.workers,
            rings: s.rings(c.plan.local),
            ring_bytes: c.plan.ring_bytes as u64,
        };
        card.check(&want).map_err(refuse)?;
        let rtr = wire::rtr(mine, &c.endpoints[p], card.qpn, card.psn);
        stack.modify(p, &rtr).map_err(call_error)?;
        let rts = Transition::Rts {
            sq_psn: wire::psn(&c.topo.key, me, s.rank),
        };
        stack.modify(p, &rts).map_err(call_error)?;
        remotes.push(Remote {
            base: card.base,
            rkey: card.rkey,
            rings: card.rings,
            credits: card.credits,
            staged: card.staged,
            first: card.first,
        });
    }
    tracing::info!(
        target: "gossamer::fabric",
        device = %mine.device,
        port = mine.port,
        queue_pairs = remotes.len(),
        "verbs queue pairs ready to send"
    );
    Ok(remotes)
}
