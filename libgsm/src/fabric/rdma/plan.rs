//! Where everything lies in one rank's registered region, how rings are numbered, the 32-bit
//! immediate of a write, and the receive side's bookkeeping of one incoming ring
//! ([`Arrivals`]). Arithmetic only; nothing here touches a transport or a ring's words.
//!
//! The region of one rank, in order (every part aligned to 128 bytes):
//!
//! ```text
//! adapter     what the adapter keeps in registered memory (ofi: its hellos); may be empty
//! credit in   one u64 per outgoing ring: the consumer's `released`, written by the peer
//! credit out  one u64 per incoming ring: the value this rank writes to the peer
//! rings in    one ring per (peer worker, local worker, lane): the rings local workers consume
//! rings out   one ring per (local worker, peer worker, lane): the shadow rings they publish into
//! ```
//!
//! Within a peer's section, ring `i = (producer * consumer_workers + consumer) * 2 + lane`, with
//! `producer` and `consumer` the workers' indexes within their ranks: the same `i` names one ring
//! on both sides (this rank's outgoing ring `i` to a peer is that peer's incoming ring `i` from
//! this rank). A ring's *number* is its section's first number plus `i`, the same for a rank's
//! incoming and outgoing ring of one index.

use crate::fabric::Lane;
use crate::wire::ring::RingLayout;

/// Bit of an immediate that marks a credit (else a slot).
pub(crate) const CREDIT_BIT: u32 = 1 << 31;

fn align(n: usize) -> usize {
    n.div_ceil(128) * 128
}

/// One peer's share of the region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section {
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
    pub(crate) fn rings(&self, local: u32) -> u32 {
        local * self.workers * 2
    }
}

/// Where everything lies in one rank's region.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Ring geometry.
    pub layout: RingLayout,
    /// This rank's workers.
    pub local: u32,
    /// Peers, in the order of their sections (the adapter's peer indexes).
    pub peers: Vec<Section>,
    /// Rings in each direction.
    pub rings: u32,
    /// Bytes per ring (a multiple of 128).
    pub ring_bytes: usize,
    credit_in: usize,
    credit_out: usize,
    rings_in: usize,
    rings_out: usize,
    /// Bytes of the whole region.
    pub total: usize,
}

impl Plan {
    /// The plan for `local` workers and `peers` (rank, workers, first global worker), after
    /// `adapter` bytes of the adapter's own.
    pub(crate) fn new(
        layout: RingLayout,
        local: u32,
        peers: &[(u32, u32, u32)],
        adapter: usize,
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
            return Err("too many rings for a 32-bit immediate (2^31 slots at most)");
        }
        let too_large = "region too large";
        let n = rings as usize;
        let ring_bytes = align(layout.bytes());
        let credit_in = align(adapter);
        let credit_out = credit_in + align(n * 8);
        let rings_in = credit_out + align(n * 8);
        let all_rings = n.checked_mul(ring_bytes).ok_or(too_large)?;
        let rings_out = rings_in.checked_add(all_rings).ok_or(too_large)?;
        let total = rings_out.checked_add(all_rings).ok_or(too_large)?;
        Ok(Plan {
            layout,
            local,
            peers: sections,
            rings: rings as u32,
            ring_bytes,
            credit_in,
            credit_out,
            rings_in,
            rings_out,
            total: total.max(4096),
        })
    }

    /// Index within a section of the ring from `producer` to `consumer` (indexes within their
    /// ranks; `consumer_workers` is the consuming rank's worker count).
    #[cfg(test)]
    pub(crate) fn index(producer: u32, consumer: u32, consumer_workers: u32, lane: Lane) -> u32 {
        let bit = match lane {
            Lane::Request => 0,
            Lane::Response => 1,
        };
        (producer * consumer_workers + consumer) * 2 + bit
    }

    /// The (producer, consumer, lane) of index `i` with `consumer_workers` consumers.
    pub(crate) fn unindex(i: u32, consumer_workers: u32) -> (u32, u32, Lane) {
        let lane = if i % 2 == 0 {
            Lane::Request
        } else {
            Lane::Response
        };
        let pair = i / 2;
        (pair / consumer_workers, pair % consumer_workers, lane)
    }

    /// Offset of the credit word of outgoing ring `number`.
    pub(crate) fn credit_in(&self, number: u32) -> usize {
        self.credit_in + number as usize * 8
    }
    /// Offset of the credit source word of incoming ring `number`.
    pub(crate) fn credit_out(&self, number: u32) -> usize {
        self.credit_out + number as usize * 8
    }
    /// Offset of incoming ring `number`.
    pub(crate) fn ring_in(&self, number: u32) -> usize {
        self.rings_in + number as usize * self.ring_bytes
    }
    /// Offset of outgoing ring `number`.
    pub(crate) fn ring_out(&self, number: u32) -> usize {
        self.rings_out + number as usize * self.ring_bytes
    }
    /// The peer (index in `peers`) whose section holds ring `number`, and the index within it.
    pub(crate) fn owner(&self, number: u32) -> Option<(usize, u32)> {
        if number >= self.rings {
            return None;
        }
        let p = self.peers.partition_point(|s| s.first <= number) - 1;
        Some((p, number - self.peers[p].first))
    }
}

/// Offset of slot `slot`'s header word within a ring (after the 128-byte control block, each
/// slot is a header word, the payload and padding to `slot_size + 64`; `wire::ring` owns that
/// format). The payload follows the header word.
pub(crate) fn header_offset(layout: RingLayout, slot: u64) -> usize {
    128 + slot as usize * (layout.slot_size as usize + 64)
}

/// The header tag of a slot published at `position` (`lap + 1`, as `wire::ring` writes it).
pub(crate) fn tag(position: u64, slots: u32) -> u32 {
    ((position >> slots.trailing_zeros()) as u32).wrapping_add(1)
}

/// The immediate of a slot write: ring `number`'s slot `slot`.
pub(crate) fn slot_imm(number: u32, slots: u32, slot: u32) -> u32 {
    number * slots + slot
}

/// The immediate of a credit write for ring `number`.
pub(crate) fn credit_imm(number: u32) -> u32 {
    CREDIT_BIT | number
}

/// What an immediate names: a slot (ring number, slot) or a credit (ring number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Imm {
    Slot(u32, u32),
    Credit(u32),
}

/// Reads an immediate.
pub(crate) fn read_imm(imm: u32, slots: u32) -> Imm {
    if imm & CREDIT_BIT != 0 {
        Imm::Credit(imm & !CREDIT_BIT)
    } else {
        Imm::Slot(imm / slots, imm % slots)
    }
}

/// The ring position a write into `slot` stands for, when positions below `next` are published:
/// the first position from `next` on that maps to `slot`.
pub(crate) fn position(next: u64, slot: u32, slots: u32) -> u64 {
    let s = u64::from(slots);
    next + (u64::from(slot) + s - next % s) % s
}

/// The receive side of one incoming ring: writes may complete in any slot order relative to
/// what is published (a credit frees several slots at once), and headers go into the ring in
/// ring order only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arrivals {
    /// Next position whose header to publish.
    pub next: u64,
    /// Arrived, unpublished writes (index = slot; length + 1, or 0).
    arrived: Vec<u32>,
}

impl Arrivals {
    pub(crate) fn new(slots: u32) -> Arrivals {
        Arrivals {
            next: 0,
            arrived: vec![0; slots as usize],
        }
    }

    /// Records a write into slot `slot` whose header word landed as `landed`, the consumer
    /// having released positions below `released`. The writer sends the previous lap's tag
    /// (what the slot already holds, so that the consumer sees nothing new until this side
    /// publishes) with the payload's length. Refuses (with what was wrong) a second write into
    /// an unpublished slot, a tag other than that, a length beyond `slot_size`, and a position
    /// the consumer has not released.
    pub(crate) fn arrive(
        &mut self,
        slot: u32,
        landed: u64,
        released: u64,
        slot_size: u32,
    ) -> Result<(), String> {
        let slots = self.arrived.len() as u32;
        if slot >= slots {
            return Err(format!("slot {slot} of a ring of {slots}"));
        }
        let at = position(self.next, slot, slots);
        let len = landed as u32;
        if self.arrived[slot as usize] != 0 {
            return Err(format!("two writes into slot {slot}"));
        }
        if (landed >> 32) as u32 != tag(at, slots).wrapping_sub(1) || len > slot_size {
            return Err(format!("slot {slot}: header {landed:#x} at position {at}"));
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
    pub(crate) fn pop(&mut self) -> Option<(u64, u64)> {
        let slots = self.arrived.len() as u32;
        let s = (self.next % u64::from(slots)) as usize;
        let len = self.arrived[s].checked_sub(1)?;
        self.arrived[s] = 0;
        let header = (u64::from(tag(self.next, slots)) << 32) | u64::from(len);
        self.next += 1;
        Some((s as u64, header))
    }
}
