//! A worker: one OS thread running a fiber scheduler and a poller, and holding its trustee-side
//! property table. `WorkerCore` owns the parts (`Inbox`, `Outbox`, `Pending`, `Context`, the
//! `Scheduler` of its fibers) and drives one turn of the loop; the parts, the request path through them and the
//! idle protocol are described in this folder's README.md.
//!
//! **Loop.** Run up to `POLL_EVERY` ready fibers, then poll: serve incoming request batches (one
//! ring per client plus the loopback queue), complete incoming responses (one ring per trustee
//! plus loopback), flush outgoing batches. Outgoing records are thus batched per destination and
//! flushed when every fiber waits (the ready queue ran dry), when a batch fills its slot (flushed
//! at once), or after at most `POLL_EVERY` fiber switches. A fiber that only applies to local
//! properties (inline, never suspending) also polls every `INLINE_POLL` applies, so other workers'
//! requests to this one are not starved by it; those polls publish its own partly filled request
//! batches only every `INLINE_REQUEST_FLUSH`-th time, so that they fill. Nor do the clients starve
//! the worker's own fibers: a poll that served k requests lets them run k inline applies (at least
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
//! **Serving.** A request batch is served record by record (`Inbox`), each through its
//! trampoline (`entry.rs`; the kinds of request are in `trust/serve.rs`, `spawn.rs` and
//! `mail.rs`); a trampoline of `apply`/`apply_then` also serves the plain records of its own kind
//! right behind it (`trust::serve::serve_run`), so a run of requests of one closure type costs one
//! call, one property lookup per name change and one staging of results per 16.
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
//! **Idle backoff and wake-up.** An idle worker spins (looking only at its ring headers), then
//! yields its thread, then sleeps on its doorbell; the states, who wakes whom and why no wake-up
//! is lost are in README.md, "The idle protocol".
//!
//! This module does not know the user-facing types; `trust/` and `spawn.rs` build on it. See
//! ARCHITECTURE.md.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{DelegationError, Error};
use crate::fabric::{Bell, Doorbell, Lane, Progress, Turn};
use crate::fiber;
use crate::property::{PropertyTable, Toggle};
use crate::wire::codeptr;
use crate::wire::record::{
    Body, Byte, CONTROL, Large, MAX_TABLE, Partial, RELEASE, Request, RequestReader,
    ResponseReader, Src, classify,
};
use crate::wire::ring::{Consumer, Producer, RingLayout};

pub use crate::error::BLOCKING_IN_DELEGATED;

/// An idle worker's first sleep on its doorbell; each later one that ends by its timeout with
/// nothing come is twice as long, `NAP_DOUBLINGS` times at most. The timeout is only a safety net
/// (a ring wakes the worker at once, see the idle protocol in the README), so a long one costs no
/// latency, and a short one cost an idle rank a wake-up per worker every few milliseconds.
const NAP: Duration = Duration::from_millis(20);
const NAP_DOUBLINGS: u32 = 3;

/// Fiber resumes between two polls. Small enough that a client with many fibers publishes its
/// first requests while its later fibers still run, so the trustee serves in parallel instead
/// of waiting for one large batch.
const POLL_EVERY: usize = 16;
/// Idle loop turns spent spinning, then yielding the thread, before parking. Not longer: a
/// spinning worker holds a core that the peer worker it waits for may need.
const SPIN: u32 = 64;
/// The same while this rank's awake workers outnumber the CPUs they have (see
/// [`Shared::spin`]): a spinning worker then holds a CPU that the worker it waits for needs, so
/// it yields at once.
pub(crate) const SPIN_OVERSUBSCRIBED: u32 = 1;
/// Header checks per spinning turn of an idle worker (see `run_loop`): a turn of the loop (a
/// poll over every ring) costs tens of nanoseconds, a look at the headers a few.
const LIGHT_SPINS: u32 = 8;
const YIELDS: u32 = 32;
/// How long after its last work a worker keeps yielding instead of parking, while it has a CPU
/// of its own ([`Shared::spin`]): waking a parked worker was the tail of `gsm-bench curves` at
/// light load (the curves' history in docs/performance-log.md). Only after an idle spell shorter than
/// this (work arrives often): a worker woken only by a timer parks at once, as before.
const LINGER: Duration = Duration::from_millis(2);
/// How long a job of one rank must stay stalled (every worker quiet, roots left, no activity)
/// before it is reported deadlocked; the ranks of a larger job agree on the same wait (see
/// `runtime::quiesce::terminate`). Nothing can wake a stalled job, so this only keeps the report from
/// resting on a single look.
pub(crate) const STALL_CONFIRM: Duration = Duration::from_secs(1);
/// How long a worker whose fibers wait in [`crate::wait_for`] (unless its waiters all sleep and
/// the first deadline is this far or farther) yields the thread between looks before it sleeps
/// at all: a sleep lasts at least the timer's slack however short it is asked to be, and a partner
/// that another rank's worker on this core is about to become is usually much nearer. The
/// millisecond of `gsm-collectives`' board waits before the runtime took them over (sleeping
/// after a hundred idle turns instead made a barrier wait out the timer's slack).
const WAITER_YIELDING: Duration = Duration::from_millis(1);
/// Inline (local) applies from a fiber between two looks at the incoming rings (one header load
/// per ring). 16 rather than 64: a remote client waiting on this worker is answered sooner, at
/// no measured cost to the local rate.
const INLINE_POLL: i32 = 16;
/// Of the polls made between inline applies, only every this many publishes the worker's partly
/// filled request batches; the others serve, answer and complete only. A fiber that mixes
/// inline and remote applies so fills about 64 applies' worth of records per slot instead of 16,
/// while a client waiting on this worker is still answered every `INLINE_POLL` applies. Fuller
/// slots carry the same records in fewer publications, each with its fence and ring.
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
/// applies (a fraction of a millisecond at most). A smaller bound let one flooding client take
/// more than its half of the worker.
const MAX_SHARE: u32 = 1 << 14;

/// A share larger than this many applies is handed out this many at a time, with a look at the
/// clock in between (see [`SHARE_TIME`]): rare enough that the clock reads do not show in a
/// loop of inline applies, as they did at 64.
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

/// The shape of every trampoline (`entry.rs`; the kinds of request are in `trust/serve.rs`,
/// `spawn.rs` and `mail.rs`): the worker, the client, the record, and the rest of its batch, from
/// which a trampoline may serve the plain records of its own kind that follow (see
/// `trust::serve::serve_run`); it leaves the others to the caller.
pub(crate) type Trampoline = unsafe fn(&WorkerCore, usize, &Request<'_>, &mut RequestReader<'_>);

/// How many response records ahead of the one being completed its pending slot is prefetched:
/// far enough for the slot's line to arrive in time; farther gained nothing.
const AHEAD: usize = 16;

/// The ring ends the fabrics made for one worker, to other ranks' workers (those between this
/// rank's workers are made on first use, `lanes.rs`). Lists, not vectors by worker: a worker
/// keeps a place for a peer only once it has a ring to it or talks to it.
#[derive(Debug, Default)]
pub(crate) struct Ends {
    /// Rings this worker publishes into: (global id of the consumer, lane, end).
    pub out: Vec<(usize, Lane, Producer)>,
    /// Rings this worker polls: (global id of the producer, lane, end).
    pub inc: Vec<(usize, Lane, Consumer)>,
    /// (global worker, a bell only this worker rings after publishing to it: a fabric's
    /// `Links::worker_bells`), rung instead of the rank's shared one (`Shared::bells`).
    pub bells: Vec<(usize, Bell)>,
    /// The fabrics' hooks for this worker's thread (`Links::progress`).
    pub progress: Vec<Progress>,
}

/// Everything one worker owns. Reached through a thread-local pointer; all mutation goes through
/// `Cell`/`RefCell`, and no `RefCell` borrow is held while user code runs, except the incoming
/// ring being served (user code cannot reach it).
///
/// Peers are named by *global* worker id (every worker of every rank); what a worker keeps per
/// peer is made on first use (`places.rs`). The rings to workers of other ranks come from the
/// fabrics, the others from the heap, on first use (`lanes.rs`).
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
    /// [`Ends::progress`].
    progress: Vec<Progress>,
    /// This worker's fibers: the ready queue, the running one, the sleeping and waiting ones.
    sched: Scheduler,
    /// How deep the running code is in delegated closures and callbacks.
    context: Context,
    /// This worker's outgoing batches.
    outbox: Outbox,
    /// This worker's incoming rings.
    inbox: Inbox,
    /// This worker's requests awaiting an answer.
    pending: Pending,
    /// This worker's quiet report stands (`Shared::quiet`); see [`not_quiet`](Self::not_quiet).
    reported: Cell<bool>,
    /// Closures run inline since the last poll from a fiber, counted from minus the fibers' share
    /// that poll granted (`poll_flushing`), or `INLINE_POLL` when the loopback queue has work
    /// that must run before the next inline closure (see [`WorkerCore::inline_ran`]).
    inline_runs: Cell<i32>,
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
    pub props: RefCell<PropertyTable>,
    /// Messages delivered to this worker and not yet received (`mailbox.rs`; the API that sends
    /// and receives them is `crate::mail`).
    pub mail: RefCell<mailbox::Mailbox>,
    next_id: Cell<u64>,
    backlog_limit: usize,
    /// Sockets this worker's fibers wait for, polled at each turn and slept on when idle
    /// (`crate::reactor`).
    pub(crate) reactor: reactor::Reactor,
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
    if core().is_some_and(|c| c.sched.dropping()) {
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
        let outbox = Outbox::new((id, local), shared.clone(), ends.out, ends.bells, slot_cap);
        let inbox = Inbox::new((id, local), place, ends.inc, slots.max(2));
        let door = shared.doors[local].clone();
        // Closed until this worker has looked at its rings and found them empty (a shm segment
        // starts with zero there).
        door.gate()
            .store(crate::wire::doorbell::CLOSED, Ordering::Relaxed);
        WorkerCore {
            id,
            home: home(id, shared.epoch),
            door,
            local,
            sender_bit: sender_bit(local),
            count,
            progress: ends.progress,
            sched: Scheduler::new(stack),
            context: Context::default(),
            outbox,
            inbox,
            pending: Pending::default(),
            reported: Cell::new(false),
            inline_runs: Cell::new(0),
            inline_polls: Cell::new(0),
            empty_looks: Cell::new(0),
            last_look: Cell::new(None),
            quick_yields: Cell::new(0),
            runs_at_yield: Cell::new(0),
            share_left: Cell::new(0),
            share_until: Cell::new(None),
            props: RefCell::new(PropertyTable::default()),
            mail: RefCell::new(mailbox::Mailbox::default()),
            next_id: Cell::new(((id as u64) << 40) | 1),
            backlog_limit: slots.max(2),
            reactor: reactor::Reactor::default(),
            shared,
        }
    }

    /// Calls the fabrics' hooks for turn `t`; whether any delivered something.
    #[inline]
    pub(super) fn fabric_turn(&self, t: Turn) -> bool {
        let mut any = false;
        for p in &self.progress {
            any |= p.turn(t);
        }
        any
    }

    /// Whether global worker `w` is in another rank.
    #[inline]
    pub(crate) fn is_remote(&self, w: usize) -> bool {
        self.outbox.is_remote(w)
    }

    /// This worker's incoming rings.
    #[inline(always)]
    pub(crate) fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// This worker's outgoing batches: where responses are staged.
    #[inline(always)]
    pub(crate) fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Installs `self` as this thread's core for the duration of `f`.
    pub(crate) fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let _watch = crate::fiber::watch_overflow(self.id, self.sched.stack_size());
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
    /// limited a loop of them.
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
        if self.outbox.any_dirty() {
            return;
        }
        self.door.open_gate(self.home);
        // The Dekker re-check (`wire::doorbell`): a publication that came before the gate opened
        // may have found it closed.
        if self.inbox.waiting(&self.shared.lanes) {
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
        self.sched.dropping() && self.sched.current().is_none()
    }

    /// The execution context of the running code (delegated closure, callback, or neither).
    #[inline(always)]
    pub(crate) fn context(&self) -> &Context {
        &self.context
    }

    /// This worker's requests awaiting an answer.
    #[inline(always)]
    pub(crate) fn pending(&self) -> &Pending {
        &self.pending
    }

    /// Whether the caller may suspend: on a fiber, not inside a delegated closure or callback.
    #[inline]
    pub(crate) fn can_block(&self) -> bool {
        self.sched.current().is_some() && self.context.outside()
    }

    /// Whether requests to self must be deferred to the loopback queue (a property closure or
    /// callback is running on this worker).
    #[inline]
    pub(crate) fn must_defer(&self) -> bool {
        self.context.in_delegated()
    }

    /// Whether a delegated closure or a callback is running on this worker.
    #[inline]
    pub(crate) fn delegated_or_callback(&self) -> bool {
        !self.context.outside()
    }

    /// Panics with [`BLOCKING_IN_DELEGATED`] unless the caller may block.
    #[inline]
    #[track_caller]
    pub(crate) fn assert_can_block(&self) {
        if !self.can_block() {
            cannot_block(
                self.unwinding_fibers(),
                self.sched.current().is_none() && self.context.outside(),
            );
        }
    }

    /// Starts a fiber and makes it ready.
    ///
    /// # Panics
    /// If its stack cannot be had (see [`try_spawn_fiber`](Self::try_spawn_fiber)), at the
    /// caller's `spawn`.
    #[track_caller]
    pub(crate) fn spawn_fiber(&self, f: impl FnOnce() + 'static) {
        if let Err(e) = self.sched.spawn(f) {
            panic!("{e}");
        }
    }

    /// Starts a fiber and makes it ready, or says why its stack could not be had.
    pub(crate) fn try_spawn_fiber(&self, f: impl FnOnce() + 'static) -> Result<(), String> {
        self.sched.spawn(f)
    }

    /// The running fiber's id.
    #[inline]
    pub(crate) fn current_fiber(&self) -> Option<u32> {
        self.sched.current()
    }

    /// Makes fiber `id` ready.
    #[inline]
    pub(crate) fn wake_fiber(&self, id: u32) {
        self.sched.wake(id);
    }

    /// Whether no fiber of this worker is ready to run.
    #[inline]
    pub(crate) fn nothing_ready(&self) -> bool {
        self.sched.nothing_ready()
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
    /// the condition once per loop turn, between fibers (`Scheduler::wake_waiters`), so a
    /// waiting fiber costs no switch until it can go on, and a worker whose fibers all wait is
    /// idle: it sleeps in short spells, and it can be found quiet, which is how a job whose
    /// ranks wait for each other on the host board is seen deadlocked.
    #[track_caller]
    pub(crate) fn wait_for(&self, cond: &mut dyn FnMut() -> bool) {
        self.assert_can_block();
        let Some(id) = self.sched.current() else {
            return;
        };
        let board = &self.shared.board_fresh[self.local];
        self.sched.wait_for(id, &self.context, board, cond);
    }

    /// Suspends the running fiber until `cond()` holds, for an operation in flight that no
    /// message counter sees (a segment's RMA on a fabric): meanwhile the worker counts as having
    /// a sleeper due now, so it is neither found quiet (no false deadlock) nor parked for long.
    #[track_caller]
    pub(crate) fn wait_in_flight(&self, cond: &mut dyn FnMut() -> bool) {
        if cond() {
            return;
        }
        self.assert_can_block();
        let Some(id) = self.sched.current() else {
            return;
        };
        let board = &self.shared.board_fresh[self.local];
        self.sched.wait_in_flight(id, &self.context, board, cond);
    }

    /// Suspends the running fiber until `until` ([`crate::sleep`]); the loop looks at the
    /// scheduler's timers once per turn.
    #[track_caller]
    pub(crate) fn sleep_until(&self, until: Instant) {
        self.assert_can_block();
        if let Some(id) = self.sched.current() {
            self.sched.sleep_until(id, until);
        }
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

#[cold]
pub(crate) fn capture_mismatch() -> DelegationError {
    DelegationError::Wire("gossamer: a request's captured bytes do not fit its closure".into())
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

mod context;
pub(crate) mod entry;
mod id;
mod idle;
mod inbox;
mod lanes;
pub(crate) mod mailbox;
mod outbox;
pub(crate) mod pending;
mod places;
mod poll;
mod props;
pub(crate) mod reactor;
mod sched;
mod send;
mod shared;
mod sockets;
pub(crate) mod tasks;
mod teardown;

use context::Context;
pub(crate) use context::{CALLBACK, DELEGATED};
pub use id::WorkerId;
pub(crate) use id::home;
use inbox::Inbox;
use lanes::Lanes;
use outbox::Outbox;
pub(crate) use pending::{Data, Pending};
use sched::Scheduler;
pub(crate) use shared::{Place, Shared};
use sockets::SocketWatch;

#[cfg(test)]
mod boundary_tests;
#[cfg(all(test, not(loom)))]
mod lanes_tests;
#[cfg(test)]
mod mutation_tests;
#[cfg(test)]
mod places_tests;
#[cfg(test)]
mod spin_host_tests;
#[cfg(test)]
mod tests;
