//! The `tcp` fabric: slot rings between ranks on different hosts, carried over TCP connections
//! that prove the job key.
//!
//! It abstracts one thing: making a remote worker's rings look local. Every ring end the runtime
//! gets is an ordinary heap ring in this process. The workers move slots between those rings and
//! the sockets themselves, on their own threads: a worker writes its connection when it rings the
//! bell after publishing, and reads the incoming connections when it polls. One I/O thread per
//! rank (`gsm-tcp-io`) accepts and authenticates connections, reports lost peers, finishes a write
//! the socket could not take (back-pressure), and reads the sockets while every worker of the rank
//! sleeps. It does not encode records, choose which peers it serves, retry lost connections, or
//! encrypt anything (the key proves membership of the job; it does not hide the traffic).
//!
//! # Why the workers do the socket I/O
//!
//! A blocking round trip through an I/O thread crossed four thread hand-offs (worker -> I/O
//! thread -> socket -> I/O thread -> worker, each way a bell, an eventfd or epoll wake, and a
//! futex wake), several times Open MPI's ping-pong, whose calling thread polls its socket itself
//! (figures in docs/performance-log.md). Now the only cross-thread step of a round trip is
//! the kernel's: the client's worker `send`s from its bell, the trustee's worker `recv`s in its next
//! poll, serves, and `send`s the answer from its bell; the client's poll `recv`s it. Batching is
//! kept: a bell drains every slot its shadow rings hold into one `send`, and a poll reads up to
//! 1 MiB per connection, so a busy worker makes one system call per destination per poll; a read
//! that does not fill the buffer ends the pass (the socket is empty, and another `recv` would only
//! say so). An idle worker keeps polling (one `recv` per incoming connection per turn) for its
//! spin budget (64 turns, 1 when the rank's awake workers outnumber their CPUs), yields, then
//! parks: the last worker of the rank to park hands the sockets to the I/O thread (see
//! `io::link`), which reads and wakes the worker as before, so a job with more workers than cores
//! loses nothing it had. While polling, a worker gives the CPU away every 2 empty polls, or every
//! 16 while its yields come straight back (`io::link::Rhythm`): on a loaded machine the kernel
//! delivers loopback and veth packets from `ksoftirqd`, which a poller that never yields starves;
//! on an idle one each yield is a system call between an answer landing and its being read.
//!
//! Each incoming connection has a home worker, the one with the connecting worker's index
//! (modulo this rank's workers; on a two-way connection, the one that writes back on it). A
//! polling worker reads its own connections, and another's only while that home sleeps or its
//! polls have stood still for a few dozen of the reader's (it runs a long task): with every
//! worker reading every connection, a request was as often read by a worker it was not for,
//! which then had to wake its addressee and kept itself polling (see `fabric/tcp/README.md`).
//!
//! # Why connections are two-way, and the ACKs delayed
//!
//! A connection that carries data one way can never let an ACK ride on an answer: the kernel
//! sends a bare ACK from every `recv` that empties it, one more packet through the whole stack
//! on the path of every round trip. So worker `l` of
//! the lower rank of a pair and worker `l` of the higher one share one connection: the lower
//! rank's worker connects, and the higher rank's worker writes its own frames back on it
//! (`handshake::partner`; the hello says who writes back, and the acceptor checks it against the
//! same rule). A blocking `apply` between the first workers of two ranks then goes out and comes
//! back on one socket, and the answer carries the ACK. Workers without a partner (unequal
//! counts) keep a one-way connection each. A two-way connection is two links, a reading half and
//! a writing half, each behind its own mutex (a worker writing never waits for one reading) and
//! each with its own epoll registration: the writing half's on a `dup` of the socket, because
//! epoll keys on the descriptor and the halves want different triggers. [`TWO_WAY_VAR`]`=0`
//! pairs nobody (one-way connections only), for comparing.
//!
//! Incoming sockets are also put in the kernel's delayed-ACK ("ping-pong") mode (`TCP_QUICKACK`
//! off, at accept or connect and again by a reader at most every 10 ms, because the kernel
//! leaves that mode whenever its delayed-ACK timer fires): a request that is not answered on the
//! connection it came on (another worker answers, on its own) then does not cost a bare ACK
//! either. Streams are not slowed: the kernel still acknowledges every second full segment and
//! every second small pushed one at once.
//!
//! `TCP_NODELAY` is on (a frame is a whole batch; Nagle would hold the next small one for an
//! ACK). `SO_BUSY_POLL` is left to the system (`net.core.busy_read`): it polls a NIC's queue,
//! which loopback and veth do not have.
//!
//! # One connection per (worker, remote host)
//!
//! The ranks of a host form a *group* (`groups`), and each worker has one connection to each
//! remote host, whatever its ranks: worker `i` of host A (its index among A's workers, rank by
//! rank) reaches host B through B's worker `i mod workers(B)`, whose rank reads it, so the
//! reading spreads over B's ranks; worker `i` of A and worker `i` of B share one two-way
//! connection (the lower rank connects), the rest are one-way. A 2-host × 2-rank × 2-worker job
//! has 4 connections between the hosts (8 per rank pair). A frame names any worker of the
//! receiving host; the reading rank delivers a frame for another rank of its host into that
//! rank's incoming ring, which lives in that rank's tcp segment (`segment`,
//! `/dev/shm/{job}-r{rank}-tcp`, created in `create`, mapped by the readers in `attach`,
//! unlinked at `sealed`), and wakes its worker through that worker's shm doorbell (lent by the
//! shm fabric, `Tcp::lend_bells`). Before `attach` a frame for another rank is held like one
//! for a full ring. The origin of a frame is the connection's source worker, as before, so
//! answers go back as before: the answering worker writes its own connection to the origin's
//! host.
//!
//! Why this and not forwarding over shm: a frame forwarded through the shm ring from the
//! reading rank's worker would arrive as that worker's, losing the origin the answer must go
//! to; producing into the consumer's own ring keeps the ring per (remote worker, local worker,
//! lane) that the runtime already polls, with nothing new on its side.
//!
//! Not served per host (each rank then is its own group, as before; stated once with
//! `RUST_LOG=info`): `--fabric tcp` between ranks of one host (they have no shm fabric to
//! lend doorbells), and [`PER_HOST_VAR`]`=0`, for comparing. The hello says which layout a rank
//! makes, and a mismatch is refused by name. Cost of sharing: a frame for another rank of the
//! host waits for the reading rank to poll (or, while its workers sleep, for its I/O thread),
//! one futex wake more when the consumer sleeps.
//!
//! # Set-up
//!
//! - [`Tcp::prepare`] binds a listener to `Settings::bind`, else to the address this host's
//!   name resolves to, else to 127.0.0.1, always on port 0; it never binds `0.0.0.0` unless
//!   `Settings::bind` says so (and then advertises the hostname's address). The endpoint bytes
//!   are the listener's address: `4` + 4 address bytes + port (big-endian), or `6` + 16 bytes +
//!   port.
//! - [`Fabric::create`] makes every ring, starts the I/O thread (which accepts from then on),
//!   opens one connection per (local worker, remote group) that it does not share with a partner
//!   of the peer's (see above) with a blocking connect (every peer's listener exists before the
//!   exchange, so the kernel completes it from the backlog without the peer doing anything),
//!   writes the hello, and hands the connections to the I/O thread, which watches them for
//!   back-pressure and loss, and makes a bell per (local worker, remote worker) that writes the
//!   worker's connection (`Links::worker_bells`; for a writing half that waits for the peer's
//!   two-way connection, the bell rings the I/O thread until it comes). Accepting before connecting
//!   matters when more connections
//!   come than a listener's backlog holds (`listen` is capped by `net.core.somaxconn`, 128 on
//!   older kernels): two ranks each blocked connecting to the other would never accept.
//! - [`Fabric::attach`] waits, bounded by `Settings::connect_timeout`, until a connection from
//!   every remote worker (its own, or its partner's it writes back on) has proved the key, and
//!   gives each local worker its hook
//!   (`Links::progress`: read the incoming connections; hand them over before parking); on timeout it names a peer that is missing, and why
//!   `accept` is failing if it is (out of descriptors, say: the I/O thread keeps retrying, and
//!   the peers' connections wait in the listener's queue meanwhile).
//!
//! # Wire
//!
//! A connection carries everything its connecting worker publishes to any worker of the peer
//! group (host), both lanes, and on a two-way connection everything the peer's partner worker
//! publishes to any worker of the connecting group. It opens with a 72-byte hello
//! (little-endian):
//!
//! ```text
//! 0   magic "GSMTCP\0\0"          8   version u32 (3)        12  job key, 32 bytes
//! 44  source rank u32             48  source local worker u32
//! 52  destination rank u32        56  slots u32              60  slot size u32
//! 64  the destination's worker that writes back (two-way), or u32::MAX (one-way)
//! 68  1: connections per (worker, host), 0: per (worker, rank)
//! ```
//!
//! The acceptor checks all of it (the key in constant time), plus that the source is one of its
//! tcp peers, that the worker exists and has not connected before, that this rank is the one
//! of its group that reads that worker, that the layout is its own, and that who writes back
//! is what the pairing rule says. A connection that
//! fails any check, or does not complete its hello within [`HELLO_TIMEOUT`], is closed and
//! reported by one line on stderr (`gossamer: tcp: dropped a connection from <addr>: <reason>`);
//! it never reaches a ring and never ends the job. At most `MAX_HELLOS` accepted connections
//! wait for their hello; the rest wait in the listener's queue.
//!
//! After the hello, each slot is a frame, the same both ways: an 8-byte header — destination global worker (u32),
//! then `lane << 31 | length` (u32) — and `length` payload bytes, `length <= slot_size`. A frame
//! that names a worker not on the receiving group (rank, or host with per-host connections) or
//! is longer than a slot, on an authenticated connection, is a protocol error that names the
//! peer rank and host and ends the job ([`FabricError::Protocol`]).
//!
//! # Rings and back-pressure
//!
//! For every (local worker, remote worker, lane) there are two heap rings: an outgoing *shadow*
//! ring (the runtime publishes into its producer; whoever holds the connection, the publishing
//! worker or the I/O thread, consumes it, copies the slot into the connection's write buffer and
//! releases it) and an incoming ring (whoever reads the connection produces into it exactly as a
//! producer would: payload, then the header with Release; then it wakes the consuming worker
//! through `Hooks::wake` unless it is that worker). When an incoming ring is full, the reader
//! keeps the frame and stops reading that connection until a slot is free (the workers retry at
//! every poll; the I/O thread retries while they sleep); TCP's window then closes, the
//! sender's write buffer and shadow ring fill, and the remote producer finds its ring full.
//! Nothing is dropped or truncated. Buffering in between is bounded: the shadow ring, a write
//! buffer of [`WRITE_LIMIT`] bytes, the kernel's socket buffers, a read buffer.
//!
//! # The I/O thread and the bells
//!
//! One thread per rank, `epoll` plus an `eventfd` to be woken. Writing halves are
//! edge-triggered (it is told when a full socket takes bytes again, and of EOF or errors on a
//! one-way connection, whose reading half is the peer's); reading halves are level-triggered and
//! one-shot, armed only while no worker polls (see
//! `io::link`). Each pass it applies the events, takes the remote workers whose rank-wide bell
//! rang (a bitmap; the runtime's workers ring their own bells instead, but a ring end used without
//! hooks, as in the conformance suite, is served this way), drains shadow rings into write
//! buffers (many slots per `send`), writes, reads, and delivers frames. With nothing to do it
//! keeps passing for [`SPIN`] (a `sched_yield` between passes, since on a loaded machine the
//! worker it just woke may need the core; `epoll_wait` every 8th pass), then announces that it
//! sleeps (a flag, SeqCst fence), re-checks the bitmap and only then waits in `epoll_wait` for at
//! most [`IDLE_WAIT`]. A delivery waiting for a full ring is retried after a `sched_yield` for
//! [`STALL_YIELD`], then every millisecond: a consumer freeing a slot rings nothing. The
//! [`Bell`](super::Bell) for a remote worker sets its bit (after a SeqCst fence, skipping the
//! write when already set) and, after a second fence, writes the eventfd only if the thread
//! announced that it sleeps: no syscall while it is awake. The runtime must ring the bell after
//! publishing to a remote worker, as for every fabric; a slot published without a bell is only
//! found by the next bell to the same worker.
//!
//! # Failure
//!
//! An authenticated connection that reaches EOF or an error before [`Fabric::closing`] (found by
//! a worker or the I/O thread: a worker leaves it to the I/O thread, which reports it) ends the
//! job with [`FabricError::PeerLost`] (reported once per peer rank), unless `closing` comes
//! within [`LOSS_GRACE`] (at the end of a job, a fast rank may close before a slow one has called
//! `closing`); after `closing`, EOFs are expected and just closed. A frame that breaks the
//! protocol is reported at once. A peer's host that vanishes without a FIN or RST (powered off, cut
//! off) is noticed by TCP keepalive within about 25 s of silence, as an error on its connections
//! (see `connect::keep_alive`). Dropping a [`Tcp`] stops and joins the I/O thread (which never
//! blocks for longer than [`IDLE_WAIT`]) and closes every socket. With per-host connections a
//! connection's peer is the rank that opened or accepted it, the reading rank: when it dies,
//! the remote ranks report that rank lost (its connections' EOF), and the ranks of its own host
//! lose the frames it read for them and learn of it from the runtime's watch of the shm peers
//! (fate sharing ends the job on any rank's loss), so every report names the rank actually lost.
//!
//! # Cost
//!
//! Per rank: `2 × 2 × L × R × RingLayout::bytes()` bytes of rings for `L` local and `R` remote
//! workers (an outgoing and an incoming ring per pair and lane), plus per connection a read
//! buffer of `max(256 KiB, 2 × (slot + 8))` (per reading half) and a write buffer of up to
//! [`WRITE_LIMIT`] (per writing half). Between two ranks of `L` workers each there are `L`
//! connections (`2L` one-way). Every pass of the I/O thread visits every link it was told
//! about, and every poll of a worker tries every reading half (one `recv` each), which is cheap
//! for tens of peers and the thing to index first for thousands. With per-host connections a
//! rank has `L × (hosts - 1)` connections (equal workers per host); the rings are the same,
//! those filled by another rank of the host in this rank's tcp segment. `gsm-bench remote`
//! prints the counts. The rings are made at start for every pair, whether it ever talks: the
//! term that keeps a rank's memory growing with the job (ARCHITECTURE.md section 9 says what
//! would make it follow use).
//!
//! # Where things are
//!
//! `handshake` (endpoint bytes and the hello), `connect` (the listener, outgoing connections,
//! keepalive), `groups` (who reads what), `segment` (rings other ranks of the host fill),
//! `setup` (`create`'s steps), `io` (the I/O thread: `io::accept` for new
//! connections, `io::send` from shadow rings to sockets, `io::recv` from sockets to rings,
//! `io::link` for a connection the workers share and their side of the fabric, `io::shared` for
//! the bells). The ring protocol itself is `crate::wire::ring`'s. The design decisions, and what
//! each needs from the rest of the code, are in `fabric/tcp/README.md`.

mod connect;
mod groups;
mod handshake;
mod io;
mod segment;
mod setup;
#[cfg(test)]
mod tests;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{
    Bell, Fabric, FabricEntry, FabricError, FabricKind, Hooks, Links, Peer, Progress, Settings,
    Topology,
};
use crate::sys::net::Epoll;
use connect::Dialer;
use groups::Groups;
use io::{Dests, Direct, Others, Rx, Shared, Wiring};
use segment::OwnSegment;
pub use segment::segment_name;

/// How long an accepted connection has to complete its hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the I/O thread spins with nothing to do before it sleeps.
pub const SPIN: Duration = Duration::from_micros(50);
/// How long the I/O thread keeps retrying (yielding the CPU in between) a delivery that waits
/// for a full ring before it retries only every millisecond.
pub const STALL_YIELD: Duration = Duration::from_millis(5);
/// The longest the I/O thread sleeps without an event (it is woken by bells and sockets).
pub const IDLE_WAIT: Duration = Duration::from_millis(100);
/// The most bytes of frames a connection's write buffer collects before it is written.
pub const WRITE_LIMIT: usize = 256 * 1024;
/// How long after a peer's connection ends the I/O thread waits for [`Fabric::closing`] before
/// it reports the peer lost: at the end of a job a fast rank may close its sockets before a slow
/// one has called `closing`.
pub const LOSS_GRACE: Duration = Duration::from_secs(1);
/// At most this many accepted connections wait for their hello at once (which bounds what
/// strangers can make this rank hold); more wait in the listener's queue until some have
/// completed their hello or were dropped. Refusing them instead would drop legitimate peers of
/// a large job, and end it. Tests lower it so that a small job crosses it.
#[cfg(not(test))]
const MAX_HELLOS: usize = 1024;
#[cfg(test)]
const MAX_HELLOS: usize = 8;
/// An idle connection is probed after this long without traffic (the kernel's default is 2 h).
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
/// Between keepalive probes (the kernel's default is 75 s).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// Unanswered keepalive probes before an idle connection is dropped (the kernel's default is 9).
pub const KEEPALIVE_PROBES: u32 = 3;
/// A connection whose data (or zero-window probe) has waited this long for any acknowledgement
/// reports its peer lost: as long as keepalive takes on an idle connection. Keepalive does not
/// probe a connection with data in flight, and a two-way connection may never be idle while its
/// rank keeps sending to a host that vanished; a live peer, even one that reads nothing,
/// acknowledges within a round trip (see `connect::keep_alive`).
pub const UNANSWERED_LIMIT: Duration = Duration::from_secs(
    KEEPALIVE_IDLE.as_secs() + KEEPALIVE_INTERVAL.as_secs() * KEEPALIVE_PROBES as u64,
);
/// How often the I/O thread looks for connections waiting for an acknowledgement.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How long the I/O thread waits before it retries an `accept` that failed for want of
/// descriptors or memory: the connections stay queued, and each retry costs a syscall (on Linux
/// even a failing `accept` allocates a socket).
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// Bytes of a frame header: destination global worker (u32), then `lane << 31 | length` (u32).
const FRAME_HEADER: usize = 8;
/// The lane bit of a frame header's second word (set: the response lane).
const LANE_BIT: u32 = 1 << 31;

/// epoll tokens that are not connection indices.
const TOKEN_EVENTFD: u64 = u64::MAX;
const TOKEN_LISTENER: u64 = u64::MAX - 1;

/// The variable that turns two-way connections off (`0`): every worker then connects to every
/// peer rank and each connection carries one way, for comparing. Every rank of a job must see
/// the same value (a hello says which it expects, and a mismatch is refused by name).
pub const TWO_WAY_VAR: &str = gsm_contract::table::TCP_TWO_WAY.name;

/// The variable that selects one connection per (local worker, remote rank) (`0`) instead of
/// one per (local worker, remote host), for comparing. Every rank of a job must see the same
/// value (a hello says which it makes, and a mismatch is refused by name).
pub const PER_HOST_VAR: &str = gsm_contract::table::TCP_PER_HOST.name;

/// Whether workers pair on two-way connections (unless [`TWO_WAY_VAR`] is `0`).
fn two_way() -> bool {
    gsm_contract::value(&gsm_contract::table::TCP_TWO_WAY)
}

fn os_error(what: impl Into<String>, e: &std::io::Error) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Tcp,
        what: what.into(),
        detail: e.to_string(),
    }
}

/// The TCP fabric (see the module docs).
pub struct Tcp {
    listener: Option<TcpListener>,
    addr: SocketAddr,
    connect_timeout: Duration,
    shared: Option<Arc<Shared>>,
    io: Option<JoinHandle<()>>,
    links: Option<Links>,
    /// For attach: (peer rank, connections expected from it).
    expect: Vec<(u32, u32)>,
    hosts: Vec<String>,
    /// For the workers' hooks, made by attach: the epoll instance, the runtime's hooks, this
    /// rank's delivery facts.
    direct: Option<(Arc<Epoll>, Hooks, Rx)>,
    /// Who reads what, and the topology, for attach to map the other ranks' segments.
    groups: Option<(Groups, Topology)>,
    /// Where frames read here may go (attach completes it).
    dests: Option<Arc<Dests>>,
    /// This rank's tcp segment, until `sealed` unlinks its name.
    segment: Option<OwnSegment>,
    /// The doorbells of the workers of this host's other ranks, lent by the shm fabric.
    lent: std::collections::HashMap<u32, Bell>,
}

impl std::fmt::Debug for Tcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tcp")
            .field("addr", &self.addr)
            .field("running", &self.io.is_some())
            .finish()
    }
}

impl Tcp {
    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Lends this fabric the bells of the workers of this host's other ranks (the shm fabric's
    /// doorbells, after its `attach`), for frames this rank reads for them; called before
    /// [`Fabric::attach`]. Bells of other workers are ignored.
    pub fn lend_bells(&mut self, bells: &[(u32, Bell)]) {
        self.lent.extend(bells.iter().cloned());
    }

    /// Connections per (worker, remote host) (`true`) or per (worker, remote rank), once
    /// created.
    pub fn per_host(&self) -> bool {
        self.groups.as_ref().is_some_and(|g| g.0.per_host)
    }

    /// Maps the segments of this host's other ranks and hands the frames this rank reads for
    /// them their rings and doorbells (see `groups`).
    fn attach_others(&self) -> Result<(), FabricError> {
        let (Some((groups, topo)), Some(dests)) = (&self.groups, &self.dests) else {
            return Ok(());
        };
        let others: Vec<u32> = groups
            .ranks_of(groups.mine())
            .into_iter()
            .filter(|&r| r != topo.rank)
            .collect();
        if others.is_empty() {
            return Ok(());
        }
        let mut rings: Vec<Vec<(usize, crate::wire::ring::Producer)>> =
            (0..topo.total_workers()).map(|_| Vec::new()).collect();
        for &c in &others {
            for (g, l, lane, p) in segment::open_peer(topo, groups, c)? {
                let i = groups.index(topo.first_worker(c) + l) as usize;
                rings[g as usize].push((2 * i + lane as usize, p));
            }
        }
        let mut bells = Vec::with_capacity(dests.len());
        for i in 0..dests.len() {
            let (r, l) = dests.owner(i);
            if r == topo.rank {
                bells.push(None);
                continue;
            }
            let g = topo.first_worker(r) + l;
            let b = self
                .lent
                .get(&g)
                .cloned()
                .ok_or_else(|| FabricError::Choice {
                    value: format!("worker {l} of rank {r}"),
                    reason: "per-host tcp connections need the doorbells of this host's other \
                         ranks, which the shm fabric lends (set GSM_TCP_PER_HOST=0)",
                })?;
            bells.push(Some(b));
        }
        let _ = dests.others.set(Others {
            rings: std::sync::Mutex::new(rings),
            bells,
        });
        Ok(())
    }
}

/// The tcp fabric's line of [`super::FABRICS`].
pub const ENTRY: FabricEntry = FabricEntry {
    kind: FabricKind::Tcp,
    open: |settings| Tcp::prepare(settings).map(|(f, e)| (Box::new(f) as Box<dyn Fabric>, e)),
    exchanges: false,
    between_hosts: None,
};

impl Tcp {
    /// Opens the fabric (before the bootstrap exchange): binds the listener; the endpoint is
    /// its address.
    pub fn prepare(settings: &Settings) -> Result<(Self, Vec<u8>), FabricError> {
        let (listener, addr, endpoint) = connect::bind(settings)?;
        let tcp = Tcp {
            listener: Some(listener),
            addr,
            connect_timeout: settings.connect_timeout,
            shared: None,
            io: None,
            links: None,
            expect: Vec::new(),
            hosts: Vec::new(),
            direct: None,
            groups: None,
            dests: None,
            segment: None,
            lent: Default::default(),
        };
        Ok((tcp, endpoint))
    }
}

impl Fabric for Tcp {
    fn kind(&self) -> FabricKind {
        FabricKind::Tcp
    }

    fn lend(&mut self, attached: &[(FabricKind, &Links)]) {
        // Per-host tcp connections: the rank that reads a remote worker's connection wakes the
        // workers of this host's other ranks through their shm doorbells.
        for (kind, links) in attached {
            if *kind == FabricKind::Shm {
                self.lend_bells(&links.bells);
            }
        }
    }

    fn create(&mut self, topo: &Topology, peers: &[Peer], hooks: Hooks) -> Result<(), FabricError> {
        setup::check_layout(topo.layout)?;
        let listener = self.listener.take().ok_or(FabricError::Choice {
            value: "create".into(),
            reason: "Tcp::create called twice or without prepare",
        })?;
        let (addrs, is_peer) = setup::peer_addresses(topo, peers)?;
        let (groups, why) = Groups::new(topo, &is_peer, groups::per_host_wanted());
        if topo.rank == 0 || why.is_some() {
            tracing::info!(
                target: "gossamer::fabric",
                fabric = "tcp",
                rank = topo.rank,
                why = why.unwrap_or(if groups.per_host { "" } else { "GSM_TCP_PER_HOST=0" }),
                "tcp connections: one per (worker, remote {})",
                if groups.per_host { "host" } else { "rank" }
            );
        }
        let dests = Arc::new(Dests::new(&groups));
        let (shared, epoll) = setup::shared_state(topo)?;
        let mut links = Links::default();
        let (mut unclaimed, segment) = setup::incoming_rings(topo, &groups, &mut links)?;
        self.segment = segment;
        let two_way = two_way();
        let wires = setup::shadow_rings(topo, &groups, &addrs, &mut links, &mut unclaimed, two_way);
        self.expect = addrs
            .iter()
            .map(|&(r, _)| {
                let n = topo
                    .workers_of(r)
                    .filter(|&g| groups.reader(g) == topo.rank);
                (r, n.count() as u32)
            })
            .collect();
        let wiring = Wiring {
            is_peer,
            unclaimed,
            outs_of_rank: wires.outs_of_rank,
            outgoing: 2 * wires.planned.len(),
            awaited: wires.awaited,
            two_way,
            groups: groups.clone(),
            dests: dests.clone(),
        };
        let rx = Rx {
            nlocal: topo.local_workers(),
            slot_size: topo.layout.slot_size,
        };
        self.direct = Some((epoll.clone(), hooks.clone(), rx));
        let handle = setup::start_io(topo, &epoll, &shared, hooks, listener, wiring)?;
        // From here on, dropping `self` stops the thread, whatever fails below.
        self.shared = Some(shared.clone());
        self.io = Some(handle);
        let dialer = Dialer {
            timeout: self.connect_timeout,
            per_host: groups.per_host,
        };
        self.groups = Some((groups, topo.clone()));
        setup::connect_all(&dialer, topo, &epoll, &shared, wires.planned, &dests)?;
        setup::bells(topo, &shared, &addrs, &mut links);
        setup::worker_bells(&shared, &wires.cells, &mut links);
        tracing::info!(
            target: "gossamer::fabric",
            fabric = "tcp",
            rank = topo.rank,
            peers = addrs.len(),
            slots = topo.layout.slots,
            slot_size = topo.layout.slot_size,
            ring_bytes = topo.layout.bytes(),
            incoming_rings = links.incoming.len(),
            shadow_rings = links.outgoing.len(),
            listening = %self.addr,
            "fabric created"
        );
        self.hosts = topo.hosts.clone();
        self.dests = Some(dests);
        self.links = Some(links);
        Ok(())
    }

    fn attach(&mut self) -> Result<Links, FabricError> {
        let shared = self.shared.as_ref().ok_or(FabricError::Choice {
            value: "attach".into(),
            reason: "Tcp::attach called before a successful create",
        })?;
        let start = Instant::now();
        let deadline = start + self.connect_timeout;
        let mut st = shared.attach.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(e) = &st.failed {
                return Err(e.clone());
            }
            let missing = self
                .expect
                .iter()
                .find(|&&(r, n)| st.from[r as usize] < n)
                .map(|&(r, _)| r);
            let Some(missing) = missing else { break };
            let now = Instant::now();
            if now >= deadline {
                let host = self
                    .hosts
                    .get(missing as usize)
                    .cloned()
                    .unwrap_or_default();
                let seconds = self.connect_timeout.as_secs();
                // The peer may well have connected, into a queue this rank could not take from.
                if let Some(why) = &st.accept_failure {
                    return Err(FabricError::Os {
                        fabric: FabricKind::Tcp,
                        what: format!(
                            "rank {missing} (host {host}) had not connected after {seconds} s"
                        ),
                        detail: why.clone(),
                    });
                }
                return Err(FabricError::Timeout {
                    fabric: FabricKind::Tcp,
                    peer: missing,
                    host,
                    seconds,
                });
            }
            st = shared
                .attached
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(st);
        self.attach_others()?;
        tracing::info!(
            target: "gossamer::fabric",
            fabric = "tcp",
            peers = self.expect.len(),
            connections = self.expect.iter().map(|&(_, n)| n).sum::<u32>(),
            waited_ms = start.elapsed().as_millis() as u64,
            "every peer connected and proved the key"
        );
        let mut links = self.links.take().ok_or(FabricError::Choice {
            value: "attach".into(),
            reason: "Tcp::attach called twice",
        })?;
        if let Some((epoll, hooks, rx)) = self.direct.take() {
            let incoming = shared
                .incoming
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let direct = Arc::new(Direct::new(shared.clone(), epoll, hooks, rx, incoming));
            for l in 0..rx.nlocal {
                let d = direct.clone();
                links
                    .progress
                    .push((l, Progress(Arc::new(move |t| d.turn(l, t)))));
            }
        }
        Ok(links)
    }

    fn sealed(&mut self) {
        // Every rank of the host has mapped it by now.
        if let Some(s) = &mut self.segment {
            s.unlink();
        }
    }

    fn closing(&mut self) {
        if let Some(s) = &self.shared {
            s.closing.store(true, Ordering::SeqCst);
        }
    }
}

impl Drop for Tcp {
    fn drop(&mut self) {
        if let Some(s) = &self.shared {
            s.stop.store(true, Ordering::SeqCst);
            s.wake();
        }
        if let Some(h) = self.io.take() {
            // The thread checks `stop` at least every IDLE_WAIT and never blocks otherwise.
            let _ = h.join();
        }
    }
}
