//! `create`'s steps, in order: check the layout and the peers' endpoints, make the shared state
//! and the epoll instance, make every ring (incoming rings whose producers wait for their
//! connection, shadow rings grouped by outgoing connection), start the I/O thread (which accepts
//! from then on), connect and hand the connections over, and make the bells (the rank's, and one
//! per local worker that writes its own connection). It does not wait for any peer (`attach`
//! does) and does not move a byte of a slot (the workers and the I/O thread do).

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::handshake::decode_endpoint;
use super::io::{AttachState, Io, Link, OutRing, Outgoing, Shared, Side, Wiring};
use super::{LANE_BIT, TOKEN_EVENTFD, TOKEN_LISTENER, Tcp, os_error};
use crate::fabric::{
    Bell, FabricError, FabricKind, Hooks, InLink, Lane, Links, OutLink, Peer, Topology,
};
use crate::sys::net::{self, Epoll, ready};
use crate::wire::ring::{Producer, RingLayout, RingMemory};

/// The outgoing connections to make: (peer's listener, the connection's sending side).
pub(super) type Planned = Vec<(SocketAddr, Outgoing)>;
/// Each peer rank with its listener's address.
pub(super) type PeerAddrs = Vec<(u32, SocketAddr)>;

/// Refuses a layout the rings or the frame header cannot carry.
pub(super) fn check_layout(layout: RingLayout) -> Result<(), FabricError> {
    layout.validate().map_err(|_| FabricError::Choice {
        value: format!("{} slots of {} bytes", layout.slots, layout.slot_size),
        reason: "not a valid ring layout",
    })?;
    if layout.slot_size >= LANE_BIT {
        return Err(FabricError::Choice {
            value: format!("slot size {}", layout.slot_size),
            reason: "the tcp fabric carries slots of less than 2 GiB",
        });
    }
    Ok(())
}

/// Each peer's listener address, decoded from its endpoint bytes, and which ranks are peers.
pub(super) fn peer_addresses(
    topo: &Topology,
    peers: &[Peer],
) -> Result<(PeerAddrs, Vec<bool>), FabricError> {
    let ranks = topo.ranks();
    let host = |r: u32| topo.hosts.get(r as usize).cloned().unwrap_or_default();
    let mut addrs = Vec::with_capacity(peers.len());
    let mut is_peer = vec![false; ranks as usize];
    for p in peers {
        if p.rank >= ranks || p.rank == topo.rank {
            return Err(FabricError::Choice {
                value: format!("peer rank {}", p.rank),
                reason: "a tcp peer must be another rank of the job",
            });
        }
        let addr = decode_endpoint(&p.endpoint).map_err(|detail| FabricError::Protocol {
            fabric: FabricKind::Tcp,
            peer: p.rank,
            host: host(p.rank),
            detail,
        })?;
        is_peer[p.rank as usize] = true;
        addrs.push((p.rank, addr));
    }
    Ok((addrs, is_peer))
}

/// The eventfd, the epoll instance and the state shared with the I/O thread.
pub(super) fn shared_state(topo: &Topology) -> Result<(Arc<Shared>, Arc<Epoll>), FabricError> {
    let eventfd = net::eventfd().map_err(|e| os_error("creating an eventfd", &e))?;
    let epoll = Epoll::new().map_err(|e| os_error("creating an epoll instance", &e))?;
    let shared = Arc::new(Shared {
        eventfd,
        sleeping: AtomicBool::new(false),
        dirty: (0..topo.total_workers().div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect(),
        stop: AtomicBool::new(false),
        closing: AtomicBool::new(false),
        attach: Mutex::new(AttachState {
            from: vec![0; topo.ranks() as usize],
            failed: None,
            accept_failure: None,
        }),
        attached: Condvar::new(),
        handover: Mutex::new(Vec::new()),
        handed: AtomicBool::new(false),
        incoming: Mutex::new(Vec::new()),
        pollers: AtomicUsize::new(0),
        polling: (0..topo.local_workers())
            .map(|_| AtomicBool::new(false))
            .collect(),
    });
    Ok((shared, Arc::new(epoll)))
}

/// The incoming rings: their consumers go into `links`; their producers wait, per source global
/// worker, for that worker's connection (the returned table).
pub(super) fn incoming_rings(
    topo: &Topology,
    addrs: &[(u32, SocketAddr)],
    links: &mut Links,
) -> Vec<Option<Vec<Producer>>> {
    let nlocal = topo.local_workers();
    let mut unclaimed: Vec<Option<Vec<Producer>>> =
        (0..topo.total_workers()).map(|_| None).collect();
    for &(r, _) in addrs {
        for g in topo.workers_of(r) {
            let mut ps = Vec::with_capacity(2 * nlocal as usize);
            for l in 0..nlocal {
                for lane in [Lane::Request, Lane::Response] {
                    let (p, c) = Arc::new(RingMemory::new_heap(topo.layout)).split();
                    ps.push(p);
                    links.incoming.push(InLink {
                        local: l,
                        remote: g,
                        lane,
                        consumer: c,
                    });
                }
            }
            unclaimed[g as usize] = Some(ps);
        }
    }
    unclaimed
}

/// The shadow rings: one connection per (local worker, peer rank), each with a ring per remote
/// worker and lane; their producers go into `links`. Returns the connections to make (index =
/// their place in the I/O thread's table) and, per rank, the indices of its connections.
pub(super) fn shadow_rings(
    topo: &Topology,
    addrs: &[(u32, SocketAddr)],
    links: &mut Links,
) -> (Planned, Vec<Vec<usize>>) {
    let mut outgoing: Planned = Vec::new();
    let mut outs_of_rank: Vec<Vec<usize>> = vec![Vec::new(); topo.ranks() as usize];
    for l in 0..topo.local_workers() {
        for &(r, addr) in addrs {
            let mut rings = Vec::new();
            for g in topo.workers_of(r) {
                for lane in [Lane::Request, Lane::Response] {
                    let (p, c) = Arc::new(RingMemory::new_heap(topo.layout)).split();
                    links.outgoing.push(OutLink {
                        local: l,
                        remote: g,
                        lane,
                        producer: p,
                    });
                    rings.push(OutRing::new(g, lane, c));
                }
            }
            outs_of_rank[r as usize].push(outgoing.len());
            outgoing.push((addr, Outgoing::new(r, l, rings)));
        }
    }
    (outgoing, outs_of_rank)
}

/// Registers `fd` with the I/O thread's epoll instance; the error names `what`.
fn register(
    epoll: &Epoll,
    fd: BorrowedFd<'_>,
    ev: u32,
    token: u64,
    what: &str,
) -> Result<(), FabricError> {
    epoll
        .add(fd, ev, token)
        .map_err(|e| os_error(format!("registering {what} with epoll"), &e))
}

/// Registers the eventfd and the listener, and starts the I/O thread, which accepts from now on.
pub(super) fn start_io(
    topo: &Topology,
    epoll: &Arc<Epoll>,
    shared: &Arc<Shared>,
    hooks: Hooks,
    listener: TcpListener,
    wiring: Wiring,
) -> Result<JoinHandle<()>, FabricError> {
    register(
        epoll,
        shared.eventfd.as_fd(),
        ready::IN,
        TOKEN_EVENTFD,
        "the eventfd",
    )?;
    register(
        epoll,
        listener.as_fd(),
        ready::IN | ready::ET,
        TOKEN_LISTENER,
        "the listener",
    )?;
    let io = Io::new(topo, epoll.clone(), shared.clone(), hooks, listener, wiring);
    std::thread::Builder::new()
        .name("gsm-tcp-io".into())
        .spawn(move || io.run())
        .map_err(|e| os_error("starting the tcp I/O thread", &e))
}

impl Tcp {
    /// Opens every planned connection, registers it, and hands them all to the I/O thread;
    /// returns them as (local worker, peer rank, link) for the workers' bells.
    ///
    /// Only once this rank accepts: a peer's listen backlog may be smaller than the connections
    /// coming to it, and two ranks each blocked connecting to the other while neither accepts
    /// would wait until the connect timeout.
    pub(super) fn connect_all(
        &self,
        topo: &Topology,
        epoll: &Epoll,
        shared: &Shared,
        outgoing: Planned,
    ) -> Result<Vec<(u32, u32, Arc<Link>)>, FabricError> {
        let mut handed = Vec::with_capacity(outgoing.len());
        let mut made = Vec::with_capacity(outgoing.len());
        for (i, (addr, o)) in outgoing.into_iter().enumerate() {
            let sock = self.connect(topo, o.local, o.rank, addr)?;
            register(
                epoll,
                sock.as_fd(),
                ready::IN | ready::OUT | ready::RDHUP | ready::ET,
                i as u64,
                "a connection",
            )?;
            let (l, r) = (o.local, o.rank);
            let link = Arc::new(Link::new(sock, addr, i as u64, Side::Out(Box::new(o))));
            made.push((l, r, link.clone()));
            handed.push((i, link));
        }
        *shared.handover.lock().unwrap_or_else(|p| p.into_inner()) = handed;
        shared.handed.store(true, Ordering::Release);
        shared.wake();
        Ok(made)
    }
}

/// A bell for every remote worker of the peers: it marks the worker's bit for the I/O thread.
pub(super) fn bells(
    topo: &Topology,
    shared: &Arc<Shared>,
    addrs: &[(u32, SocketAddr)],
    links: &mut Links,
) {
    for &(r, _) in addrs {
        for g in topo.workers_of(r) {
            let s = shared.clone();
            links
                .bells
                .push((g, Bell::Call(Arc::new(move || s.ring(g)))));
        }
    }
}

/// A bell for every (local worker, remote worker) pair: the worker writes its own connection to
/// the remote worker's rank as it rings (see `io::link`).
pub(super) fn worker_bells(
    topo: &Topology,
    shared: &Arc<Shared>,
    made: &[(u32, u32, Arc<Link>)],
    links: &mut Links,
) {
    for (l, r, link) in made {
        for g in topo.workers_of(*r) {
            let (s, link) = (shared.clone(), link.clone());
            links
                .worker_bells
                .push((*l, g, Bell::Call(Arc::new(move || link.send_now(&s)))));
        }
    }
}
