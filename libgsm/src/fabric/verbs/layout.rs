//! The `verbs` fabric's registered region and its numbers: where each ring, credit word and
//! staged header lies, how rings are numbered, the 32-bit immediate of a write, and the receive
//! side's bookkeeping of one incoming ring ([`Arrivals`]: which slots arrived, what to publish
//! next, and the checks of an arrived header). Arithmetic only; nothing here touches verbs or a
//! ring's words.
//!
//! The region of one rank, in order (every part aligned to 128 bytes):
//!
//! ```text
//! credit in   one u64 per outgoing ring: the consumer's `released`, written by the peer
//! credit out  one u64 per incoming ring: the value this rank writes to the peer
//! staged      one u64 per (incoming ring, slot): the slot header the peer writes after the payload
//! rings in    one ring per (peer worker, local worker, lane): the rings local workers consume
//! rings out   one ring per (local worker, peer worker, lane): the shadow rings they publish into
//! ```
//!
//! Within a peer's section, ring `i = (producer * consumer_workers + consumer) * 2 + lane`, with
//! `producer` and `consumer` the workers' indexes within their ranks, so the same `i` names one
//! ring on both sides, as in the `ofi` fabric. A ring's *number* is its section's first number
//! plus `i`. See ARCHITECTURE.md (the verbs fabric).

use crate::fabric::Lane;
use crate::wire::ring::RingLayout;

/// Bit of the immediate that marks a credit (else a slot).
pub(super) const CREDIT_BIT: u32 = 1 << 31;

fn align(n: usize) -> usize {
    n.div_ceil(128) * 128
}

/// One peer's share of the region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Section {
    /// Its rank.
    pub rank: u32,
    /// Its workers.
    pub workers: u32,
    /// Global id of its first worker.
    pub first_worker: u32,
    /// Number of this section's first ring.
    pub first: u32,
}

impl Section {
    /// Rings in each direction between this rank (`local` workers) and the peer.
    pub(super) fn rings(&self, local: u32) -> u32 {
        local * self.workers * 2
    }
}

/// Where everything lies in one rank's region.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// Ring geometry.
    pub layout: RingLayout,
    /// This rank's workers.
    pub local: u32,
    /// Peers, in the order of their sections (and of their queue pairs).
    pub peers: Vec<Section>,
    /// Rings in each direction.
    pub rings: u32,
    /// Bytes per ring (a multiple of 128).
    pub ring_bytes: usize,
    credit_out: usize,
    staged: usize,
    rings_in: usize,
    rings_out: usize,
    /// Bytes of the whole region.
    pub total: usize,
}

impl Plan {
    /// The plan for `local` workers and `peers` (rank, workers, first global worker).
    pub(super) fn new(
        layout: RingLayout,
        local: u32,
        peers: &[(u32, u32, u32)],
    ) -> Result<Plan, &'static str> {
        let mut sections = Vec::with_capacity(peers.len());
        let mut rings: u64 = 0;
        for &(rank, workers, first_worker) in peers {
            sections.push(Section {
                rank,
                workers,
                first_worker,
                first: rings as u32,
            });
            rings += u64::from(local) * u64::from(workers) * 2;
        }
        // A slot's immediate carries `number * slots + slot` in 31 bits.
        if rings.saturating_mul(u64::from(layout.slots)) >= u64::from(CREDIT_BIT) {
            return Err("too many rings for the verbs fabric's immediates (2^31 slots at most)");
        }
        let rings_n = rings as usize;
        let too_large = "region too large";
        let ring_bytes = align(layout.bytes());
        let credit_out = align(rings_n * 8);
        let staged = credit_out + align(rings_n * 8);
        let staged_bytes = rings_n
            .checked_mul(layout.slots as usize * 8)
            .ok_or(too_large)?;
        let rings_in = staged + align(staged_bytes);
        let all_rings = rings_n.checked_mul(ring_bytes).ok_or(too_large)?;
        let rings_out = rings_in.checked_add(all_rings).ok_or(too_large)?;
        let total = rings_out.checked_add(all_rings).ok_or(too_large)?;
        Ok(Plan {
            layout,
            local,
            peers: sections,
            rings: rings as u32,
            ring_bytes,
            credit_out,
            staged,
            rings_in,
            rings_out,
            total: total.max(4096),
        })
    }

    /// The (producer, consumer, lane) of index `i` with `consumer_workers` consumers.
    pub(super) fn unindex(i: u32, consumer_workers: u32) -> (u32, u32, Lane) {
        let lane = if i % 2 == 0 {
            Lane::Request
        } else {
            Lane::Response
        };
        let pair = i / 2;
        (pair / consumer_workers, pair % consumer_workers, lane)
    }

    /// Offset of the credit word of outgoing ring `number`.
    pub(super) fn credit_in(&self, number: u32) -> usize {
        number as usize * 8
    }
    /// Offset of the credit source word of incoming ring `number`.
    pub(super) fn credit_out(&self, number: u32) -> usize {
        self.credit_out + number as usize * 8
    }
    /// Offset of the staged header of slot `slot` of incoming ring `number`.
    pub(super) fn staged(&self, number: u32, slot: u32) -> usize {
        self.staged + (number as usize * self.layout.slots as usize + slot as usize) * 8
    }
    /// Offset of incoming ring `number`.
    pub(super) fn ring_in(&self, number: u32) -> usize {
        self.rings_in + number as usize * self.ring_bytes
    }
    /// Offset of outgoing ring `number`.
    pub(super) fn ring_out(&self, number: u32) -> usize {
        self.rings_out + number as usize * self.ring_bytes
    }
    /// The peer (index in `peers`) whose section holds ring `number`, and the index within it.
    pub(super) fn owner(&self, number: u32) -> Option<(usize, u32)> {
        if number >= self.rings {
            return None;
        }
        let p = self.peers.partition_point(|s| s.first <= number) - 1;
        Some((p, number - self.peers[p].first))
    }
}

/// Offset of slot `slot`'s payload within a ring (after the 128-byte control block, each slot
/// is a header word, the payload and padding to `slot_size + 64`; `wire::ring` owns that format).
pub(super) fn payload_offset(layout: RingLayout, slot: u64) -> usize {
    header_offset(layout, slot) + 8
}
/// Offset of slot `slot`'s header word within a ring.
pub(super) fn header_offset(layout: RingLayout, slot: u64) -> usize {
    128 + slot as usize * (layout.slot_size as usize + 64)
}

/// The immediate of a slot write: ring `number`'s slot `slot`.
pub(super) fn slot_imm(number: u32, slots: u32, slot: u32) -> u32 {
    number * slots + slot
}

/// What an immediate names: a slot (ring number, slot) or a credit (ring number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Imm {
    Slot(u32, u32),
    Credit(u32),
}

/// Reads an immediate.
pub(super) fn read_imm(imm: u32, slots: u32) -> Imm {
    if imm & CREDIT_BIT != 0 {
        Imm::Credit(imm & !CREDIT_BIT)
    } else {
        Imm::Slot(imm / slots, imm % slots)
    }
}

/// The ring position a write into `slot` stands for, when positions below `next` are published:
/// the first position from `next` on that maps to `slot`.
pub(super) fn position(next: u64, slot: u32, slots: u32) -> u64 {
    let s = u64::from(slots);
    next + (u64::from(slot) + s - next % s) % s
}

/// The receive side of one incoming ring: writes may complete in any slot order relative to
/// what is published (a credit frees several slots at once), and headers go into the ring in
/// ring order only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Arrivals {
    /// Next position whose header to publish.
    pub next: u64,
    /// Arrived, unpublished writes (index = slot; length + 1, or 0).
    arrived: Vec<u32>,
}

impl Arrivals {
    pub(super) fn new(slots: u32) -> Arrivals {
        Arrivals {
            next: 0,
            arrived: vec![0; slots as usize],
        }
    }

    /// Records slot `slot` arriving with the staged header `h`, the consumer having released
    /// positions below `released`. Refuses (with what was wrong) a second write into an
    /// unpublished slot, a tag other than the position's, a length beyond `slot_size`, and a
    /// position the consumer has not released.
    pub(super) fn arrive(
        &mut self,
        slot: u32,
        h: u64,
        released: u64,
        slot_size: u32,
    ) -> Result<(), String> {
        let slots = self.arrived.len() as u32;
        if slot >= slots {
            return Err(format!("slot {slot} of a ring of {slots}"));
        }
        let at = position(self.next, slot, slots);
        let len = h as u32;
        if self.arrived[slot as usize] != 0 {
            return Err(format!("two writes into slot {slot}"));
        }
        if (h >> 32) as u32 != tag(at, slots) || len > slot_size {
            return Err(format!("slot {slot}: header {h:#x} at position {at}"));
        }
        if at >= released + u64::from(slots) {
            return Err(format!(
                "position {at} written before its release ({released})"
            ));
        }
        self.arrived[slot as usize] = len + 1;
        Ok(())
    }

    /// The next header to publish, in ring order: (slot, header word); advances.
    pub(super) fn pop(&mut self) -> Option<(u64, u64)> {
        let slots = self.arrived.len() as u32;
        let s = (self.next % u64::from(slots)) as usize;
        let len = self.arrived[s].checked_sub(1)?;
        self.arrived[s] = 0;
        let header = (u64::from(tag(self.next, slots)) << 32) | u64::from(len);
        self.next += 1;
        Some((s as u64, header))
    }
}

/// The header tag a slot published at `position` carries (`lap + 1`, as `wire::ring` writes it).
pub(super) fn tag(position: u64, slots: u32) -> u32 {
    ((position >> slots.trailing_zeros()) as u32).wrapping_add(1)
}
