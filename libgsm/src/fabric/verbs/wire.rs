//! What the `verbs` fabric's ranks tell each other through the bootstrap (MPI), as bytes, and the
//! checks those bytes must pass: another process wrote them, so every field is checked before
//! this rank writes a byte to where it points.
//!
//! - The **endpoint** (in the run's offer, one per rank): the port's address (LID, GID, link
//!   layer, MTU) and the device's name for messages.
//! - The **card** (one per peer, in a second exchange after `create`): the job key, the ranks,
//!   the ring geometry, the queue pair's number and first sequence number, and the region's
//!   address, rkey, length and where the receiver's rings, credit words and staged headers lie.
//!
//! It also decides the queue-pair attributes that depend on both sides (the path MTU, routing
//! by GID or by LID). It does not call verbs (`sys/verbs.rs` does). See ARCHITECTURE.md.

use crate::bootstrap::KEY_LEN;
use crate::sys::verbs::{LINK_LAYER_ETHERNET, Port, Transition};

const ENDPOINT_VERSION: u8 = 1;
/// Bytes of a card.
pub(super) const CARD: usize = 128;
const MAGIC: &[u8; 8] = b"GSMVRB\0\0";
const CARD_VERSION: u32 = 1;
/// Longest device name carried (Linux caps them at 64 bytes).
const NAME_MAX: usize = 64;

/// A rank's port, as published in its offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Endpoint {
    pub device: String,
    pub port: u8,
    pub link_layer: u8,
    pub lid: u16,
    /// `ibv_mtu` value, 1 (256 B) to 5 (4096 B).
    pub mtu: u32,
    pub gid: [u8; 16],
    pub gid_index: u8,
}

impl Endpoint {
    pub(super) fn of(port: &Port) -> Endpoint {
        Endpoint {
            device: port.device.clone(),
            port: port.num,
            link_layer: port.link_layer,
            lid: port.lid,
            mtu: port.active_mtu,
            gid: port.gid,
            gid_index: port.gid_index,
        }
    }

    /// version, link layer, port, GID index, MTU, LID (LE), GID, name length, name.
    pub(super) fn encode(&self) -> Vec<u8> {
        let name = &self.device.as_bytes()[..self.device.len().min(NAME_MAX)];
        let mut b = vec![
            ENDPOINT_VERSION,
            self.link_layer,
            self.port,
            self.gid_index,
            self.mtu as u8,
        ];
        b.extend_from_slice(&self.lid.to_le_bytes());
        b.extend_from_slice(&self.gid);
        b.push(name.len() as u8);
        b.extend_from_slice(name);
        b
    }

    /// Reads and checks a peer's endpoint.
    pub(super) fn decode(b: &[u8]) -> Result<Endpoint, String> {
        if b.len() < 24 {
            return Err(format!(
                "its verbs endpoint is {} bytes, too short",
                b.len()
            ));
        }
        if b[0] != ENDPOINT_VERSION {
            return Err(format!(
                "verbs endpoint version {}, expected {ENDPOINT_VERSION}",
                b[0]
            ));
        }
        let mtu = u32::from(b[4]);
        if !(1..=5).contains(&mtu) {
            return Err(format!(
                "an MTU code of {mtu}, expected 1 (256 B) to 5 (4096 B)"
            ));
        }
        let n = b[23] as usize;
        if n > NAME_MAX || b.len() != 24 + n {
            return Err(format!("a device name of {n} bytes in {} bytes", b.len()));
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[7..23]);
        let e = Endpoint {
            device: String::from_utf8_lossy(&b[24..]).into_owned(),
            port: b[2],
            link_layer: b[1],
            lid: u16::from_le_bytes([b[5], b[6]]),
            mtu,
            gid,
            gid_index: b[3],
        };
        if e.port == 0 {
            return Err("port 0 (ports count from 1)".into());
        }
        if e.link_layer != LINK_LAYER_ETHERNET && e.lid == 0 && e.gid == [0; 16] {
            return Err(
                "an InfiniBand port without a LID or GID (is the subnet manager up?)".into(),
            );
        }
        Ok(e)
    }
}

/// The INIT -> RTR transition towards a peer: the smaller MTU of the two ports, and routing by
/// GID on Ethernet (RoCE has no LIDs) or when the peer has no LID.
pub(super) fn rtr(mine: &Endpoint, theirs: &Endpoint, qpn: u32, psn: u32) -> Transition {
    let global = (mine.link_layer == LINK_LAYER_ETHERNET || theirs.lid == 0)
        .then_some((theirs.gid, mine.gid_index));
    Transition::Rtr {
        port: mine.port,
        path_mtu: mine.mtu.min(theirs.mtu),
        dest_qpn: qpn,
        rq_psn: psn,
        dlid: if global.is_some() { 0 } else { theirs.lid },
        global,
    }
}

/// The first packet sequence number rank `from` uses towards rank `to` (24 bits). Any value
/// works; distinct ones make a stale packet of an earlier job on the same queue pair numbers
/// unlikely to be taken for this one's.
pub(super) fn psn(key: &[u8; KEY_LEN], from: u32, to: u32) -> u32 {
    let k = u32::from_le_bytes([key[0], key[1], key[2], key[3]]);
    (k ^ from.wrapping_mul(0x9E37_79B9) ^ to.wrapping_mul(0x85EB_CA6B)) & 0xFF_FFFF
}

/// What one rank tells one peer once its queue pair and region exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Card {
    pub key: [u8; KEY_LEN],
    pub from: u32,
    pub to: u32,
    pub slots: u32,
    pub slot_size: u32,
    /// The sender's workers.
    pub workers: u32,
    /// The sender's queue pair towards the receiver.
    pub qpn: u32,
    /// Its first packet sequence number.
    pub psn: u32,
    /// Number of the receiver's section's first ring at the sender.
    pub first: u32,
    /// Address of the sender's region, its rkey and its length.
    pub base: u64,
    pub rkey: u32,
    pub len: u64,
    /// Offsets in that region of the receiver's section: incoming rings, credit words, staged
    /// headers.
    pub rings: u64,
    pub credits: u64,
    pub staged: u64,
}

impl Card {
    /// The 128 bytes (little-endian).
    pub(super) fn encode(&self) -> [u8; CARD] {
        let mut b = [0u8; CARD];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&CARD_VERSION.to_le_bytes());
        b[12..44].copy_from_slice(&self.key);
        let words32 = [
            self.from,
            self.to,
            self.slots,
            self.slot_size,
            self.workers,
            self.qpn,
            self.psn,
            self.first,
            self.rkey,
        ];
        for (i, w) in words32.iter().enumerate() {
            b[44 + 4 * i..48 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        let words64 = [self.base, self.len, self.rings, self.credits, self.staged];
        for (i, w) in words64.iter().enumerate() {
            b[80 + 8 * i..88 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// Reads a card; checks only its form (see [`Card::check`]).
    pub(super) fn decode(b: &[u8]) -> Result<Card, String> {
        if b.len() != CARD {
            return Err(format!("a card of {} bytes, expected {CARD}", b.len()));
        }
        if &b[..8] != MAGIC {
            return Err("not a Gossamer verbs card (bad magic)".into());
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        if u32_at(8) != CARD_VERSION {
            return Err(format!(
                "card version {}, expected {CARD_VERSION}",
                u32_at(8)
            ));
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
            qpn: w(5),
            psn: w(6),
            first: w(7),
            rkey: w(8),
            base: d(0),
            len: d(1),
            rings: d(2),
            credits: d(3),
            staged: d(4),
        })
    }

    /// Checks what a card from `from` to `to` says against what this rank expects: the key
    /// (in constant time), the ranks, the geometry, the queue pair numbers' width, and that
    /// `rings` rings of `ring_bytes`, their credit words and staged headers lie inside the
    /// region it describes (with no overflow).
    pub(super) fn check(&self, want: &Expect) -> Result<(), String> {
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
        if self.qpn == 0 || self.qpn > 0xFF_FFFF || self.psn > 0xFF_FFFF {
            return Err(format!(
                "queue pair {:#x}, sequence {:#x}: both are 24 bits, the pair non-zero",
                self.qpn, self.psn
            ));
        }
        let end =
            |off: u64, n: u64, each: u64| n.checked_mul(each).and_then(|b| b.checked_add(off));
        let r = u64::from(want.rings);
        let ends = [
            end(self.rings, r, want.ring_bytes),
            end(self.credits, r, 8),
            end(self.staged, r * u64::from(self.slots), 8),
        ];
        if ends.iter().any(|e| e.is_none_or(|e| e > self.len))
            || self.base.checked_add(self.len).is_none()
        {
            return Err("its rings, credit words or staged headers lie outside its region".into());
        }
        Ok(())
    }
}

/// What a card must say to this rank.
#[derive(Debug, Clone)]
pub(super) struct Expect {
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

/// The card addressed to `me` among the cards rank `from` published (its gathered bytes).
pub(super) fn card_for(blob: &[u8], me: u32) -> Result<Card, String> {
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
    found.ok_or_else(|| format!("no card for rank {me} (does it use GSM_FABRIC=verbs too?)"))
}
