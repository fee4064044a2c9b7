//! The store as a Gossamer job: one SPMD body per worker of every rank.
//!
//! Each worker entrusts one [`Shard`]; the trusts are gathered by worker 0 and handed to every
//! worker (mail under two tags of this program), so every worker of the job holds the same
//! table and sends each key to the same shard. The first worker of each rank listens on TCP
//! (`--bind`, default 127.0.0.1; port `--port` plus the rank's index among the ranks of its host,
//! so ranks that share a host do not collide, as several `redis-server`s on one host would not),
//! accepts without blocking and hands the connections round robin to the workers of its rank,
//! each served by a fiber there (`conn.rs`). Sockets wait through the runtime's reactor
//! (`gossamer::reactor`): a worker whose fibers all wait for clients sleeps in `epoll_wait`,
//! and while it spins idle it looks at its sockets at every 4th turn (`reactor::look_every`).
//! Every worker runs a housekeeping loop, woken every 100 ms by a timer in its reactor
//! (`gossamer::reactor::Interval`), that purges expired keys of its shard.
//!
//! In cluster mode (`--cluster`, `cluster.rs`) every worker listens, on `--port` plus its index
//! among the workers of its host (rank by rank), serves the connections it accepts itself, and
//! the table every worker gets holds each worker's address too (the address it is announced at:
//! `--bind`, or for an address of every interface `--cluster-announce-ip`, or the host's first
//! IPv4 address that is not a loopback one).
//!
//! `SHUTDOWN` (or `redis-cli shutdown nosave`, or SIGTERM/SIGINT to any rank, seen within
//! 100 ms) sets a stop flag on every rank (`state.rs`), by a closure delegated to the first shard
//! of each; each worker then ends its loops, its connections close, and the job ends normally. A
//! rank that cannot listen ends the job with a report that names it. Nothing is persisted. See
//! the crate's README.md.

use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gossamer::{Trust, WorkerId};

use crate::cluster::{Cluster, Node};
use crate::conn;
use crate::route::{Rule, Shards};
use crate::shard::Shard;
use crate::state::{self, Ctx, shutdown, stopping};
use crate::sys;

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct Options {
    pub bind: IpAddr,
    pub port: u16,
    /// The most clients a rank serves at once (lowered at start to what the descriptor limit
    /// allows, as Redis does).
    pub maxclients: usize,
    /// Cluster mode: every worker a shard with its own port (`cluster.rs`).
    pub cluster: bool,
    /// The address shards are announced at when `bind` is every interface's.
    pub announce: Option<IpAddr>,
}

/// Redis's default `maxclients`.
pub const MAX_CLIENTS: usize = 10_000;
/// Descriptors kept out of `maxclients` for the runtime's own (Redis keeps 32), beyond those
/// open at start.
const RESERVED_FDS: usize = 32;
/// How long the listener waits before it accepts again when the process is out of
/// descriptors and cannot even refuse a connection.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// Set by SIGTERM or SIGINT: the rank's first worker then stops the whole job, as `SHUTDOWN`.
static SIGNALLED: std::sync::LazyLock<std::sync::Arc<AtomicBool>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(AtomicBool::new(false)));

/// Mail tags of the shard table's exchange.
const TAG_SHARD: u64 = 0x6b76_0000_0000_0001;
const TAG_TABLE: u64 = 0x6b76_0000_0000_0002;

/// How often a worker purges expired keys and looks at the stop flag.
const HOUSEKEEPING: Duration = Duration::from_millis(100);

/// Runs the store until `SHUTDOWN`; `Err` with a line for the user if the job failed.
pub fn serve(options: Options, config: gossamer::Config) -> Result<(), String> {
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, SIGNALLED.clone())
            .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
    }
    let results =
        gossamer::spmd(config, move |w| worker_main(w, &options)).map_err(|e| e.to_string())?;
    results.into_iter().collect()
}

/// What worker 0 hands every worker: a name for the job, then every worker's trust and address.
type Table = (u64, Vec<(Trust<Shard>, Node)>);

/// Every worker's trust to its shard and address, in worker order, on every worker, with a
/// name for the job that worker 0 draws.
fn shard_table(mine: (Trust<Shard>, Node), me: usize, count: usize) -> Table {
    if me != 0 {
        gossamer::send(WorkerId::new(0), TAG_SHARD, mine);
        return gossamer::recv(WorkerId::new(0), TAG_TABLE);
    }
    let mut table = vec![mine];
    for w in 1..count {
        table.push(gossamer::recv(WorkerId::new(w), TAG_SHARD));
    }
    let job: u64 = rand::random();
    for w in 1..count {
        gossamer::send(WorkerId::new(w), TAG_TABLE, (job, table.clone()));
    }
    gossamer::flush();
    (job, table)
}

/// The place of worker `w` among the listeners of its host, in rank order: its rank's index
/// among the ranks of its host standalone (one listener per rank), its own index among the
/// workers of its host in cluster mode.
fn host_index(w: &gossamer::Worker, cluster: bool) -> usize {
    let (rank, host) = (w.rank(), gossamer::host_of_rank(w.rank()));
    let before = (0..rank).filter(|&r| gossamer::host_of_rank(r) == host);
    if !cluster {
        return before.count();
    }
    let workers: usize = before.map(|r| gossamer::workers_of_rank(r).len()).sum();
    workers + w.id() - gossamer::workers_of_rank(rank).start
}

/// The address a shard is announced at in cluster mode.
fn announced(options: &Options) -> String {
    if !options.bind.is_unspecified() {
        return options.bind.to_string();
    }
    options
        .announce
        .or_else(sys::first_ipv4)
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
        .to_string()
}

/// The port of the listener at `index` among those of its host: `port` plus the index (0
/// stays 0: every listener takes a port the system picks, and prints it).
fn listen_port(port: u16, index: usize) -> Result<u16, String> {
    if port == 0 {
        return Ok(0);
    }
    u16::try_from(usize::from(port) + index)
        .map_err(|_| format!("port {port} + {index} is past 65535"))
}

fn worker_main(w: &gossamer::Worker, options: &Options) -> Result<(), String> {
    // Look at the sockets at every 4th idle turn only: an idle worker's looks that find nothing
    // are CPU time the clients on the same cores lose.
    gossamer::reactor::look_every(4);
    let rank = w.rank();
    let fail = |what: String| -> ! { gossamer::fail_job(format!("gsm-kv: rank {rank}: {what}")) };
    let port =
        listen_port(options.port, host_index(w, options.cluster)).unwrap_or_else(|e| fail(e));
    let first = gossamer::workers_of_rank(rank).start == w.id();
    let accepting = first || options.cluster;
    let listener = if accepting {
        let addr = SocketAddr::new(options.bind, port);
        let l = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .unwrap_or_else(|e| fail(format!("cannot listen on {addr}: {e}")));
        Some(l)
    } else {
        None
    };
    let port = match &listener {
        Some(l) => l.local_addr().map_or(port, |a| a.port()),
        None => port,
    };
    let node = Node {
        ip: announced(options),
        port,
    };
    let (job, table) = shard_table((gossamer::entrust(Shard::new()), node), w.id(), w.count());
    let (trusts, nodes): (Vec<_>, Vec<_>) = table.into_iter().unzip();
    if first {
        state::set_max_clients(max_clients(options.maxclients, w.count(), rank));
    }
    let (rule, cluster) = if options.cluster {
        let me = w.id();
        (Rule::Slots { me }, Some(Cluster::new(nodes, me, job)))
    } else {
        (Rule::Hash, None)
    };
    let ctx = Rc::new(Ctx {
        shards: Shards::new(trusts, rule),
        cluster,
        port,
        started: Instant::now(),
        rank,
        ranks: gossamer::rank_count(),
        worker: w.id(),
    });
    state::install(Some(ctx.clone()));
    let accept = {
        let ctx = ctx.clone();
        let to = if options.cluster {
            w.id()..w.id() + 1
        } else {
            gossamer::workers_of_rank(rank)
        };
        gossamer::spawn(move || accept_loop(&ctx, listener, to))
    };
    if first {
        crate::command::set_listen(options.bind.to_string(), port);
        println!(
            "gsm-kv: rank {rank} of {} listening on {}:{port} ({} workers in the job)",
            ctx.ranks,
            options.bind,
            w.count()
        );
    }
    if let Some(c) = &ctx.cluster {
        let (from, to) = c.slots_of(w.id());
        println!(
            "gsm-kv: shard {} of {} (rank {rank}) listening on {}:{port}, slots {from}-{to}",
            w.id(),
            w.count(),
            options.bind,
        );
    }
    // A timerfd in the reactor, not `gossamer::sleep`: a sleeping fiber costs its worker a
    // clock read at every turn of its loop, which is on the path of every request.
    let mut housekeeping = gossamer::reactor::Interval::new(HOUSEKEEPING)
        .unwrap_or_else(|e| fail(format!("cannot make the housekeeping timer: {e}")));
    while !stopping() {
        if housekeeping.tick().is_err() {
            break;
        }
        if accepting && SIGNALLED.load(Ordering::Relaxed) && !stopping() {
            shutdown(&ctx);
        }
        ctx.shards[w.id()].apply(|s: &mut Shard| s.purge_expired());
    }
    // Every fiber of this worker waiting for a socket gives up: connections close, the
    // listener's loop ends.
    gossamer::reactor::close();
    accept.join();
    state::install(None);
    Ok(())
}

/// `maxclients` as the descriptor limit allows it: the soft limit is raised towards what
/// `wanted` clients need, and what is left of it after the descriptors open now and a reserve
/// bounds the clients.
fn max_clients(wanted: usize, workers: usize, rank: usize) -> usize {
    let reserve = RESERVED_FDS + 4 * workers + sys::open_descriptors().unwrap_or(0);
    let Some(limit) = sys::raise_open_files((wanted + reserve) as u64) else {
        return wanted;
    };
    let allowed = usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_sub(reserve);
    if allowed < wanted {
        eprintln!(
            "gsm-kv: rank {rank}: maxclients lowered from {wanted} to {} by the limit of \
             {limit} open descriptors",
            allowed.max(1)
        );
    }
    wanted.min(allowed).max(1)
}

/// Redis's answer to a client over `maxclients`, written before the connection closes.
const TOO_MANY: &[u8] = b"-ERR max number of clients reached\r\n";

/// Tells a client it is refused, and closes (a fresh socket takes so short a reply at once; a
/// client that cannot take it is not waited for).
fn refuse(stream: std::net::TcpStream) {
    use std::io::Write;
    if stream.set_nonblocking(true).is_ok() {
        let _ = (&stream).write(TOO_MANY);
    }
}

/// The listener's fiber, on the accepting worker: takes new connections and hands them out
/// round robin to the workers `workers` (those of its rank, or itself in cluster mode).
fn accept_loop(
    ctx: &Rc<Ctx>,
    listener: Option<std::net::TcpListener>,
    workers: std::ops::Range<usize>,
) {
    let Some(listener) = listener else {
        return;
    };
    let mut listener = gossamer::reactor::Registered::new(listener)
        .unwrap_or_else(|e| gossamer::fail_job(format!("gsm-kv: rank {}: epoll: {e}", ctx.rank)));
    let mut next = 0usize;
    let mut spare = sys::spare_descriptor();
    while !stopping() {
        match listener.retry(|l| l.accept()) {
            Ok((stream, _)) => {
                if !state::client_joined() {
                    refuse(stream);
                    continue;
                }
                let to = workers.start + next % workers.len();
                next += 1;
                hand_out(ctx, stream, to);
            }
            // `close` at the end of the job.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted && stopping() => return,
            // The connection waits in the backlog, and the listener's edge is spent: let the
            // spare descriptor go to take it and refuse it, or wait a little, but never spin.
            Err(e) if sys::out_of_descriptors(&e) => {
                let refused = spare.take().is_some()
                    && listener.get_mut().accept().map(|(s, _)| refuse(s)).is_ok();
                spare = sys::spare_descriptor();
                if !refused {
                    gossamer::sleep(ACCEPT_BACKOFF);
                }
            }
            // The connection was reset before it was taken: go on serving the others.
            Err(_) => gossamer::yield_now(),
        }
    }
}

/// Starts the fiber of a new connection on worker `to` of this rank.
fn hand_out(ctx: &Ctx, stream: std::net::TcpStream, to: usize) {
    if to == ctx.worker {
        drop(gossamer::spawn(move || conn::serve(stream)));
        return;
    }
    use std::os::fd::{FromRawFd, IntoRawFd};
    let fd = stream.into_raw_fd();
    drop(gossamer::spawn_on(WorkerId::new(to), move || {
        // SAFETY: `fd` is a connected socket whose only owner was the stream consumed by
        // `into_raw_fd` above, in this same process (`to` is a worker of this rank); this fiber
        // is its only new owner.
        let stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
        conn::serve(stream);
    }));
}
