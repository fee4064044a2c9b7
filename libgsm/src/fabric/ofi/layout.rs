//! The `ofi` fabric's registered region and its numbers: where each ring, credit word and hello
//! buffer lies, how rings are numbered, the 128-byte hello, and the 64-bit remote completion
//! data. Arithmetic and encodings only; nothing here touches libfabric or a ring's words.
//!
//! The region of one rank, in order (every part aligned to 128 bytes):
//!
//! ```text
//! hello out   one 128-byte hello per peer (what this rank tells it)
//! hello in    one 128-byte receive buffer per peer
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
//! incoming and outgoing ring of one index. See ARCHITECTURE.md.

use crate::bootstrap::KEY_LEN;
use crate::fabric::Lane;
use crate::wire::ring::RingLayout;

/// Bytes of a hello.
pub(super) const HELLO: usize = 128;
const MAGIC: &[u8; 8] = b"GSMOFI\0\0";
const VERSION: u32 = 1;
/// Bit of the remote data that marks a credit (else a slot).
pub(super) const CREDIT_BIT: u64 = 1 << 63;

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

/// Where everything lies in one rank's region.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// Ring geometry.
    pub layout: RingLayout,
    /// This rank's workers.
    pub local: u32,
    /// Peers, in the order of their sections.
    pub peers: Vec<Section>,
    /// Rings in each direction.
    pub rings: u32,
    /// Bytes per ring (a multiple of 128).
    pub ring_bytes: usize,
    hello_in: usize,
    credit_in: usize,
    credit_out: usize,
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
        // Slot completions carry `number * slots + slot` in 31 bits.
        if rings.saturating_mul(u64::from(layout.slots)) >= 1 << 31 {
            return Err("too many rings for the ofi fabric's completion data (2^31 slots at most)");
        }
        let ring_bytes = align(layout.bytes());
        let n = peers.len();
        let hello_in = align(n * HELLO);
        let credit_in = hello_in + align(n * HELLO);
        let credit_out = credit_in + align(rings as usize * 8);
        let rings_in = credit_out + align(rings as usize * 8);
        let rings_out = rings_in
            .checked_add(
                (rings as usize)
                    .checked_mul(ring_bytes)
                    .ok_or("region too large")?,
            )
            .ok_or("region too large")?;
        let total = rings_out + rings as usize * ring_bytes;
        Ok(Plan {
            layout,
            local,
            peers: sections,
            rings: rings as u32,
            ring_bytes,
            hello_in,
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
    pub(super) fn index(producer: u32, consumer: u32, consumer_workers: u32, lane: Lane) -> u32 {
        (producer * consumer_workers + consumer) * 2 + lane_bit(lane)
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

    /// Offset of the hello this rank sends to peer `p` (index in `peers`).
    pub(super) fn hello_out(&self, p: usize) -> usize {
        p * HELLO
    }
    /// Offset of receive buffer `p`.
    pub(super) fn hello_in(&self, p: usize) -> usize {
        self.hello_in + p * HELLO
    }
    /// Offset of the credit word of outgoing ring `number`.
    pub(super) fn credit_in(&self, number: u32) -> usize {
        self.credit_in + number as usize * 8
    }
    /// Offset of the credit source word of incoming ring `number`.
    pub(super) fn credit_out(&self, number: u32) -> usize {
        self.credit_out + number as usize * 8
    }
    /// Offset of incoming ring `number`.
    pub(super) fn ring_in(&self, number: u32) -> usize {
        self.rings_in + number as usize * self.ring_bytes
    }
    /// Offset of outgoing ring `number`.
    pub(super) fn ring_out(&self, number: u32) -> usize {
        self.rings_out + number as usize * self.ring_bytes
    }
    /// Offset of the incoming rings of peer `p`, as told to it.
    pub(super) fn section_in(&self, p: usize) -> usize {
        self.ring_in(self.peers[p].first)
    }
    /// Offset of the credit words of peer `p`'s section, as told to it.
    pub(super) fn section_credit(&self, p: usize) -> usize {
        self.credit_in(self.peers[p].first)
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

#[cfg(test)]
fn lane_bit(lane: Lane) -> u32 {
    match lane {
        Lane::Request => 0,
        Lane::Response => 1,
    }
}

/// Offset of slot `slot`'s payload within a ring (after the 128-byte control block, each slot
/// is a header word, the payload and padding to `slot_size + 64`; `wire::ring` owns that format).
pub(super) fn payload_offset(layout: RingLayout, slot: u64) -> usize {
    128 + slot as usize * (layout.slot_size as usize + 64) + 8
}
/// Offset of slot `slot`'s header word within a ring.
pub(super) fn header_offset(layout: RingLayout, slot: u64) -> usize {
    128 + slot as usize * (layout.slot_size as usize + 64)
}

/// What one rank tells one peer at set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Hello {
    /// The job key.
    pub key: [u8; KEY_LEN],
    /// Sender.
    pub from: u32,
    /// Receiver.
    pub to: u32,
    /// Ring geometry.
    pub slots: u32,
    /// Ring geometry.
    pub slot_size: u32,
    /// The sender's workers.
    pub workers: u32,
    /// RMA address of the sender's region (0 if offsets are used).
    pub base: u64,
    /// Its memory key.
    pub mr_key: u64,
    /// Its length.
    pub len: u64,
    /// Offset of the receiver's section of incoming rings there.
    pub rings: u64,
    /// Offset of the receiver's section of credit words there.
    pub credits: u64,
    /// Number of that section's first ring there.
    pub first: u32,
}

impl Hello {
    /// The 128 bytes (little-endian).
    pub(super) fn encode(&self) -> [u8; HELLO] {
        let mut b = [0u8; HELLO];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..44].copy_from_slice(&self.key);
        let words32 = [self.from, self.to, self.slots, self.slot_size, self.workers];
        for (i, w) in words32.iter().enumerate() {
            b[44 + 4 * i..48 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        let words64 = [self.base, self.mr_key, self.len, self.rings, self.credits];
        for (i, w) in words64.iter().enumerate() {
            b[64 + 8 * i..72 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        b[104..108].copy_from_slice(&self.first.to_le_bytes());
        b
    }

    /// Reads a hello; checks only its form (the caller checks what it says).
    pub(super) fn decode(b: &[u8]) -> Result<Hello, String> {
        if b.len() != HELLO {
            return Err(format!("a hello of {} bytes, expected {HELLO}", b.len()));
        }
        if &b[..8] != MAGIC {
            return Err("not a Gossamer ofi hello (bad magic)".into());
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        if u32_at(8) != VERSION {
            return Err(format!("hello version {}, expected {VERSION}", u32_at(8)));
        }
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&b[12..44]);
        Ok(Hello {
            key,
            from: u32_at(44),
            to: u32_at(48),
            slots: u32_at(52),
            slot_size: u32_at(56),
            workers: u32_at(60),
            base: u64_at(64),
            mr_key: u64_at(72),
            len: u64_at(80),
            rings: u64_at(88),
            credits: u64_at(96),
            first: u32_at(104),
        })
    }
}

/// The remote data of a slot write: ring `number`, `slot`, `len` bytes.
pub(super) fn slot_data(number: u32, slots: u32, slot: u32, len: u32) -> u64 {
    ((u64::from(number) * u64::from(slots) + u64::from(slot)) << 32) | u64::from(len)
}

/// (ring number, slot, len) of a slot write's remote data.
pub(super) fn read_slot_data(data: u64, slots: u32) -> (u32, u32, u32) {
    let hi = (data >> 32) as u32 & 0x7FFF_FFFF;
    (hi / slots, hi % slots, data as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_numbers_match_across_the_two_sides_and_round_trip() {
        let layout = RingLayout::new(16, 256).unwrap();
        let plan = Plan::new(layout, 2, &[(0, 3, 0), (2, 1, 5)]).unwrap();
        // 2 local workers × (3 + 1) peer workers × 2 lanes.
        assert_eq!(plan.rings, 16);
        assert_eq!(plan.owner(11), Some((0, 11)));
        assert_eq!(plan.owner(12), Some((1, 0)));
        assert_eq!(plan.owner(16), None);
        for i in 0..12 {
            let (p, c, lane) = Plan::unindex(i, 2);
            assert_eq!(Plan::index(p, c, 2, lane), i);
        }
        assert!(plan.ring_in(0) % 128 == 0 && plan.ring_out(0) >= plan.ring_in(15));
        assert!(plan.ring_out(15) + plan.ring_bytes <= plan.total);
        let d = slot_data(9, 16, 15, 256);
        assert_eq!(read_slot_data(d, 16), (9, 15, 256));
        assert_eq!(d & CREDIT_BIT, 0);
    }

    #[test]
    fn a_hello_round_trips_and_a_bad_one_is_refused() {
        let h = Hello {
            key: [7; KEY_LEN],
            from: 1,
            to: 2,
            slots: 16,
            slot_size: 4096,
            workers: 3,
            base: 0xdead_0000,
            mr_key: 42,
            len: 1 << 20,
            rings: 4096,
            credits: 256,
            first: 12,
        };
        let b = h.encode();
        assert_eq!(Hello::decode(&b), Ok(h));
        let mut bad = b;
        bad[0] = b'X';
        assert!(Hello::decode(&bad).is_err());
        assert!(Hello::decode(&b[..64]).is_err());
    }
}
