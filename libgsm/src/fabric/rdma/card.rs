//! What one rank tells one peer once its region is registered (the *card*): the job key, the
//! ranks, the ring geometry, the region's RMA address, key and length, where the receiver's
//! rings and credit words lie there, and two words of the adapter's own (verbs: the queue pair's
//! number and first packet sequence number). The adapter carries it (ofi: a message on the
//! endpoint; verbs: the bootstrap's all-gather). Another process wrote it: every field is
//! checked ([`Card::check`]) before this rank writes a byte to where it points.

use crate::bootstrap::KEY_LEN;

/// Bytes of a card.
pub(crate) const CARD: usize = 128;
const MAGIC: &[u8; 8] = b"GSMRMA\0\0";
const VERSION: u32 = 1;

/// See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Card {
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
    /// Number of the receiver's section's first ring at the sender.
    pub first: u32,
    /// The adapter's words (verbs: queue pair number, first packet sequence number).
    pub extra: [u32; 2],
    /// RMA address of the sender's region (0 where the provider takes offsets).
    pub base: u64,
    /// Its memory key.
    pub mr_key: u64,
    /// Its length.
    pub len: u64,
    /// Offset of the receiver's section of incoming rings there.
    pub rings: u64,
    /// Offset of the receiver's section of credit words there.
    pub credits: u64,
}

/// What a card must say to this rank.
#[derive(Debug, Clone)]
pub(crate) struct Expect {
    pub key: [u8; KEY_LEN],
    pub from: u32,
    pub to: u32,
    pub slots: u32,
    pub slot_size: u32,
    pub workers: u32,
    /// Rings in each direction between the two ranks.
    pub rings: u32,
    /// Bytes per ring.
    pub ring_bytes: u64,
}

impl Card {
    /// The 128 bytes (little-endian).
    pub(crate) fn encode(&self) -> [u8; CARD] {
        let mut b = [0u8; CARD];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..44].copy_from_slice(&self.key);
        let words32 = [
            self.from,
            self.to,
            self.slots,
            self.slot_size,
            self.workers,
            self.first,
            self.extra[0],
            self.extra[1],
        ];
        for (i, w) in words32.iter().enumerate() {
            b[44 + 4 * i..48 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        let words64 = [self.base, self.mr_key, self.len, self.rings, self.credits];
        for (i, w) in words64.iter().enumerate() {
            b[80 + 8 * i..88 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// Reads a card; checks only its form (see [`Card::check`]).
    pub(crate) fn decode(b: &[u8]) -> Result<Card, String> {
        if b.len() != CARD {
            return Err(format!("a card of {} bytes, expected {CARD}", b.len()));
        }
        if &b[..8] != MAGIC {
            return Err("not a Gossamer RMA card (bad magic)".into());
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        if u32_at(8) != VERSION {
            return Err(format!("card version {}, expected {VERSION}", u32_at(8)));
        }
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&b[12..44]);
        let w = |i: usize| u32_at(44 + 4 * i);
        let d = |i: usize| u64_at(80 + 8 * i);
        Ok(Card {
            key,
            from: w(0),
            to: w(1),
            slots: w(2),
            slot_size: w(3),
            workers: w(4),
            first: w(5),
            extra: [w(6), w(7)],
            base: d(0),
            mr_key: d(1),
            len: d(2),
            rings: d(3),
            credits: d(4),
        })
    }

    /// Checks what a card says against what this rank expects: the key (in constant time), the
    /// ranks, the geometry, and that `rings` rings of `ring_bytes` and their credit words lie
    /// inside the region it describes (with no overflow).
    pub(crate) fn check(&self, want: &Expect) -> Result<(), String> {
        let diff = self
            .key
            .iter()
            .zip(&want.key)
            .fold(0u8, |a, (x, y)| a | (x ^ y));
        if diff != 0 {
            return Err("wrong job key".into());
        }
        if self.from != want.from || self.to != want.to {
            return Err(format!(
                "a card from rank {} to rank {}, expected from {} to {}",
                self.from, self.to, want.from, want.to
            ));
        }
        if (self.slots, self.slot_size, self.workers) != (want.slots, want.slot_size, want.workers)
        {
            return Err(format!(
                "{} slots of {} bytes, {} workers; expected {} of {}, {}",
                self.slots, self.slot_size, self.workers, want.slots, want.slot_size, want.workers
            ));
        }
        let end =
            |off: u64, n: u64, each: u64| n.checked_mul(each).and_then(|b| b.checked_add(off));
        let r = u64::from(want.rings);
        let ends = [end(self.rings, r, want.ring_bytes), end(self.credits, r, 8)];
        if ends.iter().any(|e| e.is_none_or(|e| e > self.len))
            || self.base.checked_add(self.len).is_none()
        {
            return Err("its rings or credit words lie outside its region".into());
        }
        Ok(())
    }
}

/// The card addressed to `me` among the cards one rank published (its gathered bytes).
#[cfg_attr(
    not(feature = "rdma"),
    allow(dead_code, reason = "verbs gathers its cards")
)]
pub(crate) fn card_for(blob: &[u8], me: u32) -> Result<Card, String> {
    if blob.len() % CARD != 0 {
        return Err(format!(
            "{} bytes of cards, not a multiple of {CARD}",
            blob.len()
        ));
    }
    let mut found = None;
    for chunk in blob.chunks_exact(CARD) {
        let c = Card::decode(chunk)?;
        if c.to == me {
            if found.is_some() {
                return Err(format!("two cards for rank {me}"));
            }
            found = Some(c);
        }
    }
    found.ok_or_else(|| format!("no card for rank {me} (does it use the same fabric?)"))
}
