//! The `tcp` fabric: slot rings between ranks on different hosts, carried over TCP connections
//! that prove the job key (DESIGN §6–§7, §9).
//!
//! It abstracts one thing: making a remote worker's rings look local. Every ring end the runtime
//! gets is an ordinary heap ring in this process; a single I/O thread per rank (`gsm-tcp-io`)
//! moves slots between those rings and the sockets. It does not encode records, choose which
//! peers it serves, retry lost connections, or encrypt anything (the key proves membership of
//! the job; it does not hide the traffic).
//!
//! # Set-up
//!
//! - [`Fabric::prepare`] binds a listener to `Settings::bind`, else to the address this host's
//!   name resolves to, else to 127.0.0.1, always on port 0; it never binds `0.0.0.0` unless
//!   `Settings::bind` says so (and then advertises the hostname's address). The endpoint bytes
//!   are the listener's address: `4` + 4 address bytes + port (big-endian), or `6` + 16 bytes +
//!   port.
//! - [`Fabric::create`] makes every ring, starts the I/O thread (which accepts from then on),
//!   opens ONE connection per (local worker, remote rank) with a blocking connect (every peer's
//!   listener exists before the exchange, so the kernel completes it from the backlog without the
//!   peer doing anything), writes the hello, and hands the connections to the I/O thread, which
//!   from then on owns every socket. Accepting before connecting matters when more connections
//!   come than a listener's backlog holds (`listen` is capped by `net.core.somaxconn`, 128 on
//!   older kernels): two ranks each blocked connecting to the other would never accept.
//! - [`Fabric::attach`] waits, bounded by `Settings::connect_timeout`, until every remote worker
//!   has connected and proved the key; on timeout it names a peer that is missing, and why
//!   `accept` is failing if it is (out of descriptors, say: the I/O thread keeps retrying, and
//!   the peers' connections wait in the listener's queue meanwhile).
//!
//! # Wire
//!
//! A connection carries, one way, everything its local worker publishes to any worker of the
//! peer rank, both lanes. It opens with a 64-byte hello (little-endian):
//!
//! ```text
//! 0   magic "GSMTCP\0\0"          8   version u32 (1)        12  job key, 32 bytes
//! 44  source rank u32             48  source local worker u32
//! 52  destination rank u32        56  slots u32              60  slot size u32
//! ```
//!
//! The acceptor checks all of it (the key in constant time), plus that the source is one of its
//! tcp peers, that the worker exists and that it has not connected before. A connection that
//! fails any check, or does not complete its hello within [`HELLO_TIMEOUT`], is closed and
//! reported by one line on stderr (`gossamer: tcp: dropped a connection from <addr>: <reason>`);
//! it never reaches a ring and never ends the job. At most `MAX_HELLOS` accepted connections
//! wait for their hello; the rest wait in the listener's queue.
//!
//! After the hello, each slot is a frame: an 8-byte header — destination global worker (u32),
//! then `lane << 31 | length` (u32) — and `length` payload bytes, `length <= slot_size`. A frame
//! that names a worker not on this rank or is longer than a slot, on an authenticated
//! connection, is a protocol error and ends the job ([`FabricError::Protocol`]).
//!
//! # Rings and back-pressure
//!
//! For every (local worker, remote worker, lane) there are two heap rings: an outgoing *shadow*
//! ring (the runtime publishes into its producer; the I/O thread consumes it, copies the slot
//! into the connection's write buffer and releases it) and an incoming ring (the I/O thread
//! produces into it exactly as a producer would: payload, then the header with Release; then it
//! calls `Hooks::wake`). When an incoming ring is full, the I/O thread keeps the frame and stops
//! reading that connection until the runtime frees a slot; TCP's window then closes, the
//! sender's write buffer and shadow ring fill, and the remote producer finds its ring full.
//! Nothing is dropped or truncated. Buffering in between is bounded: the shadow ring, a write
//! buffer of [`WRITE_LIMIT`] bytes, the kernel's socket buffers, a read buffer.
//!
//! # The I/O thread and the bells
//!
//! One thread per rank, `epoll` (edge-triggered sockets) plus an `eventfd` to be woken. Each pass
//! it takes the remote workers whose bell rang (a bitmap), drains their shadow rings into write
//! buffers (many slots per `send`), writes, reads, and delivers frames. With nothing to do it
//! keeps passing for [`SPIN`] (a `sched_yield` between passes, since on a loaded machine the
//! worker it just woke may need the core; `epoll_wait` every 8th pass), then announces that it
//! sleeps (a flag, SeqCst fence), re-checks the bitmap and only then waits in `epoll_wait` for at
//! most [`IDLE_WAIT`]. A delivery waiting for a full ring is retried after a `sched_yield` for
//! [`STALL_YIELD`], then every millisecond: a consumer freeing a slot rings nothing. The [`Bell`]
//! for a remote worker sets its bit (after a SeqCst fence, skipping the write when already set)
//! and, after a second fence, writes the eventfd only if the thread announced that it sleeps: no
//! syscall while it is awake. The runtime must ring the bell after publishing to a remote
//! worker, as for every fabric; a slot published without a bell is only found by the next bell
//! to the same worker.
//!
//! # Failure
//!
//! An authenticated connection that reaches EOF or an error before [`Fabric::closing`] ends the
//! job with [`FabricError::PeerLost`] (reported once per peer rank), unless `closing` comes
//! within [`LOSS_GRACE`] (at the end of a job, a fast rank may close before a slow one has called
//! `closing`); after `closing`, EOFs are expected and just closed. A frame that breaks the
//! protocol is reported at once. A peer's host that vanishes without a FIN or RST (powered off,
//! cut off) is noticed by TCP keepalive within about 25 s of silence, as an error on its
//! connections (see `keep_alive`). Dropping a [`Tcp`] stops and joins the I/O thread (which
//! never blocks for longer than [`IDLE_WAIT`]) and closes every socket.
//!
//! # Measured (loopback, this repository's 2-core test machine, release build)
//!
//! `cargo test -p gossamer --release --lib fabric::tcp::tests -- --ignored --nocapture`: one
//! link moved 8.3 M slots/s of 64 B (64-slot rings) and 250 k slots/s of 4 KiB (1.0 GB/s) on a
//! quiet machine (before idle passes yielded); with idle passes yielding, at a load average of
//! 14 to 16: 1.5–4.8 M slots/s of 64 B, 0.97 GB/s of 4 KiB, and a 4-byte round trip through both
//! I/O threads of 65 µs (median). Figures on that machine vary by 3× with the other load.
//!
//! # Cost
//!
//! Per rank: `2 × 2 × L × R × RingLayout::bytes()` bytes of rings for `L` local and `R` remote
//! workers (an outgoing and an incoming ring per pair and lane), plus per connection a read
//! buffer of `max(256 KiB, 2 × (slot + 8))` and a write buffer of up to [`WRITE_LIMIT`]. Every
//! pass of the I/O thread visits every connection, which is cheap for tens of peers and the
//! thing to index first for thousands.

use std::io::{Read, Write};
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{
    Bell, Fabric, FabricError, FabricKind, Hooks, InLink, Lane, Links, OutLink, Peer, Settings,
    Topology,
};
use crate::bootstrap::KEY_LEN;
use crate::sys::net::{self, Epoll, Events, ready};
use crate::wire::ring::{Consumer, Producer, RingLayout, RingMemory};

#[cfg(test)]
mod tests;

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
/// How long the I/O thread waits before it retries an `accept` that failed for want of
/// descriptors or memory: the connections stay queued, and each retry costs a syscall (on Linux
/// even a failing `accept` allocates a socket).
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

const MAGIC: [u8; 8] = *b"GSMTCP\0\0";
const VERSION: u32 = 1;
const HELLO_LEN: usize = 64;
const FRAME_HEADER: usize = 8;
const LANE_BIT: u32 = 1 << 31;

/// epoll tokens that are not connection indices.
const TOKEN_EVENTFD: u64 = u64::MAX;
const TOKEN_LISTENER: u64 = u64::MAX - 1;

fn os_error(what: impl Into<String>, e: &std::io::Error) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Tcp,
        what: what.into(),
        detail: e.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Endpoint bytes and the hello.

/// Encodes a listener's address as endpoint bytes.
fn encode_endpoint(addr: SocketAddr) -> Vec<u8> {
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
fn decode_endpoint(b: &[u8]) -> Result<SocketAddr, String> {
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
struct Hello {
    key: [u8; KEY_LEN],
    src_rank: u32,
    src_local: u32,
    dst_rank: u32,
    layout: RingLayout,
}

impl Hello {
    fn encode(&self) -> [u8; HELLO_LEN] {
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
        ]
        .into_iter()
        .enumerate()
        {
            b[44 + 4 * i..48 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}

fn word(b: &[u8], at: usize) -> u32 {
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
struct Expect<'a> {
    key: &'a [u8; KEY_LEN],
    rank: u32,
    workers: &'a [u32],
    is_peer: &'a [bool],
    layout: RingLayout,
}

/// Checks a complete hello; `Ok((source rank, source local worker))` or why it is refused.
fn check_hello(b: &[u8; HELLO_LEN], x: &Expect<'_>) -> Result<(u32, u32), String> {
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
    Ok((src_rank, src_local))
}

/// Makes the kernel drop `sock` when the peer's host stops answering: keepalive probes after
/// [`KEEPALIVE_IDLE`] of silence, every [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_PROBES`] of them (about
/// 25 s in all). Without it a rank that waits for a peer whose host vanished without a FIN or RST
/// (powered off, cut off) waits for ever on an idle connection; with it the I/O thread sees an
/// error and reports the peer lost. A peer that is alive but slow is not affected: its kernel
/// answers the probes even when its rings are full and it reads nothing.
///
/// `TCP_USER_TIMEOUT` is deliberately not set. It would also bound data in flight (about 15
/// minutes of retransmissions otherwise), but since Linux 5.11 it also aborts a connection whose
/// peer has kept a zero window that long: a live rank stopped in a debugger, or busy in a fiber
/// that does not yield, would be reported lost.
///
/// Linux probes only a connection with nothing unacknowledged: one whose data to the vanished
/// host is still in flight, or that waits on its closed window, retransmits or probes on its own
/// clock instead and fails only after those 15 minutes. That does not delay the report, because
/// a connection carries data one way: this rank's connections *from* the peer's workers (one per
/// worker) only ever carry acknowledgements from this side, so they are always probed, and the
/// first of them to fail reports the peer. The integration test
/// `a_host_that_vanishes_without_a_word_is_noticed_over_tcp` (`tests/tests/cluster.rs`) shows it
/// end to end: the ranks end about 26 s after the other host goes silent.
///
/// Failing to set these options is not fatal (a kernel or sandbox may lack one): the connection
/// works, only a vanished host is noticed later (see [`keep_alive_or_warn`]).
fn keep_alive(sock: &TcpStream) -> std::io::Result<()> {
    net::keep_alive(
        sock.as_fd(),
        KEEPALIVE_IDLE,
        KEEPALIVE_INTERVAL,
        KEEPALIVE_PROBES,
    )
}

/// [`keep_alive`], or a warning (once per process) that a vanished peer host will be noticed
/// late: the connection itself is fine.
fn keep_alive_or_warn(sock: &TcpStream) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if let Err(e) = keep_alive(sock) {
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "gossamer: tcp: cannot turn on keepalive for a connection ({e}); a peer host that \
                 vanishes may go unnoticed"
            );
        }
    }
}

/// The address this host's name resolves to, if it is one a peer can connect to.
fn host_address() -> Option<IpAddr> {
    super::resolve(&net::hostname()).filter(|ip| !ip.is_unspecified())
}

// ---------------------------------------------------------------------------------------------
// State shared by the bootstrap thread, the bells and the I/O thread.

struct Shared {
    eventfd: OwnedFd,
    /// The I/O thread announced that it is about to wait in epoll.
    sleeping: AtomicBool,
    /// One bit per global worker: its bell rang since the I/O thread last looked.
    dirty: Box<[AtomicU64]>,
    stop: AtomicBool,
    closing: AtomicBool,
    attach: Mutex<AttachState>,
    attached: Condvar,
    /// The outgoing connections, with their index in `Io::conns`, once `create` made them all.
    handover: Mutex<Vec<(usize, Conn)>>,
    /// `handover` is filled and the I/O thread has not taken it yet.
    handed: AtomicBool,
}

struct AttachState {
    /// Authenticated connections per rank.
    from: Vec<u32>,
    /// The first failure the I/O thread reported.
    failed: Option<FabricError>,
    /// Why the last `accept` failed, while it keeps failing (`"accepting connections on ADDR:
    /// ERROR"`): a peer that seems not to connect may have been refused by this rank.
    accept_failure: Option<String>,
}

impl Shared {
    /// The bell of remote worker `g`: cheap (two fences and two loads) while the thread is awake.
    fn ring(&self, g: u32) {
        // Orders the caller's publication before the look at the bit: if the bit is already set
        // and the I/O thread clears it later, its fence after the clear makes the slot visible.
        fence(Ordering::SeqCst);
        let (w, bit) = ((g / 64) as usize, 1u64 << (g % 64));
        let word = &self.dirty[w];
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, Ordering::Release);
        }
        // Dekker with the I/O thread's `sleeping` store, fence, bitmap check.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::Relaxed) {
            net::eventfd_signal(self.eventfd.as_fd());
        }
    }

    fn any_dirty(&self) -> bool {
        self.dirty.iter().any(|w| w.load(Ordering::Relaxed) != 0)
    }

    fn wake(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
        net::eventfd_signal(self.eventfd.as_fd());
    }
}

// ---------------------------------------------------------------------------------------------
// The fabric.

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
}

impl Fabric for Tcp {
    const KIND: FabricKind = FabricKind::Tcp;

    fn prepare(settings: &Settings) -> Result<(Self, Vec<u8>), FabricError> {
        let ip = settings
            .bind
            .or_else(host_address)
            .unwrap_or(Ipv4Addr::LOCALHOST.into());
        let listener = TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|e| os_error(format!("binding a listener to {ip}"), &e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| os_error("reading the listener's address", &e))?;
        // Room for the connections that come before this rank starts accepting in `create` (the
        // kernel caps it at net.core.somaxconn; connects wait for room, bounded by their timeout).
        let _ = net::listen(listener.as_fd(), 4096);
        listener
            .set_nonblocking(true)
            .map_err(|e| os_error("making the listener non-blocking", &e))?;
        let advertised = if addr.ip().is_unspecified() {
            SocketAddr::new(
                host_address().unwrap_or(Ipv4Addr::LOCALHOST.into()),
                addr.port(),
            )
        } else {
            addr
        };
        let tcp = Tcp {
            listener: Some(listener),
            addr,
            connect_timeout: settings.connect_timeout,
            shared: None,
            io: None,
            links: None,
            expect: Vec::new(),
            hosts: Vec::new(),
        };
        Ok((tcp, encode_endpoint(advertised)))
    }

    fn create(&mut self, topo: &Topology, peers: &[Peer], hooks: Hooks) -> Result<(), FabricError> {
        let layout = topo.layout;
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
        let listener = self.listener.take().ok_or(FabricError::Choice {
            value: "create".into(),
            reason: "Tcp::create called twice or without prepare",
        })?;
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
        let nlocal = topo.local_workers();
        let first_local = topo.first_worker(topo.rank);
        let total = topo.total_workers();

        let eventfd = net::eventfd().map_err(|e| os_error("creating an eventfd", &e))?;
        let epoll = Epoll::new().map_err(|e| os_error("creating an epoll instance", &e))?;
        let shared = Arc::new(Shared {
            eventfd,
            sleeping: AtomicBool::new(false),
            dirty: (0..total.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            stop: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            attach: Mutex::new(AttachState {
                from: vec![0; ranks as usize],
                failed: None,
                accept_failure: None,
            }),
            attached: Condvar::new(),
            handover: Mutex::new(Vec::new()),
            handed: AtomicBool::new(false),
        });

        // Rings. Incoming: producer ends wait, per source worker, for its connection.
        let mut links = Links::default();
        let mut unclaimed: Vec<Option<Vec<Producer>>> = (0..total).map(|_| None).collect();
        for &(r, _) in &addrs {
            for g in topo.workers_of(r) {
                let mut ps = Vec::with_capacity(2 * nlocal as usize);
                for l in 0..nlocal {
                    for lane in [Lane::Request, Lane::Response] {
                        let (p, c) = Arc::new(RingMemory::new_heap(layout)).split();
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

        // Outgoing: one connection per (local worker, peer rank), with its shadow rings. The
        // sockets come after the I/O thread started (below); `conns[i]` waits for `outgoing[i]`.
        let mut outgoing: Vec<(SocketAddr, Outgoing)> = Vec::new();
        let mut outs_of_rank: Vec<Vec<usize>> = vec![Vec::new(); ranks as usize];
        for l in 0..nlocal {
            for &(r, addr) in &addrs {
                let mut rings = Vec::new();
                for g in topo.workers_of(r) {
                    for lane in [Lane::Request, Lane::Response] {
                        let (p, c) = Arc::new(RingMemory::new_heap(layout)).split();
                        links.outgoing.push(OutLink {
                            local: l,
                            remote: g,
                            lane,
                            producer: p,
                        });
                        rings.push(OutRing {
                            head: g | if lane == Lane::Response { LANE_BIT } else { 0 },
                            consumer: c,
                        });
                    }
                }
                outs_of_rank[r as usize].push(outgoing.len());
                outgoing.push((
                    addr,
                    Outgoing {
                        rank: r,
                        local: l,
                        rings,
                        next: 0,
                        wbuf: Vec::with_capacity(WRITE_LIMIT + 64 * 1024),
                        wstart: 0,
                        // A bell rung before the I/O thread took the connection found no
                        // connection to mark.
                        pending: true,
                    },
                ));
            }
        }

        // Register the eventfd and the listener and start the thread.
        let epoll = Arc::new(epoll);
        let reg = |fd: BorrowedFd<'_>, ev: u32, token: u64, what: &str| {
            epoll
                .add(fd, ev, token)
                .map_err(|e| os_error(format!("registering {what} with epoll"), &e))
        };
        reg(
            shared.eventfd.as_fd(),
            ready::IN,
            TOKEN_EVENTFD,
            "the eventfd",
        )?;
        reg(
            listener.as_fd(),
            ready::IN | ready::ET,
            TOKEN_LISTENER,
            "the listener",
        )?;
        let mut rank_of = Vec::with_capacity(total as usize);
        for (r, &n) in topo.workers.iter().enumerate() {
            rank_of.extend(std::iter::repeat_n(r as u32, n as usize));
        }
        let io = Io {
            epoll: epoll.clone(),
            shared: shared.clone(),
            hooks,
            listener,
            acceptable: true,
            accept_retry: None,
            rank: topo.rank,
            workers: topo.workers.clone(),
            hosts: topo.hosts.clone(),
            key: topo.key,
            layout,
            first_local,
            nlocal,
            is_peer,
            rank_of,
            conns: (0..outgoing.len()).map(|_| None).collect(),
            free: Vec::new(),
            hellos: 0,
            unclaimed,
            outs_of_rank,
            reported: vec![false; ranks as usize],
            woke: vec![false; nlocal as usize],
            woke_list: Vec::new(),
            stalled: 0,
            lost: Vec::new(),
        };
        let handle = std::thread::Builder::new()
            .name("gsm-tcp-io".into())
            .spawn(move || io.run())
            .map_err(|e| os_error("starting the tcp I/O thread", &e))?;
        // From here on, dropping `self` stops the thread, whatever fails below.
        self.shared = Some(shared.clone());
        self.io = Some(handle);

        // Connect only now that this rank accepts: a peer's listen backlog may be smaller than
        // the connections coming to it, and two ranks each blocked connecting to the other
        // while neither accepts would wait until the connect timeout.
        let mut handed = Vec::with_capacity(outgoing.len());
        for (i, (addr, o)) in outgoing.into_iter().enumerate() {
            let sock = self.connect(topo, o.local, o.rank, addr)?;
            reg(
                sock.as_fd(),
                ready::IN | ready::OUT | ready::RDHUP | ready::ET,
                i as u64,
                "a connection",
            )?;
            handed.push((
                i,
                Conn {
                    sock,
                    addr,
                    readable: true,
                    writable: true,
                    role: Role::Out(Box::new(o)),
                },
            ));
        }
        *shared.handover.lock().unwrap_or_else(|p| p.into_inner()) = handed;
        shared.handed.store(true, Ordering::Release);
        shared.wake();

        for &(r, _) in &addrs {
            for g in topo.workers_of(r) {
                let s = shared.clone();
                links
                    .bells
                    .push((g, Bell::Call(Arc::new(move || s.ring(g)))));
            }
        }
        self.expect = addrs
            .iter()
            .map(|&(r, _)| (r, topo.workers[r as usize]))
            .collect();
        self.hosts = topo.hosts.clone();
        self.links = Some(links);
        Ok(())
    }

    fn attach(&mut self) -> Result<Links, FabricError> {
        let shared = self.shared.as_ref().ok_or(FabricError::Choice {
            value: "attach".into(),
            reason: "Tcp::attach called before a successful create",
        })?;
        let deadline = Instant::now() + self.connect_timeout;
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
        self.links.take().ok_or(FabricError::Choice {
            value: "attach".into(),
            reason: "Tcp::attach called twice",
        })
    }

    fn sealed(&mut self) {}

    fn closing(&mut self) {
        if let Some(s) = &self.shared {
            s.closing.store(true, Ordering::SeqCst);
        }
    }
}

impl Tcp {
    /// Opens local worker `l`'s connection to rank `r` and sends the hello.
    fn connect(
        &self,
        topo: &Topology,
        l: u32,
        r: u32,
        addr: SocketAddr,
    ) -> Result<TcpStream, FabricError> {
        let host = || topo.hosts.get(r as usize).cloned().unwrap_or_default();
        let what = || {
            format!(
                "connecting worker {l} to rank {r} (host {}) at {addr}",
                host()
            )
        };
        let mut sock = TcpStream::connect_timeout(&addr, self.connect_timeout).map_err(|e| {
            // This rank could not reach `r`, which `FabricError::Timeout` ("rank r did not
            // connect") would put the other way round.
            let e = if e.kind() == std::io::ErrorKind::TimedOut {
                std::io::Error::other(format!(
                    "no answer within {} s; is rank {r} running, and can this host reach it? \
                     (GSM_CONNECT_TIMEOUT raises the limit)",
                    self.connect_timeout.as_secs()
                ))
            } else {
                e
            };
            os_error(what(), &e)
        })?;
        let hello = Hello {
            key: topo.key,
            src_rank: topo.rank,
            src_local: l,
            dst_rank: r,
            layout: topo.layout,
        };
        sock.set_write_timeout(Some(self.connect_timeout))
            .and_then(|()| sock.write_all(&hello.encode()))
            .and_then(|()| sock.set_nodelay(true))
            .and_then(|()| sock.set_nonblocking(true))
            .map_err(|e| os_error(what(), &e))?;
        keep_alive_or_warn(&sock);
        Ok(sock)
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

// ---------------------------------------------------------------------------------------------
// The I/O thread.

struct OutRing {
    /// The frame header's second half without the length, and the destination: `g | lane bit`.
    head: u32,
    consumer: Consumer,
}

struct Outgoing {
    rank: u32,
    local: u32,
    rings: Vec<OutRing>,
    /// Round-robin position in `rings`.
    next: usize,
    /// Frames waiting to be written, from `wstart`. Possibly uninitialised bytes: a producer may
    /// have written padding into a slot (`SlotWriter::buf_uninit`); they only go to `send`.
    wbuf: Vec<MaybeUninit<u8>>,
    wstart: usize,
    /// Some ring may hold a published slot.
    pending: bool,
}

struct Incoming {
    rank: u32,
    local: u32,
    /// Index `local worker * 2 + lane`.
    producers: Vec<Producer>,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    /// A frame waits for room in a full ring; reading stops until it is delivered.
    stalled: bool,
}

enum Role {
    Hello {
        buf: [u8; HELLO_LEN],
        got: usize,
        deadline: Instant,
    },
    In(Box<Incoming>),
    Out(Box<Outgoing>),
}

struct Conn {
    sock: TcpStream,
    addr: SocketAddr,
    /// Edge-triggered readiness, cleared on EAGAIN.
    readable: bool,
    writable: bool,
    role: Role,
}

/// What happened to a connection in one pass.
enum Fate {
    Keep,
    /// Drop an unauthenticated connection with a line on stderr.
    Refuse(String),
    /// The peer went away (EOF or error).
    Lost(u32, String),
    /// The peer broke the protocol.
    Broke(u32, String),
}

struct Io {
    /// Shared with `create`, which registers the outgoing connections while this thread runs.
    epoll: Arc<Epoll>,
    shared: Arc<Shared>,
    hooks: Hooks,
    listener: TcpListener,
    /// The listener signalled (edge-triggered) and has not yet returned EAGAIN.
    acceptable: bool,
    /// `accept` failed for want of resources; not retried before this time.
    accept_retry: Option<Instant>,
    rank: u32,
    workers: Vec<u32>,
    hosts: Vec<String>,
    key: [u8; KEY_LEN],
    layout: RingLayout,
    first_local: u32,
    nlocal: u32,
    is_peer: Vec<bool>,
    rank_of: Vec<u32>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Connections waiting for their hello.
    hellos: usize,
    /// Incoming producers per source global worker, until its connection authenticates.
    unclaimed: Vec<Option<Vec<Producer>>>,
    outs_of_rank: Vec<Vec<usize>>,
    /// Peers whose failure was reported.
    reported: Vec<bool>,
    woke: Vec<bool>,
    woke_list: Vec<u32>,
    /// Connections whose delivery waits for a full ring (last pass).
    stalled: usize,
    /// Peers whose connection ended before `closing`, with when to report them.
    lost: Vec<(u32, String, Instant)>,
}

impl Io {
    fn run(mut self) {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.main_loop()));
        if let Err(p) = result {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let e = os_error(
                "the tcp I/O thread",
                &std::io::Error::other(format!("it panicked: {msg}")),
            );
            self.record(e.clone());
            (self.hooks.fail)(e);
        }
    }

    fn main_loop(&mut self) {
        let mut events = Events::with_capacity(256);
        let mut idle_since: Option<Instant> = None;
        let mut stalled_since: Option<Instant> = None;
        let mut idle_passes = 0u32;
        let mut spun = false;
        let mut stall_yield = true;
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return;
            }
            let mut timeout = 0;
            // Reading the clock every pass would cost as much as the pass itself.
            if self.stalled == 0 {
                stalled_since = None;
                stall_yield = true;
            } else if idle_passes % 16 == 15 {
                stall_yield =
                    stalled_since.get_or_insert_with(Instant::now).elapsed() < STALL_YIELD;
            }
            if !spun && idle_passes % 16 == 15 {
                spun = idle_since.is_some_and(|t| t.elapsed() >= SPIN);
            }
            if spun && self.stalled > 0 && stall_yield {
                // A ring is full and its consumer may need this core to drain it.
                std::thread::yield_now();
            } else if spun {
                self.shared.sleeping.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                if !self.shared.any_dirty() && !self.shared.stop.load(Ordering::Relaxed) {
                    timeout = self.sleep_ms();
                }
            }
            // While spinning, look at the sockets every 8th pass only (epoll_wait is the most
            // expensive part of an idle pass), and offer the core to other threads in between:
            // on a loaded machine the worker this thread just woke may need it.
            let n = if timeout > 0 || idle_passes % 8 == 0 {
                self.epoll.wait(&mut events, timeout)
            } else {
                if idle_passes > 0 {
                    std::thread::yield_now();
                }
                0
            };
            self.shared.sleeping.store(false, Ordering::Relaxed);
            let mut progress = n > 0;
            for (flags, token) in events.ready(n) {
                match token {
                    TOKEN_EVENTFD => net::eventfd_drain(self.shared.eventfd.as_fd()),
                    TOKEN_LISTENER => self.acceptable = true,
                    i => {
                        if let Some(Some(c)) = self.conns.get_mut(i as usize) {
                            let hup = ready::HUP | ready::ERR;
                            if flags & (ready::IN | ready::RDHUP | hup) != 0 {
                                c.readable = true;
                            }
                            if flags & (ready::OUT | hup) != 0 {
                                c.writable = true;
                            }
                        }
                    }
                }
            }
            if self.shared.handed.load(Ordering::Acquire) {
                self.take_outgoing();
                progress = true;
            }
            if self.acceptable && self.accept_retry.is_none_or(|t| t <= Instant::now()) {
                progress |= self.accept();
            }
            progress |= self.collect_bells();
            progress |= self.pump();
            self.wake_locals();
            self.report_losses();
            if progress {
                idle_since = None;
                idle_passes = 0;
                spun = false;
            } else {
                idle_passes = idle_passes.wrapping_add(1);
                if idle_since.is_none() {
                    idle_since = Some(Instant::now());
                }
            }
        }
    }

    /// How long to sleep in epoll, in milliseconds.
    fn sleep_ms(&self) -> i32 {
        if self.stalled > 0 {
            return 1;
        }
        let wait = if self.hellos > 0 || !self.lost.is_empty() {
            50
        } else {
            IDLE_WAIT.as_millis() as i32
        };
        // A failed `accept` is retried on time: nothing else wakes this thread for it.
        match self.accept_retry {
            Some(t) => wait.min(t.saturating_duration_since(Instant::now()).as_millis() as i32 + 1),
            None => wait,
        }
    }

    /// Reports the peers whose connection ended more than [`LOSS_GRACE`] ago, unless the job
    /// has started closing since.
    fn report_losses(&mut self) {
        if self.lost.is_empty() {
            return;
        }
        if self.closing() {
            self.lost.clear();
            return;
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.lost.len() {
            if self.lost[i].2 > now {
                i += 1;
                continue;
            }
            let (r, detail, _) = self.lost.swap_remove(i);
            let e = FabricError::PeerLost {
                peer: r,
                host: self.host(r),
                detail,
            };
            self.report(r, e);
        }
    }

    /// Accepts every waiting connection (only after the listener's event: on Linux, even a
    /// failing `accept` allocates a socket), or until [`MAX_HELLOS`] wait for their hello; the
    /// listener then stays `acceptable`, to be taken up again by a later pass.
    fn accept(&mut self) -> bool {
        let mut any = false;
        loop {
            if self.hellos >= MAX_HELLOS {
                return any;
            }
            let (sock, addr) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.acceptable = false;
                    return any;
                }
                // That one connection failed before it was taken (reset, or refused by a
                // firewall rule); the next may be fine.
                Err(e) if net::accept_lost_one(&e) => continue,
                // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) or worse: the
                // connections stay queued and the edge-triggered listener will not signal them
                // again, so stay `acceptable` and retry, and keep the cause for `attach`.
                Err(e) => {
                    self.accept_failed(&e);
                    return any;
                }
            };
            any = true;
            if self.accept_retry.take().is_some() {
                let mut st = self.shared.attach.lock().unwrap_or_else(|p| p.into_inner());
                st.accept_failure = None;
            }
            if let Err(e) = sock.set_nonblocking(true) {
                refuse(addr, &format!("cannot make it non-blocking: {e}"));
                continue;
            }
            keep_alive_or_warn(&sock);
            let i = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            let ev = ready::IN | ready::RDHUP | ready::ET;
            if let Err(e) = self.epoll.add(sock.as_fd(), ev, i as u64) {
                refuse(addr, &format!("cannot watch it: {e}"));
                self.free.push(i);
                continue;
            }
            self.hellos += 1;
            self.conns[i] = Some(Conn {
                sock,
                addr,
                readable: true,
                writable: false,
                role: Role::Hello {
                    buf: [0; HELLO_LEN],
                    got: 0,
                    deadline: Instant::now() + HELLO_TIMEOUT,
                },
            });
        }
    }

    /// Takes the outgoing connections `create` handed over into their reserved places.
    fn take_outgoing(&mut self) {
        self.shared.handed.store(false, Ordering::Relaxed);
        let handed = std::mem::take(
            &mut *self
                .shared
                .handover
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for (i, c) in handed {
            self.conns[i] = Some(c);
        }
    }

    /// Notes that `accept` failed with `e`: retried after [`ACCEPT_RETRY`], reported once on
    /// stderr, and kept for the message of an `attach` that times out meanwhile.
    fn accept_failed(&mut self, e: &std::io::Error) {
        let first = self.accept_retry.is_none();
        self.accept_retry = Some(Instant::now() + ACCEPT_RETRY);
        let at = self
            .listener
            .local_addr()
            .map_or_else(|_| "the listener".to_string(), |a| a.to_string());
        let hint = if net::out_of_descriptors(e) {
            "; raise the limit on open files (ulimit -n)"
        } else {
            ""
        };
        let why = format!("accepting connections on {at}: {e}{hint}");
        if first {
            crate::eprint_line(format_args!("gossamer: tcp: {why} (retrying)"));
        }
        let mut st = self.shared.attach.lock().unwrap_or_else(|p| p.into_inner());
        st.accept_failure = Some(why);
    }

    /// Marks the connections to every remote worker whose bell rang as pending.
    fn collect_bells(&mut self) -> bool {
        let mut any = false;
        for w in 0..self.shared.dirty.len() {
            if self.shared.dirty[w].load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = self.shared.dirty[w].swap(0, Ordering::Acquire);
            any = true;
            while bits != 0 {
                let g = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let r = self.rank_of.get(g).copied().unwrap_or(u32::MAX) as usize;
                for &c in self
                    .outs_of_rank
                    .get(r)
                    .map(|v| v.as_slice())
                    .unwrap_or(&[])
                {
                    if let Some(Some(Conn {
                        role: Role::Out(o), ..
                    })) = self.conns.get_mut(c)
                    {
                        o.pending = true;
                    }
                }
            }
        }
        if any {
            // Pairs with the fence in `Shared::ring` for a bit that was already set.
            fence(Ordering::SeqCst);
        }
        any
    }

    /// One pass over every connection.
    fn pump(&mut self) -> bool {
        let mut progress = false;
        self.stalled = 0;
        // Only hellos have deadlines; the clock is not read on the data path.
        let now = (self.hellos > 0).then(Instant::now);
        for i in 0..self.conns.len() {
            let Some(mut c) = self.conns[i].take() else {
                continue;
            };
            let fate = match &mut c.role {
                Role::Out(_) => self.pump_out(&mut c, &mut progress),
                Role::In(_) => self.pump_in(&mut c, &mut progress),
                Role::Hello { deadline, .. } => {
                    if now.is_some_and(|now| *deadline <= now) {
                        Fate::Refuse(format!(
                            "no complete hello within {} s",
                            HELLO_TIMEOUT.as_secs()
                        ))
                    } else if c.readable {
                        self.read_hello(&mut c, &mut progress)
                    } else {
                        Fate::Keep
                    }
                }
            };
            let hello = matches!(c.role, Role::Hello { .. });
            match fate {
                Fate::Keep => {
                    self.conns[i] = Some(c);
                    continue;
                }
                Fate::Refuse(why) => refuse(c.addr, &why),
                Fate::Lost(r, detail) => {
                    if !self.closing() && !self.lost.iter().any(|l| l.0 == r) {
                        self.lost.push((r, detail, Instant::now() + LOSS_GRACE));
                    }
                }
                Fate::Broke(r, detail) => {
                    if !self.closing() {
                        self.report(
                            r,
                            FabricError::Protocol {
                                fabric: FabricKind::Tcp,
                                peer: r,
                                host: self.host(r),
                                detail,
                            },
                        );
                    }
                }
            }
            if hello {
                self.hellos -= 1;
            }
            progress = true;
            self.free.push(i);
            // Dropping `c` closes the socket, which also removes it from the epoll set.
        }
        progress
    }

    fn closing(&self) -> bool {
        self.shared.closing.load(Ordering::SeqCst)
    }

    fn host(&self, r: u32) -> String {
        self.hosts.get(r as usize).cloned().unwrap_or_default()
    }

    /// Reports a failure of peer `r` once.
    fn report(&mut self, r: u32, e: FabricError) {
        if std::mem::replace(&mut self.reported[r as usize], true) {
            return;
        }
        self.record(e.clone());
        (self.hooks.fail)(e);
    }

    fn record(&self, e: FabricError) {
        let mut st = self.shared.attach.lock().unwrap_or_else(|p| p.into_inner());
        st.failed.get_or_insert(e);
        self.shared.attached.notify_all();
    }

    fn read_hello(&mut self, c: &mut Conn, progress: &mut bool) -> Fate {
        let Role::Hello { buf, got, .. } = &mut c.role else {
            unreachable!("read_hello on a connection past its hello")
        };
        while *got < HELLO_LEN {
            match (&c.sock).read(&mut buf[*got..]) {
                Ok(0) => return Fate::Refuse("closed before completing its hello".into()),
                Ok(n) => {
                    *got += n;
                    *progress = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    c.readable = false;
                    return Fate::Keep;
                }
                Err(e) => return Fate::Refuse(format!("reading its hello: {e}")),
            }
        }
        let checked = check_hello(
            buf,
            &Expect {
                key: &self.key,
                rank: self.rank,
                workers: &self.workers,
                is_peer: &self.is_peer,
                layout: self.layout,
            },
        );
        let (src_rank, src_local) = match checked {
            Ok(x) => x,
            Err(why) => return Fate::Refuse(why),
        };
        let g = self.workers[..src_rank as usize].iter().sum::<u32>() + src_local;
        let Some(producers) = self.unclaimed[g as usize].take() else {
            return Fate::Refuse(format!(
                "rank {src_rank} worker {src_local} is already connected"
            ));
        };
        let cap = (256 * 1024).max(2 * (FRAME_HEADER + self.layout.slot_size as usize));
        c.role = Role::In(Box::new(Incoming {
            rank: src_rank,
            local: src_local,
            producers,
            rbuf: vec![0; cap],
            rstart: 0,
            rend: 0,
            stalled: false,
        }));
        self.hellos -= 1;
        {
            let mut st = self.shared.attach.lock().unwrap_or_else(|p| p.into_inner());
            st.from[src_rank as usize] += 1;
        }
        self.shared.attached.notify_all();
        // Bytes that followed the hello are read by the next pass (`readable` stays set).
        Fate::Keep
    }

    fn pump_out(&mut self, c: &mut Conn, progress: &mut bool) -> Fate {
        let Role::Out(o) = &mut c.role else {
            unreachable!("pump_out on a connection that is not outgoing")
        };
        // Nothing ever arrives on an outgoing connection: readable means EOF or an error.
        if c.readable {
            let mut scratch = [0u8; 64];
            match (&c.sock).read(&mut scratch) {
                Ok(0) => {
                    return Fate::Lost(
                        o.rank,
                        format!("it closed the connection of worker {} to it", o.local),
                    );
                }
                Ok(_) => {
                    return Fate::Broke(
                        o.rank,
                        format!(
                            "it sent bytes on the connection of worker {} to it, which only \
                             carries data towards it",
                            o.local
                        ),
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => c.readable = false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Fate::Lost(
                        o.rank,
                        format!("the connection of worker {} to it failed: {e}", o.local),
                    );
                }
            }
        }
        for _ in 0..4 {
            // Refill only once half the buffer is out, so that moving the unsent rest to the
            // front costs at most as much as the bytes sent.
            if o.pending && o.wbuf.len() - o.wstart < WRITE_LIMIT / 2 {
                if o.wstart > 0 {
                    o.wbuf.drain(..o.wstart);
                    o.wstart = 0;
                }
                o.pending = fill(o);
            }
            if o.wstart == o.wbuf.len() || !c.writable {
                break;
            }
            // Possibly uninitialised padding bytes, which the kernel only copies. MSG_NOSIGNAL
            // turns a broken pipe into EPIPE.
            let n = match net::send_nosignal(c.sock.as_fd(), &o.wbuf[o.wstart..]) {
                Ok(n) => n,
                Err(e) => match e.kind() {
                    std::io::ErrorKind::WouldBlock => {
                        c.writable = false;
                        break;
                    }
                    std::io::ErrorKind::Interrupted => continue,
                    _ => {
                        return Fate::Lost(
                            o.rank,
                            format!("sending to it from worker {} failed: {e}", o.local),
                        );
                    }
                },
            };
            *progress = true;
            o.wstart += n;
            if o.wstart == o.wbuf.len() {
                o.wbuf.clear();
                o.wstart = 0;
            }
        }
        Fate::Keep
    }

    fn pump_in(&mut self, c: &mut Conn, progress: &mut bool) -> Fate {
        let Role::In(inc) = &mut c.role else {
            unreachable!("pump_in on a connection that is not incoming")
        };
        let max_frame = FRAME_HEADER + self.layout.slot_size as usize;
        let mut budget = 4 * inc.rbuf.len();
        loop {
            match self.deliver(inc, progress) {
                Ok(true) => {}
                Ok(false) => {
                    inc.stalled = true;
                    self.stalled += 1;
                    return Fate::Keep;
                }
                Err(detail) => return Fate::Broke(inc.rank, detail),
            }
            inc.stalled = false;
            if !c.readable || budget == 0 {
                return Fate::Keep;
            }
            if inc.rstart == inc.rend {
                inc.rstart = 0;
                inc.rend = 0;
            } else if inc.rbuf.len() - inc.rend < max_frame {
                inc.rbuf.copy_within(inc.rstart..inc.rend, 0);
                inc.rend -= inc.rstart;
                inc.rstart = 0;
            }
            match (&c.sock).read(&mut inc.rbuf[inc.rend..]) {
                Ok(0) => {
                    return Fate::Lost(
                        inc.rank,
                        format!("it closed the connection from its worker {}", inc.local),
                    );
                }
                Ok(n) => {
                    inc.rend += n;
                    budget = budget.saturating_sub(n);
                    *progress = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => c.readable = false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Fate::Lost(
                        inc.rank,
                        format!("the connection from its worker {} failed: {e}", inc.local),
                    );
                }
            }
        }
    }

    /// Delivers the complete frames in `inc`'s buffer: `Ok(true)` when none is left whole,
    /// `Ok(false)` when one waits for a full ring, `Err` for a frame no correct peer sends.
    fn deliver(&mut self, inc: &mut Incoming, progress: &mut bool) -> Result<bool, String> {
        let slot_size = self.layout.slot_size;
        while inc.rend - inc.rstart >= FRAME_HEADER {
            let h = &inc.rbuf[inc.rstart..inc.rstart + FRAME_HEADER];
            let (dst, w) = (word(h, 0), word(h, 4));
            let (lane, len) = ((w >> 31) as usize, w & !LANE_BIT);
            let local = dst.wrapping_sub(self.first_local);
            if local >= self.nlocal {
                return Err(format!(
                    "its worker {} sent a frame for worker {dst}, which is not on rank {}",
                    inc.local, self.rank
                ));
            }
            if len > slot_size {
                return Err(format!(
                    "its worker {} sent a frame of {len} bytes for slots of {slot_size}",
                    inc.local
                ));
            }
            let end = inc.rstart + FRAME_HEADER + len as usize;
            if end > inc.rend {
                return Ok(true);
            }
            let p = &mut inc.producers[local as usize * 2 + lane];
            let Some(mut slot) = p.try_reserve() else {
                return Ok(false);
            };
            slot.buf()[..len as usize].copy_from_slice(&inc.rbuf[inc.rstart + FRAME_HEADER..end]);
            slot.publish(len);
            inc.rstart = end;
            *progress = true;
            if !std::mem::replace(&mut self.woke[local as usize], true) {
                self.woke_list.push(local);
            }
        }
        Ok(true)
    }

    fn wake_locals(&mut self) {
        for l in self.woke_list.drain(..) {
            self.woke[l as usize] = false;
            (self.hooks.wake)(l);
        }
    }
}

/// Copies published slots of `o`'s rings into its write buffer, round robin, until the buffer
/// holds [`WRITE_LIMIT`] bytes; returns whether a ring may still hold slots.
fn fill(o: &mut Outgoing) -> bool {
    let n = o.rings.len();
    if n == 0 {
        return false;
    }
    let mut empty_in_a_row = 0;
    let mut i = o.next % n;
    while empty_in_a_row < n {
        if o.wbuf.len() >= WRITE_LIMIT {
            o.next = i;
            return true;
        }
        let ring = &mut o.rings[i];
        let mut got = false;
        while o.wbuf.len() < WRITE_LIMIT {
            // A corrupt header cannot come from this process's own producer; a poisoned ring
            // just stops.
            let Ok(Some(r)) = ring.consumer.try_poll() else {
                break;
            };
            let bytes = r.bytes_uninit();
            let dst = ring.head & !LANE_BIT;
            let second = (ring.head & LANE_BIT) | bytes.len() as u32;
            let mut h = [0u8; FRAME_HEADER];
            h[..4].copy_from_slice(&dst.to_le_bytes());
            h[4..].copy_from_slice(&second.to_le_bytes());
            o.wbuf.extend(h.map(MaybeUninit::new));
            o.wbuf.extend_from_slice(bytes);
            got = true;
            // Dropping `r` releases the slot to the producer.
        }
        if got {
            empty_in_a_row = 0;
        } else {
            empty_in_a_row += 1;
        }
        i = (i + 1) % n;
    }
    o.next = i;
    false
}

/// Drops an unauthenticated connection's report: one line on stderr.
fn refuse(addr: SocketAddr, why: &str) {
    crate::eprint_line(format_args!(
        "gossamer: tcp: dropped a connection from {addr}: {why}"
    ));
}
