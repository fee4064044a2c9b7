//! The fiber scheduler: spawning, waking, yielding, the ready queue and the fibers waiting in
//! `wait_for` or `sleep`.

use super::*;

impl WorkerCore {
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
    /// ([`in_share`](Self::in_share)), or its yields would take back what the share gave. A
    /// fiber made ready by that poll, a draining or stopping runtime, all take the real switch.
    /// Switching to the scheduler and back on such yields cost a loop that yields often a large
    /// part of its time.
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
    /// its worker would serve its clients only once that fiber had yielded thousands of times.
    /// A back-off of the looks at empty rings (`look_later`) is no share: yields keep their
    /// cadence through it.
    #[inline]
    pub(super) fn in_share(&self) -> bool {
        let r = self.inline_runs.get();
        r != self.runs_at_yield.replace(r)
            && ((r < 0 && self.empty_looks.get() == 0) || self.share_left.get() > 0)
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

    /// Suspends the running fiber until `cond()` holds, for an operation in flight that no
    /// message counter sees (a segment's RMA on a fabric): meanwhile the worker counts as having
    /// a sleeper due now, so it is neither found quiet (no false deadlock) nor parked for long.
    #[track_caller]
    pub(crate) fn wait_in_flight(&self, cond: &mut dyn FnMut() -> bool) {
        if cond() {
            return;
        }
        let now = Instant::now();
        self.sleepers.borrow_mut().push(now);
        let _sleeping = Sleeping(&self.sleepers, now);
        self.wait_for(cond);
    }

    /// Suspends the running fiber until `until` ([`crate::sleep`]): an entry in the worker's
    /// timers, which the loop looks at once per turn ([`wake_timers`](Self::wake_timers)).
    #[track_caller]
    pub(crate) fn sleep_until(&self, until: Instant) {
        self.assert_can_block();
        let Some(id) = self.current.get() else {
            return;
        };
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

    /// Whether fibers wait in [`wait_for`](Self::wait_for) or sleep.
    #[inline]
    pub(super) fn has_waits(&self) -> bool {
        self.waiters.get() > 0 || !self.timers.borrow().is_empty()
    }

    /// How long an idle worker may sleep: until the first sleeper's deadline when no fiber
    /// waits in [`wait_for`](Self::wait_for) for anything but the clock (at most `longest`),
    /// else [`WAITER_SLEEP`] (board conditions ring no doorbell).
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

    /// Tests a [`wait_for`](Self::wait_for) condition in callback context, on the fiber and on
    /// the worker alike. The worker tests it between fibers, where nothing may block; a
    /// blocking call in it then panicked with "called outside a fiber" (the caller was in a
    /// fiber) while the same call passed in the fiber's own first test. Now it is refused in
    /// every test with [`BLOCKING_IN_DELEGATED`], which names conditions, and `try_apply`
    /// there answers `BlockingInDelegatedContext`. A panic in `cond` is caught, with the
    /// level put back, for the caller to raise in the fiber.
    pub(super) fn condition(&self, cond: &mut dyn FnMut() -> bool) -> std::thread::Result<bool> {
        self.context.caught(CALLBACK, cond)
    }

    /// Makes ready every fiber in [`wait_for`](Self::wait_for) whose condition holds; returns
    /// whether there was one. One load per loop turn when no fiber waits.
    #[inline]
    pub(super) fn wake_waiters(&self) -> bool {
        self.waiters.get() > 0 && self.wake_waiters_slow()
    }

    #[cold]
    #[inline(never)]
    pub(super) fn wake_waiters_slow(&self) -> bool {
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
    pub(super) fn waiter_ready(&self) -> bool {
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
}

/// A sleeping fiber's entry in `timers`, taken out when its wait ends early (unwinding).
struct Timer<'a>(
    &'a RefCell<std::collections::BTreeMap<(Instant, u64), u32>>,
    (Instant, u64),
);

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
