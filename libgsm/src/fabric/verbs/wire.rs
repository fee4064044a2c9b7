//! What the `verbs` fabric's ranks tell each other through the bootstrap (MPI), as bytes, and the
//! checks those bytes must pass: another process wrote them, so every field is checked before
//! this rank writes a byte to where it points.
//!
//! - The **endpoint** (in the run's offer, one per rank): the port's address (LID, GID, link
//!   layer, MTU) and the device's name for messages.
//! - The **card** (one per peer, in a second exchange after `create`): `fabric/rdma`'s card,
//!   whose two words of the adapter's are the queue pair's number and first sequence number
//!   (checked here, [`check_queue_pair`]).
//!
//! It also decides the queue-pair attributes that depend on both sides (the path MTU, routing
//! by GID or by LID). It does not call verbs (`sys/verbs.rs` does).

use crate::bootstrap::KEY_LEN;
use crate::sys::verbs::{LINK_LAYER_ETHERNET, Port, Transition};

const ENDPOINT_VERSION: u8 = 1;
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

/// Checks a card's words of the verbs adapter and its key: the queue pair number and the first
/// packet sequence number are 24 bits, the number non-zero, and the key an rkey (32 bits).
pub(super) fn check_queue_pair(qpn: u32, psn: u32, key: u64) -> Result<(), String> {
    if qpn == 0 || qpn > 0xFF_FFFF || psn > 0xFF_FFFF {
        return Err(format!(
            "queue pair {qpn:#x}, sequence {psn:#x}: both are 24 bits, the pair non-zero"
        ));
    }
    if key > u64::from(u32::MAX) {
        return Err(format!("an rkey of {key:#x}, wider than 32 bits"));
    }
    Ok(())
}
