//! The bytes a tcp connection opens with: a listener's address as endpoint bytes (what the
//! bootstrap exchange publishes) and the 72-byte hello that proves the job key and says who
//! writes what on the connection (the pairing rule, `Groups::partner`), with every check the acceptor
//! makes of it. Pure functions over bytes: it opens no socket and keeps no state;
//! the layout of both is in the `tcp` module docs, the frames that follow a hello are
//! `io::send`'s and `io::recv`'s. See `fabric/tcp/README.md`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::groups::Groups;
use crate::bootstrap::KEY_LEN;
use crate::wire::ring::RingLayout;

const MAGIC: [u8; 8] = *b"GSMTCP\0\0";
/// 3: the hello says whether connections are per host or per rank (word 68).
const VERSION: u32 = 3;
/// Bytes of a hello.
pub(super) const HELLO_LEN: usize = 72;
/// The hello's `back` word of a one-way connection.
const ONE_WAY: u32 = u32::MAX;

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
    /// Whether connections are per (worker, remote host) (`groups`).
    pub(super) per_host: bool,
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
            u32::from(self.per_host),
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
    /// Whether this rank pairs workers on two-way connections (`Groups::partner`).
    pub(super) two_way: bool,
    /// Who reads what (and whether per host).
    pub(super) groups: &'a Groups,
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
    let per_host = word(b, 68) == 1;
    if word(b, 68) > 1 || per_host != x.groups.per_host {
        let say = |p: bool| {
            if p {
                "per (worker, host)"
            } else {
                "per (worker, rank)"
            }
        };
        return Err(format!(
            "it makes connections {}, this rank {} (is {} the same on every rank, and the \
             fabric the same on every host?)",
            say(per_host),
            say(x.groups.per_host),
            super::PER_HOST_VAR
        ));
    }
    let back = match word(b, 64) {
        ONE_WAY => None,
        w => Some(w),
    };
    let gs = x.workers[..src_rank as usize].iter().sum::<u32>() + src_local;
    let mine = x.groups.mine();
    let t = x.groups.target(gs, mine);
    if x.groups.rank(t) != x.rank {
        return Err(format!(
            "rank {src_rank}'s worker {src_local} sends to this host through rank {}, not this one",
            x.groups.rank(t)
        ));
    }
    if !x.groups.connects(gs, mine, x.two_way) {
        return Err(format!(
            "rank {src_rank}'s worker {src_local} writes back on this rank's worker {}'s \
             connection instead (is {} the same on every rank?)",
            x.groups.local(t),
            super::TWO_WAY_VAR
        ));
    }
    let want = x
        .groups
        .partner(gs, mine, x.two_way)
        .map(|p| x.groups.local(p));
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
