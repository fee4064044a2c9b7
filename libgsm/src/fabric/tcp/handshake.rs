//! The bytes a tcp connection opens with: a listener's address as endpoint bytes (what the
//! bootstrap exchange publishes) and the 68-byte hello that proves the job key and says who
//! writes what on the connection (the pairing rule, [`partner`]), with every check the acceptor
//! makes of it. Pure functions over bytes: it opens no socket and keeps no state;
//! the layout of both is in the `tcp` module docs, the frames that follow a hello are
//! `io::send`'s and `io::recv`'s. See ARCHITECTURE.md.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::bootstrap::KEY_LEN;
use crate::wire::ring::RingLayout;

const MAGIC: [u8; 8] = *b"GSMTCP\0\0";
/// 2: the hello carries the worker that writes back on a two-way connection.
const VERSION: u32 = 2;
/// Bytes of a hello.
pub(super) const HELLO_LEN: usize = 68;
/// The hello's `back` word of a one-way connection.
const ONE_WAY: u32 = u32::MAX;

/// The worker of rank `acceptor` that writes its frames to rank `connector` back on the
/// connection from `connector`'s worker `l`, if that connection is two-way (`None`: it carries
/// `l`'s frames only). Worker `l` of the lower rank pairs with worker `l` of the higher one:
/// the lower rank connects, the higher one answers on it, and workers without a partner
/// (unequal counts) keep a one-way connection each. `two_way` false (`GSM_TCP_TWO_WAY=0`)
/// pairs nobody: every worker connects to every peer rank, as before issue 33's fourth
/// session. Both ends compute it from the topology, so the hello only confirms it.
pub(super) fn partner(
    connector: u32,
    l: u32,
    acceptor: u32,
    workers: &[u32],
    two_way: bool,
) -> Option<u32> {
    let has = |r: u32| workers.get(r as usize).is_some_and(|&n| l < n);
    (two_way && connector < acceptor && has(connector) && has(acceptor)).then_some(l)
}

/// Whether worker `l` of rank `me` opens a connection to rank `r`: unless its frames ride back
/// on the two-way connection of `r`'s worker `l` (see [`partner`]).
pub(super) fn connects(me: u32, l: u32, r: u32, workers: &[u32], two_way: bool) -> bool {
    partner(r, l, me, workers, two_way).is_none()
}

/// Encodes a listener's address as endpoint bytes.
pub(super) fn encode_endpoint(addr: SocketAddr) -> Vec<u8> {
    let mut v = Vec::with_capacity(19);
    match addr.ip() {
        IpAddr::V4(ip) => {
            v.push(4);
            v.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            v.push(6);
            v.extend_from_slice(&ip.octets());
        }
    }
    v.extend_from_slice(&addr.port().to_be_bytes());
    v
}

/// Decodes endpoint bytes; the error says what is wrong with them.
pub(super) fn decode_endpoint(b: &[u8]) -> Result<SocketAddr, String> {
    let (ip, rest): (IpAddr, &[u8]) = match b.first() {
        None => return Err("it published no tcp endpoint (is tcp compiled in there?)".into()),
        Some(4) if b.len() == 7 => {
            let o: [u8; 4] = b[1..5].try_into().expect("length checked");
            (Ipv4Addr::from(o).into(), &b[5..])
        }
        Some(6) if b.len() == 19 => {
            let o: [u8; 16] = b[1..17].try_into().expect("length checked");
            (Ipv6Addr::from(o).into(), &b[17..])
        }
        Some(f @ (4 | 6)) => {
            return Err(format!(
                "its IPv{f} tcp endpoint has {} bytes instead of {}",
                b.len(),
                if *f == 4 { 7 } else { 19 }
            ));
        }
        Some(f) => return Err(format!("its tcp endpoint has unknown address family {f}")),
    };
    let port = u16::from_be_bytes([rest[0], rest[1]]);
    if port == 0 || ip.is_unspecified() {
        return Err(format!(
            "its tcp endpoint {ip}:{port} cannot be connected to"
        ));
    }
    Ok(SocketAddr::new(ip, port))
}

/// What a connection's first bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hello {
    pub(super) key: [u8; KEY_LEN],
    pub(super) src_rank: u32,
    pub(super) src_local: u32,
    pub(super) dst_rank: u32,
    pub(super) layout: RingLayout,
    /// The acceptor's worker that writes back on this connection (two-way), or `None`.
    pub(super) back: Option<u32>,
}

impl Hello {
    pub(super) fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..44].copy_from_slice(&self.key);
        for (i, v) in [
            self.src_rank,
            self.src_local,
            self.dst_rank,
            self.layout.slots,
            self.layout.slot_size,
            self.back.unwrap_or(ONE_WAY),
        ]
        .into_iter()
        .enumerate()
        {
            b[44 + 4 * i..48 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}

pub(super) fn word(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("in bounds"))
}

/// Compares two keys in time independent of where they differ.
fn same_key(a: &[u8; KEY_LEN], b: &[u8]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0 && b.len() == KEY_LEN
}

/// What the acceptor checks a hello against.
pub(super) struct Expect<'a> {
    pub(super) key: &'a [u8; KEY_LEN],
    pub(super) rank: u32,
    pub(super) workers: &'a [u32],
    pub(super) is_peer: &'a [bool],
    pub(super) layout: RingLayout,
    /// Whether this rank pairs workers on two-way connections ([`partner`]).
    pub(super) two_way: bool,
}

/// What an acceptor learns from a hello it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Accepted {
    pub(super) src_rank: u32,
    pub(super) src_local: u32,
    /// The local worker that writes back on the connection (two-way), or `None`.
    pub(super) back: Option<u32>,
}

/// Checks a complete hello; what it says, or why it is refused.
pub(super) fn check_hello(b: &[u8; HELLO_LEN], x: &Expect<'_>) -> Result<Accepted, String> {
    if b[0..8] != MAGIC {
        return Err("not a gossamer tcp hello (wrong magic bytes)".into());
    }
    let version = word(b, 8);
    if version != VERSION {
        return Err(format!(
            "protocol version {version}, this build speaks {VERSION}"
        ));
    }
    if !same_key(x.key, &b[12..44]) {
        return Err("wrong job key (not a connection of this job)".into());
    }
    let (src_rank, src_local, dst_rank) = (word(b, 44), word(b, 48), word(b, 52));
    let layout = RingLayout {
        slots: word(b, 56),
        slot_size: word(b, 60),
    };
    if dst_rank != x.rank {
        return Err(format!(
            "it is meant for rank {dst_rank}, this is rank {}",
            x.rank
        ));
    }
    if !x.is_peer.get(src_rank as usize).copied().unwrap_or(false) {
        return Err(format!("rank {src_rank} is not a tcp peer of this rank"));
    }
    if src_local >= x.workers[src_rank as usize] {
        return Err(format!("rank {src_rank} has no worker {src_local}"));
    }
    if layout != x.layout {
        return Err(format!(
            "its rings have {} slots of {} bytes, this job's have {} of {}",
            layout.slots, layout.slot_size, x.layout.slots, x.layout.slot_size
        ));
    }
    let back = match word(b, 64) {
        ONE_WAY => None,
        w => Some(w),
    };
    let want = partner(src_rank, src_local, x.rank, x.workers, x.two_way);
    if back != want {
        let say = |w: Option<u32>| match w {
            Some(w) => format!("two-way, with worker {w} of rank {} writing back", x.rank),
            None => "one-way".to_string(),
        };
        return Err(format!(
            "it says the connection of rank {src_rank}'s worker {src_local} is {}, this rank \
             expects it {} (is {} the same on every rank?)",
            say(back),
            say(want),
            super::TWO_WAY_VAR
        ));
    }
    Ok(Accepted {
        src_rank,
        src_local,
        back,
    })
}
