//! What the fibers of one rank share while the store runs: each worker's context (the shard
//! table, its port and place), the stop flag that `SHUTDOWN` sets on every rank, and the count of
//! open connections, with the `INFO` text made from them. The server sets them up and the
//! connections read them; this module accepts and serves nothing.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use crate::cluster::Cluster;
use crate::route::Shards;
use crate::shard::Shard;

/// Set when the job is to stop (by `SHUTDOWN` from any rank).
static STOP: AtomicBool = AtomicBool::new(false);
/// Connections open on this rank.
static CLIENTS: AtomicUsize = AtomicUsize::new(0);
/// The most connections this rank serves at once (Redis's `maxclients`), set at start.
static MAX_CLIENTS: AtomicUsize = AtomicUsize::new(usize::MAX);

/// What the fibers of one worker share.
#[derive(Debug)]
pub struct Ctx {
    /// Every shard of the job, by worker id, and how keys map to them.
    pub shards: Shards,
    /// The cluster as this worker answers for it, in cluster mode.
    pub cluster: Option<Cluster>,
    pub port: u16,
    pub started: Instant,
    pub rank: usize,
    pub ranks: usize,
    pub worker: usize,
}

thread_local! {
    /// The worker's context, for the connection fibers started on it (a fiber never leaves
    /// its worker, so this is the same for all of them).
    static CTX: RefCell<Option<Rc<Ctx>>> = const { RefCell::new(None) };
}

/// Sets (or with `None` clears) the calling worker's context.
pub fn install(ctx: Option<Rc<Ctx>>) {
    CTX.with(|c| *c.borrow_mut() = ctx);
}

/// The context of the calling worker, while the store runs.
pub fn ctx() -> Option<Rc<Ctx>> {
    CTX.with(|c| c.borrow().clone())
}

/// Whether the job is stopping.
pub fn stopping() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Counts a new connection in, unless the rank serves `maxclients` already (`false`: the
/// connection is to be refused).
pub fn client_joined() -> bool {
    let max = MAX_CLIENTS.load(Ordering::Relaxed);
    CLIENTS
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < max).then_some(n + 1)
        })
        .is_ok()
}

/// Sets this rank's `maxclients`.
pub fn set_max_clients(n: usize) {
    MAX_CLIENTS.store(n, Ordering::Relaxed);
}

/// This rank's `maxclients`.
pub fn max_clients() -> usize {
    MAX_CLIENTS.load(Ordering::Relaxed)
}

pub fn client_left() {
    CLIENTS.fetch_sub(1, Ordering::Relaxed);
}

/// Asks every rank to stop.
pub fn shutdown(ctx: &Ctx) {
    for r in 0..ctx.ranks {
        let first = gossamer::workers_of_rank(r).start;
        // The closure runs in rank r's process: it sets that process's flag.
        let _ = ctx.shards[first].try_apply(|_: &mut Shard| STOP.store(true, Ordering::SeqCst));
    }
}

/// Sets the hash listpack limits of every rank (each rank's first shard runs the change in
/// its process), returning once all have.
pub fn config_set(ctx: &Ctx, limits: crate::command::Limits) {
    let (entries, value) = (limits.entries, limits.value);
    for r in 0..ctx.ranks {
        let first = gossamer::workers_of_rank(r).start;
        let _ = ctx.shards[first]
            .try_apply(move |_: &mut Shard| crate::shard::hash::set_limits(entries, value));
    }
}

/// The sections `INFO` shows without an argument (`default`), in Redis's order.
const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
    "gossamer",
];

/// Every section, in Redis's order: the default ones and `commandstats`.
const ALL: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "cluster",
    "keyspace",
    "gossamer",
];

/// `INFO commandstats`: the calls of each command called (times are not measured).
fn command_stats(calls: &[u64]) -> String {
    let mut text = String::from("# Commandstats\r\n");
    for (row, &n) in calls.iter().enumerate().filter(|(_, n)| **n > 0) {
        if let Some(name) = crate::command::name_of(row) {
            text.push_str(&format!(
                "cmdstat_{name}:calls={n},usec=0,usec_per_call=0.00,rejected_calls=0,\
                 failed_calls=0\r\n"
            ));
        }
    }
    text
}

/// The text of `INFO` for the sections asked (`default`, `all`, `everything` or names; an
/// unknown name adds nothing, as in Redis).
pub fn info(ctx: &Ctx, out: &mut Vec<u8>, asked: &[Vec<u8>], keys: i64, calls: &[u64]) {
    let mut wanted: Vec<&str> = Vec::new();
    if asked.is_empty() {
        wanted.extend(DEFAULT);
    }
    for a in asked {
        let a = a.to_ascii_lowercase();
        match a.as_slice() {
            b"default" => wanted.extend(DEFAULT),
            b"all" | b"everything" => wanted.extend(ALL),
            _ => {
                if let Some(name) = ALL.iter().find(|n| n.as_bytes() == a.as_slice()) {
                    wanted.push(name);
                }
            }
        }
    }
    let mut text = String::new();
    for name in ALL.iter().filter(|n| wanted.contains(n)) {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        match *name {
            "commandstats" => text.push_str(&command_stats(calls)),
            _ => text.push_str(&section(ctx, name, keys)),
        }
    }
    crate::resp::bulk(out, text.as_bytes());
}

/// One section of `INFO`, its title line first.
fn section(ctx: &Ctx, name: &str, keys: i64) -> String {
    let uptime = ctx.started.elapsed().as_secs();
    match name {
        "server" => format!(
            "# Server\r\nredis_version:7.0.0\r\ngsm_kv_version:{}\r\nredis_mode:{}\r\n\
             os:{}\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{uptime}\r\n\
             uptime_in_days:{}\r\nexecutable:gsm-kv\r\n",
            env!("CARGO_PKG_VERSION"),
            if ctx.cluster.is_some() {
                "cluster"
            } else {
                "standalone"
            },
            std::env::consts::OS,
            std::process::id(),
            ctx.port,
            uptime / 86_400,
        ),
        "clients" => format!(
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n",
            CLIENTS.load(Ordering::Relaxed),
            max_clients(),
        ),
        "memory" => format!(
            "# Memory\r\nused_memory:{0}\r\nused_memory_rss:{0}\r\nmaxmemory:0\r\n\
             maxmemory_policy:noeviction\r\nmem_allocator:libc\r\n",
            crate::sys::resident_bytes().unwrap_or(0)
        ),
        "persistence" => "# Persistence\r\nloading:0\r\naof_enabled:0\r\n\
                          rdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\n"
            .into(),
        "stats" => "# Stats\r\n".into(),
        "replication" => {
            "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n".into()
        }
        "cpu" => {
            let (user, sys) = crate::sys::cpu_seconds();
            format!(
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n\
                 used_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n"
            )
        }
        "modules" => "# Modules\r\n".into(),
        "errorstats" => "# Errorstats\r\n".into(),
        "cluster" => format!(
            "# Cluster\r\ncluster_enabled:{}\r\n",
            u8::from(ctx.cluster.is_some())
        ),
        "keyspace" if keys > 0 => {
            format!("# Keyspace\r\ndb0:keys={keys},expires=0,avg_ttl=0\r\n")
        }
        "keyspace" => "# Keyspace\r\n".into(),
        _ => format!(
            "# Gossamer\r\ngsm_rank:{}\r\ngsm_ranks:{}\r\ngsm_worker:{}\r\ngsm_shards:{}\r\n",
            ctx.rank,
            ctx.ranks,
            ctx.worker,
            ctx.shards.len(),
        ),
    }
}
