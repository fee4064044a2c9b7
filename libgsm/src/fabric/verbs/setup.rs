//! The `verbs` fabric's set-up steps after the device is open: the completion queue, the
//! registered region, one RC queue pair per peer rank moved to INIT with its receives posted and
//! this rank's cards (`create`, which waits for nobody), then the peers' cards checked and each
//! queue pair moved to RTR and RTS (`accept`). A card is `fabric/rdma`'s, with the queue pair's
//! number and first packet sequence number as its two words of the adapter's.
//!
//! It does not move slots or credits; `fabric/rdma` does, from what is built here.

use std::sync::Arc;

use super::wire::{self, Endpoint};
use crate::fabric::rdma::card::{CARD, Card, Expect, card_for};
use crate::fabric::rdma::plan::Plan;
use crate::fabric::rdma::region::Region;
use crate::fabric::rdma::rings::Remote;
use crate::fabric::{FabricError, FabricKind, Hooks, Peer, Topology};
use crate::sys::verbs::{Stack, Transition, VerbsError};

/// Work requests each peer's queue pair is sized for, capped at the device's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Depths {
    /// Send queue: one write per slot of every outgoing ring, one credit per incoming ring.
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
        send: cap(r * s + r),
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
    /// This rank's queue pair towards each peer: its number (plan order).
    pub qpns: Vec<u32>,
    pub cards: Vec<u8>,
    pub hooks: Hooks,
    pub topo: Topology,
}

/// A peer as its card describes it (plan order): where to write, and its region's rkey.
#[derive(Debug, Clone)]
pub(super) struct Heard {
    pub remote: Remote,
    pub rkey: u32,
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
    let plan = Plan::new(topo.layout, topo.local_workers(), &list, 0).map_err(|reason| {
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
    let mut qpns = Vec::with_capacity(peers.len());
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
            first: s.first,
            extra: [qpn, wire::psn(&topo.key, me, s.rank)],
            base: region.at(0) as u64,
            mr_key: u64::from(rkey),
            len: region.len() as u64,
            rings: plan.ring_in(s.first) as u64,
            credits: plan.credit_in(s.first) as u64,
        };
        cards.extend_from_slice(&card.encode());
        qpns.push(qpn);
    }
    Ok(Created {
        plan,
        region,
        endpoints,
        depths,
        qpns,
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
) -> Result<Vec<Heard>, FabricError> {
    let me = c.topo.rank;
    let mut remotes = Vec::with_capacity(c.plan.peers.len());
    for (p, s) in c.plan.peers.iter().enumerate() {
        let refuse = |d: String| protocol(&c.topo, s.rank, format!("its verbs card: {d}"));
        let blob = gathered
            .get(s.rank as usize)
            .ok_or_else(|| refuse("missing from the exchange".into()))?;
        let card = card_for(blob, me).map_err(refuse)?;
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
        let [qpn, psn] = card.extra;
        wire::check_queue_pair(qpn, psn, card.mr_key).map_err(refuse)?;
        let rtr = wire::rtr(mine, &c.endpoints[p], qpn, psn);
        stack.modify(p, &rtr).map_err(call_error)?;
        let rts = Transition::Rts {
            sq_psn: wire::psn(&c.topo.key, me, s.rank),
        };
        stack.modify(p, &rts).map_err(call_error)?;
        remotes.push(Heard {
            remote: Remote {
                base: card.base,
                rings: card.rings,
                credits: card.credits,
                first: card.first,
            },
            rkey: card.mr_key as u32,
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
