//! Fibers as the user sees them: `spawn`, `spawn_on`, `JoinHandle`, `yield_now`, and the worker
//! identity functions.
//!
//! A local `spawn` takes any `'static` closure and shares its result with the `JoinHandle`
//! through an `Rc` (a fiber never leaves its worker, so the handle is `!Send`: join it on the
//! worker that spawned it). `spawn_on` to another worker ships the closure like a delegated one
//! (`NoRef` captures, a trampoline that starts the fiber there) and the result comes back as a
//! response record (`R: Wire`, moved by bytes within a process). A panic in the fiber is caught
//! and handed to the joiner: `join` re-raises it (with the original message), `try_join`
//! returns it as [`Error::FiberPanicked`].
//!
//! A panic is never lost. If the fiber's `JoinHandle` was dropped without a join (before or after
//! the panic), nobody can learn of it from the handle, so it ends the job with
//! [`Error::Panicked`] naming the fiber's worker, as a panic of the main fiber does: an SPMD job
//! with a silently dead fiber would go on to give wrong results. (Rayon decides alike: a
//! panic in a detached `spawn` aborts by default. `std::thread` instead drops it; a thread there
//! is a process-level resource, not one step of a computation.) Dropping the handle of a fiber
//! that ends normally is fine: the fiber runs on, detached.
//!
//! **Detached fibers at the end of a run.** A fiber that is still running (ready, or computing
//! between yields, or in [`sleep`], which ends by itself) when the roots return keeps the run
//! going until it ends: the job drains before it stops. (So a detached fiber that sleeps in a
//! loop keeps its run going for ever: give it a way to stop, or make it wait in `recv`.) A fiber
//! still *waiting* (in `recv`, `join`, `wait_for`) once the whole job is quiet is dropped: its
//! stack unwinds, its destructors run (where blocking `try_` calls answer
//! [`Error::Stopped`](crate::Error::Stopped)), and the run returns the roots' result. That is the
//! pattern of a server fiber, a loop of `recv`s that waits for the next request for ever, and it
//! is what Go does with goroutines and Tokio with tasks when `main` returns. The same wait while
//! a root still runs is different: the root then waits too, or will, and nothing could ever wake
//! them, so the job is reported deadlocked ([`Error::Deadlock`](crate::Error::Deadlock)). A
//! detached fiber whose wait is a bug (a `recv` whose `send` was never written) is therefore
//! silent once the roots are done; join the fibers whose work the result depends on. See
//! ARCHITECTURE.md.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

use crate::error::{DelegationError, Error};
use crate::noref::{NoRef, Wire};
use crate::trust::decode;
use crate::wire::codeptr;
use crate::wire::record::{Byte, Request, RequestReader, Src};
use crate::worker::entry::{Delegated, Of, trampoline};
use crate::worker::{Data, WorkerCore, core_or_panic, fiber_panic, tasks};

pub use crate::worker::WorkerId;

/// What an SPMD body learns about where it runs.
#[derive(Debug, Clone, Copy)]
pub struct Worker {
    pub(crate) id: usize,
    pub(crate) count: usize,
    pub(crate) rank: usize,
}

impl Worker {
    /// This worker's index in the job (global: the workers of every rank, numbered rank by rank).
    pub fn id(&self) -> usize {
        self.id
    }
    /// The number of workers in the job (every rank's).
    pub fn count(&self) -> usize {
        self.count
    }
    /// The rank this worker belongs to.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// This worker as a [`WorkerId`].
    pub fn worker_id(&self) -> WorkerId {
        WorkerId::new(self.id)
    }
}

struct JoinCell<R> {
    result: RefCell<Option<Result<R, String>>>,
    waiter: Cell<Option<u32>>,
    /// Whether the `JoinHandle` still exists (a failure can still be joined).
    watched: Cell<bool>,
    /// Whether the failure in `result` must end the job if it is never joined: a panic or a
    /// failed start, not the runtime stopping.
    grave: Cell<bool>,
    /// The worker (global id) the fiber runs on, for the report of a failure nobody joins.
    worker: usize,
    /// Whether the fiber is a task of a completion scope, which reports its panic to the
    /// scope's caller: then a failure nobody joins does not end the job.
    scoped: Cell<bool>,
}

impl<R> JoinCell<R> {
    fn new(worker: usize) -> Rc<Self> {
        Rc::new(JoinCell {
            result: RefCell::new(None),
            waiter: Cell::new(None),
            watched: Cell::new(true),
            grave: Cell::new(false),
            worker,
            scoped: Cell::new(false),
        })
    }

    /// Stores the fiber's outcome and wakes the joiner. `grave`: a failure that must not pass
    /// unseen (see the module docs); it ends the job at once if the handle is gone already.
    fn set(&self, r: Result<R, String>, grave: bool) {
        let grave = grave && !self.scoped.get();
        let unjoined = match &r {
            Err(m) if grave && !self.watched.get() => Some(m.clone()),
            _ => None,
        };
        self.grave.set(grave && r.is_err());
        *self.result.borrow_mut() = Some(r);
        if let Some(m) = unjoined {
            self.grave.set(false);
            unjoined_failure(self.worker, m);
        }
        if let (Some(f), Some(core)) = (self.waiter.take(), crate::worker::core()) {
            core.wake_fiber(f);
        }
    }
}

/// Ends the job for the failure `message` of a fiber on `worker` whose handle is gone.
#[cold]
fn unjoined_failure(worker: usize, message: String) {
    let message = format!("{message} (in a spawned fiber whose JoinHandle was dropped unjoined)");
    match crate::worker::core() {
        Some(core) => core.shared.fail(Error::Panicked {
            rank: core.shared.place.rank_of(worker),
            worker,
            message,
        }),
        // A handle kept past its runtime (in a thread-local, say): the job is over, so the
        // report can only go to stderr.
        None => crate::eprint_line(format_args!("gossamer: worker {worker}: {message}")),
    }
}

/// The result of a spawned fiber, to be joined on the worker that spawned it.
pub struct JoinHandle<R> {
    cell: Rc<JoinCell<R>>,
    _not_send: PhantomData<*const ()>,
}

impl<R> Drop for JoinHandle<R> {
    /// A handle dropped unjoined while its fiber's failure waits in it ends the job with that
    /// failure, unless the dropping fiber is itself unwinding: then the panic that unwinds it is
    /// the run's failure (handles still to be joined are dropped by the unwinding, and the first
    /// of them to fail, recorded first, was reported instead of the panic that ended main; its own
    /// panic message was printed when it happened).
    fn drop(&mut self) {
        self.cell.watched.set(false);
        if self.cell.grave.take()
            && !std::thread::panicking()
            && let Some(Err(m)) = self.cell.result.borrow_mut().take()
        {
            unjoined_failure(self.cell.worker, m);
        }
    }
}

impl<R> std::fmt::Debug for JoinHandle<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("done", &self.cell.result.borrow().is_some())
            .finish()
    }
}

impl<R> JoinHandle<R> {
    /// Whether the fiber has finished.
    pub fn is_finished(&self) -> bool {
        self.cell.result.borrow().is_some()
    }

    /// Waits (suspending this fiber) for the result.
    ///
    /// # Panics
    /// If the fiber panicked (re-raising its message), or where blocking is impossible.
    #[track_caller]
    pub fn join(self) -> R {
        match self.try_join() {
            Ok(r) => r,
            Err(Error::FiberPanicked(m)) => panic!("{m}"),
            Err(e) => panic!("gossamer: JoinHandle::join failed: {e}"),
        }
    }

    /// [`join`](Self::join) without waiting: the promise of the fiber's result (a panic of the
    /// fiber is the promise's failure). The promise completes on this worker, so it can be
    /// awaited by any executor, unlike the handle, which stays on its worker.
    ///
    /// # Panics
    /// Outside a gossamer worker.
    #[track_caller]
    pub fn join_async(self) -> crate::Promise<R>
    where
        R: 'static,
    {
        if self.is_finished() {
            return match self.try_join() {
                Ok(r) => crate::Promise::ready(r),
                Err(e) => crate::Promise::failed(e.to_string()),
            };
        }
        crate::spawn_async(move || self.join())
    }

    /// Waits for the result; a panic in the fiber comes back as [`Error::FiberPanicked`]. In a
    /// destructor that runs because the run ended with its fiber unfinished, it answers
    /// [`Error::Stopped`] (a panic there would abort the process).
    ///
    /// Joining a fiber that has finished never waits, so it works anywhere on its worker, in a
    /// callback too; check [`is_finished`](Self::is_finished) first there, since joining an
    /// unfinished one in a callback panics.
    ///
    /// # Panics
    /// Where blocking is impossible (outside a fiber, inside a delegated closure or a callback)
    /// and the fiber has not finished.
    #[track_caller]
    pub fn try_join(self) -> Result<R, Error> {
        if self.cell.result.borrow().is_none() {
            let core = core_or_panic("JoinHandle::join");
            if core.unwinding_fibers() {
                // A destructor of a fiber the ended run drops: no result can come.
                return Err(Error::Stopped);
            }
            core.assert_can_block();
            let cell = self.cell.clone();
            core.wait_until(|| {
                let done = cell.result.borrow().is_some();
                if !done {
                    cell.waiter.set(core.current_fiber());
                }
                done
            });
        }
        match self.cell.result.borrow_mut().take() {
            Some(Ok(r)) => Ok(r),
            Some(Err(m)) => Err(Error::FiberPanicked(m)),
            None => Err(Error::Stopped),
        }
    }
}

/// Starts `f` as a fiber on the current worker.
///
/// # Panics
/// Outside a gossamer worker.
#[track_caller]
pub fn spawn<R: 'static>(f: impl FnOnce() -> R + 'static) -> JoinHandle<R> {
    let core = core_or_panic("spawn");
    let cell = JoinCell::new(core.id);
    let c2 = cell.clone();
    let scope = tasks::current();
    if scope != 0 {
        tasks::started(scope);
        cell.scoped.set(true);
    }
    core.spawn_fiber(move || {
        let r = if scope != 0 {
            catch_unwind(AssertUnwindSafe(|| tasks::fiber(scope, f)))
        } else {
            catch_unwind(AssertUnwindSafe(f))
        };
        match r {
            Ok(v) => c2.set(Ok(v), false),
            Err(p) => c2.set(Err(fiber_panic(p)), true),
        }
    });
    JoinHandle {
        cell,
        _not_send: PhantomData,
    }
}

/// Starts `f` as a fiber on `worker` (this one included).
///
/// # Panics
/// Outside a gossamer worker, or if `worker` does not exist.
#[track_caller]
pub fn spawn_on<F, R>(worker: WorkerId, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + NoRef,
    R: Wire,
{
    let core = core_or_panic("spawn_on");
    let w = worker.index();
    assert!(
        w < core.count,
        "gossamer: spawn_on: worker {w} does not exist (this runtime has {} workers)",
        core.count
    );
    if w == core.id {
        return spawn(f);
    }
    let scope = tasks::current();
    if scope != 0 {
        tasks::started(scope);
        let handle = spawn_remote(core, w, move || tasks::fiber(scope, f));
        handle.cell.scoped.set(true);
        return handle;
    }
    spawn_remote(core, w, f)
}

/// The remote half of [`spawn_on`]: stages the request that starts `f` on worker `w`.
fn spawn_remote<F, R>(core: &WorkerCore, w: usize, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + NoRef,
    R: Wire,
{
    let cell: Rc<JoinCell<R>> = JoinCell::new(w);
    let joined = Rc::into_raw(cell.clone()) as usize as u64;
    let req = core
        .pending()
        .add(w, fill_join::<R>, |data| data[0] = MaybeUninit::new(joined));
    core.pending().fiber_result(true);
    core.send_request(
        w,
        Some(codeptr::offset_of(trampoline::<Spawn<F, R>>() as usize)),
        0,
        0,
        req,
        Src::closure(&f),
        None,
        false,
    );
    JoinHandle {
        cell,
        _not_send: PhantomData,
    }
}

/// # Safety
/// `data[0]` must be an `Rc<JoinCell<R>>` raw pointer from `spawn_on::<_, R>`.
unsafe fn fill_join<R: Wire>(core: &WorkerCore, data: &mut Data, st: u8, body: &[Byte]) {
    core.pending().fiber_result(false);
    // SAFETY: per the contract; reclaimed once (the entry completes once).
    let cell = unsafe { Rc::from_raw(data[0].assume_init() as usize as *const JoinCell<R>) };
    // SAFETY: the response to this request carries a moved `R` when OK.
    let r = unsafe { decode::<R>(st, body) };
    let grave = !matches!(r, Err(DelegationError::Stopped));
    cell.set(
        r.map_err(|e| match e {
            DelegationError::Panicked(m) => m,
            e => e.to_string(),
        }),
        grave,
    );
}

/// The requests of `spawn_on` of `F` on another worker, answering an `R`.
struct Spawn<F, R>(Of<(F, R)>);

impl<F: FnOnce() -> R + Copy + 'static, R: Wire> Delegated for Spawn<F, R> {
    /// # Safety
    /// `rec` must be a record encoded by `spawn_on::<F, R>`.
    #[inline(always)]
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        _more: &mut RequestReader<'_>,
    ) {
        // SAFETY: the client copied one `F` into the captured bytes (this function's contract).
        match unsafe { crate::trust::captured::<F>(rec) } {
            Ok(f) => spawn_answering(core, client, rec.req, f),
            Err(e) => core.outbox().respond::<R>(client, rec.req, Err(e)),
        }
    }
}

/// Starts `f` as a fiber that answers request `req` of `client` with its result (or its panic).
/// A fiber whose stack cannot be had (the process's fiber limit, say) is answered with why, for
/// the client's `join` to report: a panic here, in the poller, ended the whole run.
fn spawn_answering<R: Wire>(
    core: &WorkerCore,
    client: usize,
    req: u32,
    f: impl FnOnce() -> R + 'static,
) {
    let started = core.try_spawn_fiber(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let r = match r {
            Ok(v) => Ok(v),
            Err(p) => Err(DelegationError::Panicked(fiber_panic(p))),
        };
        if let Some(core) = crate::worker::core() {
            core.outbox().respond::<R>(client, req, r);
        }
    });
    if let Err(why) = started {
        core.outbox()
            .respond::<R>(client, req, Err(DelegationError::Panicked(why)));
    }
}

/// Starts `f(arg)` as a fiber on `worker` (this one included), moving `arg` there: how owned data
/// (a `Vec`, a `String`, a [`Trust`](crate::Trust)) reaches a fiber on another worker or rank.
/// Within a process `arg` moves by bytes; to another rank it is serialised (`postcard`).
///
/// # Panics
/// Outside a gossamer worker, or if `worker` does not exist. If `arg` cannot be serialised
/// for another rank, the fiber is not started and `join` reports the error.
#[track_caller]
pub fn spawn_on_with<A, F, R>(worker: WorkerId, arg: A, f: F) -> JoinHandle<R>
where
    A: Wire,
    F: FnOnce(A) -> R + NoRef,
    R: Wire,
{
    let core = core_or_panic("spawn_on_with");
    let w = worker.index();
    assert!(
        w < core.count,
        "gossamer: spawn_on_with: worker {w} does not exist (this runtime has {} workers)",
        core.count
    );
    if w == core.id {
        return spawn(move || f(arg));
    }
    let scope = tasks::current();
    if scope != 0 {
        tasks::started(scope);
        let handle = spawn_remote_with(core, w, arg, move |a: A| tasks::fiber(scope, || f(a)));
        handle.cell.scoped.set(true);
        return handle;
    }
    spawn_remote_with(core, w, arg, f)
}

/// The remote half of [`spawn_on_with`]: moves `arg` and stages the request that starts `f`.
fn spawn_remote_with<A, F, R>(core: &WorkerCore, w: usize, arg: A, f: F) -> JoinHandle<R>
where
    A: Wire,
    F: FnOnce(A) -> R + NoRef,
    R: Wire,
{
    let cell: Rc<JoinCell<R>> = JoinCell::new(w);
    let arg = match crate::trust::OutArg::new(core, w, arg) {
        Ok(a) => a,
        Err(e) => {
            cell.set(Err(e.to_string()), true);
            return JoinHandle {
                cell,
                _not_send: PhantomData,
            };
        }
    };
    let joined = Rc::into_raw(cell.clone()) as usize as u64;
    let req = core
        .pending()
        .add(w, fill_join::<R>, |data| data[0] = MaybeUninit::new(joined));
    core.pending().fiber_result(true);
    let code = Some(codeptr::offset_of(
        trampoline::<SpawnWith<A, F, R>>() as usize
    ));
    core.send_request(
        w,
        code,
        0,
        0,
        req,
        Src::closure(&f),
        Some(arg.src()),
        arg.encoded(),
    );
    JoinHandle {
        cell,
        _not_send: PhantomData,
    }
}

/// The requests of `spawn_on_with` of `F` with an argument `A`, answering an `R`.
struct SpawnWith<A, F, R>(Of<(A, F, R)>);

impl<A: Wire, F: FnOnce(A) -> R + Copy + 'static, R: Wire> Delegated for SpawnWith<A, F, R> {
    /// # Safety
    /// `rec` must be a record encoded by `spawn_on_with::<A, F, R>`.
    #[inline(always)]
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        _more: &mut RequestReader<'_>,
    ) {
        // SAFETY: the client copied one `F` into the captured bytes (this function's contract).
        let f: F = match unsafe { crate::trust::captured::<F>(rec) } {
            Ok(f) => f,
            Err(e) => {
                core.outbox().respond::<R>(client, rec.req, Err(e));
                return;
            }
        };
        // SAFETY: the argument bytes are one moved `A` or its encoding (as encoded above).
        let a: A = match unsafe { crate::trust::take_arg::<A>(core, client, rec) } {
            Ok(a) => a,
            Err(e) => {
                core.outbox().respond::<R>(client, rec.req, Err(e));
                return;
            }
        };
        spawn_answering(core, client, rec.req, move || f(a));
    }
}

/// Lets other fibers of this worker run, and lets the worker serve, answer and flush.
///
/// With no other fiber ready it returns at once, and every 16th such call polls (serves the
/// worker's incoming requests, completes its answers, publishes what it staged) before it
/// returns: the same cadence as switching to the scheduler, which polls once per 16 fibers it
/// resumes, without the cost of the switches. So yielding every few dozen operations of a loop
/// is cheap.
///
/// In a destructor that runs because the run ended with its fiber unfinished, it returns at
/// once: nothing else will run there.
///
/// # Panics
/// Inside a delegated closure or a callback (where no fiber may be suspended).
#[track_caller]
pub fn yield_now() {
    let core = core_or_panic("yield_now");
    core.yield_fiber();
}

/// Suspends the calling fiber until `cond()` returns `true`: a wait for a condition that no
/// message announces, such as a word that another rank writes on the host board
/// ([`host_board`](crate::host_board)). `gsm-collectives` waits so for its steps on the board.
///
/// The condition is tested at once, and then by the worker once per turn of its loop, between
/// fibers, until it holds; then the fiber is ready again (and tests it once more itself). So a
/// waiting fiber costs its worker no switch, and a worker whose fibers all wait is idle: it
/// yields its thread for a millisecond, then sleeps in spells of 20 µs (no doorbell rings for
/// a write to the board).
///
/// The condition must be cheap, must not block, and should only read (atomics of the board, say).
/// It is run as a callback is, on the fiber and on the worker alike: a blocking call in it
/// (`apply`, `join`, `recv`, …) panics with
/// [`BLOCKING_IN_DELEGATED`](crate::BLOCKING_IN_DELEGATED), and `try_apply` answers
/// [`BlockingInDelegatedContext`](crate::DelegationError::BlockingInDelegatedContext). It must be
/// made true by fibers of this job only: a job whose fibers all wait (`recv`, `join`, or here)
/// while no message is in flight and no condition holds is reported deadlocked
/// ([`Error::Deadlock`](crate::Error::Deadlock)) after a second; so do not wait here for a thread
/// or a process outside the job, nor for the clock (use [`sleep`]). A panic in the condition is
/// raised in the calling fiber.
///
/// # Panics
/// Outside a fiber, inside a delegated closure or a callback.
#[track_caller]
pub fn wait_for(mut cond: impl FnMut() -> bool) {
    let core = core_or_panic("wait_for");
    core.wait_for(&mut cond);
}

/// Suspends the calling fiber for at least `duration`, while its worker goes on with its other
/// fibers and serves its trustees (`std::thread::sleep` would stop all of that).
///
/// The worker looks at the clock between its other work; when it has nothing else to do it
/// sleeps until the first deadline (or, while other fibers of it wait in [`wait_for`], in
/// spells of 20 µs), so the fiber wakes up within the timer's slack (tens of microseconds) on
/// an idle worker, later on a busy one (after the fiber or request then running). A sleep ends by
/// itself, so it is no deadlock: while a fiber sleeps its worker is not counted idle, and a job
/// whose other fibers wait for the sleeper is not reported deadlocked. For the same reason a
/// run does not end while a fiber sleeps (see the module docs on detached fibers).
///
/// # Panics
/// Outside a fiber, inside a delegated closure or a callback (as [`wait_for`]).
#[track_caller]
pub fn sleep(duration: std::time::Duration) {
    let core = core_or_panic("sleep");
    core.sleep_until(std::time::Instant::now() + duration);
}

/// Whether this host runs more workers than it has CPUs (this rank's workers beyond the CPUs it
/// may use, or all its ranks' workers beyond the online CPUs). Code that waits by spinning
/// should then yield at once: the worker it waits for may need this CPU.
///
/// # Panics
/// Outside a gossamer worker.
#[track_caller]
pub fn oversubscribed() -> bool {
    core_or_panic("oversubscribed").shared.oversubscribed()
}

/// The host board of the current run (see `crate::board`'s docs): `None` in a job of one rank
/// or where this rank reaches no rank over `shm` and has no segment of its own.
///
/// # Panics
/// Outside a gossamer worker.
pub fn host_board() -> Option<std::sync::Arc<crate::board::Board>> {
    core_or_panic("host_board").shared.place.board.clone()
}

/// The worker the caller runs on.
///
/// # Panics
/// Outside a gossamer worker.
#[track_caller]
pub fn current_worker() -> WorkerId {
    WorkerId::new(core_or_panic("current_worker").id)
}

/// The number of workers in the job (every rank's).
///
/// # Panics
/// Outside a gossamer worker.
#[track_caller]
pub fn worker_count() -> usize {
    core_or_panic("worker_count").count
}

/// This process's rank in the job (0 for a program started without a launcher).
///
/// # Panics
/// Outside a gossamer worker: the rank is known once the run has joined the job, so ask inside
/// `run`/`spmd` (and return it from the body if `main` needs it afterwards).
#[track_caller]
pub fn rank() -> usize {
    core_or_panic("rank").shared.place.rank as usize
}

/// The number of ranks in the job.
///
/// # Panics
/// Outside a gossamer worker, as [`rank`].
#[track_caller]
pub fn rank_count() -> usize {
    core_or_panic("rank_count").shared.place.rank_workers.len()
}

/// The rank that worker `w` belongs to.
///
/// # Panics
/// Outside a gossamer worker, or if `w` does not exist.
#[track_caller]
pub fn rank_of(w: WorkerId) -> usize {
    let core = core_or_panic("rank_of");
    core.assert_worker("gossamer::rank_of", w.index());
    core.shared.place.rank_of(w.index()) as usize
}

/// The hostname of `rank`'s host, as the job's bootstrap learnt it (`gethostname`). Ranks with
/// equal hostnames share a host (and the `shm` fabric).
///
/// # Panics
/// Outside a gossamer worker, or if `rank` does not exist.
#[track_caller]
pub fn host_of_rank(rank: usize) -> String {
    let place = &core_or_panic("host_of_rank").shared.place;
    assert!(
        rank < place.hosts.len(),
        "gossamer: host_of_rank: rank {rank} does not exist (this job has {} ranks)",
        place.hosts.len()
    );
    place.hosts[rank].clone()
}

/// The workers of `rank`, as a range of global worker indices.
///
/// # Panics
/// Outside a gossamer worker, or if `rank` does not exist.
#[track_caller]
pub fn workers_of_rank(rank: usize) -> std::ops::Range<usize> {
    let place = &core_or_panic("workers_of_rank").shared.place;
    assert!(
        rank < place.rank_workers.len(),
        "gossamer: workers_of_rank: rank {rank} does not exist (this job has {} ranks)",
        place.rank_workers.len()
    );
    let first = place.first_of(rank as u32);
    first..first + place.rank_workers[rank] as usize
}

/// Properties currently alive on this worker's table (a diagnostic for tests and leak checks).
///
/// # Panics
/// Outside a gossamer worker.
#[track_caller]
pub fn live_properties_here() -> usize {
    core_or_panic("live_properties_here").live_properties()
}

/// Runs `op` in a fiber of its own on this worker and returns the promise of its result; a panic
/// of `op` is the promise's failure (waiting for it panics with the same message).
///
/// # Panics
/// Outside a gossamer worker.
#[track_caller]
pub fn spawn_async<T: 'static>(op: impl FnOnce() -> T + 'static) -> crate::Promise<T> {
    let (p, c) = crate::future::promise();
    // A detached fiber: its panic is caught here, so no handle is left holding it.
    drop(spawn(move || {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(op)) {
            Ok(v) => c.complete(v),
            Err(e) => c.fail(crate::worker::panic_message(&*e)),
        }
    }));
    p
}

impl WorkerId {
    /// The first worker of `rank`: where [`run`](crate::run)'s main runs on that rank, and the
    /// member of `rank` in a team of ranks.
    ///
    /// # Panics
    /// Outside a gossamer worker, or if `rank` does not exist.
    #[track_caller]
    pub fn first_of_rank(rank: usize) -> WorkerId {
        WorkerId::new(workers_of_rank(rank).start)
    }

    /// Every worker of `rank`, in order.
    ///
    /// # Panics
    /// Outside a gossamer worker, or if `rank` does not exist.
    #[track_caller]
    pub fn of_rank(rank: usize) -> impl Iterator<Item = WorkerId> {
        workers_of_rank(rank).map(WorkerId::new)
    }

    /// The rank this worker belongs to ([`rank_of`]).
    ///
    /// # Panics
    /// Outside a gossamer worker, or if this worker does not exist.
    #[track_caller]
    pub fn rank(self) -> usize {
        rank_of(self)
    }
}

thread_local! {
    /// The fiber that runs [`run`](crate::run)'s main on this worker thread, while it does
    /// (`None` elsewhere and under [`spmd`](crate::spmd)). A thread-local is right here: the
    /// worker thread is the one the fiber lives on, and the value names that fiber, so other
    /// fibers of the worker that read it between yields see that they are not it.
    static RUN_MAIN: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Marks the calling fiber as `run`'s main until the guard drops (also by unwinding).
pub(crate) struct RunMain(());

impl RunMain {
    pub(crate) fn enter() -> RunMain {
        let fiber = crate::worker::core().and_then(WorkerCore::current_fiber);
        RUN_MAIN.with(|m| m.set(fiber));
        RunMain(())
    }
}

impl Drop for RunMain {
    fn drop(&mut self) {
        let _ = RUN_MAIN.try_with(|m| m.set(None));
    }
}

/// Whether the caller is [`run`](crate::run)'s main itself (not a fiber it spawned, not an
/// [`spmd`](crate::spmd) body). That code runs once per rank, on the rank's first worker, while
/// the other workers only serve: a library whose calls need every worker (a collective over
/// all workers, say) refuses to start there instead of waiting for workers that never come.
pub fn in_run_main() -> bool {
    let Some(core) = crate::worker::core() else {
        return false;
    };
    let here = core.current_fiber();
    here.is_some() && RUN_MAIN.try_with(Cell::get).ok().flatten() == here
}
