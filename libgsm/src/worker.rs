//! A worker: one OS thread running a fiber scheduler and a poller, and holding its trustee-side
//! property table, its outgoing batch queues and its pending-request table.
//!
//! **Loop.** Run up to `POLL_EVERY` ready fibers, then poll: serve incoming request batches (one
//! ring per client plus the loopback queue), complete incoming responses (one ring per trustee
//! plus loopback), flush outgoing batches. Outgoing records are thus batched per destination and
//! flushed when every fiber waits (the ready queue ran dry), when a batch fills its slot (flushed
//! at once), or after at most `POLL_EVERY` fiber switches. A fiber that only applies to local properties
//! (inline, never suspending) also polls every `INLINE_POLL` applies, so other workers' requests
//! to this one are not starved by it; those polls publish its own partly filled request batches
//! only every `INLINE_REQUEST_FLUSH`-th time, so that they fill. Nor do the clients starve the
//! worker's own fibers: a poll that served k requests lets them run k inline applies (at least
//! `INLINE_POLL`, at most `MAX_SHARE`, for at most `SHARE_TIME`) before the next look, one for
//! one.
//!
//! **The gate.** Once the looks of inline applies have found nothing for a step of
//! `LOOKS_PER_STEP` in a row, and nothing waits to be published, the worker opens the gate of its
//! doorbell ([`WorkerCore::gate`], `wire::doorbell`): from then on its inline applies neither
//! count nor look, until a ring closes the gate (every publication to this worker rings, from
//! whatever process or thread), or the worker stages a request. Then the counting and looking
//! above start again, from a look at the next apply.
//!
//! **Serving.** A request batch is served record by record, each through its trampoline (see
//! `trust.rs`); a trampoline of `apply`/`apply_then` also serves the plain records of its own
//! kind right behind it ([`WorkerCore::serve_run`]), so a run of requests of one closure type
//! costs one call, one property lookup per name change and one staging of results per 16.
//!
//! **Contexts.** Code runs on a worker in one of three contexts: a *fiber* (may block: apply, join,
//! yield), a *delegated closure* (a closure run against a property, inline or served; may not
//! block, since blocking would have to suspend the poller or alias the property), or a *callback*
//! (an `apply_then` callback, run by the poller, or at once on the calling fiber when the trustee
//! is its own worker; may not block either way, so that it behaves the same wherever its answer
//! comes from). Everything else a poll runs (destructors of values it drops) is in callback
//! context too. A blocking call in the wrong context panics at once with
//! [`BLOCKING_IN_DELEGATED`]; a panic that escapes a callback or a poll ends the job
//! ([`WorkerCore::guarded`]).
//!
//! **Idle backoff and wake-up.** An idle worker spins, then yields its thread, then parks. Before
//! parking it stores `sleeping = true`, issues a SeqCst fence and re-checks its rings; a producer
//! publishes its slot (release), issues a SeqCst fence and then reads `sleeping`. This is the
//! Dekker pattern: at least one side sees the other's store, so either the consumer sees the data
//! or the producer sees the flag and unparks it (`Thread::unpark` keeps a token, so an unpark
//! just before the park is not lost). The park also has a timeout as a safety net. How long a
//! worker spins depends on how many of its rank's workers are awake, not on how many there are
//! ([`Shared::spin`]): on a host with more workers than CPUs whose idle workers sleep, the
//! others still spin.
//!
//! This module does not know the user-facing types; `trust.rs` and `spawn.rs` build on it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{DelegationError, Error};
use crate::fabric::{Bell, Doorbell};
use crate::fiber::{self, Co, StackPool};
use crate::property::{PropertyTable, Toggle};
use crate::wire::codeptr;
use crate::wire::record::{
    Body, Byte, CONTROL, Large, OutQueue, Partial, RELEASE, RESP_CONT, Request, RequestReader,
    ResponseReader, SER, SER_STATUS, SMALL, Sink, Src, classify, parked_by_responses,
};
use crate::wire::ring::{Consumer, Producer};

/// The message of a blocking call made where blocking is impossible.
pub const BLOCKING_IN_DELEGATED: &str = "gossamer: blocking call (apply/try_apply/apply_with/join/yield_now/entrust_on/recv, or a collective) inside a delegated closure, an apply_then callback, a wait_for condition or other code its poller runs (a destructor of a value it drops): a trustee runs these in its poller and cannot suspend there (it would stall every request it serves, or alias the property). Use apply_then (or spawn a fiber) instead";

/// Fiber resumes between two polls. Small enough that a client with many fibers publishes its
/// first requests while its later fibers still run, so the trustee serves in parallel instead
/// of waiting for one large batch (A/B against 128: 64-fiber apply median 9.5 -> 10.3 M/s).
const POLL_EVERY: usize = 16;
/// Idle loop turns spent spinning, then yielding the thread, before parking. Longer spinning
/// measured slower on this shared 2-core machine (the peer worker needs the core).
const SPIN: u32 = 64;
/// The same while this rank's awake workers outnumber the CPUs they have (see
/// [`Shared::spin`]): a spinning worker then holds a CPU that the worker it waits for needs, so
/// it yields at once. Measured with one rank of 3 and
/// 4 workers on 2 CPUs (a barrier of `gsm-collectives` through messages): 47–55 µs with 64
/// spinning turns, 8–10 µs with 8, 3.9–4.4 µs with 1; with 2 workers (not oversubscribed),
/// 0.5–1.3 µs either way.
pub(crate) const SPIN_OVERSUBSCRIBED: u32 = 1;
/// Header checks per spinning turn of an idle worker (see `run_loop`): a turn of the loop (a
/// poll over every ring) costs tens of nanoseconds, a look at the headers a few.
const LIGHT_SPINS: u32 = 8;
const YIELDS: u32 = 32;
/// How long a job of one rank must stay stalled (every worker quiet, roots left, no activity)
/// before it is reported deadlocked; the ranks of a larger job agree on the same wait (see
/// `cluster::terminate`). Nothing can wake a stalled job, so this only keeps the report from
/// resting on a single look.
pub(crate) const STALL_CONFIRM: Duration = Duration::from_secs(1);
/// The longest an idle worker sleeps while fibers of it wait in [`crate::wait_for`]: their
/// conditions are set by other processes through the host board, which ring no doorbell. The
/// 20 µs that `gsm-collectives`' board waits slept before the runtime took them over.
const WAITER_SLEEP: Duration = Duration::from_micros(20);
/// How long such a worker yields the thread between looks before it sleeps at all: a sleep
/// lasts the timer's slack (about 50 µs here) however short it is asked to be, and a partner
/// that another rank's worker on this core is about to become is usually much nearer. The
/// millisecond of `gsm-collectives`' board waits before the runtime took them over (sleeping
/// after a hundred idle turns instead: a barrier of 2 ranks of 1 worker 0.09 -> 50 µs).
const WAITER_YIELDING: Duration = Duration::from_millis(1);
/// Inline (local) applies from a fiber between two looks at the incoming rings (one header load
/// per ring). 16 rather than 64: a remote client waiting on this worker is answered sooner
/// (gsm-bench, 1 fiber/worker: worker 1's share 1.4 -> 2.4 M/s) at no measured cost to the
/// local rate.
const INLINE_POLL: i32 = 16;
/// Of the polls made between inline applies, only every this many publishes the worker's partly
/// filled request batches; the others serve, answer and complete only. A fiber that mixes
/// inline and remote applies so fills about 64 applies' worth of records per slot instead of 16,
/// while a client waiting on this worker is still answered every `INLINE_POLL` applies.
/// gsm-bench local, sharded map: records per served slot 38-50 -> 105-120, rate +6 to +22 %
/// (A/B alternated within each process); the counter cases unchanged or up to +8 %.
const INLINE_REQUEST_FLUSH: u32 = 4;
/// Empty looks in a row by inline applies before the next doubles their spacing (see
/// [`WorkerCore::look_later`]).
const LOOKS_PER_STEP: u32 = 8;
/// At most this many doublings: a look every 256 inline applies.
const MAX_LOOK_STEP: u32 = 4;
/// Looks spaced farther apart than this on average over a step stop the doubling.
const LOOK_GAP: Duration = Duration::from_micros(1);

/// The most inline applies a poll grants this worker's own fibers (see
/// [`WorkerCore::poll_flushing`]): a little more than one poll serves from one full client ring
/// at the default geometry (16 slots of 4 KiB; a run of requests of one kind takes 5 bytes per
/// record, so about 13 000), so that one busy client is matched one for one, while a worker
/// that serves many busy clients still looks at its rings again within this many of its own
/// applies (a fraction of a millisecond at most). With 4096, one flooding client got 55-57% of
/// the worker instead of 50%.
const MAX_SHARE: u32 = 1 << 14;

/// `apply_then` requests one worker may have unanswered before a fiber that issues one more
/// waits (polling, so answers come in and run their callbacks) until fewer are: the pending
/// queue's bound of the thesis (§3.2.4: the issuing fiber yields when its pending queue is
/// full). Without it nothing bounded them: a fiber issuing 10 million `apply_then`s to another
/// worker and yielding every 4096 had 5.8-6.8 million unanswered at once (312-357 MB of pending
/// entries and of answers queued on the trustee, whose full response ring the client emptied
/// only at its rare polls) and ran at 18-20 M/s; with the bound, at most 15 000, 5 MB and
/// 26-35 M/s (alternated runs; yielding every 64 never meets the bound). A full ring of
/// continuations, like [`MAX_SHARE`]: 16 384 entries take 0.7 MB here, and at the tcp fabric's
/// 50-80 us round trip they still allow 200 M requests/s. Blocking requests (`apply`, `join`)
/// are not counted: each holds a fiber, so fibers bound them, and a spawned fiber's answer may
/// wait on work that the spawner has yet to issue.
pub(crate) const MAX_THEN_IN_FLIGHT: usize = 1 << 14;

/// A share larger than this many applies is handed out this many at a time, with a look at the
/// clock in between (see [`SHARE_TIME`]). 64 at a time cost the one-trust map 6-8% and the
/// counter 2-3% (A/B within each process); 256 cost nothing measurable.
const SHARE_CHUNK: u32 = 256;
/// A share ends after this long even if its applies are not used up: it is counted in applies,
/// and a fiber whose inline applies each cost far more than the requests served (say 10 µs of
/// work each, after a poll that served 16 000 requests of a few nanoseconds) would otherwise keep
/// the worker's clients waiting for a tenth of a second. With the clock read only between chunks,
/// the wait is at most this, or one chunk of applies, whichever is longer.
const SHARE_TIME: Duration = Duration::from_millis(1);

/// Local worker `local`'s bit in a trust's set of the workers it sent `apply_then`s from
/// (`Trust::senders`): bit `local`, or bit 63 for every worker from 63 up.
#[inline]
pub(crate) fn sender_bit(local: usize) -> u64 {
    1 << local.min(63)
}

/// One level of delegated closure, and one of callback, in `WorkerCore::context`.
const DELEGATED: u64 = 1;
const CALLBACK: u64 = 1 << 32;

/// Results of a run of requests (`WorkerCore::serve_run`) staged together.
const RUN_GROUP: usize = 16;

/// The request-id field of a reference-counting (`CONTROL`) record says which kind it is: a
/// registration of a trust made from another, or a release (see `property.rs`).
pub(crate) const CONTROL_REGISTER: u32 = 0;
pub(crate) const CONTROL_RELEASE: u32 = 1;

/// The request id of a record that wants no response (a one-way message).
pub(crate) const NO_REPLY: u32 = u32::MAX;

/// Status codes of response records.
pub(crate) mod status {
    pub const OK: u8 = 0;
    pub const PANICKED: u8 = 1;
    pub const POISONED: u8 = 2;
    pub const DEAD: u8 = 3;
    pub const BLOCKING: u8 = 4;
    pub const STOPPED: u8 = 5;
    pub const WIRE: u8 = 6;
}

/// Where this rank sits in the job (the same numbers on every worker of the rank).
#[derive(Debug, Clone)]
pub(crate) struct Place {
    /// This rank.
    pub rank: u32,
    /// Workers of each rank.
    pub rank_workers: Vec<u32>,
    /// Hostname of each rank (for messages).
    pub hosts: Vec<String>,
    /// Global id of this rank's first worker.
    pub base: usize,
    /// Workers of this rank.
    pub local: usize,
    /// Workers in the job.
    pub total: usize,
    /// Process id of each rank.
    pub pids: Vec<u32>,
    /// Per rank: whether it can read this process's memory (`process_vm_readv`), so that large
    /// bodies for it are parked here instead of streamed through the rings.
    pub far: Vec<bool>,
    /// The host boards this rank maps (`crate::board`), if any.
    pub board: Option<Arc<crate::board::Board>>,
}

impl Place {
    /// A job of one rank with `n` workers.
    pub(crate) fn single(n: usize) -> Place {
        Place {
            rank: 0,
            rank_workers: vec![n as u32],
            hosts: vec![crate::bootstrap::hostname()],
            base: 0,
            local: n,
            total: n,
            pids: vec![std::process::id()],
            far: vec![false],
            board: None,
        }
    }

    /// How many of this rank's workers have a CPU each: the CPUs it may use, less those the
    /// workers of the other ranks on this host (same hostname) take of the host's online CPUs.
    pub(crate) fn cpu_room(&self) -> usize {
        let here = &self.hosts[self.rank as usize];
        let others: usize = self
            .rank_workers
            .iter()
            .zip(&self.hosts)
            .enumerate()
            .filter(|&(r, (_, h))| r != self.rank as usize && h == here)
            .map(|(_, (&w, _))| w as usize)
            .sum();
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
        crate::config::available_cpus().min(online.saturating_sub(others))
    }

    /// Whether global worker `g` belongs to this rank.
    #[inline]
    pub(crate) fn is_local(&self, g: usize) -> bool {
        g >= self.base && g < self.base + self.local
    }

    /// The rank of global worker `g`.
    pub(crate) fn rank_of(&self, g: usize) -> u32 {
        let mut base = 0usize;
        for (r, &n) in self.rank_workers.iter().enumerate() {
            if g < base + n as usize {
                return r as u32;
            }
            base += n as usize;
        }
        self.rank_workers.len() as u32
    }

    /// Global id of `rank`'s first worker.
    pub(crate) fn first_of(&self, rank: u32) -> usize {
        self.rank_workers[..rank as usize]
            .iter()
            .map(|&n| n as usize)
            .sum()
    }
}

/// A counter on its own cache line (one writer: its worker).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Counter(pub AtomicU64);

/// State shared by all workers of this rank.
#[derive(Debug)]
pub(crate) struct Shared {
    pub place: Place,
    pub stop: AtomicBool,
    /// This rank's workers' doorbells (index = local worker).
    pub doors: Vec<Doorbell>,
    /// By global worker id: what to ring after publishing to it (`None` for nobody to ring).
    pub bells: Vec<Option<Bell>>,
    pub failure: Mutex<Option<Error>>,
    pub roots_left: AtomicUsize,
    /// Set when the roots are done: workers keep serving until the job is quiet (see
    /// [`WorkerCore::try_finish`]).
    pub draining: AtomicBool,
    /// Set by a worker that goes to sleep while roots are still running, cleared by the next
    /// worker that does work: while it is set, the workers count their activity as when
    /// draining, so that a rank whose workers are all idle with roots left (a deadlock) is seen.
    pub watching: AtomicBool,
    /// Bumped by every worker after each loop turn that did work while counting (draining or
    /// watching), and once at the first turn that sees counting on after seeing it off.
    pub activity: AtomicU64,
    /// Per local worker: the `activity` value it last saw while locally quiet (`u64::MAX`: never).
    pub quiet: Vec<AtomicU64>,
    /// Whether other ranks take part: then a quiet rank does not stop by itself; it reports
    /// `rank_quiet` and the rank's main thread decides with the other ranks (`runtime.rs`).
    pub multi: bool,
    /// The `activity` value at which every worker of this rank was last seen quiet.
    pub rank_quiet: AtomicU64,
    /// A job of this rank alone found stalled (every worker quiet with roots left) at this
    /// `activity` value, first at this time (see [`STALL_CONFIRM`]).
    pub stall: Mutex<Option<(u64, Instant)>>,
    /// After a deadlock: per local worker that had waiting fibers, what they waited for.
    pub waits: Mutex<Vec<(usize, Vec<String>)>>,
    /// Waves of the termination protocol this rank has completed (`cluster::terminate`).
    pub waves: AtomicU64,
    /// Per local worker with fibers in [`crate::wait_for`]: the `waves` value read before it
    /// last found all their conditions false while counting; `u64::MAX` while it has none. A
    /// rank whose waiters were not all looked at since its last wave is not quiet in the next
    /// one (see `cluster::sample`): a condition is set by another rank's write to the host
    /// board, which no message counts.
    pub board_fresh: Vec<AtomicU64>,
    /// Per local worker: slots it published to, and consumed from, rings of other ranks.
    pub sent: Vec<Counter>,
    pub received: Vec<Counter>,
    /// This rank's workers that are not asleep in their doorbells, and how many of them have a
    /// CPU each ([`Place::cpu_room`]): see [`Shared::spin`].
    pub awake: AtomicUsize,
    pub cpu_room: usize,
    /// This runtime's number among those this process started (from 1; see [`RUNTIMES`]).
    pub epoch: u32,
}

/// Runtimes this process has started. Each one's number marks the trusts it makes
/// (`Trust::home`), so a trust kept past the end of its runtime is told apart from the trusts
/// of a later one, whose tables reuse the same indexes and generations.
static RUNTIMES: AtomicU32 = AtomicU32::new(0);

impl Shared {
    pub(crate) fn new(
        place: Place,
        doors: Vec<Doorbell>,
        mut bells: Vec<Option<Bell>>,
        roots: usize,
        multi: bool,
    ) -> Self {
        let n = place.local;
        for (l, d) in doors.iter().enumerate() {
            bells[place.base + l] = Some(Bell::Door(d.clone()));
        }
        Shared {
            awake: AtomicUsize::new(n),
            cpu_room: place.cpu_room(),
            epoch: RUNTIMES
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_add(1)
                .max(1),
            stop: AtomicBool::new(false),
            doors,
            bells,
            failure: Mutex::new(None),
            roots_left: AtomicUsize::new(roots),
            draining: AtomicBool::new(false),
            watching: AtomicBool::new(false),
            activity: AtomicU64::new(0),
            quiet: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
            multi,
            rank_quiet: AtomicU64::new(u64::MAX),
            stall: Mutex::new(None),
            waits: Mutex::new(Vec::new()),
            waves: AtomicU64::new(0),
            board_fresh: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
            sent: (0..n).map(|_| Counter::default()).collect(),
            received: (0..n).map(|_| Counter::default()).collect(),
            place,
        }
    }

    /// Whether this host runs more workers than there are CPUs for them: this rank's workers
    /// beyond the CPUs it may use, or the workers of every rank on this host beyond the host's
    /// online CPUs ([`Place::cpu_room`]).
    pub(crate) fn oversubscribed(&self) -> bool {
        self.place.local > self.cpu_room
    }

    /// Idle turns a worker spins before yielding: [`SPIN`] while this rank's awake workers have
    /// a CPU each, [`SPIN_OVERSUBSCRIBED`] when they do not. Counted awake, not started: a host
    /// with more workers than CPUs whose idle workers sleep still has a CPU for each of the
    /// others, and a worker that waits for an answer from another one on the other CPU then
    /// sees it within nanoseconds instead of yielding its CPU to nobody. (One rank of 8 workers
    /// on 2 CPUs, a blocking apply to another worker while 6 sleep: 0.8-1.1 us with the static
    /// choice, against 0.44-0.50 us with 2 workers.) The workers of the other ranks on the
    /// host are counted awake all the time, since their sleep is not seen from here.
    #[inline]
    pub(crate) fn spin(&self) -> u32 {
        if self.awake.load(Ordering::Relaxed) <= self.cpu_room {
            SPIN
        } else {
            SPIN_OVERSUBSCRIBED
        }
    }

    /// Asks every worker of this rank to stop and wakes them.
    pub(crate) fn stop_all(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for d in &self.doors {
            d.force();
        }
    }

    /// The roots are done: workers drain in-flight work, then stop (the last to see the job
    /// quiet calls [`Shared::stop_all`], or the main thread does once every rank is quiet).
    pub(crate) fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        for d in &self.doors {
            d.force();
        }
    }

    /// Records the first failure and stops the runtime.
    pub(crate) fn fail(&self, e: Error) {
        if let Ok(mut f) = self.failure.lock() {
            f.get_or_insert(e);
        }
        self.stop_all();
    }

    /// Whether a failure was recorded.
    pub(crate) fn failed(&self) -> bool {
        self.failure.lock().map(|f| f.is_some()).unwrap_or(true)
    }

    /// Wakes global worker `w` if it sleeps (after a publication to it).
    #[inline]
    fn wake(&self, w: usize) {
        if let Some(b) = &self.bells[w] {
            b.ring();
        }
    }

    /// Slots this rank published to other ranks' rings, and consumed from theirs.
    pub(crate) fn traffic(&self) -> (u64, u64) {
        let s = self.sent.iter().map(|c| c.0.load(Ordering::Acquire)).sum();
        let r = self
            .received
            .iter()
            .map(|c| c.0.load(Ordering::Acquire))
            .sum();
        (s, r)
    }
}

/// Inline storage of a pending entry.
pub(crate) type Data = [MaybeUninit<u64>; 4];
/// Completes a pending entry with `(status, body)`, on the worker that made it.
pub(crate) type Completer = unsafe fn(&WorkerCore, &mut Data, u8, &[Byte]);
/// The shape of every trampoline (see `trust.rs` and `spawn.rs`): the worker, the client, the
/// record, and the rest of its batch, from which a trampoline may serve the plain records of
/// its own kind that follow (see [`WorkerCore::serve_run`]); it leaves the others to the caller.
pub(crate) type Trampoline = unsafe fn(&WorkerCore, usize, &Request<'_>, &mut RequestReader<'_>);

/// How many response records ahead of the one being completed its pending slot is prefetched
/// (gsm-bench local, `apply_then`, A/B within each process: 8 ahead +5 to +7%, 16 ahead +7 to
/// +10%, 32 ahead +7 to +13%; 32 is no better within the noise).
const AHEAD: usize = 16;

/// Marks the worker as running no fiber when dropped (see `run_ready`).
struct OutOfFiber<'a>(&'a WorkerCore);

impl Drop for OutOfFiber<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.current.set(None);
        fiber::clear_current();
    }
}

/// A value alone in its cache line: its neighbours in a struct are not next to it, so the
/// compiler cannot merge an update of it with one of theirs into one wide load and store.
#[repr(align(64))]
struct Lone<T>(T);

impl<T> std::ops::Deref for Lone<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

#[derive(Debug)]
struct PendingSlot {
    complete: Option<Completer>,
    data: Data,
}

/// The ring ends one worker holds.
#[derive(Debug)]
pub(crate) struct Ends {
    pub req_out: Vec<Option<Producer>>,
    pub req_in: Vec<Option<Consumer>>,
    pub resp_out: Vec<Option<Producer>>,
    pub resp_in: Vec<Option<Consumer>>,
}

/// A fiber suspended in [`crate::wait_for`] and its condition, which lives on that fiber's
/// stack: the fiber stays suspended while its entry exists (only the worker, on taking the entry
/// out, makes it ready), and teardown forgets the entries before it drops the fibers.
struct Waiter {
    fiber: u32,
    cond: *mut (dyn FnMut() -> bool + 'static),
    /// Where the worker leaves a panic of the condition (on the same fiber's stack), which the
    /// fiber then raises without testing again (so the panic is reported once).
    panic: *mut Option<Box<dyn std::any::Any + Send>>,
}

impl Waiter {
    /// Tests the condition on worker `core` (in condition context, see
    /// [`WorkerCore::condition`]): a panic is kept for the fiber and counts as true.
    ///
    /// # Safety
    /// The fiber that owns `cond` and `panic` is suspended in `wait_for` (see the type's docs).
    unsafe fn holds(&self, core: &WorkerCore) -> bool {
        // SAFETY: the caller's; both live in the suspended fiber's frame.
        unsafe {
            if (*self.panic).is_some() {
                return true;
            }
            match core.condition(&mut *self.cond) {
                Ok(holds) => holds,
                Err(p) => {
                    *self.panic = Some(p);
                    true
                }
            }
        }
    }
}

/// Everything one worker owns. Reached through a thread-local pointer; all mutation goes through
/// `Cell`/`RefCell`, and no `RefCell` borrow is held while user code runs, except the incoming
/// ring being served (user code cannot reach it).
///
/// Vectors indexed by worker are indexed by *global* worker id (every worker of every rank); the
/// rings to workers of other ranks come from the fabrics, the others from the heap.
pub(crate) struct WorkerCore {
    /// Global worker id.
    pub id: usize,
    /// `id` and the runtime's number (`Shared::epoch`) in one word, as a trust of this runtime
    /// held here names its trustee (`trust::home`).
    pub home: u64,
    /// This worker's doorbell, whose gate holds `home` while this worker watches it: then an
    /// apply of a trust held here runs inline after one compare of the two words (see
    /// [`gate`](Self::gate)).
    door: Doorbell,
    /// Index within this rank.
    pub local: usize,
    /// [`sender_bit`]`(local)`, kept for the `apply_then` send path.
    pub sender_bit: u64,
    /// Workers in the job.
    pub count: usize,
    pub shared: Arc<Shared>,
    fibers: RefCell<Vec<Option<Co>>>,
    free_fibers: RefCell<Vec<u32>>,
    ready: RefCell<VecDeque<u32>>,
    current: Cell<Option<u32>>,
    /// Set while [`teardown`](Self::teardown) drops the unfinished fibers (see [`fiber_panic`]).
    dropping_fibers: Cell<bool>,
    stacks: RefCell<StackPool>,
    /// How deep the running code is in delegated closures (`DELEGATED` each, the low half) and
    /// in callbacks (`CALLBACK` each, the high half); 0 outside both. One word, so that an
    /// inline `apply_then` enters its closure's and then its callback's context with one store
    /// each and leaves with one.
    ///
    /// Alone in its cache line ([`Lone`]): next to the `pending` table's borrow flag, the
    /// compiler merged `complete`'s release of that borrow and its step into callback context
    /// into one 16-byte load and store, and the load, overlapping the flag's 8-byte store just
    /// before it, waited for that store to retire (a failed store-to-load forward: a quarter of
    /// `complete`'s samples on that load). Worker 1's `apply_then` stream to worker 0
    /// (quickbench remote, 20 pairs alternated with the build before): +11%, median of the
    /// pairs' ratios; quickbench local +2.5%.
    context: Lone<Cell<u64>>,
    out_req: Vec<RefCell<OutQueue>>,
    out_resp: Vec<RefCell<OutQueue>>,
    req_in: Vec<RefCell<Option<Consumer>>>,
    resp_in: Vec<RefCell<Option<Consumer>>>,
    /// By global id: whether that worker is in another rank (its rings cross a process).
    remote: Vec<bool>,
    /// Large records being reassembled, per incoming remote ring.
    partial_req: Vec<RefCell<Option<Partial>>>,
    partial_resp: Vec<RefCell<Option<Partial>>>,
    pending: RefCell<(Vec<PendingSlot>, Vec<u32>)>,
    /// Pending requests not yet answered.
    outstanding: Cell<usize>,
    /// Of those, `spawn_on`s to other workers: answered when the fiber they started there ends,
    /// they wait for that fiber, which its worker's quiet report covers, not for anything in
    /// flight, so they do not keep this worker from being quiet (a fiber suspended for ever
    /// there is a deadlock, or at the end of the run a fiber left behind, as on this worker).
    fiber_results: Cell<usize>,
    /// This worker's quiet report stands (`Shared::quiet`); see [`not_quiet`](Self::not_quiet).
    reported: Cell<bool>,
    /// Fibers suspended in [`crate::wait_for`], with their conditions (see
    /// [`wait_for`](Self::wait_for)), and how many there are (tested once per loop turn).
    waiting: RefCell<Vec<Waiter>>,
    waiters: Cell<usize>,
    /// Of those, the deadlines of fibers in [`crate::sleep`]: their wait ends by itself, so while
    /// there are any this worker is never quiet (a job whose fibers wait for a sleeper is no
    /// deadlock), and an idle worker whose waiters all sleep sleeps until the first deadline.
    sleepers: RefCell<Vec<Instant>>,
    /// Of those, `apply_then` requests (see [`MAX_THEN_IN_FLIGHT`]).
    then_in_flight: Cell<usize>,
    /// Closures run inline since the last poll from a fiber, counted from minus the fibers' share
    /// that poll granted (`poll_flushing`), or `INLINE_POLL` when the loopback queue has work
    /// that must run before the next inline closure (see [`WorkerCore::inline_ran`]).
    inline_runs: Cell<i32>,
    /// Request records served, in all (see [`WorkerCore::poll_flushing`]).
    served: Cell<u32>,
    /// Polls made by [`WorkerCore::inline_ran`] (see `INLINE_REQUEST_FLUSH`).
    inline_polls: Cell<u32>,
    /// Looks at the rings by inline applies in a row that found nothing (see
    /// [`look_later`](WorkerCore::look_later)). Non-zero exactly while a negative `inline_runs`
    /// counts a back-off rather than a share: a poll that grants a share has found work, and
    /// that resets it.
    empty_looks: Cell<u32>,
    /// When the last step of those looks ended (every `LOOKS_PER_STEP` of them).
    last_look: Cell<Option<Instant>>,
    /// Yields since the last one that polled (see [`WorkerCore::yield_fiber`]).
    quick_yields: Cell<u32>,
    /// `inline_runs` at the last yield (see [`WorkerCore::in_share`]).
    runs_at_yield: Cell<i32>,
    /// Applies of the fibers' share not yet handed out, and when the share ends at the latest
    /// (see [`WorkerCore::grant_share`]).
    share_left: Cell<u32>,
    share_until: Cell<Option<Instant>>,
    /// Slots published to / consumed from other ranks (mirrored into `Shared` after each poll).
    sent: Cell<u64>,
    received: Cell<u64>,
    pub props: RefCell<PropertyTable>,
    /// Messages delivered to this worker and not yet received (`mail.rs`).
    pub mail: RefCell<crate::mail::Mailbox>,
    next_id: Cell<u64>,
    backlog_limit: usize,
}

impl std::fmt::Debug for WorkerCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerCore")
            .field("id", &self.id)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

thread_local! {
    static CORE: Cell<*const WorkerCore> = const { Cell::new(std::ptr::null()) };
}

/// The current worker's core, if this thread is a worker.
///
/// The reference is valid for the rest of the worker thread's run: the core is installed before
/// any user code runs and removed only after every fiber and property has been dropped. Callers
/// must not keep it beyond the current call.
#[inline]
pub(crate) fn core() -> Option<&'static WorkerCore> {
    let p = CORE.with(|c| c.get());
    // SAFETY: see above; `p` is either null or points to the live core of this thread.
    unsafe { p.as_ref() }
}

/// The current worker's core, or a panic explaining that a runtime is needed.
#[inline]
#[track_caller]
pub(crate) fn core_or_panic(what: &str) -> &'static WorkerCore {
    match core() {
        Some(c) => c,
        None => outside_worker(what),
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn outside_worker(what: &str) -> ! {
    panic!(
        "gossamer: {what} was called outside a gossamer worker; run this code inside gossamer::run or gossamer::spmd"
    )
}

/// The message of a panic that a fiber's entry caught, or, while the fiber's worker drops its
/// unfinished fibers at teardown, no message: what unwinds a fiber then is the coroutine
/// library's forced unwind, which must reach the library and is passed on. Its payload's type is
/// private, so only the time tells it apart: any other payload, a string or not
/// (`panic_any(7)`), is the fiber's own panic and reaches its joiner. (Taking every payload that
/// is not a string for the forced unwind ended the whole job instead.)
pub(crate) fn fiber_panic(p: Box<dyn std::any::Any + Send>) -> String {
    if core().is_some_and(|c| c.dropping_fibers.get()) {
        std::panic::resume_unwind(p);
    }
    panic_message(&*p)
}

/// A panic payload as text.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

impl WorkerCore {
    pub(crate) fn new(
        local: usize,
        shared: Arc<Shared>,
        ends: Ends,
        slot_cap: usize,
        stack: usize,
        slots: usize,
    ) -> Self {
        let place = &shared.place;
        let (id, count) = (place.base + local, place.total);
        let remote: Vec<bool> = (0..count).map(|g| !place.is_local(g)).collect();
        let mk = |v: Vec<Option<Producer>>| -> Vec<RefCell<OutQueue>> {
            v.into_iter()
                .enumerate()
                .map(|(g, p)| {
                    RefCell::new(OutQueue::new(
                        slot_cap,
                        p.map_or(Sink::Loopback, Sink::Ring),
                        remote[g],
                    ))
                })
                .collect()
        };
        let (out_req, out_resp) = (mk(ends.req_out), mk(ends.resp_out));
        for g in (0..count).filter(|&g| remote[g]) {
            if place.far.get(place.rank_of(g) as usize) == Some(&true) {
                out_req[g].borrow_mut().allow_far(false);
                out_resp[g].borrow_mut().allow_far(true);
            }
        }
        let door = shared.doors[local].clone();
        // Closed until this worker has looked at its rings and found them empty (a shm segment
        // starts with zero there).
        door.gate()
            .store(crate::wire::doorbell::CLOSED, Ordering::Relaxed);
        WorkerCore {
            id,
            home: crate::trust::home(id, shared.epoch),
            door,
            local,
            sender_bit: sender_bit(local),
            count,
            fibers: RefCell::new(Vec::new()),
            free_fibers: RefCell::new(Vec::new()),
            ready: RefCell::new(VecDeque::new()),
            current: Cell::new(None),
            dropping_fibers: Cell::new(false),
            stacks: RefCell::new(StackPool::new(stack)),
            context: Lone(Cell::new(0)),
            out_req,
            out_resp,
            req_in: ends.req_in.into_iter().map(RefCell::new).collect(),
            resp_in: ends.resp_in.into_iter().map(RefCell::new).collect(),
            partial_req: (0..count).map(|_| RefCell::new(None)).collect(),
            partial_resp: (0..count).map(|_| RefCell::new(None)).collect(),
            remote,
            pending: RefCell::new((Vec::new(), Vec::new())),
            outstanding: Cell::new(0),
            fiber_results: Cell::new(0),
            reported: Cell::new(false),
            waiting: RefCell::new(Vec::new()),
            waiters: Cell::new(0),
            sleepers: RefCell::new(Vec::new()),
            then_in_flight: Cell::new(0),
            inline_runs: Cell::new(0),
            served: Cell::new(0),
            inline_polls: Cell::new(0),
            empty_looks: Cell::new(0),
            last_look: Cell::new(None),
            quick_yields: Cell::new(0),
            runs_at_yield: Cell::new(0),
            share_left: Cell::new(0),
            share_until: Cell::new(None),
            sent: Cell::new(0),
            received: Cell::new(0),
            props: RefCell::new(PropertyTable::default()),
            mail: RefCell::new(crate::mail::Mailbox::default()),
            next_id: Cell::new(((id as u64) << 40) | 1),
            backlog_limit: slots.max(2),
            shared,
        }
    }

    /// Whether global worker `w` is in another rank.
    #[inline]
    pub(crate) fn is_remote(&self, w: usize) -> bool {
        self.remote[w]
    }

    /// Installs `self` as this thread's core for the duration of `f`.
    pub(crate) fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let _watch = crate::fiber::watch_overflow(self.id, self.stacks.borrow().size());
        CORE.with(|c| c.set(self));
        let r = f();
        CORE.with(|c| c.set(std::ptr::null()));
        r
    }

    /// The runtime's number (`Shared::epoch`, kept in `home`).
    #[inline(always)]
    pub(crate) fn epoch(&self) -> u32 {
        (self.home >> 32) as u32
    }

    /// The gate word of this worker's doorbell: `home` while this worker watches it (see
    /// [`watch`](Self::watch)), [`CLOSED`](crate::wire::doorbell::CLOSED) otherwise.
    ///
    /// While it holds `home`, nothing was published to this worker since it last looked at its
    /// rings, its loopback queue is empty and nothing waits in its outgoing batches, so an inline
    /// apply need not count itself towards the next look ([`inline_ran`](Self::inline_ran)):
    /// an inline apply of a trust of this worker is one compare of its home word with this one,
    /// and no store. Counting was a load, an increment and a store per apply, and the store
    /// limited a loop of them: gsm-bench local's `apply_then` counter on worker 0, both workers
    /// issuing, runs with the gate and without it alternated within one process (a temporary
    /// switch), 40 pairs: +9.8%, +9.4% and +5.7% in three such series (35, 35 and 24 pairs of
    /// 40 faster); its sharded map case unchanged (median of 30 pairs -0.3%).
    ///
    /// Whatever needs a look closes the gate: every ring of this doorbell after a publication
    /// (by a worker of this rank, a peer rank through the shm segment, or a fabric thread), a
    /// request this worker stages for another worker or for itself
    /// ([`send_request`](Self::send_request)), and a stop. Then applies count and look as before
    /// until the looks find nothing for a step of `LOOKS_PER_STEP` in a row.
    #[inline(always)]
    pub(crate) fn gate(&self) -> u64 {
        self.door.gate().load(Ordering::Relaxed)
    }

    /// Opens the gate (see [`gate`](Self::gate)) if nothing is staged or queued for any worker,
    /// this one included, and keeps it open if then nothing has arrived; the first apply after
    /// it closes looks at once.
    #[cold]
    fn watch(&self) {
        let staged = (0..self.count)
            .any(|d| self.out_req[d].borrow().is_dirty() || self.out_resp[d].borrow().is_dirty());
        if staged {
            return;
        }
        self.door.open_gate(self.home);
        // The Dekker re-check (`wire::doorbell`): a publication that came before the gate opened
        // may have found it closed.
        if self.incoming_waiting() {
            self.door.close_gate();
        }
        // The next look comes with the first apply after the gate closes, or with the next
        // apply if it closed just now.
        self.inline_runs.set(INLINE_POLL - 1);
    }

    /// Panics, naming `op` (as in `gossamer::send`), unless worker `w` exists in this job.
    #[inline]
    #[track_caller]
    pub(crate) fn assert_worker(&self, op: &str, w: usize) {
        if w >= self.count {
            no_such_worker(op, w, self.count);
        }
    }

    /// A fresh trust id, unique in the job (worker id in the high bits).
    #[inline]
    pub(crate) fn new_trust_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    #[inline]
    pub(crate) fn stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// Whether the caller is a destructor run while the worker drops its unfinished fibers at
    /// the end of a run (no fiber is current then, and the fiber's stack is being unwound).
    /// There a blocking `try_*` call answers [`Error::Stopped`](crate::Error::Stopped): a panic
    /// would be a panic during unwinding, which aborts the whole process.
    pub(crate) fn unwinding_fibers(&self) -> bool {
        self.dropping_fibers.get() && self.current.get().is_none()
    }

    // ----- contexts -----

    /// Whether the caller may suspend: on a fiber, not inside a delegated closure or callback.
    #[inline]
    pub(crate) fn can_block(&self) -> bool {
        self.current.get().is_some() && self.context.get() == 0
    }

    /// Whether requests to self must be deferred to the loopback queue (a property closure or
    /// callback is running on this worker).
    #[inline]
    pub(crate) fn must_defer(&self) -> bool {
        self.context.get() as u32 != 0
    }

    /// Whether a delegated closure or a callback is running on this worker.
    #[inline]
    pub(crate) fn delegated_or_callback(&self) -> bool {
        self.context.get() != 0
    }

    /// Panics with [`BLOCKING_IN_DELEGATED`] unless the caller may block.
    #[inline]
    #[track_caller]
    pub(crate) fn assert_can_block(&self) {
        if !self.can_block() {
            cannot_block(
                self.unwinding_fibers(),
                self.current.get().is_none() && self.context.get() == 0,
            );
        }
    }

    /// Runs `f` on property `(idx, gn)` of type `T` as a delegated closure: no blocking inside,
    /// panics caught and turned into poison.
    #[inline]
    pub(crate) fn run_delegated<T: 'static, U>(
        &self,
        idx: u32,
        gn: u32,
        f: impl FnOnce(&mut T) -> U,
    ) -> Result<U, DelegationError> {
        let p = self.lookup::<T>(idx, gn)?;
        // SAFETY: `p` was just looked up, so it is live; see `run_on`.
        unsafe { self.run_on(p, idx, gn, f) }
    }

    /// [`run_delegated`](Self::run_delegated) for a trust of this process, which carries the
    /// property's key word `k` (`property::key`): the lookup is one compare when it matches.
    #[inline(always)]
    pub(crate) fn run_keyed<T: 'static, U>(
        &self,
        idx: u32,
        gn: u32,
        k: u64,
        f: impl FnOnce(&mut T) -> U,
    ) -> Result<U, DelegationError> {
        // SAFETY: the reference ends with this statement, and a lookup runs no user code.
        let p = unsafe { self.table() }.get_keyed::<T>(idx, gn, k)?;
        // SAFETY: `p` was just looked up, so it is live; see `run_on`.
        unsafe { self.run_on(p, idx, gn, f) }
    }

    /// [`run_keyed`](Self::run_keyed) and then `then` with its result, as an inline
    /// `apply_then` does: the closure in delegated context, the callback in callback context
    /// (a panic in it ends the job, see [`guarded`](Self::guarded)). The context word goes from
    /// the closure's level straight to the callback's: three stores per apply instead of four.
    #[inline(always)]
    pub(crate) fn run_keyed_then<T: 'static, U>(
        &self,
        idx: u32,
        gn: u32,
        k: u64,
        f: impl FnOnce(&mut T) -> U,
        then: impl FnOnce(Result<U, DelegationError>),
    ) {
        let level = self.context.get();
        // SAFETY: the reference ends with this statement, and a lookup runs no user code.
        let r = match unsafe { self.table() }.get_keyed::<T>(idx, gn, k) {
            Ok(p) => {
                self.context.set(level + DELEGATED);
                // SAFETY: `p` was just looked up, so it is live; see `run_on`.
                let r = catch_unwind(AssertUnwindSafe(|| f(unsafe { &mut *p })));
                self.context.set(level + CALLBACK);
                r.map_err(|e| self.closure_panicked(idx, gn, &*e))
            }
            Err(e) => {
                self.context.set(level + CALLBACK);
                Err(e)
            }
        };
        let c = catch_unwind(AssertUnwindSafe(|| then(r)));
        self.context.set(level);
        if let Err(p) = c {
            self.callback_panicked(&*p);
        }
    }

    /// Where the live, unpoisoned property `(idx, gn)` of type `T` is.
    #[inline(always)]
    fn lookup<T: 'static>(&self, idx: u32, gn: u32) -> Result<*mut T, DelegationError> {
        // SAFETY: the reference ends with this statement, and a lookup runs no user code.
        unsafe { self.table() }.get::<T>(idx, gn)
    }

    /// The property table, for one lookup, without a `RefCell` guard: then the lookup stores
    /// nothing, and a guard's two stores to the borrow flag per closure cost more than the
    /// lookup in a loop of inline applies, whose stores are what limits it (gsm-bench local, A/B
    /// within each process: `apply_then`, blocking `apply` and the one-trust map +4 to +8%).
    ///
    /// Nor does it test the borrow flag, as `RefCell::try_borrow_unguarded` would: no mutable
    /// borrow of the table can be live when a closure starts, since every `borrow_mut` of it ends
    /// within the statement that takes it, and none of those statements runs user code (values
    /// leave the table by `toggle` and `drain` and are dropped after the borrow has ended). The
    /// test was a load and a branch per inline apply: gsm-bench local's `apply_then` counter case
    /// in a probe, processes with and without it alternated, 10 pairs each: worker 0 alone
    /// +14% and +10% (medians; 9 and 6 pairs of 10 faster), both workers issuing +7% and +19%
    /// (6 and 10 of 10). Debug builds still check it.
    ///
    /// # Safety
    /// The caller must drop the reference before anything can borrow the table mutably: before
    /// any user code runs, and before anything inserts, toggles or poisons.
    #[inline(always)]
    unsafe fn table(&self) -> &PropertyTable {
        debug_assert!(
            self.props.try_borrow_mut().is_ok(),
            "gossamer: the property table is borrowed while a closure starts"
        );
        // SAFETY: only this thread uses the table, no mutable borrow of it is live (see above),
        // and the caller drops the reference before anything borrows it mutably (contract).
        unsafe { &*self.props.as_ptr() }
    }

    /// Runs `f` on the property `(idx, gn)` at `p` as a delegated closure; a panic poisons it.
    ///
    /// # Safety
    /// `p` must be what [`lookup`](Self::lookup) returned for `(idx, gn)`, with no toggle or
    /// poisoning on this worker since. Then it points to the live boxed property, and it is not
    /// freed while `f` runs: frees happen only in `toggle`, which runs from the poller's serve
    /// loop or loopback, never nested inside a delegated closure (requests to self are deferred
    /// while a delegated closure runs), and no other `&mut T` exists since only this thread touches it
    /// and delegated closures do not nest on one property (nested requests to this worker are
    /// deferred).
    #[inline(always)]
    unsafe fn run_on<T: 'static, U>(
        &self,
        p: *mut T,
        idx: u32,
        gn: u32,
        f: impl FnOnce(&mut T) -> U,
    ) -> Result<U, DelegationError> {
        // SAFETY: see the contract above.
        let r = caught_at(&self.context, DELEGATED, || f(unsafe { &mut *p }));
        r.map_err(|e| self.closure_panicked(idx, gn, &*e))
    }

    /// A delegated closure on property `(idx, gn)` panicked with `e`: poisons the property and
    /// returns the error its caller gets.
    #[cold]
    fn closure_panicked(
        &self,
        idx: u32,
        gn: u32,
        e: &(dyn std::any::Any + Send),
    ) -> DelegationError {
        self.props.borrow_mut().poison(idx, gn);
        panic_to_error(e)
    }

    /// Serves `first`, a request to run an `F` on a `T`, and then every record right behind it
    /// in its batch that is of the same kind and plain ([`Request::plain_head`]): one trampoline
    /// call for the run instead of one per record, no general decoding, and the property looked
    /// up again only when a record names another one (or the last closure panicked). What ends
    /// the run is left in `more` for the serve loop.
    ///
    /// The looked-up pointer stays valid from one record to the next: the only code that runs
    /// in between is the closures themselves, and they can neither free a property (their
    /// toggles to this worker are deferred to the loopback queue) nor poison one without
    /// panicking, which ends the reuse.
    ///
    /// The continuations behind a record (most of a run: a batch starts each run with one full
    /// record) are served by a loop of their own, in one `catch_unwind` with the delegated
    /// depth raised once: a panic there poisons the property, answers the record that panicked
    /// after those before it, and leaves the rest to the general loop, which finds the property
    /// poisoned. Per record that loop reads the id and the capture, runs the closure and
    /// gathers the result (or answers it at once, for a client in another rank); the general
    /// loop also looked the property up, compared it with the last, and counted the depth and
    /// caught a panic per record (gsm-bench local, in-process A/B: `apply_then` +15 to +17%,
    /// one-trust map +2 to +3%, sharded map 0 to +6%; gsm-bench remote, alternated with the
    /// build before: `apply_then` both ways +11%, one way equal).
    ///
    /// # Safety
    /// `first` must have been encoded for this `(T, U, F)` (captured bytes = one `F`), and so
    /// must every record of `more` whose first header word equals `first`'s.
    #[inline(always)]
    pub(crate) unsafe fn serve_run<
        T: 'static,
        U: serde::Serialize,
        F: FnOnce(&mut T) -> U + Copy,
    >(
        &self,
        client: usize,
        first: &Request<'_>,
        more: &mut RequestReader<'_>,
    ) {
        if first.cap_len != std::mem::size_of::<F>() {
            // Not what this trampoline's sender writes: refuse it (and the run with it, whose
            // records have the same length) rather than read past the captured bytes.
            self.respond::<U>(client, first.req, Err(capture_mismatch()));
            return;
        }
        // Only a plain record starts a run; any other is served alone.
        let head = first.plain_head();
        // Results for a client of this rank are gathered and staged `RUN_GROUP` at a time, with
        // one borrow of the out-queue and one room check (`push_value_responses`); anything else
        // (a failure, a one-way request, a client in another rank) first stages what was
        // gathered, so the responses keep the order of the requests.
        let gather = !self.remote[client] && std::mem::size_of::<U>() <= SMALL;
        let mut group: [MaybeUninit<(u32, ManuallyDrop<U>)>; RUN_GROUP] =
            [const { MaybeUninit::uninit() }; RUN_GROUP];
        let mut n = 0;
        let stage = |group: &[MaybeUninit<(u32, ManuallyDrop<U>)>], n: usize| {
            if n > 0 {
                // SAFETY: the first `n` entries were written below and not yet staged;
                // `MaybeUninit<X>` has the layout of `X`.
                let done = unsafe {
                    std::slice::from_raw_parts(group.as_ptr().cast::<(u32, ManuallyDrop<U>)>(), n)
                };
                self.out_resp[client]
                    .borrow_mut()
                    .push_value_responses(status::OK, done);
            }
        };
        // The property last looked up, while it is known to be live and unpoisoned.
        let mut known = None;
        let mut next = Some((first.req, first.idx, first.gn, first.cap()));
        while let Some((req, idx, gn, cap)) = next {
            // SAFETY: `first`, or a record of the same first header word (contract), so of the
            // same capture length, which is one `F`'s (checked above).
            let f: F = unsafe { std::ptr::read_unaligned(cap.as_ptr().cast::<F>()) };
            let p = match known {
                Some((i, g, p)) if i == idx && g == gn => Ok(p),
                _ => self.lookup::<T>(idx, gn),
            };
            let r = match p {
                Ok(p) => {
                    known = Some((idx, gn, p));
                    // SAFETY: looked up for `(idx, gn)` by this run, and nothing toggled or
                    // poisoned since (a poisoning closure clears `known` below).
                    unsafe { self.run_on(p, idx, gn, f) }
                }
                Err(e) => Err(e),
            };
            match r {
                Ok(u) if gather && req != NO_REPLY => {
                    group[n] = MaybeUninit::new((req, ManuallyDrop::new(u)));
                    n += 1;
                    if n == RUN_GROUP {
                        stage(&group, n);
                        n = 0;
                    }
                }
                r => {
                    if r.is_err() {
                        known = None;
                    }
                    stage(&group, n);
                    n = 0;
                    self.respond(client, req, r);
                }
            }
            if let (Some(h), Some((i, g, p))) = (head, known)
                && more.continues(h, i, g)
            {
                // The continuations right behind this record name the same live property and
                // closure type, so each needs only its id and captured bytes: no lookup or
                // compare, and one depth count and one `catch_unwind` for all of them.
                let level = self.context.get();
                self.context.set(level + DELEGATED);
                let mut at = NO_REPLY;
                let mut running = false;
                let caught = catch_unwind(AssertUnwindSafe(|| {
                    while let Some((req, cap)) = more.next_continuation() {
                        // SAFETY: a continuation of a record of this kind (`continues`), so
                        // its captured bytes are one `F` (checked above for `first`).
                        let f: F = unsafe { std::ptr::read_unaligned(cap.as_ptr().cast::<F>()) };
                        at = req;
                        running = true;
                        // SAFETY: `p` was looked up for `(i, g)` by this run, and nothing
                        // toggled or poisoned since (see `run_on`).
                        let u = f(unsafe { &mut *p });
                        running = false;
                        if req == NO_REPLY {
                            drop(u);
                            continue;
                        }
                        if !gather {
                            self.respond(client, req, Ok(u));
                            continue;
                        }
                        group[n] = MaybeUninit::new((req, ManuallyDrop::new(u)));
                        n += 1;
                        if n == RUN_GROUP {
                            stage(&group, n);
                            n = 0;
                        }
                    }
                }));
                self.context.set(level);
                if let Err(e) = caught {
                    if !running {
                        std::panic::resume_unwind(e);
                    }
                    self.props.borrow_mut().poison(i, g);
                    known = None;
                    stage(&group, n);
                    n = 0;
                    self.respond::<U>(client, at, Err(panic_to_error(&*e)));
                }
            }
            next = head.and_then(|h| more.next_plain(h));
        }
        stage(&group, n);
    }

    /// Runs `f` as a delegated closure that has no property (e.g. `entrust_on`'s maker).
    pub(crate) fn run_plain<U>(&self, f: impl FnOnce() -> U) -> Result<U, DelegationError> {
        caught_at(&self.context, DELEGATED, f).map_err(|e| panic_to_error(&*e))
    }

    // ----- fibers -----

    /// Starts a fiber and makes it ready.
    ///
    /// # Panics
    /// If its stack cannot be had (see [`try_spawn_fiber`](Self::try_spawn_fiber)), at the
    /// caller's `spawn`.
    #[track_caller]
    pub(crate) fn spawn_fiber(&self, f: impl FnOnce() + 'static) {
        if let Err(e) = self.try_spawn_fiber(f) {
            panic!("{e}");
        }
    }

    /// Starts a fiber and makes it ready, or says why its stack could not be had.
    pub(crate) fn try_spawn_fiber(&self, f: impl FnOnce() + 'static) -> Result<(), String> {
        let made = self.stacks.borrow_mut().fiber(f);
        let co = made.map_err(|e| self.stacks.borrow_mut().explain(&e))?;
        let id = {
            let mut fibers = self.fibers.borrow_mut();
            match self.free_fibers.borrow_mut().pop() {
                Some(i) => {
                    fibers[i as usize] = Some(co);
                    i
                }
                None => {
                    fibers.push(Some(co));
                    (fibers.len() - 1) as u32
                }
            }
        };
        self.ready.borrow_mut().push_back(id);
        Ok(())
    }

    /// The running fiber's id.
    #[inline]
    pub(crate) fn current_fiber(&self) -> Option<u32> {
        self.current.get()
    }

    /// Makes fiber `id` ready.
    #[inline]
    pub(crate) fn wake_fiber(&self, id: u32) {
        self.ready.borrow_mut().push_back(id);
    }

    /// Yields the running fiber (it stays ready).
    ///
    /// When no other fiber is ready, switching to the scheduler would only resume this fiber
    /// again: the scheduler polls once per `POLL_EVERY` fibers it resumes. So then the yield
    /// returns at once, and every `POLL_EVERY`-th such yield polls here instead, on the
    /// fiber's stack, which keeps the poll cadence of a yielding loop as it was; but not in a
    /// loop of inline applies before the fibers' share that the last poll granted is used up
    /// ([`in_share`](Self::in_share)), or its yields would take back what the share gave. A fiber made
    /// ready by that poll, a draining or stopping runtime, all take the real switch.
    /// The switches cost a loop that yields every 64 local applies 21% of its time (inline
    /// `apply_then` alone: 313 Mops/s, against 379 when yielding every 1024); without them it
    /// runs at 360.
    #[track_caller]
    pub(crate) fn yield_fiber(&self) {
        if !self.can_block() {
            if self.unwinding_fibers() {
                // A destructor of a fiber the ended run drops: nothing else will run, so there
                // is nothing to yield to (and a panic here would abort the process).
                return;
            }
            self.assert_can_block();
        }
        let Some(id) = self.current.get() else {
            return;
        };
        if self.nothing_ready() && !self.stopping() && !self.shared.draining.load(Ordering::Relaxed)
        {
            let n = self.quick_yields.get() + 1;
            if n < POLL_EVERY as u32 || self.in_share() {
                self.quick_yields.set(n);
                return;
            }
            self.quick_yields.set(0);
            self.guarded(false, || self.poll());
            if self.nothing_ready() {
                return;
            }
        }
        self.wake_fiber(id);
        fiber::suspend();
    }

    /// Whether this yield comes from a loop of inline applies (some ran since the last yield)
    /// that is still within the share the last poll granted this worker's fibers
    /// (`poll_flushing`). Only inline applies spend the share: a fiber that yields between
    /// other work (remote requests, computing, waiting) keeps the usual cadence of polls, or
    /// its worker would serve its clients only once that fiber had yielded thousands of times
    /// (gsm-bench remote, `apply_then` both ways between two ranks: 54 -> 20 M/s when yields
    /// spent the share too). A back-off of the looks at empty rings (`look_later`) is no share:
    /// yields keep their cadence through it.
    #[inline]
    fn in_share(&self) -> bool {
        let r = self.inline_runs.get();
        r != self.runs_at_yield.replace(r)
            && ((r < 0 && self.empty_looks.get() == 0) || self.share_left.get() > 0)
    }

    /// Counts a pending `spawn_on` request in (`true`, once registered) or out (`false`, when
    /// its answer completes it); see `fiber_results`.
    pub(crate) fn fiber_result(&self, pending: bool) {
        let n = self.fiber_results.get();
        self.fiber_results
            .set(if pending { n + 1 } else { n.saturating_sub(1) });
    }

    /// Suspends the running fiber until `done()` holds (someone must wake it).
    #[track_caller]
    pub(crate) fn wait_until(&self, done: impl Fn() -> bool) {
        self.assert_can_block();
        while !done() {
            fiber::suspend();
            if !done() && self.stopping() {
                // Let the worker loop exit; the fiber will be dropped (unwound).
                fiber::suspend();
            }
        }
    }

    /// Suspends the running fiber until `cond()` holds ([`crate::wait_for`]). The worker tests
    /// the condition once per loop turn, between fibers ([`wake_waiters`](Self::wake_waiters)),
    /// so a waiting fiber costs no switch until it can go on, and a worker whose fibers all wait
    /// is idle: it sleeps in short spells, and it can be found quiet, which is how a job whose
    /// ranks wait for each other on the host board is seen deadlocked.
    #[track_caller]
    pub(crate) fn wait_for(&self, cond: &mut dyn FnMut() -> bool) {
        self.assert_can_block();
        let Some(id) = self.current.get() else {
            return;
        };
        let mut panic: Option<Box<dyn std::any::Any + Send>> = None;
        while !self
            .condition(cond)
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        {
            let short: *mut (dyn FnMut() -> bool + '_) = cond;
            // SAFETY: only the lifetime is erased. The entry is taken out of `waiting` before
            // this fiber is made ready again, so the pointers are used only while this frame is
            // suspended below (its stack intact); teardown forgets every entry before it drops
            // the fibers.
            let cond: *mut (dyn FnMut() -> bool + 'static) = unsafe { std::mem::transmute(short) };
            let mut waiting = self.waiting.borrow_mut();
            if waiting.is_empty() {
                self.shared.board_fresh[self.local].store(0, Ordering::SeqCst);
            }
            waiting.push(Waiter {
                fiber: id,
                cond,
                panic: &mut panic,
            });
            self.waiters.set(waiting.len());
            drop(waiting);
            while self.waiting.borrow().iter().any(|w| w.fiber == id) {
                fiber::suspend();
            }
            // The worker's test panicked: raised here, in the fiber, where it belongs.
            if let Some(p) = panic.take() {
                std::panic::resume_unwind(p);
            }
        }
    }

    /// Suspends the running fiber until `until` ([`crate::sleep`]): a [`wait_for`](Self::wait_for)
    /// on the clock, counted in `sleepers` meanwhile so that the worker is not found quiet.
    #[track_caller]
    pub(crate) fn sleep_until(&self, until: Instant) {
        struct Sleeping<'a>(&'a RefCell<Vec<Instant>>, Instant);
        impl Drop for Sleeping<'_> {
            fn drop(&mut self) {
                let mut v = self.0.borrow_mut();
                if let Some(i) = v.iter().position(|&t| t == self.1) {
                    v.swap_remove(i);
                }
            }
        }
        self.sleepers.borrow_mut().push(until);
        let _sleeping = Sleeping(&self.sleepers, until);
        self.wait_for(&mut || Instant::now() >= until);
    }

    /// How long an idle worker may sleep: until the first sleeper's deadline when every fiber
    /// in `wait_for` sleeps (at most `longest`), else [`WAITER_SLEEP`] (board conditions ring
    /// no doorbell).
    fn waiter_nap(&self, longest: Duration) -> Duration {
        let sleepers = self.sleepers.borrow();
        if sleepers.len() < self.waiters.get() {
            return WAITER_SLEEP;
        }
        sleepers
            .iter()
            .min()
            .map_or(WAITER_SLEEP, |t| {
                t.saturating_duration_since(Instant::now())
            })
            .min(longest)
    }

    /// Tests a [`wait_for`](Self::wait_for) condition in callback context, on the fiber and on
    /// the worker alike. The worker tests it between fibers, where nothing may block; a
    /// blocking call in it then panicked with "called outside a fiber" (the caller was in a
    /// fiber) while the same call passed in the fiber's own first test. Now it is refused in
    /// every test with [`BLOCKING_IN_DELEGATED`], which names conditions, and `try_apply`
    /// there answers `BlockingInDelegatedContext`. A panic in `cond` is caught, with the
    /// level put back, for the caller to raise in the fiber.
    fn condition(&self, cond: &mut dyn FnMut() -> bool) -> std::thread::Result<bool> {
        caught_at(&self.context, CALLBACK, cond)
    }

    /// Makes ready every fiber in [`wait_for`](Self::wait_for) whose condition holds; returns
    /// whether there was one. One load per loop turn when no fiber waits.
    #[inline]
    fn wake_waiters(&self) -> bool {
        self.waiters.get() > 0 && self.wake_waiters_slow()
    }

    #[cold]
    #[inline(never)]
    fn wake_waiters_slow(&self) -> bool {
        // Taken out while the conditions run: no borrow is held across user code.
        let mut waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        let before = waiting.len();
        waiting.retain(|w| {
            // SAFETY: an entry's fiber is suspended in `wait_for` (see `Waiter`).
            let go = unsafe { w.holds(self) };
            if go {
                self.wake_fiber(w.fiber);
            }
            !go
        });
        let woke = waiting.len() < before;
        if waiting.is_empty() {
            self.shared.board_fresh[self.local].store(u64::MAX, Ordering::SeqCst);
        }
        self.waiters.set(waiting.len());
        *self.waiting.borrow_mut() = waiting;
        woke
    }

    /// Whether a fiber in [`wait_for`](Self::wait_for) could go on (tested while spinning, and
    /// before a quiet report), without making it ready.
    fn waiter_ready(&self) -> bool {
        (0..self.waiters.get()).any(|i| {
            let Some((fiber, cond, panic)) = self
                .waiting
                .borrow()
                .get(i)
                .map(|w| (w.fiber, w.cond, w.panic))
            else {
                return false;
            };
            // SAFETY: as in `wake_waiters_slow`; no borrow of `waiting` is held while it runs.
            // A panic is kept for the next turn, which makes the fiber ready to raise it.
            unsafe { Waiter { fiber, cond, panic }.holds(self) }
        })
    }

    fn run_ready(&self, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(id) = self.ready.borrow_mut().pop_front() else {
                break;
            };
            let Some(mut co) = self
                .fibers
                .borrow_mut()
                .get_mut(id as usize)
                .and_then(|s| s.take())
            else {
                continue;
            };
            self.current.set(Some(id));
            let r = {
                // No fiber runs once `resume` is back, whether it returned or a panic escaped
                // the fiber: left set, `current` would let teardown's code block, and the
                // yielder would point into a fiber's dropped stack.
                let _out = OutOfFiber(self);
                co.resume(())
            };
            n += 1;
            if r.as_return().is_some() {
                self.stacks.borrow_mut().recycle(co);
                self.free_fibers.borrow_mut().push(id);
            } else {
                self.fibers.borrow_mut()[id as usize] = Some(co);
            }
        }
        n
    }

    // ----- pending requests -----

    /// Registers a pending request whose completer `complete` finds its data where `fill`
    /// wrote it; returns its id.
    ///
    /// `fill` writes into the slot itself. Handed over as a value, the data was copied from the
    /// caller's frame in 16-byte loads over the narrower stores (or none) the caller had just
    /// made there, and each such load waited for those stores to retire (a failed
    /// store-to-load forward: over half of this function's samples in an `apply_then` loop;
    /// together with the same fix in `serve_batch`, gsm-bench local, alternated with the build
    /// before: one-trust map +4 to +8%, sharded map +2 to +5%, the counter cases equal).
    #[inline]
    pub(crate) fn add_pending(&self, complete: Completer, fill: impl FnOnce(&mut Data)) -> u32 {
        self.outstanding.set(self.outstanding.get() + 1);
        let mut p = self.pending.borrow_mut();
        let (slots, free) = &mut *p;
        match free.pop() {
            Some(i) => {
                let s = &mut slots[i as usize];
                s.complete = Some(complete);
                fill(&mut s.data);
                i
            }
            None => {
                // Request ids stay below the bit that marks a response continuation
                // (`record::RESP_CONT`); 2^31 requests in flight would take far more memory
                // than their pending slots could get anyway.
                assert!(
                    slots.len() < RESP_CONT as usize,
                    "gossamer: more than 2^31 requests in flight on one worker"
                );
                let mut data: Data = [MaybeUninit::uninit(); 4];
                fill(&mut data);
                slots.push(PendingSlot {
                    complete: Some(complete),
                    data,
                });
                (slots.len() - 1) as u32
            }
        }
    }

    /// Completes pending request `req` (runs its completer as a callback). Returns `false`, and
    /// does nothing, if no request `req` is waiting for an answer.
    #[inline]
    #[must_use]
    pub(crate) fn complete(&self, req: u32, st: u8, body: &[Byte]) -> bool {
        let slot = {
            let mut p = self.pending.borrow_mut();
            let (slots, free) = &mut *p;
            let Some(s) = slots.get_mut(req as usize) else {
                return false;
            };
            let Some(c) = s.complete.take() else {
                return false;
            };
            free.push(req);
            self.outstanding.set(self.outstanding.get() - 1);
            (c, s.data)
        };
        let (c, mut data) = slot;
        // SAFETY: `c` and `data` were registered together by `add_pending`, and the entry is
        // completed once (its completer was taken). `st`/`body` are the response to it.
        let r = caught_at(&self.context, CALLBACK, || unsafe {
            c(self, &mut data, st, body)
        });
        if let Err(e) = r {
            std::panic::resume_unwind(e);
        }
        true
    }

    /// Completes request `req` with a response from worker `from`; a response that no request
    /// is waiting for (an unknown id, or one answered already) breaks the protocol: answers
    /// cannot be matched any more, so the job ends with a report rather than go on unsure.
    #[inline(always)]
    fn complete_from(&self, from: usize, req: u32, st: u8, body: &[Byte]) {
        if !self.complete(req, st, body) {
            self.unexpected_response(from, req);
        }
    }

    #[cold]
    #[inline(never)]
    fn unexpected_response(&self, from: usize, req: u32) {
        self.ring_broken(
            from,
            &format!("a response to request {req}, which is not waiting for one"),
        );
    }

    // ----- sending -----

    /// Counts `n` slots just published to `dest` and wakes it.
    #[inline]
    fn published(&self, dest: usize, n: usize) {
        if n > 0 {
            if self.remote[dest] {
                self.sent.set(self.sent.get() + n as u64);
            }
            self.shared.wake(dest);
        }
    }

    /// Stages a request record to `dest` (the loopback queue when `dest` is this worker).
    /// `ser`: the argument bytes are a `postcard` encoding (to another rank), not a moved value.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_request(
        &self,
        dest: usize,
        code: Option<u64>,
        idx: u32,
        gn: u32,
        req: u32,
        cap: Src<'_>,
        arg: Option<Src<'_>>,
        ser: bool,
    ) {
        if dest == self.id {
            self.loopback_pending();
        } else {
            // Staged for another worker: the looks of inline applies publish it in time.
            self.door.close_gate();
        }
        let backlog = {
            let mut q = self.out_req[dest].borrow_mut();
            q.push_request(code, idx, gn, req, cap, arg, if ser { SER } else { 0 });
            if q.backlog() > 0 && dest != self.id {
                let n = q.flush_sealed();
                self.published(dest, n);
                q.backlog()
            } else {
                0
            }
        };
        if backlog > self.backlog_limit && self.can_block() {
            self.wait_for_room(|| self.out_req[dest].borrow().backlog() <= self.backlog_limit);
        }
    }

    /// Counts an `apply_then` request about to be staged; past [`MAX_THEN_IN_FLIGHT`] unanswered ones,
    /// a fiber that may block waits until fewer are.
    #[inline]
    pub(crate) fn then_issued(&self) {
        let n = self.then_in_flight.get() + 1;
        self.then_in_flight.set(n);
        if n > MAX_THEN_IN_FLIGHT && self.can_block() {
            self.wait_for_room(|| self.then_in_flight.get() <= MAX_THEN_IN_FLIGHT);
        }
    }

    /// Counts the answer to an `apply_then` request (its completer runs).
    #[inline]
    pub(crate) fn then_answered(&self) {
        self.then_in_flight.set(self.then_in_flight.get() - 1);
    }

    /// Back-pressure for a fiber that issues faster than its requests are taken or answered:
    /// polls (which publishes what is staged, serves, and completes answers) and yields until
    /// `room` holds or the runtime stops. When nothing moves it gives the thread away: on an
    /// oversubscribed machine the trustee may need this core.
    #[cold]
    #[inline(never)]
    fn wait_for_room(&self, room: impl Fn() -> bool) {
        while !room() && !self.stopping() {
            if !self.guarded(true, || self.poll()) {
                std::thread::yield_now();
            }
            self.yield_fiber();
        }
    }

    /// Stages a response record to `client`.
    #[inline(always)]
    pub(crate) fn respond_raw(&self, client: usize, req: u32, st: u8, body: Src<'_>) {
        self.out_resp[client]
            .borrow_mut()
            .push_response(req, st, body);
    }

    /// Stages the response carrying `r` to `client`: the bytes of `U` moved (same rank), or its
    /// `postcard` encoding (another rank).
    #[inline(always)]
    pub(crate) fn respond<U: serde::Serialize>(
        &self,
        client: usize,
        req: u32,
        r: Result<U, DelegationError>,
    ) {
        match r {
            Ok(u) if req != NO_REPLY && !self.remote[client] => {
                // Ownership moves to the record: the original is never dropped.
                let u = std::mem::ManuallyDrop::new(u);
                self.respond_raw(client, req, status::OK, Src::of(&*u));
            }
            r => self.respond_otherwise(client, req, r),
        }
    }

    /// [`respond`](Self::respond) for a one-way request, a client in another rank (the result
    /// is encoded) or a failure. Out of line, so that a trampoline keeps only the common case:
    /// with these paths inlined it saved six registers and reserved 136 bytes of stack on every
    /// request it served (gsm-bench local, A/B within each process: `apply_then` +1 to +9%,
    /// median +3.5%; one-trust map +2 to +5% in 3 processes of 4).
    #[cold]
    #[inline(never)]
    fn respond_otherwise<U: serde::Serialize>(
        &self,
        client: usize,
        req: u32,
        r: Result<U, DelegationError>,
    ) {
        if req == NO_REPLY {
            if let Err(e) = r {
                self.shared.fail(Error::Delegation(e));
            }
            return;
        }
        match r {
            Ok(u) => match postcard::to_allocvec(&u) {
                Ok(bytes) => {
                    drop(u);
                    self.respond_raw(client, req, status::OK | SER_STATUS, Src::slice(&bytes));
                }
                Err(e) => {
                    // The closure ran to its end: a wire failure, not a panic (the property is
                    // not poisoned). postcard's error drops the type's own message; name it.
                    let msg = format!(
                        "gossamer: the result (a `{}`) could not be serialised for another rank: {e}",
                        std::any::type_name::<U>()
                    );
                    self.respond_raw(client, req, status::WIRE, Src::slice(msg.as_bytes()));
                }
            },
            Err(e) => {
                let (st, msg) = error_to_status(&e);
                self.respond_raw(client, req, st, Src::slice(msg.as_bytes()));
            }
        }
    }

    // ----- polling -----

    /// Serves, completes and flushes once. Returns whether anything happened.
    pub(crate) fn poll(&self) -> bool {
        self.poll_flushing(true)
    }

    /// Runs `f` in callback context, where a panic that escapes ends the job with a report:
    /// an `apply_then` callback run at once (the trustee is this worker), or a poll or drain of
    /// the loopback queue, from the scheduler loop or from a yield, a wait for room or an
    /// inline apply (and then mostly on a fiber's stack).
    /// - In callback context the same callback may not block whether its answer came from
    ///   this worker or another, and user code a poll reaches which is neither closure nor
    ///   callback (the destructor of an argument or result it drops, say) may not block either,
    ///   and is told so ([`BLOCKING_IN_DELEGATED`]): on a fiber's stack that would suspend the
    ///   fiber in the middle of the poll, with a ring borrowed.
    /// - A panic (a panicking callback, a failed `apply_then`) ends the job as the same panic
    ///   does from any other worker. Unwinding into a fiber instead, it would be taken for that
    ///   fiber's own failure (a joiner could swallow it), and in a poll the rest of the batch
    ///   being completed would be lost, leaving fibers waiting for answers forever.
    ///
    /// Returns what `f` returned, or `otherwise` after a panic.
    #[inline(always)]
    pub(crate) fn guarded<R>(&self, otherwise: R, f: impl FnOnce() -> R) -> R {
        match caught_at(&self.context, CALLBACK, f) {
            Ok(r) => r,
            Err(p) => {
                self.callback_panicked(&*p);
                otherwise
            }
        }
    }

    /// Ends the job for panic `p`, which escaped a callback, a poll or a property's destructor on
    /// this worker.
    #[cold]
    #[inline(never)]
    fn callback_panicked(&self, p: &(dyn std::any::Any + Send)) {
        self.shared.fail(Error::Panicked {
            rank: self.shared.place.rank,
            worker: self.id,
            message: panic_message(p),
        });
    }

    /// [`poll`](Self::poll); `requests`: also publish the request batches being filled (responses
    /// are always published).
    fn poll_flushing(&self, requests: bool) -> bool {
        // A poll looks at every ring, so inline applies count afresh from the end of this one
        // (below), by the requests it served: a worker whose clients keep its rings full would
        // otherwise serve a whole poll's worth of their requests (up to thousands) for every
        // `INLINE_POLL` applies of its own fibers. Serving them one for one is the fair split
        // between this worker's fibers and its clients, and the cheaper one for the worker, whose
        // inline applies cost less than served requests. (gsm-bench local, one-trust map, whose
        // client worker can issue faster than the trustee serves, A/B within each process:
        // worker 0's own share 1 -> 50%, the rate +12 to +17%; the counter cases, whose client
        // cannot fill the rings, unchanged.) Work waiting in the loopback queue keeps its claim
        // on the next inline apply (only `inline_turn` drops it, once the queue is empty).
        let served_before = self.served.get();
        let mut work = false;
        let budget = self.backlog_limit;
        for c in 0..self.count {
            if c == self.id {
                for _ in 0..budget {
                    let batch = {
                        let mut q = self.out_req[c].borrow_mut();
                        q.seal();
                        q.queued.pop_front()
                    };
                    let Some(b) = batch else { break };
                    work = true;
                    self.serve_batch(c, &b, true);
                    self.out_req[c].borrow_mut().recycle(b);
                }
            } else {
                let mut cons = self.req_in[c].borrow_mut();
                let Some(cons) = cons.as_mut() else { continue };
                let remote = self.remote[c];
                for _ in 0..budget {
                    let slot = match cons.try_poll() {
                        Ok(Some(slot)) => slot,
                        Ok(None) => break,
                        Err(e) => {
                            self.ring_broken(c, &e.to_string());
                            break;
                        }
                    };
                    work = true;
                    if remote {
                        self.received.set(self.received.get() + 1);
                        self.serve_remote(c, slot.bytes_uninit());
                    } else {
                        self.serve_batch(c, slot.bytes_uninit(), true);
                    }
                    slot.release();
                }
                // Answer this client now rather than after every other ring: its responses
                // are complete, and it may be waiting for nothing else.
                self.flush_to(c, false);
            }
        }
        for t in 0..self.count {
            if t == self.id {
                for _ in 0..budget {
                    let batch = {
                        let mut q = self.out_resp[t].borrow_mut();
                        q.seal();
                        q.queued.pop_front()
                    };
                    let Some(b) = batch else { break };
                    work = true;
                    self.complete_batch(t, &b, true);
                    self.out_resp[t].borrow_mut().recycle(b);
                }
            } else {
                let mut cons = self.resp_in[t].borrow_mut();
                let Some(cons) = cons.as_mut() else { continue };
                let remote = self.remote[t];
                for _ in 0..budget {
                    let slot = match cons.try_poll() {
                        Ok(Some(slot)) => slot,
                        Ok(None) => break,
                        Err(e) => {
                            self.ring_broken(t, &e.to_string());
                            break;
                        }
                    };
                    work = true;
                    if remote {
                        self.received.set(self.received.get() + 1);
                        self.complete_remote(t, slot.bytes_uninit());
                    } else {
                        self.complete_batch(t, slot.bytes_uninit(), true);
                    }
                    slot.release();
                }
            }
        }
        // Publishing counts as work: a batch that waited for room in a full ring and goes out
        // now must bump the job's activity (`run_loop`) like the serving that will follow, or
        // the termination wave could find every worker quiet with it unserved in the ring.
        work |= self.flush_all(requests);
        self.publish_traffic();
        // The fibers' share: as many inline applies before the next look as requests were just
        // served (at least `INLINE_POLL`), unless the loopback queue has a claim on the next one.
        if work {
            self.empty_looks.set(0);
        }
        if self.inline_runs.get() < INLINE_POLL {
            self.grant_share(self.served.get().wrapping_sub(served_before));
        }
        work
    }

    /// Lets this worker's fibers run `k` inline applies (at least `INLINE_POLL`, at most
    /// `MAX_SHARE`) before an inline apply looks at the rings again: a first chunk of them now,
    /// the rest by [`SHARE_CHUNK`] from `inline_turn` until [`SHARE_TIME`] has passed.
    fn grant_share(&self, k: u32) {
        let k = k.min(MAX_SHARE);
        let first = k.min(SHARE_CHUNK);
        self.inline_runs.set((INLINE_POLL - first as i32).min(0));
        self.share_left.set(k - first);
        if k > first {
            self.share_until.set(Some(Instant::now() + SHARE_TIME));
        }
    }

    /// Hands out the next chunk of the fibers' share, if any is left and its time has not run
    /// out; returns whether it did (then the inline apply does not look at the rings).
    fn next_share_chunk(&self) -> bool {
        let left = self.share_left.get();
        if left == 0 {
            return false;
        }
        if self.share_until.get().is_none_or(|t| Instant::now() >= t) {
            self.share_left.set(0);
            return false;
        }
        let c = left.min(SHARE_CHUNK);
        self.share_left.set(left - c);
        self.inline_runs.set(INLINE_POLL - c as i32);
        true
    }

    /// Mirrors this worker's cross-rank slot counts into `Shared` for the termination waves,
    /// only when they changed (a Release store: the wave reads them after this worker's SeqCst
    /// quiet report, which the store precedes).
    #[inline]
    fn publish_traffic(&self) {
        let me = self.local;
        let (s, r) = (self.sent.get(), self.received.get());
        let (ss, rr) = (&self.shared.sent[me].0, &self.shared.received[me].0);
        if ss.load(Ordering::Relaxed) != s {
            ss.store(s, Ordering::Release);
        }
        if rr.load(Ordering::Relaxed) != r {
            rr.store(r, Ordering::Release);
        }
    }

    /// A registration or release from worker `from` named property `idx` (generation `gn`),
    /// which is not alive.
    #[cold]
    #[inline(never)]
    fn count_broken(&self, from: usize, idx: u32, gn: u32, id: u64, what: Toggle) {
        let verb = match what {
            Toggle::Register { .. } => "registers",
            Toggle::Release { .. } => "releases",
        };
        let place = &self.shared.place;
        self.shared.fail(Error::TrustCount {
            worker: self.id,
            rank: place.rank,
            from,
            from_rank: place.rank_of(from),
            detail: format!(
                "a reference-counting record {verb} trust {id} of property {idx} (generation \
                 {gn}), which is not alive"
            ),
        });
    }

    /// A ring or record from worker `peer` broke the protocol: the job cannot go on safely.
    #[cold]
    pub(crate) fn ring_broken(&self, peer: usize, detail: &str) {
        let place = &self.shared.place;
        let rank = place.rank_of(peer);
        self.shared.fail(Error::Protocol {
            rank,
            host: place.hosts.get(rank as usize).cloned().unwrap_or_default(),
            detail: format!("worker {peer} -> worker {}: {detail}", self.id),
        });
    }

    /// Called before a closure runs inline on a local property. Every `INLINE_POLL` of them it
    /// polls if a batch has arrived: a fiber that applies to local properties in a loop never
    /// suspends, and without this the requests of other workers to this one would wait until it
    /// does. And first of all it serves the loopback queue if that holds work, so that this
    /// worker's requests to itself, deferred from a delegated closure, run in the order they were
    /// issued, before the inline one.
    ///
    /// Both wait behind one counter, so an inline apply costs one increment and one compare, and
    /// none at all while the worker watches its gate ([`gate`](Self::gate)). A request to this
    /// worker itself closes the gate and sets the counter to `INLINE_POLL`
    /// ([`loopback_pending`](Self::loopback_pending)); only [`inline_turn`](Self::inline_turn)
    /// takes that back, once the loopback queue is empty. (Responses enter the loopback queue
    /// only while its requests are served, so they are covered too.) Looking at both loopback
    /// queues on every inline apply cost more than the closure (gsm-bench local, A/B within each
    /// process: `apply_then` +18 to +20%, blocking `apply` with 1 and with 64 fibers per worker
    /// +18 to +24%).
    ///
    /// Returns whether the closure may run inline now: not while requests deferred earlier are
    /// still waiting in the loopback queue (its draining is bounded), since the closure would
    /// overtake them; then it must be queued behind them.
    #[inline]
    #[must_use]
    pub(crate) fn inline_ran(&self) -> bool {
        let n = self.inline_runs.get() + 1;
        if n < INLINE_POLL {
            self.inline_runs.set(n);
            true
        } else {
            self.inline_turn(n > INLINE_POLL)
        }
    }

    /// The rare turn of [`inline_ran`](Self::inline_ran): polls if a batch has arrived, then
    /// drains the loopback queue if it has work (`loopback`: it had before the poll). Returns
    /// whether the loopback queue is empty now.
    #[cold]
    #[inline(never)]
    fn inline_turn(&self, loopback: bool) -> bool {
        if !loopback && self.next_share_chunk() {
            return true;
        }
        // While the loopback queue has work the counter keeps saying so, also to the inline
        // applies that callbacks make during the poll below.
        self.inline_runs.set(if loopback { INLINE_POLL } else { 0 });
        if self.can_block() {
            if self.incoming_waiting() {
                let k = self.inline_polls.get().wrapping_add(1);
                self.inline_polls.set(k);
                self.guarded(false, || self.poll_flushing(k % INLINE_REQUEST_FLUSH == 0));
            } else if !loopback {
                self.look_later();
            }
        }
        // The counter says whether the loopback queue has work now (the poll may have queued
        // some, or drained it), so the turns that only poll skip looking at it (gsm-bench local,
        // A/B within each process: `apply_then` +6 to +11%, blocking `apply` +3 to +9%).
        if self.inline_runs.get() < INLINE_POLL {
            return true;
        }
        // Draining is bounded too: what is left waits for the next inline apply, and this one
        // queues behind it.
        let left = self.guarded(true, || self.drain_loopback());
        self.inline_runs.set(if left { INLINE_POLL } else { 0 });
        !left
    }

    /// After a look at the rings by an inline apply that found nothing: the next look comes
    /// `INLINE_POLL` applies later at first, and twice as many applies later after every
    /// `LOOKS_PER_STEP` more empty looks in a row, up to `INLINE_POLL << MAX_LOOK_STEP` (256),
    /// as long as the looks of a step came less than `LOOK_GAP` apart on average. Any poll that
    /// finds work starts again from `INLINE_POLL`. At the end of each step the worker tries to
    /// watch its gate instead ([`watch`](Self::watch)), which stops the looks altogether until
    /// something arrives; the spacing only grows while that fails (batches held back by a full
    /// ring).
    ///
    /// A worker running a loop of cheap inline applies that nobody sends to spent ~10% of its
    /// time looking (a look is a chain of dependent loads through the ring's state, ~8 ns,
    /// against ~2.5 ns per apply; 1 look in 200 found a batch in the `apply_then` counter case).
    /// A client that keeps sending finds the worker looking every `INLINE_POLL` applies as before
    /// (its batches end each streak within a few looks), so round trips to a worker busy with
    /// inline applies keep their latency. A request that arrives after a quiet spell waits at
    /// most about `2 × LOOK_GAP` more, or 32 applies when those are slower; yields keep their
    /// own cadence of polls throughout (see `in_share`). Every step also publishes
    /// what the worker staged for others, so that a loop of inline applies that never yields
    /// cannot hold back its own remote requests (and wait on them) forever.
    #[cold]
    fn look_later(&self) {
        let mut empty = self.empty_looks.get().saturating_add(1);
        if empty % LOOKS_PER_STEP == 0 {
            // A loop of inline applies that never yields must still publish the requests its
            // fibers staged for other workers: nothing may come back until it does.
            self.flush_all(true);
            // A step ends: were its looks close enough in time to space them out further? (The
            // clock is read once per step, so it costs next to nothing.)
            let now = Instant::now();
            let since = self.last_look.replace(Some(now));
            if since.is_some_and(|t| now.duration_since(t) > LOOK_GAP * LOOKS_PER_STEP) {
                // Applies this slow gain nothing from fewer looks: stay at the first step.
                empty = LOOKS_PER_STEP;
            }
        } else if empty == 1 {
            self.last_look.set(None);
        }
        self.empty_looks.set(empty);
        let step = (empty / LOOKS_PER_STEP).min(MAX_LOOK_STEP);
        self.inline_runs.set(INLINE_POLL - (INLINE_POLL << step));
        if empty % LOOKS_PER_STEP == 0 {
            // Everything staged has just been published: from here on, a ring says when to
            // look again.
            self.watch();
        }
    }

    /// A request to this worker itself was queued: the next inline apply serves it first.
    #[inline]
    fn loopback_pending(&self) {
        self.door.close_gate();
        self.inline_runs.set(INLINE_POLL);
    }

    /// Whether the loopback queue holds requests or responses.
    fn loopback_dirty(&self) -> bool {
        let me = self.id;
        self.out_req[me].borrow().is_dirty() || self.out_resp[me].borrow().is_dirty()
    }

    /// Serves the requests waiting in the loopback queue and completes the responses they
    /// produce, up to a bound. Returns whether work is left.
    fn drain_loopback(&self) -> bool {
        let me = self.id;
        for _ in 0..1024 {
            if !self.loopback_dirty() {
                return false;
            }
            let batch = {
                let mut q = self.out_req[me].borrow_mut();
                q.seal();
                q.queued.pop_front()
            };
            if let Some(b) = batch {
                self.serve_batch(me, &b, true);
                self.out_req[me].borrow_mut().recycle(b);
            }
            let batch = {
                let mut q = self.out_resp[me].borrow_mut();
                q.seal();
                q.queued.pop_front()
            };
            if let Some(b) = batch {
                self.complete_batch(me, &b, true);
                self.out_resp[me].borrow_mut().recycle(b);
            }
        }
        self.loopback_dirty()
    }

    /// Publishes what is staged for worker `dest`: its responses (`requests` false) or requests.
    #[inline]
    pub(crate) fn flush_to(&self, dest: usize, requests: bool) {
        let q = if requests {
            &self.out_req[dest]
        } else {
            &self.out_resp[dest]
        };
        let n = {
            let mut q = q.borrow_mut();
            if !q.is_dirty() {
                return;
            }
            q.flush()
        };
        self.published(dest, n);
    }

    /// Publishes every staged batch now (`gossamer::flush`).
    pub(crate) fn flush_now(&self) {
        self.flush_all(true);
        self.publish_traffic();
    }

    /// Whether no fiber of this worker is ready to run.
    #[inline]
    pub(crate) fn nothing_ready(&self) -> bool {
        self.ready.borrow().is_empty()
    }

    /// Publishes the staged batches to every other worker (request batches only if `requests`);
    /// returns whether any slot was published.
    fn flush_all(&self, requests: bool) -> bool {
        let mut any = false;
        for d in 0..self.count {
            if d == self.id {
                continue;
            }
            let mut n = 0;
            let mut broken = None;
            for (q, go) in [(&self.out_req[d], requests), (&self.out_resp[d], true)] {
                if !go {
                    continue;
                }
                let mut q = q.borrow_mut();
                if q.is_dirty() {
                    let k = q.flush();
                    // Nothing went out while batches wait: back-pressure, or a broken ring.
                    if k == 0 && q.backlog() > 0 {
                        broken = broken.or_else(|| q.broken().map(|e| e.to_string()));
                    }
                    if q.is_dirty() {
                        // Left for a later flush, which the looks of inline applies make.
                        self.door.close_gate();
                    }
                    n += k;
                }
            }
            self.published(d, n);
            any |= n > 0;
            if let Some(e) = broken {
                self.ring_broken(d, &format!("the ring to it takes no more slots: {e}"));
            }
        }
        any
    }

    /// Serves one request batch. `pointers`: the batch comes from this process, so its large
    /// records may carry heap pointers (never true for a ring from another rank).
    fn serve_batch(&self, client: usize, bytes: &[Byte], pointers: bool) {
        // SAFETY: batches in our rings and loopback queue are written by an `OutQueue` of this
        // build (this process, or a peer rank running the same binary, which the bootstrap
        // checked), and each is served exactly once (the slot is released / the buffer recycled
        // right after). Pointer-carrying large records are accepted only from this process.
        let Some(reader) = (unsafe { RequestReader::new(bytes, pointers) }) else {
            self.ring_broken(client, "a request batch whose header is malformed");
            return;
        };
        // The batch's code table resolved once (a small table on the stack: most batches name
        // one or two functions).
        let ntab = reader.table.len() / 8;
        let mut small = [0usize; 16];
        let mut big = Vec::new();
        let fns: &mut [usize] = if ntab <= small.len() {
            &mut small[..ntab]
        } else {
            big.resize(ntab, 0);
            &mut big
        };
        for (i, f) in fns.iter_mut().enumerate() {
            *f = reader
                .code(i as u8)
                .and_then(codeptr::address_of)
                .unwrap_or(0);
        }
        let mut reader = reader;
        // `ref`: the record is used where `next` left it. Moved into a binding of its own, it was
        // copied in 8-byte words that straddled the narrower stores `next` had just made, and
        // every record waited for those stores to retire before the copy could load them (a
        // failed store-to-load forward: ~half of this loop's samples). The map workload of
        // gsm-bench on one trust, A/B within each process, medians of 12-16 pairs: +7% with both
        // workers issuing, +6% with only the other worker issuing.
        while let Some(ref rec) = reader.next() {
            let f = fns.get(rec.fidx as usize).copied().unwrap_or(0);
            self.dispatch(client, f, rec, &mut reader);
        }
        self.served
            .set(self.served.get().wrapping_add(reader.taken));
        // Requests cannot be skipped unseen: their clients would wait for answers forever.
        if let Some(why) = reader.malformed() {
            self.ring_broken(client, why);
        }
    }

    /// Runs one request record whose trampoline is at address `f` (0: not in our text).
    ///
    /// Inlined into the serve loop with only the common case (a trampoline of this binary, the
    /// body in the batch): as a call of its own it cost a call and a frame per record served
    /// (gsm-bench local, A/B within each process: `apply_then` +9 to +17%, one-trust map +3 to
    /// +10%, 64-fiber `apply` +1 to +10%).
    #[inline(always)]
    fn dispatch(&self, client: usize, f: usize, rec: &Request<'_>, more: &mut RequestReader<'_>) {
        // `RELEASE` and `CONTROL` are the two highest function indexes.
        const { assert!(RELEASE == u8::MAX - 1 && CONTROL == u8::MAX) };
        if f == 0 || rec.fidx >= RELEASE || matches!(rec.body, Body::Far { .. }) {
            self.dispatch_other(client, f, rec);
            return;
        }
        // SAFETY: `f` lies in this binary's text and was encoded by `send_request` from a
        // function pointer of type `Trampoline` (every code offset we encode is one; a peer rank
        // runs the same build, so its offsets name the same functions).
        let tramp: Trampoline = unsafe { std::mem::transmute::<usize, Trampoline>(f) };
        // SAFETY: the record was written for this trampoline by its monomorphic sender, and so
        // were the records of the same first header word that it may take from `more` (the
        // word includes the function index, which names the same code within one batch).
        unsafe { tramp(self, client, rec, more) };
    }

    /// [`dispatch`](Self::dispatch) for the other records: a body parked in the client's
    /// memory, a release or trust-id toggle, code outside this binary's text.
    #[cold]
    #[inline(never)]
    fn dispatch_other(&self, client: usize, f: usize, rec: &Request<'_>) {
        if let Body::Far { addr, len, token } = rec.body {
            self.dispatch_far(client, f, rec, addr, len, token);
            return;
        }
        if rec.fidx == RELEASE {
            let token = control_id(rec.cap());
            let q = if parked_by_responses(token) {
                &self.out_resp[client]
            } else {
                &self.out_req[client]
            };
            q.borrow_mut().release(token);
            return;
        }
        if rec.fidx == CONTROL {
            let Some((id, word)) = control_words(rec.cap()) else {
                self.ring_broken(client, "a reference-counting record of the wrong length");
                return;
            };
            let what = if rec.req == CONTROL_RELEASE {
                Toggle::Release { made: word }
            } else {
                Toggle::Register { parent: word }
            };
            self.toggle(client, rec.idx, rec.gn, id, what);
            return;
        }
        self.respond_raw(
            client,
            rec.req,
            status::PANICKED,
            Src::slice(
                b"gossamer: the request names code outside this binary's text; it was refused",
            ),
        );
    }

    fn complete_batch(&self, from: usize, bytes: &[Byte], pointers: bool) {
        // SAFETY: as in `serve_batch`, for response batches.
        let Some(mut reader) = (unsafe { ResponseReader::new(bytes, pointers) }) else {
            self.ring_broken(from, "a response batch whose header is malformed");
            return;
        };
        // A short batch (a blocking apply's answer, say) is completed as it is read: its few
        // slots gain nothing from a prefetch, and holding records back made a round trip 4-9%
        // slower (gsm-bench local latency, A/B within each process).
        if bytes.len() < AHEAD * 32 {
            for (req, st, body) in reader.by_ref() {
                self.complete_one(from, req, st, body);
            }
            self.check_responses_read(from, &reader);
            return;
        }
        // Completing a record touches its pending slot, which was written thousands of requests
        // ago (a full ring of batches is in flight) and has left the L1 cache by now: each
        // record's slot is prefetched when the record is read and completed `AHEAD` records
        // later, in the same order.
        let mut held: [Option<(u32, u8, Body<'_>)>; AHEAD] = Default::default();
        let mut i = 0usize;
        for (req, st, body) in reader.by_ref() {
            self.prefetch_pending(req);
            if let Some((r, s, b)) = held[i % AHEAD].replace((req, st, body)) {
                self.complete_one(from, r, s, b);
            }
            i += 1;
        }
        for k in 0..AHEAD {
            if let Some((r, s, b)) = held[(i + k) % AHEAD].take() {
                self.complete_one(from, r, s, b);
            }
        }
        self.check_responses_read(from, &reader);
    }

    /// Responses cannot be skipped unseen either: their fibers would wait forever.
    #[inline]
    fn check_responses_read(&self, from: usize, reader: &ResponseReader<'_>) {
        if let Some(why) = reader.malformed() {
            self.ring_broken(from, why);
        }
    }

    /// Hints the CPU to fetch pending slot `req` (no access, no effect on unknown ids).
    #[inline(always)]
    fn prefetch_pending(&self, req: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = self.pending.borrow();
            if let Some(s) = p.0.get(req as usize) {
                // SAFETY: a prefetch reads nothing architecturally and cannot fault.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        (s as *const PendingSlot).cast::<i8>(),
                    );
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = req;
    }

    /// Completes one response record (fetching a far body first).
    #[inline(always)]
    fn complete_one(&self, from: usize, req: u32, st: u8, body: Body<'_>) {
        if let Body::Far { addr, len, token } = body {
            // Only ever on a ring from another rank (`pointers` is false there and the
            // sender parks bodies only for ranks that can read it).
            if let Some(b) = self.fetch_far(from, addr, len) {
                self.send_release(from, token);
                self.complete_from(from, req, st, &b);
            }
            return;
        }
        self.complete_from(from, req, st, body.bytes());
        drop::<Body<'_>>(body);
    }

    /// Runs a request whose body is parked in the client's memory: reads it in one copy, runs
    /// it, and tells the client it may free the body.
    #[cold]
    fn dispatch_far(
        &self,
        client: usize,
        f: usize,
        rec: &Request<'_>,
        addr: u64,
        len: u64,
        token: u64,
    ) {
        let Some(body) = self.fetch_far(client, addr, len) else {
            return;
        };
        self.send_release(client, token);
        let local = Request {
            fidx: rec.fidx,
            flags: rec.flags,
            req: rec.req,
            idx: rec.idx,
            gn: rec.gn,
            cap_len: rec.cap_len,
            body: Body::Large(body),
        };
        self.dispatch(client, f, &local, &mut RequestReader::empty());
    }

    /// Tells worker `sender` that the body it parked under `token` has been read.
    fn send_release(&self, sender: usize, token: u64) {
        self.out_req[sender].borrow_mut().push_release(token);
    }

    /// Reads `len` bytes at `addr` in the process of worker `from`'s rank (`process_vm_readv`).
    /// On failure the job fails with the reason (the record cannot be had any other way).
    fn fetch_far(&self, from: usize, addr: u64, len: u64) -> Option<Box<[Byte]>> {
        let place = &self.shared.place;
        let rank = place.rank_of(from);
        let pid = place.pids.get(rank as usize).copied().unwrap_or(0);
        match crate::wire::far::read(pid, addr, len) {
            Ok(b) => Some(b),
            Err(e) => {
                self.ring_broken(
                    from,
                    &format!("cannot read a {len}-byte record from its process (pid {pid}): {e}"),
                );
                None
            }
        }
    }

    /// Serves one slot from another rank: a batch, or a piece of a large record.
    fn serve_remote(&self, client: usize, bytes: &[Byte]) {
        match classify(bytes) {
            Large::Batch => self.serve_batch(client, bytes, false),
            piece => {
                let done = {
                    let mut p = self.partial_req[client].borrow_mut();
                    Partial::feed(&mut p, piece, true)
                };
                match done {
                    Ok(None) => {}
                    Ok(Some(done)) => {
                        let f = codeptr::address_of(done.code).unwrap_or(0);
                        let rec = done.into_request();
                        self.dispatch(client, f, &rec, &mut RequestReader::empty());
                    }
                    Err(e) => self.ring_broken(client, e),
                }
            }
        }
    }

    /// Completes one slot from another rank: a batch, or a piece of a large response.
    fn complete_remote(&self, trustee: usize, bytes: &[Byte]) {
        match classify(bytes) {
            Large::Batch => self.complete_batch(trustee, bytes, false),
            piece => {
                let done = {
                    let mut p = self.partial_resp[trustee].borrow_mut();
                    Partial::feed(&mut p, piece, false)
                };
                match done {
                    Ok(None) => {}
                    Ok(Some(done)) => {
                        let (req, st, body) = done.into_response();
                        self.complete_from(trustee, req, st, &body);
                    }
                    Err(e) => self.ring_broken(trustee, e),
                }
            }
        }
    }

    /// Toggles a trust id on a local property, on behalf of worker `from`, and drops the
    /// property if that left no trust. A toggle that names a dead property ends the job with a
    /// report ([`Error::TrustCount`]): the counts of that property's trusts no longer hold, so
    /// it could be freed while a trust still names it, or never.
    pub(crate) fn toggle(&self, from: usize, idx: u32, gn: u32, id: u64, what: Toggle) {
        let dead = match self.props.borrow_mut().toggle(idx, gn, id, what) {
            Ok(dead) => dead,
            Err(_) => {
                self.count_broken(from, idx, gn, id, what);
                return;
            }
        };
        if let Some(v) = dead {
            let r = caught_at(&self.context, DELEGATED, move || drop(v));
            if let Err(e) = r {
                std::panic::resume_unwind(e);
            }
        }
    }

    /// Whether a ring to this worker holds a published batch (one header load per ring).
    fn incoming_waiting(&self) -> bool {
        self.req_in.iter().any(ring_has_data) || self.resp_in.iter().any(ring_has_data)
    }

    fn has_incoming(&self) -> bool {
        !self.ready.borrow().is_empty() || self.incoming_waiting() || self.loopback_dirty()
    }

    fn has_backlog(&self) -> bool {
        self.out_req
            .iter()
            .chain(self.out_resp.iter())
            .any(|q| q.borrow().backlog() > 0)
    }

    /// Whether this worker has nothing left to do: no ready fiber, no unanswered request of its
    /// own (but `spawn_on`s, see `fiber_results`), nothing staged or queued outgoing, nothing
    /// waiting in its rings or loopback queue.
    fn locally_quiet(&self) -> bool {
        self.sleepers.borrow().is_empty()
            && self.outstanding.get() == self.fiber_results.get()
            && !self.has_incoming()
            && !self
                .out_req
                .iter()
                .chain(self.out_resp.iter())
                .any(|q| q.borrow().is_dirty())
    }

    /// While counting (draining, or watching for a deadlock): reports this worker quiet, and
    /// when every worker is: stops the runtime if the roots are done, reports a deadlock if they
    /// are not (in a job of one rank, after [`STALL_CONFIRM`]), or in a larger job leaves the
    /// decision to the main thread with the other ranks (`cluster::terminate`).
    ///
    /// Termination argument: every worker bumps `activity` (SeqCst) after each loop turn that did
    /// work, i.e. after it published what that work produced. A worker reads `a = activity` and
    /// *then* checks that it is locally quiet; if so it records `quiet[w] = a`. If all workers
    /// recorded the same `a` and `activity` still reads `a`, no worker did work since any of
    /// those reads, and any batch published before the last bump is visible to the later quiet
    /// checks (the bump is a release, the read an acquire). So every ring is empty, every
    /// request answered and every toggle applied, and nothing can create new work: stop.
    ///
    /// Fibers in [`wait_for`](Self::wait_for) wait for writes to the host board, which are done
    /// in other workers' turns (bumps) but counted by no message. So their conditions are tested
    /// again after `a` is read: a write before the bump that made `a` is seen. For the ranks'
    /// waves, the test also records the wave it follows (`Shared::board_fresh`).
    fn try_finish(&self) {
        let sh = &self.shared;
        let a = sh.activity.load(Ordering::SeqCst);
        if self.waiters.get() > 0 {
            let wave = sh.waves.load(Ordering::SeqCst);
            if self.waiter_ready() {
                // Not quiet: the next turn makes the fiber ready, as work (a bump), so that no
                // report of this worker stands while that fiber runs.
                return;
            }
            sh.board_fresh[self.local].store(wave, Ordering::SeqCst);
        }
        if !self.locally_quiet() {
            return;
        }
        sh.quiet[self.local].store(a, Ordering::SeqCst);
        self.reported.set(true);
        let mut all = true;
        for (w, q) in sh.quiet.iter().enumerate() {
            if q.load(Ordering::SeqCst) != a {
                all = false;
                // Ask a worker whose report is stale to look again (if it sleeps).
                sh.doors[w].ring();
            }
        }
        if all && sh.activity.load(Ordering::SeqCst) == a {
            if sh.multi {
                // Other ranks may still send work: the main thread decides with them.
                sh.rank_quiet.store(a, Ordering::SeqCst);
            } else if sh.roots_left.load(Ordering::SeqCst) == 0 {
                sh.stop_all();
            } else {
                self.stalled(a);
            }
        }
    }

    /// Every worker of this rank, the only one of its job, is quiet at activity `a` while roots
    /// are left: nothing can wake their fibers. Reported once the same `a` has been seen for
    /// [`STALL_CONFIRM`].
    #[cold]
    #[inline(never)]
    fn stalled(&self, a: u64) {
        let sh = &self.shared;
        let Ok(mut stall) = sh.stall.lock() else {
            return;
        };
        match *stall {
            Some((at, since)) if at == a => {
                if since.elapsed() >= STALL_CONFIRM {
                    drop(stall);
                    sh.fail(Error::Deadlock {
                        rank: sh.place.rank,
                        waits: Vec::new(),
                    });
                }
            }
            _ => *stall = Some((a, Instant::now())),
        }
    }

    /// The scheduler loop; returns when the runtime stops. After the roots are done it keeps
    /// running (serving, completing, running fibers) until the whole job is quiet.
    ///
    /// Counting (see [`try_finish`](Self::try_finish)) is on while draining, and while watching
    /// for a deadlock: a worker about to sleep with roots left turns watching on, and the next
    /// worker that does work turns it off (after its bump), so that a busy job pays for it once
    /// per sleep, not once per turn. Only at its first sleep since it last did work, though: a
    /// worker that a count woke (to report again) and that goes back to sleep has nothing new to
    /// watch for. Otherwise, with two workers busy and six idle (8 on 2 CPUs), every sleep turned
    /// watching on, every count woke the sleepers, and each of them turned it on again as it went
    /// back to sleep: the idle workers used 1.2-1.3 CPUs between them and a blocking apply
    /// between the busy two took 4-5 us instead of 0.5. A deadlock is still seen: the last worker
    /// to do work has not slept since, and turns watching on at its first sleep, and nobody
    /// turns it off again. Soundness as with draining alone: a turn that did work and
    /// saw counting on bumps after its work; a turn that saw counting off marks this worker, and
    /// its next turn that sees counting on bumps before it records itself quiet. So work done
    /// while counting was off is always followed by a bump of its worker before that worker can
    /// agree with the others on a quiet `activity` value. A turn that did work and saw counting
    /// off also withdraws this worker's quiet report ([`not_quiet`](Self::not_quiet)): a report
    /// made just before another worker turned counting off carries the value of that worker's
    /// bump, and without the withdrawal the others, recording the same value once counting is on
    /// again, would agree with it while this worker runs what that work made ready (a fiber
    /// computing for seconds, taken for a stalled job).
    pub(crate) fn run_loop(&self) {
        let mut idle = 0u32;
        let mut off_seen = true;
        // When this worker's idle spell reached the sleeping stage (see `WAITER_YIELDING`).
        let mut sleepy_since: Option<Instant> = None;
        // Whether this idle spell has already had its chance to turn watching on (see below).
        let mut watched = false;
        while !self.stopping() {
            let ran = self.run_ready(POLL_EVERY);
            let polled = self.guarded(true, || self.poll());
            let worked = ran > 0 || polled || self.wake_waiters();
            let sh = &self.shared;
            let draining = sh.draining.load(Ordering::Relaxed);
            if draining || sh.watching.load(Ordering::Relaxed) {
                if worked || off_seen {
                    off_seen = false;
                    sh.activity.fetch_add(1, Ordering::SeqCst);
                    if worked && !draining {
                        sh.watching.store(false, Ordering::SeqCst);
                    }
                }
                if !worked {
                    self.try_finish();
                }
            } else {
                off_seen = true;
                if worked {
                    self.not_quiet();
                }
            }
            if worked {
                idle = 0;
                sleepy_since = None;
                watched = false;
                continue;
            }
            idle += 1;
            let spin = self.shared.spin();
            if idle < spin {
                // Spin lightly: look only at ring headers (and the ready queue) until something
                // arrives, instead of a whole poll per turn, so that an answer is noticed within
                // a few nanoseconds of landing. A backlog needs the full poll to retry flushing.
                if !self.has_backlog() {
                    for _ in 0..LIGHT_SPINS {
                        if self.has_incoming() || self.stopping() || self.waiter_ready() {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                } else {
                    std::hint::spin_loop();
                }
            } else if idle < spin + YIELDS
                || (self.waiters.get() > 0
                    && sleepy_since.get_or_insert_with(Instant::now).elapsed() < WAITER_YIELDING)
            {
                std::thread::yield_now();
            } else {
                let t = if self.has_backlog() {
                    Duration::from_micros(50)
                } else if self.waiters.get() > 0 {
                    self.waiter_nap(Duration::from_millis(20))
                } else {
                    Duration::from_millis(20)
                };
                if !watched {
                    watched = true;
                    self.watch_for_deadlock();
                }
                let sh = &self.shared;
                sh.awake.fetch_sub(1, Ordering::Relaxed);
                sh.doors[self.local].sleep(t, || !self.has_incoming() && !self.stopping());
                sh.awake.fetch_add(1, Ordering::Relaxed);
                idle = spin.saturating_sub(4);
            }
        }
    }

    /// Withdraws this worker's quiet report, if it has one (see [`run_loop`](Self::run_loop)):
    /// a test of a flag of this worker per turn that did work while counting is off, so that a
    /// busy worker touches no shared line for it, and a store only after a report. (gsm-bench
    /// local could not tell this from a load of the shared report, nor either from no
    /// withdrawal: 8 alternated pairs, all within the host's noise of ±30%.)
    #[inline]
    fn not_quiet(&self) {
        if self.reported.replace(false) {
            self.shared.quiet[self.local].store(u64::MAX, Ordering::SeqCst);
        }
    }

    /// Turns watching on (see [`run_loop`](Self::run_loop)) before this worker sleeps, if roots
    /// are left and it is not on already.
    #[inline]
    fn watch_for_deadlock(&self) {
        let sh = &self.shared;
        if !sh.watching.load(Ordering::Relaxed)
            && !sh.draining.load(Ordering::Relaxed)
            && sh.roots_left.load(Ordering::Relaxed) > 0
        {
            sh.watching.store(true, Ordering::SeqCst);
        }
    }

    /// What this worker's suspended fibers wait for (after a deadlock): messages by sender and
    /// tag, and how many others wait (for a join, a collective's step, a yield's turn).
    fn waits(&self) -> Vec<String> {
        let mail = self.mail.borrow();
        let mut waits = mail.waits();
        let live = self.fibers.borrow().iter().filter(|f| f.is_some()).count();
        let board = self.waiters.get();
        if board > 0 {
            waits.push(format!(
                "{board} fiber{} wait{} in gossamer::wait_for (a collective's step on the host \
                 board, say)",
                if board == 1 { "" } else { "s" },
                if board == 1 { "s" } else { "" }
            ));
        }
        let others = live.saturating_sub(mail.waiters() + board + self.ready.borrow().len());
        if others > 0 {
            waits.push(format!(
                "{others} other fiber{} wait{} (a join, say)",
                if others == 1 { "" } else { "s" },
                if others == 1 { "s" } else { "" }
            ));
        }
        waits
    }

    /// Drops every fiber and property (at shutdown, while the core is still installed).
    pub(crate) fn teardown(&self) {
        if !self.shared.failed() {
            if let Some(w) = self.mail.borrow().unreceived_warning(self.id) {
                crate::error::eprint_line(w);
            }
            // Read before the fibers go: dropping their trusts sends releases that no poll
            // will apply any more.
            let twice = self.props.borrow().released_twice();
            if twice > 0 {
                crate::error::eprint_line(format!(
                    "gossamer: warning: {twice} propert{} on worker {} outlived every trust: a \
                     trust id was released twice, as when the bytes of a serialised Trust are \
                     deserialised more than once (each copy releases the same id); the \
                     propert{} stayed alive until the end of the run",
                    if twice == 1 { "y" } else { "ies" },
                    self.id,
                    if twice == 1 { "y" } else { "ies" },
                ));
            }
        }
        let deadlocked = matches!(
            self.shared.failure.lock().as_deref(),
            Ok(Some(Error::Deadlock { .. }))
        );
        if deadlocked {
            let waits = self.waits();
            if !waits.is_empty() {
                if let Ok(mut all) = self.shared.waits.lock() {
                    all.push((self.id, waits));
                }
            }
        }
        // The conditions of waiting fibers live on their stacks (see `Waiter`).
        self.waiting.borrow_mut().clear();
        self.waiters.set(0);
        let fibers = std::mem::take(&mut *self.fibers.borrow_mut());
        self.dropping_fibers.set(true);
        for co in fibers.into_iter().flatten() {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(co)));
        }
        self.dropping_fibers.set(false);
        // A property still here lost its last trust to a leak (or never had it released
        // before the end); its destructor runs now, in delegated context as during the run (a
        // blocking `try_apply` in it gets `BlockingInDelegatedContext`, where it panicked with
        // "called outside a fiber" and failed a run that had succeeded), and a panic in it is
        // reported as one during the run is (`toggle`), not lost.
        let vals = self.props.borrow_mut().drain();
        for v in vals {
            if let Err(p) = caught_at(&self.context, DELEGATED, move || drop(v)) {
                self.callback_panicked(&*p);
            }
        }
    }

    /// Live properties on this worker.
    pub(crate) fn live_properties(&self) -> usize {
        self.props.borrow().live()
    }
}

/// The panic of [`WorkerCore::assert_can_block`]: in a destructor of a fiber that an ended run
/// drops (`unwinding`), outside any fiber (`outside`), or in a delegated closure or callback.
///
/// In the first case the panic aborts the process (it is a panic while the fiber's stack
/// unwinds), so its message is all the user gets: it says where the call was and what to use
/// instead, rather than "outside a fiber", which is what the worker saw.
#[cold]
#[inline(never)]
#[track_caller]
fn cannot_block(unwinding: bool, outside: bool) -> ! {
    if unwinding {
        panic!(
            "gossamer: a blocking call (recv, wait_for, apply, join, a collective) in a destructor \
             that runs because the run ended with its fiber unfinished; nothing can wait there, \
             and this panic aborts the process: use try_apply or try_join, which answer Stopped \
             there, or do the work before the fiber can be left waiting"
        );
    }
    if outside {
        panic!(
            "gossamer: a blocking call was made outside a fiber; run it in a fiber (gossamer::spawn)"
        );
    }
    panic!("{}", BLOCKING_IN_DELEGATED);
}

#[cold]
#[inline(never)]
#[track_caller]
fn no_such_worker(op: &str, w: usize, count: usize) -> ! {
    panic!("{op}: worker {w} does not exist (this job has {count} workers)")
}

/// Runs `f` one level deeper in `depth` (`WorkerCore::context`: `step` is [`DELEGATED`] or
/// [`CALLBACK`]), catching a panic, and puts the level back as it was.
///
/// The level is restored by storing the value read before, not by a decrement: an increment and
/// a decrement of the same word are two dependent read-modify-writes per closure, and in a loop of
/// inline applies they made a chain through memory that every iteration waited on (gsm-bench
/// local, A/B within each process: `apply_then` +6 to +7%, blocking `apply` +3 to +4%).
#[inline(always)]
fn caught_at<R>(depth: &Cell<u64>, step: u64, f: impl FnOnce() -> R) -> std::thread::Result<R> {
    let level = depth.get();
    depth.set(level + step);
    let r = catch_unwind(AssertUnwindSafe(f));
    depth.set(level);
    r
}

/// The `F` (a `Copy` closure: its bytes carry no drop obligation) that request `rec` carries
/// in its captured bytes. A record whose captured bytes are not one `F` long was written by no
/// sender of this binary (it is corrupt): it is refused with an error rather than read past.
///
/// # Safety
/// `rec` must have been encoded for a trampoline of `F`: captured bytes of `F`'s size are one `F`.
pub(crate) unsafe fn captured<F: Copy>(rec: &Request<'_>) -> Result<F, DelegationError> {
    if rec.cap_len != std::mem::size_of::<F>() {
        return Err(capture_mismatch());
    }
    // SAFETY: `size_of::<F>()` initialised bytes that hold one `F` (the contract).
    Ok(unsafe { std::ptr::read_unaligned(rec.cap().as_ptr().cast::<F>()) })
}

#[cold]
fn capture_mismatch() -> DelegationError {
    DelegationError::Wire("gossamer: a request's captured bytes do not fit its closure".into())
}

/// Whether an incoming ring holds a published batch (one header load). A ring being served
/// (borrowed mutably) counts as empty.
///
/// Without a `RefCell` guard: an inline apply looks at every ring every `INLINE_POLL` applies,
/// and a guard's stores to the borrow count cost more than the header load there (gsm-bench
/// local, A/B within each process: `apply_then` +3 to +6%, blocking `apply` with 1 fiber per
/// worker +4 to +6%).
#[inline]
fn ring_has_data(ring: &RefCell<Option<Consumer>>) -> bool {
    // SAFETY: the reference lives only for the header load below, during which nothing can
    // borrow the ring mutably (this thread alone uses it).
    matches!(unsafe { ring.try_borrow_unguarded() }, Ok(Some(c)) if c.has_data())
}

/// Maps a caught panic payload to the delegation error it stands for.
pub(crate) fn panic_to_error(p: &(dyn std::any::Any + Send)) -> DelegationError {
    let m = panic_message(p);
    if m == BLOCKING_IN_DELEGATED {
        DelegationError::BlockingInDelegatedContext
    } else {
        DelegationError::Panicked(m)
    }
}

fn error_to_status(e: &DelegationError) -> (u8, String) {
    match e {
        DelegationError::Panicked(m) => (status::PANICKED, m.clone()),
        DelegationError::Poisoned => (status::POISONED, String::new()),
        DelegationError::DeadProperty => (status::DEAD, String::new()),
        DelegationError::BlockingInDelegatedContext => (status::BLOCKING, String::new()),
        DelegationError::Stopped => (status::STOPPED, String::new()),
        DelegationError::Wire(m) => (status::WIRE, m.clone()),
    }
}

/// Decodes a response into the result it carries.
///
/// # Safety
/// If `st == OK`, `body` must hold the bytes of a `U` moved by [`WorkerCore::respond`], not yet
/// taken by anyone else. If `st == OK | SER_STATUS`, `body` holds initialised bytes (a
/// `postcard` encoding from another rank, decoded with every check `postcard` makes).
#[inline]
pub(crate) unsafe fn decode<U: serde::de::DeserializeOwned>(
    st: u8,
    body: &[Byte],
) -> Result<U, DelegationError> {
    match st {
        status::OK => {
            debug_assert_eq!(body.len(), std::mem::size_of::<U>());
            if body.len() != std::mem::size_of::<U>() {
                return Err(DelegationError::Panicked(
                    "gossamer: response of the wrong size".into(),
                ));
            }
            // SAFETY: per the contract, these are the bytes of a moved `U`.
            Ok(unsafe { std::ptr::read_unaligned(body.as_ptr().cast::<U>()) })
        }
        st if st == status::OK | SER_STATUS => {
            // SAFETY: initialised bytes (contract); `MaybeUninit<u8>` has the layout of `u8`.
            let b = unsafe { std::slice::from_raw_parts(body.as_ptr().cast::<u8>(), body.len()) };
            postcard::from_bytes::<U>(b).map_err(|e| {
                DelegationError::Wire(format!(
                    "gossamer: the result (a `{}`) from another rank could not be decoded: {e}",
                    std::any::type_name::<U>()
                ))
            })
        }
        // SAFETY: every non-OK body is the bytes of a `str` (`error_to_status`), initialised.
        status::PANICKED => Err(DelegationError::Panicked(unsafe { message_of(body) })),
        status::POISONED => Err(DelegationError::Poisoned),
        status::DEAD => Err(DelegationError::DeadProperty),
        status::BLOCKING => Err(DelegationError::BlockingInDelegatedContext),
        // SAFETY: as for PANICKED.
        status::WIRE => Err(DelegationError::Wire(unsafe { message_of(body) })),
        _ => Err(DelegationError::Stopped),
    }
}

/// The text of an error body.
///
/// # Safety
/// Every byte of `body` must be initialised.
unsafe fn message_of(body: &[Byte]) -> String {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8` and the bytes are initialised (contract).
    let b = unsafe { std::slice::from_raw_parts(body.as_ptr().cast::<u8>(), body.len()) };
    String::from_utf8_lossy(b).into_owned()
}

/// The two words a reference-counting record carries (16 initialised bytes written by
/// `Trust::control`): the trust id, and the parent's id (a registration) or the number of trusts
/// made (a release); `None` for a record of another length, which no sender of this build
/// writes.
pub(crate) fn control_words(cap: &[Byte]) -> Option<(u64, u64)> {
    if cap.len() != 16 {
        return None;
    }
    // SAFETY: 16 bytes, initialised: `Trust::control` copies two `to_le_bytes` words.
    let w = unsafe { std::ptr::read_unaligned(cap.as_ptr().cast::<[u64; 2]>()) };
    Some((u64::from_le(w[0]), u64::from_le(w[1])))
}

/// The 8-byte word a record carries: the token of a release of a parked body, or the trust id
/// that `entrust_on` sends (8 initialised bytes written as `to_le_bytes`).
pub(crate) fn control_id(cap: &[Byte]) -> u64 {
    if cap.len() != 8 {
        return 0;
    }
    // SAFETY: 8 bytes, initialised: control records carry the `to_le_bytes` of a `u64`.
    u64::from_le_bytes(unsafe { std::ptr::read_unaligned(cap.as_ptr().cast::<[u8; 8]>()) })
}

#[cfg(test)]
mod tests {
    use super::{CONTROL_REGISTER, CONTROL_RELEASE};
    use crate::wire::record::{Byte, CONT, CONTROL, HEADER};
    use crate::{Config, Error, entrust, yield_now};
    use std::mem::MaybeUninit;

    /// Workers spin while the awake ones have a CPU each, whatever number were started; and the
    /// workers of other ranks on the host take their CPUs first.
    #[test]
    fn idle_workers_spin_while_the_awake_ones_have_a_cpu_each() {
        use super::{Place, SPIN, SPIN_OVERSUBSCRIBED, Shared};
        use crate::fabric::Doorbell;
        use std::sync::atomic::Ordering;
        let cpus = crate::available_cpus();
        let shared = |place: Place| {
            let n = place.local;
            let doors = (0..n).map(|_| Doorbell::heap()).collect();
            let bells = (0..place.total).map(|_| None).collect();
            Shared::new(place, doors, bells, 1, false)
        };
        let sh = shared(Place::single(cpus + 6));
        assert!(sh.oversubscribed());
        assert_eq!(sh.spin(), SPIN_OVERSUBSCRIBED, "{} workers awake", cpus + 6);
        sh.awake.store(cpus, Ordering::Relaxed);
        assert_eq!(sh.spin(), SPIN, "{cpus} workers awake on {cpus} CPUs");
        sh.awake.store(cpus + 1, Ordering::Relaxed);
        assert_eq!(sh.spin(), SPIN_OVERSUBSCRIBED);
        // This rank's worker alone, another rank's on this host holding every online CPU.
        let mut place = Place::single(1);
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
        place.rank_workers.push(online);
        place.hosts.push(place.hosts[0].clone());
        assert_eq!(place.cpu_room(), 0);
        let sh = shared(place);
        assert!(sh.oversubscribed());
        assert_eq!(sh.spin(), SPIN_OVERSUBSCRIBED);
        // The same other rank on another host leaves this one the CPUs.
        let mut place = Place::single(1);
        place.rank_workers.push(online);
        place.hosts.push(format!("not-{}", place.hosts[0]));
        assert_eq!(place.cpu_room(), cpus.min(online as usize));
        assert_eq!(shared(place).spin(), SPIN);
    }

    #[test]
    fn a_capture_of_the_wrong_length_is_refused_not_read_past() {
        use crate::wire::record::{OutQueue, RequestReader, Sink, Src};
        let mut q = OutQueue::new(256, Sink::Loopback, false);
        let three = [1u8, 2, 3];
        q.push_request(Some(0x100), 1, 1, 1, Src::of(&three), None, 0);
        q.seal();
        let b = q.queued.pop_front().expect("a sealed batch");
        // SAFETY: written by our encoder, read once.
        let rec = unsafe { RequestReader::new(&b, true) }
            .and_then(|mut r| r.next())
            .expect("one record");
        // SAFETY: the captured bytes are one `[u8; 3]`; a `u64` is refused by its length.
        unsafe {
            assert_eq!(super::captured::<[u8; 3]>(&rec).ok(), Some(three));
            match super::captured::<u64>(&rec) {
                Err(crate::DelegationError::Wire(m)) => assert!(m.contains("do not fit"), "{m}"),
                other => panic!("expected a Wire error, got {other:?}"),
            }
        }
    }

    #[test]
    #[cfg(not(loom))]
    fn a_ring_whose_consumer_broke_the_protocol_ends_the_job() {
        use std::time::Duration;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(broken_ring_job());
        });
        // Waiting on the broken ring instead would hang: fail the test after a minute.
        let r = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the job hung on a ring whose consumer broke the protocol");
        match r {
            Err(Error::Protocol { detail, .. }) => {
                assert!(detail.contains("takes no more slots"), "{detail}")
            }
            other => panic!("expected a protocol error, got {other:?}"),
        }
    }

    /// A 2-worker job whose worker 1 breaks the protocol of the ring from worker 0 to it.
    #[cfg(not(loom))]
    fn broken_ring_job() -> Result<(), Error> {
        use std::sync::atomic::Ordering;
        use std::time::{Duration, Instant};
        crate::run(Config::default().workers(2), || {
            let t = crate::entrust_on(crate::WorkerId::new(1), || 0u64);
            // Worker 1 consumes nothing for a while, so the word written below stays.
            let busy = crate::spawn_on(crate::WorkerId::new(1), || {
                let until = Instant::now() + Duration::from_millis(300);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            });
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(20) {
                yield_now();
            }
            // Worker 1 "releases" slots never published on the ring from worker 0 to it.
            let core = super::core().expect("on a worker");
            core.out_req[1]
                .borrow()
                .release_word()
                .expect("a ring to worker 1")
                .store(1 << 40, Ordering::Release);
            // More requests than the ring holds: it must be found broken, not waited on.
            for _ in 0..50_000 {
                t.apply_then(|c| *c += 1, |()| {});
            }
            drop(busy);
        })
    }

    /// A batch of `records` (header, no code table).
    fn batch(records: &[u8]) -> Vec<Byte> {
        let end = ((HEADER + records.len()) as u32).to_le_bytes();
        [&end[..], &[0, 0, 0, 0], records]
            .concat()
            .into_iter()
            .map(MaybeUninit::new)
            .collect()
    }

    /// A reference-counting request record (`kind`: `CONTROL_REGISTER` or `CONTROL_RELEASE`)
    /// for trust `id` of property `(idx, gn)`, with `word` (the parent, or the trusts made).
    fn control(kind: u32, idx: u32, gn: u32, id: u64, word: u64) -> Vec<u8> {
        let head = [CONTROL, 0, 16, 0];
        [
            &head[..],
            &kind.to_le_bytes(),
            &idx.to_le_bytes(),
            &gn.to_le_bytes(),
            &id.to_le_bytes(),
            &word.to_le_bytes(),
        ]
        .concat()
    }

    /// Runs a 1-worker job that hands `bytes` to its worker as a request batch (`requests`) or a
    /// response batch from itself; returns the job's error.
    fn feed(bytes: Vec<Byte>, requests: bool) -> Error {
        let out = crate::run(Config::default().workers(1), move || {
            let core = super::core().expect("on a worker");
            if requests {
                core.serve_batch(0, &bytes, true);
            } else {
                core.complete_batch(0, &bytes, true);
            }
        });
        out.expect_err("a malformed batch must end the job")
    }

    /// A malformed record or a response that no request waits for ends the job with a report
    /// that names the peer and the fault; the records behind it are never dropped unseen (their
    /// fibers would wait forever).
    #[test]
    fn a_malformed_batch_ends_the_job_with_a_report() {
        let cases = [
            // A request continuation with no plain record before it.
            (
                batch(&[CONT, 1, 0, 0, 0, 9]),
                true,
                "a continuation that follows no plain record",
            ),
            // A request header cut short.
            (batch(&[1, 0, 8, 0]), true, "a record runs past the end"),
            // A request batch whose header says it is longer than its bytes.
            (
                {
                    let mut b = batch(&[]);
                    b[0] = MaybeUninit::new(200);
                    b
                },
                true,
                "a request batch whose header is malformed",
            ),
            // A response whose body runs past the batch.
            (batch(&[1, 0, 0, 0, 0, 8, 0, 0, 1]), false, "past the end"),
            // A response continuation with no inline response before it.
            (
                batch(&[1, 0, 0, 0x80, 5]),
                false,
                "a continuation that follows no inline response",
            ),
            // A well-formed response to a request nobody made.
            (
                batch(&[0x39, 0x30, 0, 0, 0, 1, 0, 0, 7]),
                false,
                "a response to request 12345, which is not waiting for one",
            ),
        ];
        for (bytes, requests, want) in cases {
            match feed(bytes, requests) {
                Error::Protocol { rank, detail, .. } => {
                    assert_eq!(rank, 0);
                    assert!(
                        detail.starts_with("worker 0 -> worker 0: ") && detail.contains(want),
                        "{detail:?} should name the workers and say {want:?}"
                    );
                }
                e => panic!("expected a protocol error saying {want:?}, got {e}"),
            }
        }
    }

    /// A well-formed registration or release of a trust of a property that is not alive is no
    /// broken ring but a broken count: the report says so, names both workers, and gives the
    /// likely misuse (it read "rank 0 sent a batch that breaks the wire protocol").
    #[test]
    fn a_count_for_a_property_that_is_not_alive_ends_the_job_naming_the_misuse() {
        let cases = [
            (
                control(CONTROL_RELEASE, 7, 3, 42, 0),
                "a reference-counting record releases trust 42 of property 7 (generation 3), \
                 which is not alive",
            ),
            (
                control(CONTROL_REGISTER, 0, 9, 43, 42),
                "a reference-counting record registers trust 43 of property 0 (generation 9), \
                 which is not alive",
            ),
        ];
        for (record, want) in cases {
            let e = feed(batch(&record), true);
            assert!(
                matches!(&e, Error::TrustCount { worker: 0, rank: 0, from: 0, from_rank: 0, detail } if detail == want),
                "expected a broken count saying {want:?}, got {e:?}"
            );
            assert!(
                e.to_string()
                    .ends_with("the bytes of a serialised Trust were deserialised more than once, or bytes that are no serialised Trust of this job were read as one"),
                "{e}"
            );
        }
    }

    /// An apply that takes about `d`.
    fn busy(c: &mut u64, d: std::time::Duration) {
        let t = std::time::Instant::now();
        while t.elapsed() < d {
            *c = std::hint::black_box(*c + 1);
        }
    }

    /// A share is counted in applies but also ends with time: after a poll that served many
    /// cheap requests, a fiber whose inline applies are slow must not keep the worker's
    /// clients waiting until all of them have run (10 000 here, 50 µs each: half a second).
    #[test]
    fn a_share_of_slow_inline_applies_ends_with_time() {
        crate::run(Config::default().workers(1), || {
            let core = super::core().expect("on a worker");
            let mine = entrust(0u64);
            core.grant_share(10_000);
            let active = || core.share_left.get() > 0 || core.inline_runs.get() < 0;
            let mut applies = 0;
            while active() && applies < 10_000 {
                mine.apply(|c| busy(c, std::time::Duration::from_micros(50)));
                applies += 1;
            }
            // The first chunk outlasts `SHARE_TIME`, so the share ends at its end.
            assert_eq!(applies, super::SHARE_CHUNK);
        })
        .unwrap();
    }

    /// Inline applies that find the rings empty for a step of looks stop looking and counting
    /// (the worker watches its gate); a request they stage, or one that arrives, brings the
    /// looks back, as often as before; applies too slow to gain from a wider spacing keep
    /// looking every 16 or 32 while they look.
    #[test]
    fn looks_at_empty_rings_give_way_to_the_gate_until_something_arrives() {
        crate::run(Config::default().workers(2), || {
            let core = super::core().expect("on a worker");
            let mine = entrust(0u64);
            // Cheap applies, nothing arriving: after a step of 8 empty looks (16 applies apart)
            // the worker watches its gate, and its applies stop counting towards a look (being
            // descheduled in the middle of a step only starts it again, so over 200 000
            // applies it gets there however loaded the machine is).
            for _ in 0..200_000 {
                mine.apply(|c| *c += 1);
            }
            assert_eq!(core.gate(), core.home, "the worker does not watch its gate");
            let runs = core.inline_runs.get();
            for _ in 0..1_000 {
                mine.apply(|c| *c += 1);
            }
            assert_eq!(
                core.inline_runs.get(),
                runs,
                "applies under an open gate counted"
            );
            // Watching is no share: a loop of inline applies and yields still polls every
            // `POLL_EVERY` yields.
            core.quick_yields.set(0);
            for _ in 0..super::POLL_EVERY {
                mine.apply(|c| *c += 1);
                yield_now();
            }
            assert_eq!(core.quick_yields.get(), 0, "the last yield did not poll");
            // A request to another worker closes the gate: the looks of inline applies publish
            // it.
            let far = crate::entrust_on(crate::WorkerId::new(1), || 0u64);
            for _ in 0..200_000 {
                mine.apply(|c| *c += 1);
            }
            assert_eq!(core.gate(), core.home);
            far.apply_then(|c| *c += 1, |()| ());
            assert_eq!(core.gate(), crate::wire::doorbell::CLOSED);
            assert_eq!(far.apply(|c| *c), 1);
            for _ in 0..200_000 {
                mine.apply(|c| *c += 1);
            }
            assert_eq!(core.gate(), core.home, "the gate did not open again");
            // A request from the other worker: the next look that finds it serves it, and the
            // looks close up again.
            let other = crate::spawn_on(crate::WorkerId::new(1), || {
                let t = crate::entrust_on(crate::WorkerId::new(0), || 5u64);
                t.apply(|c| *c)
            });
            let mut applies = 0;
            while !other.is_finished() {
                mine.apply(|c| *c += 1);
                applies += 1;
                assert!(
                    applies < 10_000_000,
                    "the other worker's requests were never served"
                );
            }
            assert_eq!(other.join(), 5);
            assert!(core.empty_looks.get() < 8, "{}", core.empty_looks.get());

            // Applies of ~2 µs each: a step of 8 looks 32 applies apart takes ~0.5 ms, far more
            // than 8 × `LOOK_GAP`, so the looks never come more than 32 applies apart.
            let mut widest = 0;
            for _ in 0..2_000 {
                mine.apply(|c| busy(c, std::time::Duration::from_micros(2)));
                widest = widest.max(super::INLINE_POLL - core.inline_runs.get());
            }
            assert!(widest <= 32, "looks {widest} applies apart");
        })
        .unwrap();
    }

    /// The share a poll grants the fibers is spent by inline applies only: a loop of inline
    /// applies and yields does not poll within it, while a fiber that yields without inline
    /// applies (between remote requests, say) keeps the cadence of a poll every `POLL_EVERY`
    /// yields, however large the share (gsm-bench remote, both ways: 20 M/s instead of 54 when
    /// its yields waited for the share).
    #[test]
    fn only_inline_applies_hold_back_the_polls_of_yields() {
        crate::run(Config::default().workers(1), || {
            let core = super::core().expect("on a worker");
            let mine = entrust(0u64);
            // As a poll that served 1000 requests leaves it, just before a yield.
            let grant = |core: &super::WorkerCore| {
                core.inline_runs.set(-1000);
                core.runs_at_yield.set(-1000);
                core.quick_yields.set(0);
            };
            grant(core);
            for _ in 0..20 {
                for _ in 0..40 {
                    mine.apply(|c| *c += 1);
                }
                yield_now();
            }
            // 800 inline applies, 20 yields, no poll (a poll would have reset the count).
            assert_eq!(core.inline_runs.get(), -200);
            grant(core);
            for _ in 0..(super::POLL_EVERY + 1) {
                yield_now();
            }
            // A poll, which served nothing: the count starts afresh.
            assert_eq!(core.inline_runs.get(), 0);
        })
        .unwrap();
    }

    #[test]
    fn apply_then_waits_while_too_many_are_unanswered() {
        use super::MAX_THEN_IN_FLIGHT;
        use std::cell::Cell;
        use std::rc::Rc;
        crate::run(Config::default().workers(2), || {
            let far = crate::entrust_on(crate::WorkerId::new(1), || 0u64);
            let answered = Rc::new(Cell::new(0u64));
            // Yielding every 4096: the client then polls for answers only every 16 yields,
            // and without the bound ~127 000 of these 131 072 were unanswered at once.
            let total = 8 * MAX_THEN_IN_FLIGHT as u64;
            let mut widest = 0;
            for i in 0..total {
                let a = answered.clone();
                far.apply_then(
                    |c| {
                        *c += 1;
                        *c
                    },
                    // Answers come in the order the requests were issued.
                    move |n| {
                        assert_eq!(n, a.get() + 1);
                        a.set(n);
                    },
                );
                widest = widest.max(i + 1 - answered.get());
                if i % 4096 == 4095 {
                    yield_now();
                }
            }
            assert!(
                widest <= MAX_THEN_IN_FLIGHT as u64,
                "{widest} apply_thens were unanswered at once (bound {MAX_THEN_IN_FLIGHT})"
            );
            while answered.get() < total {
                yield_now();
            }
            assert_eq!(far.apply(|c| *c), total);
            // In a callback the caller cannot wait: apply_thens issued there go past the
            // bound instead of blocking, and are all answered.
            let extra = MAX_THEN_IN_FLIGHT as u64 + 100;
            let far2 = far.clone();
            let more = answered.clone();
            far.apply_then(
                |c| *c,
                move |_| {
                    for _ in 0..extra {
                        let m = more.clone();
                        far2.apply_then(|c| *c += 1, move |()| m.set(m.get() + 1));
                    }
                },
            );
            while answered.get() < total + extra {
                yield_now();
            }
            assert_eq!(far.apply(|c| *c), total + extra);
        })
        .unwrap();
    }
}
