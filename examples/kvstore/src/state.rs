//! What the fibers of one rank share while the store runs: each worker's context (the shard
//! table, its port and place), the stop flag that `SHUTDOWN` sets on every rank, and the count of
//! open connections, with the `INFO` text made from them. The server sets them up and the
//! connections read them; this module accepts and serves nothing.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use gossamer::Trust;

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
    /// Every shard of the job, by worker id.
    pub shards: Vec<Trust<Shard>>,
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

/// The text of `INFO` (every section at once, whatever was asked).
pub fn info(ctx: &Ctx, out: &mut Vec<u8>, keys: i64) {
    let text = format!(
        "# Server\r\nredis_version:7.0.0\r\ngsm_kv_version:{}\r\nredis_mode:standalone\r\n\
         process_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\n\r\n\
         # Clients\r\nconnected_clients:{}\r\n\r\n\
         # Persistence\r\nloading:0\r\naof_enabled:0\r\nrdb_changes_since_last_save:0\r\n\r\n\
         # Gossamer\r\ngsm_rank:{}\r\ngsm_ranks:{}\r\ngsm_worker:{}\r\ngsm_shards:{}\r\n\r\n\
         # Keyspace\r\ndb0:keys={keys},expires=0,avg_ttl=0\r\n",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        ctx.port,
        ctx.started.elapsed().as_secs(),
        CLIENTS.load(Ordering::Relaxed),
        ctx.rank,
        ctx.ranks,
        ctx.worker,
        ctx.shards.len(),
    );
    crate::resp::bulk(out, text.as_bytes());
}
