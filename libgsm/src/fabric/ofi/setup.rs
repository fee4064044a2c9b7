//! The `ofi` fabric's set-up steps: the endpoint bytes, the registered region, the hellos out
//! (`create`, which waits for nobody) and the hellos in (`exchange_hellos`, bounded by the
//! connect timeout). A hello is the peer's [`Card`], sent as a message on the endpoint; every
//! check it must pass before this rank writes a byte to where it points is the card's.
//!
//! It does not move slots or credits; `fabric/rdma` does, from what is built here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::setup_error;
use crate::fabric::rdma::card::{CARD, Card, Expect};
use crate::fabric::rdma::plan::Plan;
use crate::fabric::rdma::region::Region;
use crate::fabric::rdma::rings::Remote;
use crate::fabric::{FabricError, FabricKind, Hooks, Peer, Topology};
use crate::sys::ofi::{self as fi, Stack};

/// Context of a hello send to peer `p` (`SEND | p`) and of a receive into buffer `p`.
const SEND_CTX: usize = 1 << 60;
const RECV_CTX: usize = 2 << 60;
const CTX_MASK: usize = (1 << 60) - 1;

/// Where the hellos lie in the region (its adapter part): one to send to each peer, then one
/// receive buffer per peer.
#[derive(Debug, Clone)]
pub(super) struct Hellos {
    region: Arc<Region>,
    /// Each peer's address (plan order).
    addrs: Vec<u64>,
}

impl Hellos {
    /// Bytes of the hellos for `n` peers.
    fn bytes(n: usize) -> usize {
        2 * n * CARD
    }

    /// Each peer's address (plan order).
    pub(super) fn addrs(&self) -> &[u64] {
        &self.addrs
    }

    fn out(&self, p: usize) -> *mut u8 {
        self.region.at(p * CARD)
    }

    fn buffer(&self, p: usize) -> *mut u8 {
        self.region.at((self.addrs.len() + p) * CARD)
    }

    /// Sends this rank's hello to peer `p` again (it lies unchanged in the region).
    pub(super) fn resend(&self, stack: &mut Stack, p: usize) -> Result<(), FabricError> {
        post_send(stack, self.out(p), self.addrs[p], p)
            .map_err(|e| setup_error(&stack.offer.provider.clone(), &e))
    }

    /// Reposts receive buffer `p` after its hello was read.
    pub(super) fn repost(&self, stack: &mut Stack, p: usize) -> Result<(), FabricError> {
        // SAFETY: buffer `p` is in the registered region and was just read; nothing touches it
        // until its next completion.
        unsafe { stack.recv(self.buffer(p), CARD, RECV_CTX | p) }
            .map_err(|e| setup_error(&stack.offer.provider.clone(), &e))
    }
}

/// What `create` made for `attach`.
#[derive(Debug)]
pub(super) struct Created {
    pub plan: Plan,
    pub region: Arc<Region>,
    pub hellos: Hellos,
    pub hooks: Hooks,
    pub topo: Topology,
}

/// A peer as its hello describes it: where to write, and the key of its region.
#[derive(Debug, Clone)]
pub(super) struct Heard {
    pub remote: Remote,
    pub key: u64,
}

/// This rank's endpoint bytes: provider name, fabric name (each u16-prefixed), the address.
pub(super) fn endpoint_bytes(stack: &Stack) -> Result<Vec<u8>, FabricError> {
    let name = stack
        .name()
        .map_err(|e| setup_error(&stack.offer.provider, &e))?;
    let mut v = Vec::new();
    for s in [&stack.offer.provider, &stack.offer.fabric] {
        v.extend_from_slice(&(s.len() as u16).to_le_bytes());
        v.extend_from_slice(s.as_bytes());
    }
    v.extend_from_slice(&name);
    Ok(v)
}

/// (provider, fabric, address) of a peer's endpoint bytes.
fn decode_endpoint(b: &[u8]) -> Result<(String, String, &[u8]), String> {
    let mut rest = b;
    let mut names = Vec::new();
    for _ in 0..2 {
        if rest.len() < 2 {
            return Err("endpoint bytes cut short".into());
        }
        let n = u16::from_le_bytes([rest[0], rest[1]]) as usize;
        let s = rest.get(2..2 + n).ok_or("endpoint bytes cut short")?;
        names.push(String::from_utf8_lossy(s).into_owned());
        rest = &rest[2 + n..];
    }
    if rest.is_empty() {
        return Err("endpoint bytes without an address".into());
    }
    Ok((names.remove(0), names.remove(0), rest))
}

fn host(topo: &Topology, r: u32) -> String {
    topo.hosts.get(r as usize).cloned().unwrap_or_default()
}

/// Registers the region, inserts the peers, posts a receive per peer and sends every hello.
pub(super) fn create(
    stack: &mut Stack,
    topo: &Topology,
    peers: &[Peer],
    hooks: Hooks,
) -> Result<Created, FabricError> {
    let prov = stack.offer.provider.clone();
    let me = topo.rank;
    let mut list = Vec::with_capacity(peers.len());
    let mut addrs = Vec::with_capacity(peers.len());
    for p in peers {
        if p.rank >= topo.ranks() || p.rank == me {
            return Err(FabricError::Choice {
                value: format!("peer rank {}", p.rank),
                reason: "an ofi peer must be another rank of the job",
            });
        }
        let protocol = |detail: String| FabricError::Protocol {
            fabric: FabricKind::Ofi,
            peer: p.rank,
            host: host(topo, p.rank),
            detail,
        };
        let (their_prov, their_fabric, addr) = decode_endpoint(&p.endpoint).map_err(protocol)?;
        if their_prov != prov || their_fabric != stack.offer.fabric {
            return Err(FabricError::Provider {
                provider: prov.clone(),
                capability: format!(
                    "agreement: rank {} (host {}) opened provider {their_prov:?} on fabric \
                     {their_fabric:?}, this rank {prov:?} on {:?}; set {} (and FI_TCP_IFACE for \
                     tcp) the same on every host",
                    p.rank,
                    host(topo, p.rank),
                    stack.offer.fabric,
                    super::PROVIDER_VAR
                ),
            });
        }
        if prov == "shm" && host(topo, p.rank) != host(topo, me) {
            return Err(FabricError::Provider {
                provider: prov.clone(),
                capability: format!(
                    "reach beyond this host (rank {} runs on {}); choose a network provider \
                     with {}",
                    p.rank,
                    host(topo, p.rank),
                    super::PROVIDER_VAR
                ),
            });
        }
        addrs.push(stack.insert(addr).map_err(|e| setup_error(&prov, &e))?);
        list.push((
            p.rank,
            topo.workers[p.rank as usize],
            topo.first_worker(p.rank),
        ));
    }
    let plan = Plan::new(
        topo.layout,
        topo.local_workers(),
        &list,
        Hellos::bytes(peers.len()),
    )
    .map_err(|reason| FabricError::Choice {
        value: format!("{} ranks of {:?}", topo.ranks(), topo.workers),
        reason,
    })?;
    let region = Arc::new(Region::new(plan.total));
    // SAFETY: the region stays allocated while the stack lives: the stack moves into the ring
    // state, which holds the region too and drops the stack first.
    let reg = unsafe { stack.register(region.at(0), region.len()) }
        .map_err(|e| setup_error(&prov, &e))?;
    let hellos = Hellos {
        region: region.clone(),
        addrs,
    };
    for p in 0..plan.peers.len() {
        hellos.repost(stack, p)?;
    }
    for (p, s) in plan.peers.iter().enumerate() {
        let hello = Card {
            key: topo.key,
            from: me,
            to: s.rank,
            slots: topo.layout.slots,
            slot_size: topo.layout.slot_size,
            workers: topo.local_workers(),
            first: s.first,
            extra: [0; 2],
            base: reg.base,
            mr_key: reg.key,
            len: region.len() as u64,
            rings: plan.ring_in(s.first) as u64,
            credits: plan.credit_in(s.first) as u64,
        };
        // SAFETY: the hello's 128 bytes lie in the region's hello part, written before any
        // send of them and untouched after.
        unsafe { std::ptr::copy_nonoverlapping(hello.encode().as_ptr(), hellos.out(p), CARD) };
        if opens(me, s.rank) {
            post_send(stack, hellos.out(p), hellos.addrs[p], p)
                .map_err(|e| setup_error(&prov, &e))?;
        }
    }
    Ok(Created {
        plan,
        region,
        hellos,
        hooks,
        topo: topo.clone(),
    })
}

/// Whether rank `me` sends the first hello to `peer` (and so opens the connection): the lower
/// rank does. rxm (libfabric 1.17) refuses one of two endpoints that connect to each other at
/// once and may then lose what was sent on the refused one, so only one side connects.
fn opens(me: u32, peer: u32) -> bool {
    me < peer
}

/// Posts a hello. "Again" (`FI_EAGAIN`: the connection is still being made) is not an error:
/// the hello goes out at the next resend, from `exchange_hellos`, which progresses the
/// endpoint; `create` must not wait for a peer.
fn post_send(stack: &mut Stack, buf: *const u8, dest: u64, p: usize) -> Result<(), fi::FiError> {
    // SAFETY: the hello lies in the registered region and is not changed afterwards.
    match unsafe { stack.send(buf, CARD, dest, SEND_CTX | p) } {
        Err(e) if e.code == fi::EAGAIN => Ok(()),
        r => r,
    }
}

/// Every how long a hello not yet answered is sent again.
const RESEND: Duration = Duration::from_millis(300);

/// Whether a completion's context is a hello receive; its buffer if so.
pub(super) fn hello_buffer(context: usize) -> Option<usize> {
    (context & !CTX_MASK == RECV_CTX).then_some(context & CTX_MASK)
}

/// Whether a completion's context is a hello send.
pub(super) fn is_hello_send(context: usize) -> bool {
    context & !CTX_MASK == SEND_CTX
}

/// Waits for every peer's hello and checks each.
///
/// A hello can be lost while connections are being made: rxm in libfabric 1.17 refuses one of
/// two endpoints that connect to each other at once, and the refused send fails. So a hello not
/// yet answered is sent again every [`RESEND`], a second hello from a peer (it has not heard
/// from this rank) is answered with this rank's again, and after set-up the progress thread keeps
/// answering such repeats.
pub(super) fn exchange_hellos(
    stack: &mut Stack,
    c: &Created,
    timeout: Duration,
) -> Result<Vec<Heard>, FabricError> {
    let n = c.plan.peers.len();
    let mut got: Vec<Option<Heard>> = vec![None; n];
    let mut done = Vec::new();
    let start = Instant::now();
    let mut last_send = Instant::now();
    while got.iter().any(Option::is_none) {
        done.clear();
        // A failed hello send is sent again below; other failures cannot happen yet.
        let _ = stack.poll(&mut done);
        for e in &done {
            let Some(buf) = hello_buffer(e.context) else {
                continue;
            };
            let (p, r) = check_hello(c, buf, e.len)?;
            c.hellos.repost(stack, buf)?;
            // The first hello from a rank that opens answers it; a repeat means ours was lost.
            if got[p].is_some() || !opens(c.topo.rank, c.plan.peers[p].rank) {
                c.hellos.resend(stack, p)?;
            }
            got[p] = Some(r);
        }
        if last_send.elapsed() > RESEND {
            last_send = Instant::now();
            let me = c.topo.rank;
            for p in (0..n).filter(|&p| got[p].is_none() && opens(me, c.plan.peers[p].rank)) {
                c.hellos.resend(stack, p)?;
            }
        }
        if start.elapsed() > timeout {
            let p = got.iter().position(Option::is_none).unwrap_or(0);
            let rank = c.plan.peers[p].rank;
            return Err(FabricError::Timeout {
                fabric: FabricKind::Ofi,
                peer: rank,
                host: host(&c.topo, rank),
                seconds: timeout.as_secs(),
            });
        }
        if done.is_empty() {
            std::thread::yield_now();
        }
    }
    Ok(got.into_iter().map(Option::unwrap).collect())
}

/// Checks the hello in receive buffer `buf` (`len` bytes); returns its peer's index and what it
/// says.
fn check_hello(c: &Created, buf: usize, len: usize) -> Result<(usize, Heard), FabricError> {
    // SAFETY: the receive completed, so its bytes are written; `len` is at most CARD (the
    // posted size), and the buffer lies in the region.
    let bytes = unsafe { std::slice::from_raw_parts(c.hellos.buffer(buf), len.min(CARD)) };
    let refuse = |rank: u32, detail: String| FabricError::Protocol {
        fabric: FabricKind::Ofi,
        peer: rank,
        host: host(&c.topo, rank),
        detail: format!("its set-up hello: {detail}"),
    };
    let h = Card::decode(bytes).map_err(|d| refuse(u32::MAX, d))?;
    let p = c
        .plan
        .peers
        .iter()
        .position(|s| s.rank == h.from)
        .ok_or_else(|| refuse(h.from, "it is not an ofi peer of this rank".into()))?;
    let s = &c.plan.peers[p];
    let want = Expect {
        key: c.topo.key,
        from: s.rank,
        to: c.topo.rank,
        slots: c.plan.layout.slots,
        slot_size: c.plan.layout.slot_size,
        workers: s.workers,
        rings: s.rings(c.plan.local),
        ring_bytes: c.plan.ring_bytes as u64,
    };
    h.check(&want).map_err(|d| refuse(h.from, d))?;
    let remote = Remote {
        base: h.base,
        rings: h.rings,
        credits: h.credits,
        first: h.first,
    };
    Ok((
        p,
        Heard {
            remote,
            key: h.mr_key,
        },
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn endpoint_bytes_decode_and_short_ones_are_refused() {
        let mut v = vec![3, 0];
        v.extend_from_slice(b"shm");
        v.extend_from_slice(&[2, 0]);
        v.extend_from_slice(b"ab");
        v.extend_from_slice(&[9, 9]);
        let (p, f, a) = super::decode_endpoint(&v).unwrap();
        assert_eq!((p.as_str(), f.as_str(), a), ("shm", "ab", &[9u8, 9][..]));
        assert!(super::decode_endpoint(&v[..8]).is_err());
        assert!(super::decode_endpoint(&[200, 0, 1]).is_err());
    }
}
