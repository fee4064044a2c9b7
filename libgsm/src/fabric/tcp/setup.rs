//! `create`'s steps, in order: check the layout and the peers' endpoints, make the shared state
//! and the epoll instance, make every ring (incoming rings whose producers wait for their
//! connection, shadow rings grouped by outgoing connection), start the I/O thread (which accepts
//! from then on), connect and hand the connections over, and make the bells (the rank's, and one
//! per local worker that writes its own connection). It does not wait for any peer (`attach`
//! does) and does not move a byte of a slot (the workers and the I/O thread do).

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::connect::{Dialer, delay_acks};
use super::groups::Groups;
use super::handshake::decode_endpoint;
use super::io::{
    ARMED, AttachState, Awaited, Dests, Incoming, Io, Link, OutCell, OutRing, Outgoing, Shared,
    Side, Unclaimed, Wiring,
};
use super::segment::{self, OwnSegment};
use super::{LANE_BIT, TOKEN_EVENTFD, TOKEN_LISTENER, os_error};
use crate::fabric::{
    Bell, FabricError, FabricKind, Hooks, InLink, Lane, Links, OutLink, Peer, Topology,
};
use crate::sys::net::{self, Epoll, ready};
use crate::wire::ring::{Producer, RingLayout, RingMemory};

/// An outgoing connection to make.
pub(super) struct Plan {
    /// The peer's listener.
    addr: SocketAddr,
    /// Its sending side.
    out: Outgoing,
    /// Two-way: the peer's worker that writes back on it, and the producers of that worker's
    /// incoming rings.
    back: Option<(u32, Vec<Option<Producer>>)>,
    /// Where the workers' bells find the outgoing half.
    cell: OutCell,
}

/// The connections `shadow_rings` plans.
pub(super) struct Wires {
    /// To make, in order (index `k`: tokens `2k` and `2k + 1`).
    pub(super) planned: Vec<Plan>,
    /// Per rank, the tokens of the outgoing halves to it made here.
    pub(super) outs_of_rank: Vec<Vec<usize>>,
    /// Outgoing halves that wait for a peer's two-way connection, by (peer rank, local worker).
    pub(super) awaited: Awaited,
    /// Every outgoing half's cell, as (local worker, the remote workers it reaches, cell), for
    /// the workers' bells.
    pub(super) cells: Vec<(u32, Vec<u32>, OutCell)>,
}
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

/// The incoming rings of this rank's workers: their consumers go into `links`. A ring whose
/// frames this rank reads is on the heap, its producer in the returned table under its source
/// worker; one another rank of the group reads is in this rank's tcp segment (made here when
/// there is any), its producer that rank's to take at `attach`.
pub(super) fn incoming_rings(
    topo: &Topology,
    groups: &Groups,
    links: &mut Links,
) -> Result<(Unclaimed, Option<OwnSegment>), FabricError> {
    let nlocal = topo.local_workers();
    let mine = groups.members(groups.mine());
    let mut unclaimed: Unclaimed = (0..topo.total_workers()).map(|_| None).collect();
    for h in groups.remote() {
        for &g in groups.members(h) {
            if groups.reader(g) != topo.rank {
                continue;
            }
            let mut ps: Vec<Option<Producer>> = (0..2 * mine.len()).map(|_| None).collect();
            for l in 0..nlocal {
                let i = groups.index(groups.global(l)) as usize;
                for (k, lane) in [Lane::Request, Lane::Response].into_iter().enumerate() {
                    let (p, c) = Arc::new(RingMemory::new_heap(topo.layout)).split();
                    ps[2 * i + k] = Some(p);
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
    let plan = segment::plan(groups, topo, topo.rank);
    if plan.is_empty() {
        return Ok((unclaimed, None));
    }
    let (own, consumers) = segment::create(topo, &plan)?;
    for (&(g, l, lane), consumer) in plan.iter().zip(consumers) {
        links.incoming.push(InLink {
            local: l,
            remote: g,
            lane,
            consumer,
        });
    }
    Ok((unclaimed, Some(own)))
}

/// The shadow rings: one outgoing half per (local worker, remote group), each with a ring per
/// worker of the group and lane; their producers go into `links`. The half goes to the group's
/// worker `Groups::target` names; where this rank's worker pairs with it (`Groups::partner`),
/// this rank either connects two-way (the lower rank: the plan takes the producers of the
/// partner's incoming rings out of `unclaimed`) or waits for the partner's connection to write
/// back on (`Wires::awaited`).
pub(super) fn shadow_rings(
    topo: &Topology,
    groups: &Groups,
    addrs: &[(u32, SocketAddr)],
    links: &mut Links,
    unclaimed: &mut Unclaimed,
    two_way: bool,
) -> Wires {
    let mut w = Wires {
        planned: Vec::new(),
        outs_of_rank: vec![Vec::new(); topo.ranks() as usize],
        awaited: HashMap::new(),
        cells: Vec::new(),
    };
    let addr_of: HashMap<u32, SocketAddr> = addrs.iter().copied().collect();
    for l in 0..topo.local_workers() {
        let me = groups.global(l);
        for h in groups.remote() {
            let t = groups.target(me, h);
            let r = groups.rank(t);
            let Some(&addr) = addr_of.get(&r) else {
                continue;
            };
            let mut rings = Vec::new();
            let members = groups.members(h).to_vec();
            for &g in &members {
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
            let cell = OutCell::default();
            w.cells.push((l, members, cell.clone()));
            if !groups.connects(me, h, two_way) {
                let out = Outgoing::new(r, l, rings, true);
                w.awaited.insert((r, l), (out, cell));
                continue;
            }
            let back = groups.partner(me, h, two_way).map(|p| {
                let producers = unclaimed[p as usize]
                    .take()
                    .expect("every remote worker this rank reads has its incoming rings");
                (groups.local(p), producers)
            });
            // The outgoing half's token is 2k, a two-way connection's incoming half's 2k + 1.
            // A bell for any worker of the group marks it.
            for rr in groups.ranks_of(h) {
                w.outs_of_rank[rr as usize].push(2 * w.planned.len());
            }
            let out = Outgoing::new(r, l, rings, back.is_some());
            w.planned.push(Plan {
                addr,
                out,
                back,
                cell,
            });
        }
    }
    w
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

/// Opens every planned connection, registers it, and hands them all to the I/O thread; a
/// two-way connection becomes two links, its outgoing half on a `dup` of the socket (epoll
/// keys on the descriptor, and the halves want different triggers) and its incoming half,
/// offered to the workers and counted for `attach` at once. The outgoing halves are put in
/// their cells for the workers' bells.
///
/// Only once this rank accepts: a peer's listen backlog may be smaller than the connections
/// coming to it, and two ranks each blocked connecting to the other while neither accepts
/// would wait until the connect timeout.
pub(super) fn connect_all(
    dialer: &Dialer,
    topo: &Topology,
    epoll: &Epoll,
    shared: &Shared,
    planned: Vec<Plan>,
    dests: &Arc<Dests>,
) -> Result<(), FabricError> {
    let mut handed = Vec::with_capacity(2 * planned.len());
    for (k, plan) in planned.into_iter().enumerate() {
        let Plan {
            addr,
            out,
            back,
            cell,
        } = plan;
        let (l, r) = (out.local, out.rank);
        let two_way = back.is_some();
        let sock = dialer.connect(topo, l, r, addr, back.as_ref().map(|b| b.0))?;
        let (t_out, t_in) = (2 * k as u64, 2 * k as u64 + 1);
        let out_sock = match back {
            None => sock,
            Some((b, producers)) => {
                let what = || format!("connecting worker {l} to rank {r}");
                let out_sock = sock.try_clone().map_err(|e| os_error(what(), &e))?;
                delay_acks(&sock);
                register(epoll, sock.as_fd(), ARMED, t_in, "a connection")?;
                let src = topo.first_worker(r) + b;
                let inc = Incoming::new(
                    (r, b, src, l),
                    producers,
                    dests.clone(),
                    topo.layout.slot_size,
                );
                let link = Arc::new(Link::new(sock, addr, t_in, Side::In(Box::new(inc))));
                shared.offer_incoming(link.clone(), r);
                handed.push((t_in as usize, link));
                out_sock
            }
        };
        let ev = if two_way {
            ready::OUT | ready::ET
        } else {
            ready::IN | ready::OUT | ready::RDHUP | ready::ET
        };
        register(epoll, out_sock.as_fd(), ev, t_out, "a connection")?;
        let link = Arc::new(Link::new(out_sock, addr, t_out, Side::Out(Box::new(out))));
        let _ = cell.set(link.clone());
        handed.push((t_out as usize, link));
    }
    *shared.handover.lock().unwrap_or_else(|p| p.into_inner()) = handed;
    shared.handed.store(true, Ordering::Release);
    shared.wake();
    Ok(())
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
/// the remote worker's rank as it rings (see `io::link`). An outgoing half that waits for the
/// peer's two-way connection is not there yet: the bell then rings the rank's bitmap, and the
/// half, made with its rings marked pending, is drained once it comes.
pub(super) fn worker_bells(
    shared: &Arc<Shared>,
    cells: &[(u32, Vec<u32>, OutCell)],
    links: &mut Links,
) {
    for (l, remote, cell) in cells {
        for &g in remote {
            let (s, cell) = (shared.clone(), cell.clone());
            let ring = move || match cell.get() {
                Some(link) => link.send_now(&s),
                None => s.ring(g),
            };
            links.worker_bells.push((*l, g, Bell::Call(Arc::new(ring))));
        }
    }
}
