//! The fiber scheduler, a part of the worker with its own state: the fibers and their stacks, the
//! ready queue, the fibers sleeping until a deadline ([`crate::sleep`]) and those waiting in
//! [`crate::wait_for`]. The worker core owns one and drives it: it checks that the caller may
//! block, polls and decides when to run fibers (`idle.rs`, `poll.rs`); the scheduler only keeps
//! and switches fibers, and calls down to nothing of the worker but [`Context`] (a `wait_for`
//! condition is tested in callback context).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::context::{CALLBACK, Context};
use crate::fiber::{self, Co, StackPool};

/// The longest an idle worker sleeps while fibers of it wait in [`crate::wait_for`]: their
/// conditions are set by other processes through the host board, which ring no doorbell. The
/// 20 µs that `gsm-collectives`' board waits slept before the runtime took them over.
pub(super) const WAITER_SLEEP: Duration = Duration::from_micros(20);

/// A fiber suspended in [`crate::wait_for`] and its condition, which lives on that fiber's
/// stack: the fiber stays suspended while its entry exists (only the scheduler, on taking the
/// entry out, makes it ready), and teardown forgets the entries before it drops the fibers.
struct Waiter {
    fiber: u32,
    cond: *mut (dyn FnMut() -> bool + 'static),
    /// Where the scheduler leaves a panic of the condition (on the same fiber's stack), which
    /// the fiber then raises without testing again (so the panic is reported once).
    panic: *mut Option<Box<dyn std::any::Any + Send>>,
}

impl Waiter {
    /// Tests the condition in condition context (see [`condition`]): a panic is kept for the
    /// fiber and counts as true.
    ///
    /// # Safety
    /// The fiber that owns `cond` and `panic` is suspended in `wait_for` (see the type's docs).
    unsafe fn holds(&self, context: &Context) -> bool {
        // SAFETY: the caller's; both live in the suspended fiber's frame.
        unsafe {
            if (*self.panic).is_some() {
                return true;
            }
            match condition(context, &mut *self.cond) {
                Ok(holds) => holds,
                Err(p) => {
                    *self.panic = Some(p);
                    true
                }
            }
        }
    }
}

/// Tests a `wait_for` condition in callback context, on the fiber and on the worker alike. The
/// worker tests it between fibers, where nothing may block; a blocking call in it then panicked
/// with "called outside a fiber" (the caller was in a fiber) while the same call passed in the
/// fiber's own first test. Now it is refused in every test with
/// [`BLOCKING_IN_DELEGATED`](crate::error::BLOCKING_IN_DELEGATED), which names conditions, and
/// `try_apply` there answers `BlockingInDelegatedContext`. A panic in `cond` is caught, with the
/// level put back, for the caller to raise in the fiber.
fn condition(context: &Context, cond: &mut dyn FnMut() -> bool) -> std::thread::Result<bool> {
    context.caught(CALLBACK, cond)
}

/// One worker's fibers: who is ready, who runs, who sleeps, who waits for a condition.
///
/// All mutation goes through `Cell`/`RefCell`, and no borrow is held while a fiber or a
/// condition runs.
pub(crate) struct Scheduler {
    fibers: RefCell<Vec<Option<Co>>>,
    free_fibers: RefCell<Vec<u32>>,
    ready: RefCell<VecDeque<u32>>,
    current: Cell<Option<u32>>,
    /// Set while [`drop_fibers`](Self::drop_fibers) drops the unfinished fibers (see
    /// `worker::fiber_panic`).
    dropping: Cell<bool>,
    stacks: RefCell<StackPool>,
    /// Fibers suspended in `wait_for`, with their conditions, and how many there are (tested
    /// once per loop turn).
    waiting: RefCell<Vec<Waiter>>,
    waiters: Cell<usize>,
    /// Of those, the deadlines of fibers in `wait_in_flight` (always "now"): their wait ends by
    /// itself, so while there are any the worker is never quiet and naps only briefly.
    sleepers: RefCell<Vec<Instant>>,
    /// Fibers in `sleep`, by deadline (and a sequence number, for equal deadlines): one clock
    /// read per loop turn tells whether any is due, where a `wait_for` per sleeper cost a clock
    /// read per sleeper per turn (a client with many sleeping fibers spent most of its turns on
    /// them). While there are any the worker is never quiet (a job whose fibers wait for a
    /// sleeper is no deadlock), and an idle worker sleeps until the first.
    timers: RefCell<BTreeMap<(Instant, u64), u32>>,
    timer_seq: Cell<u64>,
}

/// Marks the scheduler as running no fiber when dropped (see `run_ready`).
struct OutOfFiber<'a>(&'a Cell<Option<u32>>);

impl Drop for OutOfFiber<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.set(None);
        fiber::clear_current();
    }
}

impl Scheduler {
    /// A scheduler with no fibers, whose fibers get stacks of `stack` bytes.
    pub(super) fn new(stack: usize) -> Self {
        Scheduler {
            fibers: RefCell::new(Vec::new()),
            free_fibers: RefCell::new(Vec::new()),
            ready: RefCell::new(VecDeque::new()),
            current: Cell::new(None),
            dropping: Cell::new(false),
            stacks: RefCell::new(StackPool::new(stack)),
            waiting: RefCell::new(Vec::new()),
            waiters: Cell::new(0),
            sleepers: RefCell::new(Vec::new()),
            timers: RefCell::new(BTreeMap::new()),
            timer_seq: Cell::new(0),
        }
    }

    /// The size of a fiber's stack.
    pub(super) fn stack_size(&self) -> usize {
        self.stacks.borrow().size()
    }

    /// Starts a fiber and makes it ready, or says why its stack could not be had.
    pub(super) fn spawn(&self, f: impl FnOnce() + 'static) -> Result<(), String> {
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
    #[inline(always)]
    pub(super) fn current(&self) -> Option<u32> {
        self.current.get()
    }

    /// Makes fiber `id` ready.
    #[inline]
    pub(super) fn wake(&self, id: u32) {
        self.ready.borrow_mut().push_back(id);
    }

    /// Whether no fiber is ready to run.
    #[inline]
    pub(super) fn nothing_ready(&self) -> bool {
        self.ready.borrow().is_empty()
    }

    /// Whether [`drop_fibers`](Self::drop_fibers) is dropping the unfinished fibers.
    #[inline]
    pub(super) fn dropping(&self) -> bool {
        self.dropping.get()
    }

    /// Runs up to `max` ready fibers, each until it suspends or ends; how many ran.
    pub(super) fn run_ready(&self, max: usize) -> usize {
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
                let _out = OutOfFiber(&self.current);
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

    /// Suspends fiber `id` (the running one) until `cond()` holds, tested in callback context
    /// of `context`: by the fiber first, then by the worker once per loop turn
    /// ([`wake_waiters`](Self::wake_waiters)). `board`: this worker's word of
    /// `Shared::board_fresh`, zeroed when the first fiber starts waiting.
    pub(super) fn wait_for(
        &self,
        id: u32,
        context: &Context,
        board: &AtomicU64,
        cond: &mut dyn FnMut() -> bool,
    ) {
        let mut panic: Option<Box<dyn std::any::Any + Send>> = None;
        while !condition(context, cond).unwrap_or_else(|p| std::panic::resume_unwind(p)) {
            let short: *mut (dyn FnMut() -> bool + '_) = cond;
            // SAFETY: only the lifetime is erased. The entry is taken out of `waiting` before
            // this fiber is made ready again, so the pointers are used only while this frame is
            // suspended below (its stack intact); teardown forgets every entry before it drops
            // the fibers.
            let cond: *mut (dyn FnMut() -> bool + 'static) = unsafe { std::mem::transmute(short) };
            let mut waiting = self.waiting.borrow_mut();
            if waiting.is_empty() {
                board.store(0, Ordering::SeqCst);
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

    /// [`wait_for`](Self::wait_for) for an operation in flight that no message counter sees:
    /// meanwhile the worker counts as having a sleeper due now, so it is neither found quiet
    /// (no false deadlock) nor parked for long.
    pub(super) fn wait_in_flight(
        &self,
        id: u32,
        context: &Context,
        board: &AtomicU64,
        cond: &mut dyn FnMut() -> bool,
    ) {
        let now = Instant::now();
        self.sleepers.borrow_mut().push(now);
        let _sleeping = Sleeping(&self.sleepers, now);
        self.wait_for(id, context, board, cond);
    }

    /// Suspends fiber `id` (the running one) until `until`: an entry in the timers, which the
    /// loop looks at once per turn ([`wake_timers`](Self::wake_timers)).
    pub(super) fn sleep_until(&self, id: u32, until: Instant) {
        if Instant::now() >= until {
            return;
        }
        let key = (until, self.timer_seq.get());
        self.timer_seq.set(key.1 + 1);
        self.timers.borrow_mut().insert(key, id);
        let _timer = Timer(&self.timers, key);
        // Only the timer's firing takes the entry out; any other wake-up of this fiber is
        // spurious and it suspends again.
        while self.timers.borrow().contains_key(&key) {
            fiber::suspend();
        }
    }

    /// Makes ready every sleeping fiber whose deadline has passed; whether there was one. One
    /// borrow when none sleeps, one clock read when some do.
    #[inline]
    pub(super) fn wake_timers(&self) -> bool {
        let mut timers = self.timers.borrow_mut();
        let Some((&(first, _), _)) = timers.first_key_value() else {
            return false;
        };
        let now = Instant::now();
        if first > now {
            return false;
        }
        while let Some(e) = timers.first_entry() {
            if e.key().0 > now {
                break;
            }
            let id = e.remove();
            self.ready.borrow_mut().push_back(id);
        }
        true
    }

    /// Whether a sleeping fiber's deadline has passed (tested while spinning).
    #[inline]
    pub(super) fn timer_due(&self) -> bool {
        self.timers
            .borrow()
            .first_key_value()
            .is_some_and(|(&(t, _), _)| t <= Instant::now())
    }

    /// How many fibers wait in `wait_for` (one load).
    #[inline(always)]
    pub(super) fn waiters(&self) -> usize {
        self.waiters.get()
    }

    /// Whether fibers wait in `wait_for` or sleep.
    #[inline]
    pub(super) fn has_waits(&self) -> bool {
        self.waiters.get() > 0 || !self.timers.borrow().is_empty()
    }

    /// Whether fibers sleep or wait for an operation in flight: waits that end by themselves,
    /// so the worker is not quiet.
    #[inline]
    pub(super) fn has_timed(&self) -> bool {
        !self.sleepers.borrow().is_empty() || !self.timers.borrow().is_empty()
    }

    /// How long an idle worker may sleep: until the first sleeper's deadline when no fiber
    /// waits in `wait_for` for anything but the clock (at most `longest`), else
    /// [`WAITER_SLEEP`] (board conditions ring no doorbell).
    pub(super) fn waiter_nap(&self, longest: Duration) -> Duration {
        let sleepers = self.sleepers.borrow();
        if sleepers.len() < self.waiters.get() {
            return WAITER_SLEEP;
        }
        let first = self.timers.borrow().first_key_value().map(|(&(t, _), _)| t);
        sleepers
            .iter()
            .copied()
            .chain(first)
            .min()
            .map_or(longest, |t| t.saturating_duration_since(Instant::now()))
            .min(longest)
    }

    /// Makes ready every fiber in `wait_for` whose condition holds (tested in callback context
    /// of `context`); returns whether there was one. One load per loop turn when no fiber
    /// waits. `board` as in [`wait_for`](Self::wait_for), set to `u64::MAX` when none waits
    /// any more.
    #[inline]
    pub(super) fn wake_waiters(&self, context: &Context, board: &AtomicU64) -> bool {
        self.waiters.get() > 0 && self.wake_waiters_slow(context, board)
    }

    #[cold]
    #[inline(never)]
    fn wake_waiters_slow(&self, context: &Context, board: &AtomicU64) -> bool {
        // Taken out while the conditions run: no borrow is held across user code.
        let mut waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        let before = waiting.len();
        waiting.retain(|w| {
            // SAFETY: an entry's fiber is suspended in `wait_for` (see `Waiter`).
            let go = unsafe { w.holds(context) };
            if go {
                self.wake(w.fiber);
            }
            !go
        });
        let woke = waiting.len() < before;
        if waiting.is_empty() {
            board.store(u64::MAX, Ordering::SeqCst);
        }
        self.waiters.set(waiting.len());
        *self.waiting.borrow_mut() = waiting;
        woke
    }

    /// Whether a fiber in `wait_for` could go on (tested while spinning, and before a quiet
    /// report), without making it ready.
    pub(super) fn waiter_ready(&self, context: &Context) -> bool {
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
            unsafe { Waiter { fiber, cond, panic }.holds(context) }
        })
    }

    /// Live fibers, and of them those ready to run (for the report of a deadlock).
    pub(super) fn counts(&self) -> (usize, usize) {
        let live = self.fibers.borrow().iter().filter(|f| f.is_some()).count();
        (live, self.ready.borrow().len())
    }

    /// Drops every unfinished fiber (at the end of a run), after forgetting the waits whose
    /// conditions and timers live on their stacks (see `Waiter`). A fiber's destructors run
    /// with [`dropping`](Self::dropping) set; what they panic with is swallowed.
    pub(super) fn drop_fibers(&self) {
        self.waiting.borrow_mut().clear();
        self.waiters.set(0);
        self.timers.borrow_mut().clear();
        let fibers = std::mem::take(&mut *self.fibers.borrow_mut());
        self.dropping.set(true);
        for co in fibers.into_iter().flatten() {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(co)));
        }
        self.dropping.set(false);
    }
}

/// A sleeping fiber's entry in `timers`, taken out when its wait ends early (unwinding).
struct Timer<'a>(&'a RefCell<BTreeMap<(Instant, u64), u32>>, (Instant, u64));

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.0.borrow_mut().remove(&self.1);
    }
}

/// A sleeper's deadline in `sleepers`, taken out again when the wait ends (unwinding too).
struct Sleeping<'a>(&'a RefCell<Vec<Instant>>, Instant);

impl Drop for Sleeping<'_> {
    fn drop(&mut self) {
        let mut v = self.0.borrow_mut();
        if let Some(i) = v.iter().position(|&t| t == self.1) {
            v.swap_remove(i);
        }
    }
}
