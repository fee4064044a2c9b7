//! Fabrics: how the slot rings between a worker of this rank and a worker of another rank are made
//! and fed. The ring protocol itself (publish, consume, release) is `crate::wire::ring`'s; the
//! phases, the registry and where a new fabric goes are in `README.md` beside this file.
//!
//! Every fabric hands the runtime the same thing, ring ends ([`Links`]): for each (local worker,
//! remote worker, [`Lane`]) a [`Producer`] to publish batches into and a [`Consumer`] to poll, plus
//! a [`Bell`] to ring after publishing to a remote worker. The runtime then treats a remote worker
//! exactly as a local one: it fills slots and polls headers. Only what is behind the ends differs:
//!
//! - [`shm`]: ranks on one host. Each rank creates one shared-memory segment holding the rings its
//!   workers *consume* from the workers of its shm peers, and its workers' doorbells; peers map it
//!   and produce into it directly. No thread, no copy beyond the slot itself. It does not notice
//!   a peer dying (the runtime watches the peers' processes).
//! - [`tcp`]: ranks on different hosts. The producer side is a ring in this process (a shadow ring)
//!   drained onto a connection by the publishing worker itself (its bell, [`Links::worker_bells`]);
//!   on the other side the polling worker (its [`Progress`] hook) or, while every worker sleeps,
//!   the fabric's I/O thread applies each slot to the consumer's ring (payload, then header) as a
//!   producer would.
//!   Back-pressure is the consumer's ring: when it is full, the receiver stops reading that
//!   connection, TCP's window closes, the sender's shadow ring fills and the producer sees it full.
//!   It reports a peer lost or broken through [`Hooks::fail`]; it does not retry or encrypt.
//! - `conformance` (tests only): one suite run against every fabric, with a simulated job of
//!   several ranks in one process; a new fabric joins it with one line.
//!
//! Every system call of the fabrics goes through `crate::sys::net` (sockets, epoll, eventfd) and
//! `crate::sys::shm` (shared-memory segments). Set-up, connections made and lost, ring sizes and
//! failures are logged through `tracing` (target `gossamer::fabric`); nothing on the data path is.
//!
//! **A registry, and no dispatch on the data path.** [`Fabric`] is an object-safe trait; each
//! fabric's module writes its line of [`FABRICS`] (kind, constructor), and the runtime
//! (`runtime/fabrics.rs`) loops over the fabrics its peers need, holding them as
//! `Box<dyn Fabric>` keyed by [`FabricKind`]. A new fabric is one folder and one line there,
//! plus its name: one line of the launch contract (`gsm_contract::contract`), which `gsmrun`
//! reads too.
//! Nothing on the data path goes through the fabric at all (the data path is the rings).
//!
//! **Phases.** Setting up is collective and goes in steps separated by barriers that the caller
//! provides (MPI at run time, a `std::sync::Barrier` in the conformance suite), the same number
//! on every rank whichever fabrics it uses:
//! 1. [`FabricEntry::open`], before the bootstrap exchange: whatever peers need to reach this
//!    rank (a listening socket), and this rank's endpoint bytes for the exchange.
//! 2. [`Fabric::create`], after the exchange: this rank's side of every link (a segment,
//!    outgoing connections); it must not wait for a peer. A fabric whose peers need more than
//!    the endpoint (verbs: queue pair numbers) then exchanges [`Fabric::cards`] once more.
//! 3. barrier; [`Fabric::attach`]: reach the peers' sides, return the [`Links`].
//! 4. barrier; [`Fabric::sealed`]: every rank has attached; drop what only attaching needed
//!    (shm unlinks its segment's name, so a crash later leaves nothing in `/dev/shm`).
//! 5. At the end, when every rank has agreed the job is over, [`Fabric::closing`]: from now on
//!    a peer closing its side is expected, not a failure.
//!
//! This module does not encode records and does not choose which fabric serves which peer beyond
//! [`pick`]; the runtime does.

#[cfg(feature = "ofi")]
pub mod ofi;
#[cfg(any(feature = "ofi", feature = "rdma"))]
pub(crate) mod rdma;
#[cfg_attr(
    not(feature = "ofi"),
    allow(dead_code, reason = "the ports' side is the ofi fabric's")
)]
pub(crate) mod rma;
pub mod shm;
pub mod tcp;
#[cfg(feature = "rdma")]
pub mod verbs;

#[cfg(test)]
mod conformance;

use std::sync::Arc;

use crate::bootstrap::KEY_LEN;
pub use crate::wire::doorbell::Doorbell;
pub use crate::wire::far::{Parked, Rendezvous};
use crate::wire::ring::{Consumer, Producer, RingLayout};

/// The fabrics, as the launcher and the runtime name them: one list, in the launch contract
/// (`contract/src/contract.rs`), of which this build has the ones in [`FABRICS`].
pub use gsm_contract::contract::{FabricChoice, FabricKind};

/// The environment variable that chooses the fabric.
pub const FABRIC_VAR: &str = gsm_contract::table::FABRIC.name;

/// Parses `auto` or a fabric's name (or alias; any case), the value of [`FABRIC_VAR`]. A fabric
/// of the contract this build lacks is refused here, naming the cargo feature that builds it;
/// whether a device exists is the fabric's own start-up check.
pub fn parse_choice(s: &str) -> Result<FabricChoice, FabricError> {
    let takes = || FabricChoice::listed(FabricChoice::all().filter(|&c| built(c)));
    match FabricChoice::parse(s) {
        Some(c) if built(c) => Ok(c),
        Some(FabricChoice::Only(k)) => Err(FabricError::NoDevice {
            value: s.trim().to_string(),
            looked_for: k.not_built(&takes()).unwrap_or_else(|| {
                format!("{k} is in no line of the fabric registry (fabric::FABRICS)")
            }),
        }),
        _ => Err(FabricError::Env {
            name: FABRIC_VAR,
            value: s.to_string(),
            reason: format!("expected {}", FabricChoice::listed(FabricChoice::all())),
        }),
    }
}

/// Whether this build can serve `choice`.
fn built(choice: FabricChoice) -> bool {
    match choice {
        FabricChoice::Auto => true,
        FabricChoice::Only(k) => entry(k).is_some(),
    }
}

/// `GSM_FABRIC`, or `Auto` when unset.
pub fn choice_from_env() -> Result<FabricChoice, FabricError> {
    parse_choice(gsm_contract::get::<&str>(&gsm_contract::table::FABRIC)?)
}

/// The fabric that `choice` gives a peer on this host (`same_host`) or another: `auto` takes
/// `shm` within a host and `tcp` between hosts (the runtime may then find a better one between
/// hosts, [`FabricEntry::between_hosts`]); `shm` cannot reach another host.
pub fn pick(
    choice: FabricChoice,
    same_host: bool,
    peer: u32,
    peer_host: &str,
) -> Result<FabricKind, FabricError> {
    match (choice, same_host) {
        (FabricChoice::Auto, true) => Ok(FabricKind::Shm),
        (FabricChoice::Auto, false) => Ok(FabricKind::Tcp),
        (FabricChoice::Only(FabricKind::Shm), false) => Err(FabricError::ShmAcrossHosts {
            peer,
            host: peer_host.to_string(),
        }),
        (FabricChoice::Only(k), _) => Ok(k),
    }
}

/// What every fabric knows of the job.
#[derive(Clone)]
pub struct Topology {
    /// This rank.
    pub rank: u32,
    /// Workers of each rank (index = rank). Global worker ids number them rank by rank.
    pub workers: Vec<u32>,
    /// Hostname of each rank (for messages).
    pub hosts: Vec<String>,
    /// The geometry of every ring (the same on every rank).
    pub layout: RingLayout,
    /// The job's name (segment names derive from it).
    pub job_id: String,
    /// The job's secret key (connections prove it).
    pub key: [u8; KEY_LEN],
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topology")
            .field("rank", &self.rank)
            .field("workers", &self.workers)
            .field("hosts", &self.hosts)
            .field("layout", &self.layout)
            .field("job_id", &self.job_id)
            .field("key", &"<secret>")
            .finish()
    }
}

impl Topology {
    /// Number of ranks.
    pub fn ranks(&self) -> u32 {
        self.workers.len() as u32
    }
    /// Global id of `rank`'s first worker.
    pub fn first_worker(&self, rank: u32) -> u32 {
        self.workers[..rank as usize].iter().sum()
    }
    /// Workers of this rank.
    pub fn local_workers(&self) -> u32 {
        self.workers[self.rank as usize]
    }
    /// Workers in the job.
    pub fn total_workers(&self) -> u32 {
        self.workers.iter().sum()
    }
    /// The rank of global worker `g`.
    pub fn rank_of(&self, g: u32) -> u32 {
        let mut base = 0;
        for (r, &n) in self.workers.iter().enumerate() {
            if g < base + n {
                return r as u32;
            }
            base += n;
        }
        self.ranks()
    }
    /// Global ids of `rank`'s workers.
    pub fn workers_of(&self, rank: u32) -> std::ops::Range<u32> {
        let b = self.first_worker(rank);
        b..b + self.workers[rank as usize]
    }
}

/// A rank a fabric serves, with the endpoint bytes it published in the exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its rank.
    pub rank: u32,
    /// What its [`FabricEntry::open`] returned.
    pub endpoint: Vec<u8>,
}

/// Which traffic a ring carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Requests, from a client worker to a trustee worker.
    Request,
    /// Responses, from a trustee worker back to the client worker.
    Response,
}

/// A ring this rank's worker `local` (index within the rank) publishes into, read by global
/// worker `remote` of another rank.
#[derive(Debug)]
pub struct OutLink {
    /// Index of the producing worker within this rank.
    pub local: u32,
    /// Global id of the consuming worker.
    pub remote: u32,
    /// What the ring carries.
    pub lane: Lane,
    /// The producing end.
    pub producer: Producer,
}

/// A ring this rank's worker `local` polls, fed by global worker `remote` of another rank.
#[derive(Debug)]
pub struct InLink {
    /// Index of the consuming worker within this rank.
    pub local: u32,
    /// Global id of the producing worker.
    pub remote: u32,
    /// What the ring carries.
    pub lane: Lane,
    /// The consuming end.
    pub consumer: Consumer,
}

/// How to make a remote worker (or the fabric that feeds it) look at a ring just published to.
#[derive(Clone)]
pub enum Bell {
    /// The remote worker's own doorbell, mapped here.
    Door(Doorbell),
    /// A function that passes the news on (e.g. wakes a fabric's I/O thread); must be cheap when
    /// nobody sleeps.
    Call(Arc<dyn Fn() + Send + Sync>),
}

impl std::fmt::Debug for Bell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bell::Door(d) => f.debug_tuple("Door").field(d).finish(),
            Bell::Call(_) => f.write_str("Call(..)"),
        }
    }
}

impl Bell {
    /// Rings it (after the publication, which the ring's fence orders first).
    #[inline]
    pub fn ring(&self) {
        match self {
            Bell::Door(d) => d.ring(),
            Bell::Call(f) => f(),
        }
    }
}

/// The ring ends a fabric made, for the runtime to place.
#[derive(Debug, Default)]
pub struct Links {
    /// Rings this rank's workers publish into.
    pub outgoing: Vec<OutLink>,
    /// Rings this rank's workers poll.
    pub incoming: Vec<InLink>,
    /// For each remote worker this fabric reaches (global id), what to ring after publishing to
    /// it.
    pub bells: Vec<(u32, Bell)>,
    /// This rank's workers' doorbells (index = local worker), when the fabric must own them (shm
    /// puts them in its segment so that peers can ring them); the runtime then parks its workers
    /// on these instead of heap doorbells.
    pub local_bells: Option<Vec<Doorbell>>,
    /// Host boards (rank, region), this rank's among them, where the fabric has them (shm:
    /// one per segment; see `crate::board`).
    pub boards: Vec<(usize, crate::board::Region)>,
    /// Bells for one publisher: (local worker, remote worker, bell), rung by that local worker
    /// instead of the remote worker's entry in `bells`, so that the fabric knows who rings
    /// (tcp: the worker writes its own connection). Empty for a fabric that does not need it.
    pub worker_bells: Vec<(u32, u32, Bell)>,
    /// Work this fabric asks of a local worker's own thread (local worker, hook): see
    /// [`Progress`]. Empty for a fabric that needs none.
    pub progress: Vec<(u32, Progress)>,
    /// Large bodies read by their receiver from this rank's registered memory (RMA read), for
    /// the ranks [`Rendezvous::reaches`] says; `None` for a fabric without one-sided reads.
    pub rendezvous: Option<Arc<dyn Rendezvous>>,
}

/// Where a worker is in its loop when it calls a [`Progress`] hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// A poll, before the worker looks at its incoming rings: the fabric may fill them now.
    Poll,
    /// The worker found nothing to do and is about to sleep on its doorbell. The hook returns
    /// `true` when it delivered something (then the worker does not sleep); otherwise from now
    /// on until the worker's next `Poll` the fabric's own thread must deliver for it.
    Park,
}

/// A hook a fabric gives each local worker, called on the worker's thread at every poll and
/// before it sleeps (see [`Turn`]); it returns whether it delivered a slot into one of this
/// rank's incoming rings. A worker without hooks (the conformance suite's threads) is served by
/// the fabric's own thread alone, so a hook is an optimisation, never a requirement.
#[derive(Clone)]
pub struct Progress(pub Arc<dyn Fn(Turn) -> bool + Send + Sync>);

impl Progress {
    /// Calls the hook.
    #[inline]
    pub fn turn(&self, t: Turn) -> bool {
        (self.0)(t)
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress(..)")
    }
}

/// What the runtime gives a fabric to call back into it from the fabric's own threads.
#[derive(Clone)]
pub struct Hooks {
    /// Wakes this rank's worker `local` after a slot was published into one of its rings.
    pub wake: Arc<dyn Fn(u32) + Send + Sync>,
    /// Reports a failure that must end the job (a peer vanished, a connection broke the
    /// protocol). Called at most a few times; the runtime keeps the first.
    pub fail: Arc<dyn Fn(FabricError) + Send + Sync>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooks { .. }")
    }
}

/// Where a fabric may listen and what it may accept, read from the environment by
/// [`Settings::from_env`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The address to bind listeners to: `GSM_TCP_BIND` if set (an address, `0.0.0.0` allowed
    /// only there), else the address `GSM_HOST_ADDR` (this rank's host as the placement names it)
    /// resolves to (when that is a loopback address in a job of several hosts, the address of
    /// the route to another host: see `outward`), else this machine's hostname's address, else
    /// loopback.
    pub bind: Option<std::net::IpAddr>,
    /// How long to wait for peers to connect and prove the key before giving up.
    pub connect_timeout: std::time::Duration,
}

impl Settings {
    /// Reads `GSM_TCP_BIND`, `GSM_HOST_ADDR` and `GSM_CONNECT_TIMEOUT` (seconds, default 30).
    /// An empty value is the default, as for every `GSM_*` variable.
    pub fn from_env() -> Result<Settings, FabricError> {
        use gsm_contract::{get, table};
        let connect_timeout = get(&table::CONNECT_TIMEOUT)?;
        let bind = match get(&table::TCP_BIND)? {
            Some(ip) => Some(ip),
            None => match get::<Option<String>>(&table::HOST_ADDR)? {
                Some(h) => {
                    let ip = resolve(&h).ok_or_else(|| FabricError::Resolve { host: h.clone() })?;
                    let hosts = get::<Option<String>>(&table::HOSTS)?.unwrap_or_default();
                    Some(outward(ip, &h, hosts.split(',')))
                }
                None => None,
            },
        };
        Ok(Settings {
            bind,
            connect_timeout,
        })
    }

    /// Refuses a `GSM_CONNECT_TIMEOUT` or `GSM_TCP_BIND` that [`from_env`](Self::from_env)
    /// would refuse, resolving nothing: what a job of one rank, which sets up no fabric, checks,
    /// so that a value not understood is found on the first small run.
    pub fn check_env() -> Result<(), FabricError> {
        use gsm_contract::table;
        Ok(gsm_contract::check_env([
            &table::CONNECT_TIMEOUT,
            &table::TCP_BIND,
        ])?)
    }
}

/// The address to listen on for a host named `name` that resolves to `ip` here, in a job over
/// `hosts` (`GSM_HOSTS`): `ip`, unless it is a loopback address while other hosts take part.
///
/// Debian and Ubuntu map a machine's own hostname to 127.0.1.1 in `/etc/hosts`, so a hostfile
/// that names hosts resolves, on each host, to an address no other host can reach: the tcp
/// fabric listened there and every peer's connection was refused. Then the address of this
/// host's route to the first other host that resolves to a non-loopback address is used
/// instead (a UDP socket "connected" there, which sends nothing), as `gsmrun` finds its own
/// control address. When no such route is found, `ip` stays, and the peers' connection error
/// says why it fails.
fn outward<'a>(
    ip: std::net::IpAddr,
    name: &str,
    hosts: impl Iterator<Item = &'a str>,
) -> std::net::IpAddr {
    if !ip.is_loopback() {
        return ip;
    }
    for host in hosts.map(str::trim).filter(|h| !h.is_empty() && *h != name) {
        let Some(peer) = resolve(host).filter(|p| !p.is_loopback() && !p.is_unspecified()) else {
            continue;
        };
        let any: std::net::SocketAddr = if peer.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let local = std::net::UdpSocket::bind(any)
            .and_then(|s| s.connect((peer, 9)).and_then(|()| s.local_addr()));
        if let Ok(local) = local {
            if !local.ip().is_loopback() && !local.ip().is_unspecified() {
                return local.ip();
            }
        }
    }
    ip
}

/// The variable for how long peers have to connect, in seconds.
pub const CONNECT_TIMEOUT_VAR: &str = gsm_contract::table::CONNECT_TIMEOUT.name;
/// The variable for the address the tcp fabric listens on.
pub const TCP_BIND_VAR: &str = gsm_contract::table::TCP_BIND.name;

/// The first IPv4 address (else any address) `host` resolves to.
pub fn resolve(host: &str) -> Option<std::net::IpAddr> {
    use std::net::ToSocketAddrs;
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Some(ip);
    }
    let addrs: Vec<_> = (host, 0).to_socket_addrs().ok()?.map(|a| a.ip()).collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
}

/// Why a fabric could not be set up, or why it ended the job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FabricError {
    /// A setting read by the fabrics (`GSM_FABRIC`, `GSM_CONNECT_TIMEOUT`, `GSM_TCP_BIND`, ...)
    /// has a value that cannot be used; worded as the runtime's own `Error::Env`.
    #[error("environment variable {name}={value:?} is invalid: {reason}")]
    Env {
        /// Variable name.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is expected.
        reason: String,
    },
    /// A fabric was set up with something it cannot use (a ring layout, a peer) or used out of
    /// order.
    #[error("invalid fabric setting {value:?}: {reason}")]
    Choice {
        /// The value given.
        value: String,
        /// What is expected.
        reason: &'static str,
    },
    /// `GSM_FABRIC=shm` but a peer is on another host.
    #[error(
        "GSM_FABRIC=shm, but rank {peer} runs on another host ({host}); shared memory only reaches \
         ranks on this host: use --fabric auto or tcp"
    )]
    ShmAcrossHosts {
        /// The peer.
        peer: u32,
        /// Its host.
        host: String,
    },
    /// `GSM_HOST_ADDR` does not resolve.
    #[error(
        "cannot resolve this rank's host address {host:?} (GSM_HOST_ADDR) to bind the TCP fabric; \
         fix the hostfile or set GSM_TCP_BIND to an address of this host"
    )]
    Resolve {
        /// The name.
        host: String,
    },
    /// An operating-system call failed.
    #[error("{fabric} fabric: {what}: {detail}")]
    Os {
        /// Which fabric.
        fabric: FabricKind,
        /// What was being done (names the segment, address or peer).
        what: String,
        /// The OS error.
        detail: String,
    },
    /// A peer did not connect or attach in time.
    #[error(
        "{fabric} fabric: rank {peer} (host {host}) did not connect within {seconds} s; is it \
         running, and can this host reach it? (GSM_CONNECT_TIMEOUT raises the limit)"
    )]
    Timeout {
        /// Which fabric.
        fabric: FabricKind,
        /// The peer.
        peer: u32,
        /// Its host.
        host: String,
        /// The limit.
        seconds: u64,
    },
    /// `GSM_FABRIC` names a fabric that cannot serve here: what was looked for and not found
    /// (the fabric in this build, an RDMA device).
    #[error("GSM_FABRIC={value}: {looked_for}")]
    NoDevice {
        /// The value given.
        value: String,
        /// What was looked for.
        looked_for: String,
    },
    /// A libfabric provider lacks something the `ofi` fabric needs.
    #[error("ofi fabric: provider {provider} lacks {capability}")]
    Provider {
        /// The provider (`tcp;ofi_rxm`, `shm`, ...; `(any)` when none was named).
        provider: String,
        /// What it lacks.
        capability: String,
    },
    /// A peer went away while the job was running.
    #[error("rank {peer} (host {host}) vanished while the job was running: {detail}")]
    PeerLost {
        /// The peer.
        peer: u32,
        /// Its host.
        host: String,
        /// How it was noticed.
        detail: String,
    },
    /// A peer broke the protocol (corrupt ring or frame).
    #[error("rank {peer} (host {host}) broke the {fabric} protocol: {detail}")]
    Protocol {
        /// Which fabric.
        fabric: FabricKind,
        /// The peer.
        peer: u32,
        /// Its host.
        host: String,
        /// What was wrong.
        detail: String,
    },
}

/// One rank's fabric of one kind, through the set-up phases of the module docs. Every method is
/// called on the thread that bootstraps the job, in the order of the docs. It is object-safe:
/// the runtime holds the fabrics of a run as `Box<dyn Fabric>`, opened through [`FABRICS`]; the
/// data path never goes through it (the data path is the rings).
pub trait Fabric: Send {
    /// Which fabric this is.
    fn kind(&self) -> FabricKind;

    /// After the exchange: creates this rank's side of the links with `peers` (never this rank;
    /// every rank passes the peers symmetric to this one's). Must not wait for any peer.
    fn create(&mut self, topo: &Topology, peers: &[Peer], hooks: Hooks) -> Result<(), FabricError>;

    /// For a fabric with a second exchange ([`FabricEntry::exchanges`]): this rank's bytes for
    /// it, after `create` (`None` before, or for a fabric without one).
    fn cards(&self) -> Option<Vec<u8>> {
        None
    }

    /// For a fabric with a second exchange: every rank's [`cards`](Fabric::cards) (index =
    /// rank; empty for a rank without this fabric), before `attach`.
    fn accept(&mut self, gathered: &[Vec<u8>]) -> Result<(), FabricError> {
        let _ = gathered;
        Ok(())
    }

    /// Before `attach`: the links of the fabrics attached before this one (in [`FABRICS`]
    /// order), for a fabric that rings another's bells (tcp rings shm's doorbells).
    fn lend(&mut self, attached: &[(FabricKind, &Links)]) {
        let _ = attached;
    }

    /// After a barrier (every rank created its side): reaches the peers' sides and returns every
    /// ring end between this rank's workers and the peers' workers, both lanes, both directions.
    fn attach(&mut self) -> Result<Links, FabricError>;

    /// After a second barrier (every rank attached).
    fn sealed(&mut self);

    /// Every rank agreed that the job is over: peers closing from now on is not a failure.
    fn closing(&mut self);
}

/// Opens one fabric before the bootstrap exchange: sets up what peers need to reach this rank
/// and returns it with this rank's endpoint bytes (empty if it needs none).
pub type FabricOpen = fn(&Settings) -> Result<(Box<dyn Fabric>, Vec<u8>), FabricError>;

/// A fabric this build has: one line of [`FABRICS`], written by the fabric's own module. Its
/// name is its kind's, in the launch contract.
#[derive(Debug, Clone, Copy)]
pub struct FabricEntry {
    /// Which fabric.
    pub kind: FabricKind,
    /// Its constructor.
    pub open: FabricOpen,
    /// Whether it exchanges [`Fabric::cards`] between `create` and `attach` (a second
    /// all-gather, which every rank of a build makes, whatever fabrics it chose).
    pub exchanges: bool,
    /// For a fabric `GSM_FABRIC=auto` may take between hosts: whether it would serve better
    /// than `tcp` here (`Ok` with why, for the log; `Err` with why not).
    pub between_hosts: Option<fn() -> Result<String, String>>,
}

/// The fabrics this build has, in the order they are set up, attached and lent bells (shm
/// first, whose doorbells tcp rings); closed in the reverse order. A new fabric is its folder,
/// one line here and one line of the launch contract's `fabrics!` list (its name).
pub static FABRICS: &[FabricEntry] = &[
    shm::ENTRY,
    tcp::ENTRY,
    #[cfg(feature = "ofi")]
    ofi::ENTRY,
    #[cfg(feature = "rdma")]
    verbs::ENTRY,
];

/// The line of [`FABRICS`] of fabric `kind`, if this build has it.
pub fn entry(kind: FabricKind) -> Option<&'static FabricEntry> {
    FABRICS.iter().find(|e| e.kind == kind)
}

/// The fabric of this build named exactly `name` (its contract name, as a rank's offer writes
/// it), `None` for another name or a fabric this build lacks.
pub fn named(name: &str) -> Option<FabricKind> {
    FabricKind::named(name).filter(|&k| entry(k).is_some())
}

#[cfg(test)]
mod tests;

impl From<gsm_contract::SettingError> for FabricError {
    fn from(e: gsm_contract::SettingError) -> Self {
        FabricError::Env {
            name: e.name,
            value: e.value,
            reason: e.expected,
        }
    }
}
