//! The worker's scheduler loop (`run_loop`) and what it does when it has nothing to do: spin,
//! yield, sleep on its doorbell; local quiescence, the stall and deadlock watch. See
//! ARCHITECTURE.md.

use super::*;

impl WorkerCore {
    pub(super) fn has_incoming(&self) -> bool {
        !self.sched.nothing_ready()
            || self.inbox.waiting(&self.shared.lanes)
            || self.outbox.loopback_dirty()
    }

    pub(super) fn has_backlog(&self) -> bool {
        self.outbox.has_backlog()
    }

    /// Whether this worker has nothing left to do: no ready fiber, no unanswered request of its
    /// own (but `spawn_on`s, see `fiber_results`), nothing staged or queued outgoing, nothing
    /// waiting in its rings or loopback queue.
    pub(super) fn locally_quiet(&self) -> bool {
        !self.sched.has_timed()
            && self.reactor.waiting() == 0
            && self.pending.settled()
            && !self.has_incoming()
            && !self.outbox.any_dirty()
    }

    /// While counting (draining, or watching for a deadlock): reports this worker quiet, and
    /// when every worker is: stops the runtime if the roots are done, reports a deadlock if they
    /// are not (in a job of one rank, after [`STALL_CONFIRM`]), or in a larger job leaves the
    /// decision to the main thread with the other ranks (`runtime::quiesce::terminate`).
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
    pub(super) fn try_finish(&self) {
        let sh = &self.shared;
        let a = sh.activity.load(Ordering::SeqCst);
        if self.sched.waiters() > 0 {
            let wave = sh.waves.load(Ordering::SeqCst);
            if self.sched.waiter_ready(&self.context) {
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
    pub(super) fn stalled(&self, a: u64) {
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
    /// Counting (see [`try_finish`](Self::try_finish)) is on while draining, and while watching for
    /// a deadlock: a worker about to sleep with roots left turns watching on, and the next worker
    /// that does work turns it off (after its bump), so that a busy job pays for it once per sleep,
    /// not once per turn. Only at its first sleep since it last did work, though: a worker that a
    /// count woke (to report again) and that goes back to sleep has nothing new to watch for.
    /// Otherwise, with two workers busy and six idle (8 on 2 CPUs), every sleep turned watching on,
    /// every count woke the sleepers, and each of them turned it on again as it went back to sleep:
    /// the idle workers kept waking each other and took CPU time from the busy two. A deadlock is
    /// still seen: the last worker to do work has not slept since, and turns watching on at its
    /// first sleep, and nobody turns it off again. Soundness as with draining alone: a turn that
    /// did work and saw counting on bumps after its work; a turn that saw counting off marks this
    /// worker, and its next turn that sees counting on bumps before it records itself quiet. So
    /// work done while counting was off is always followed by a bump of its worker before that
    /// worker can agree with the others on a quiet `activity` value. A turn that did work and saw
    /// counting off also withdraws this worker's quiet report ([`not_quiet`](Self::not_quiet)): a
    /// report made just before another worker turned counting off carries the value of that
    /// worker's bump, and without the withdrawal the others, recording the same value once counting
    /// is on again, would agree with it while this worker runs what that work made ready (a fiber
    /// computing for seconds, taken for a stalled job).
    pub(crate) fn run_loop(&self) {
        let mut idle = 0u32;
        let mut off_seen = true;
        // When this worker's idle spell reached the sleeping stage (see `WAITER_YIELDING`).
        let mut sleepy_since: Option<Instant> = None;
        // Whether this idle spell has already had its chance to turn watching on (see below).
        let mut watched = false;
        // When this idle spell began, and whether the last one was short (see `LINGER`).
        let mut idle_since: Option<Instant> = None;
        let mut recent = false;
        // This spell's samples of the host's runnable threads, for the spin and the linger
        // (`Shared::host_fits`): taken once each, at the spell's first idle turn that needs it.
        let mut fits: Option<bool> = None;
        let mut linger_fits: Option<bool> = None;
        // Sleeps in a row that ended with nothing to do (see `NAP`).
        let mut naps = 0u32;
        while !self.stopping() {
            let ran = self.sched.run_ready(POLL_EVERY);
            let polled = self.guarded(true, || self.poll());
            let worked = ran > 0
                || polled
                || self.reactor.turn(self)
                || self.sched.wake_timers()
                || self
                    .sched
                    .wake_waiters(&self.context, &self.shared.board_fresh[self.local]);
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
                recent = idle_since.take().is_none_or(|t| t.elapsed() < LINGER);
                watched = false;
                fits = None;
                linger_fits = None;
                naps = 0;
                continue;
            }
            idle += 1;
            let mut spin = sh.spin();
            if spin != SPIN && *fits.get_or_insert_with(|| sh.may_spin()) {
                spin = SPIN;
            }
            if idle < spin {
                // Spin lightly: look only at ring headers (and the ready queue) until something
                // arrives, instead of a whole poll per turn, so that an answer is noticed within
                // a few nanoseconds of landing. A backlog needs the full poll to retry flushing.
                if !self.has_backlog() {
                    for _ in 0..LIGHT_SPINS {
                        if self.has_incoming()
                            || self.stopping()
                            || self.sched.timer_due()
                            || self.sched.waiter_ready(&self.context)
                        {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                } else {
                    std::hint::spin_loop();
                }
            } else if idle < spin + YIELDS
                || (self.sched.has_waits()
                    // Not for sleepers whose first deadline is a millisecond away or more: they
                    // sleep until it (a server's housekeeping timer would keep it on the CPU).
                    && self.sched.waiter_nap(WAITER_YIELDING) < WAITER_YIELDING
                    && sleepy_since.get_or_insert_with(Instant::now).elapsed() < WAITER_YIELDING)
                || (spin == SPIN && {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    recent
                        && since.elapsed() < LINGER
                        && *linger_fits.get_or_insert_with(|| sh.may_linger())
                })
            {
                std::thread::yield_now();
            } else {
                // A spell that reaches a sleep is measured from here at the latest.
                idle_since.get_or_insert_with(Instant::now);
                let t = if self.has_backlog() {
                    Duration::from_micros(50)
                } else if self.sched.has_waits() {
                    self.sched.waiter_nap(Duration::from_millis(20))
                } else {
                    NAP.saturating_mul(1 << naps.min(NAP_DOUBLINGS))
                };
                if !watched {
                    watched = true;
                    self.watch_for_deadlock();
                }
                // A fabric whose sockets this worker reads hands them to its own thread before
                // the worker sleeps; if it found something on the way, there is work instead.
                if !self.progress.is_empty() && self.fabric_turn(Turn::Park) {
                    continue;
                }
                let sh = &self.shared;
                sh.awake.fetch_sub(1, Ordering::Relaxed);
                self.reactor.park(self, &sh.doors[self.local], t, naps, || {
                    !self.has_incoming() && !self.stopping()
                });
                sh.awake.fetch_add(1, Ordering::Relaxed);
                if self.has_incoming() || self.stopping() {
                    // Rung: look closely for a while, the next batch is likely near.
                    idle = spin.saturating_sub(4);
                    naps = 0;
                    fits = None;
                    linger_fits = None;
                } else {
                    // The timeout, with nothing come: sleep again at once, longer each time, with
                    // this spell's samples of the host kept. Spinning, yielding and reading the
                    // host's load after every timeout was most of an idle rank's CPU.
                    idle = SPIN + YIELDS;
                    naps += 1;
                }
            }
        }
    }

    /// Withdraws this worker's quiet report, if it has one (see [`run_loop`](Self::run_loop)):
    /// a test of a flag of this worker per turn that did work while counting is off, so that a
    /// busy worker touches no shared line for it, and a store only after a report.
    #[inline]
    pub(super) fn not_quiet(&self) {
        if self.reported.replace(false) {
            self.shared.quiet[self.local].store(u64::MAX, Ordering::SeqCst);
        }
    }

    /// Turns watching on (see [`run_loop`](Self::run_loop)) before this worker sleeps, if roots
    /// are left and it is not on already.
    #[inline]
    pub(super) fn watch_for_deadlock(&self) {
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
    pub(super) fn waits(&self) -> Vec<String> {
        let mail = self.mail.borrow();
        let mut waits = mail.waits();
        let (live, ready) = self.sched.counts();
        let board = self.sched.waiters();
        if board > 0 {
            waits.push(format!(
                "{board} fiber{} wait{} in gossamer::wait_for (a collective's step on the host \
                 board, say)",
                if board == 1 { "" } else { "s" },
                if board == 1 { "s" } else { "" }
            ));
        }
        let others = live.saturating_sub(mail.waiters() + board + ready);
        if others > 0 {
            waits.push(format!(
                "{others} other fiber{} wait{} (a join, say)",
                if others == 1 { "" } else { "s" },
                if others == 1 { "s" } else { "" }
            ));
        }
        waits
    }
}
