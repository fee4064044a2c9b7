//! The poller: one look at incoming rings, outgoing queues and the loopback queue, and the
//! fair sharing of the worker's time between the requests it serves and its own fibers.
//! See ARCHITECTURE.md.

use super::*;

impl WorkerCore {
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
        match self.context.caught(CALLBACK, f) {
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
    pub(crate) fn callback_panicked(&self, p: &(dyn std::any::Any + Send)) {
        self.shared.fail(Error::Panicked {
            rank: self.shared.place.rank,
            worker: self.id,
            message: panic_message(p),
        });
    }

    /// [`poll`](Self::poll); `requests`: also publish the request batches being filled (responses
    /// are always published).
    pub(super) fn poll_flushing(&self, requests: bool) -> bool {
        // A poll looks at every ring, so inline applies count afresh from the end of this one
        // (below), by the requests it served: a worker whose clients keep its rings full would
        // otherwise serve a whole poll's worth of their requests (up to thousands) for every
        // `INLINE_POLL` applies of its own fibers. Serving them one for one is the fair split
        // between this worker's fibers and its clients, and the cheaper one for the worker, whose
        // inline applies cost less than served requests. Work waiting in the loopback queue
        // keeps its claim on the next inline apply (only `inline_turn` drops it, once the queue
        // is empty).
        let served_before = self.inbox.served();
        // A fabric that reads its sockets on this thread fills the rings now (`Turn::Poll`).
        if !self.progress.is_empty() {
            self.fabric_turn(Turn::Poll);
        }
        let mut work = self.inbox.serve_all(self);
        work |= self.inbox.complete_all(self);
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
            self.grant_share(self.inbox.served().wrapping_sub(served_before));
        }
        work
    }

    /// Lets this worker's fibers run `k` inline applies (at least `INLINE_POLL`, at most
    /// `MAX_SHARE`) before an inline apply looks at the rings again: a first chunk of them now,
    /// the rest by [`SHARE_CHUNK`] from `inline_turn` until [`SHARE_TIME`] has passed.
    pub(super) fn grant_share(&self, k: u32) {
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
    pub(super) fn next_share_chunk(&self) -> bool {
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
    pub(super) fn publish_traffic(&self) {
        self.outbox.publish_sent();
        self.inbox.publish_received(&self.shared);
    }

    /// A ring or record from worker `peer` broke the protocol: the job cannot go on safely.
    #[cold]
    pub(crate) fn ring_broken(&self, peer: usize, detail: &str) {
        self.shared.ring_broken(self.id, peer, detail);
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
    /// queues on every inline apply cost more than the closure.
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

    /// The run is stopping (it failed, or a peer vanished) while a fiber applies inline in a
    /// loop that may never yield (waiting for a flag that a lost peer was to set): it is
    /// suspended for good, as a blocked fiber would be, so that its worker can stop and drop it.
    /// Left running, it kept its rank alive after the job had failed.
    #[cold]
    #[inline(never)]
    fn stop_inline_loop(&self) {
        fiber::suspend();
    }

    /// The rare turn of [`inline_ran`](Self::inline_ran): polls if a batch has arrived, then
    /// drains the loopback queue if it has work (`loopback`: it had before the poll). Returns
    /// whether the loopback queue is empty now.
    #[cold]
    #[inline(never)]
    pub(super) fn inline_turn(&self, loopback: bool) -> bool {
        if self.stopping() && self.can_block() {
            self.stop_inline_loop();
        }
        if !loopback && self.next_share_chunk() {
            return true;
        }
        // While the loopback queue has work the counter keeps saying so, also to the inline
        // applies that callbacks make during the poll below.
        self.inline_runs.set(if loopback { INLINE_POLL } else { 0 });
        if self.can_block() {
            if self.inbox.waiting(&self.shared.lanes) {
                let k = self.inline_polls.get().wrapping_add(1);
                self.inline_polls.set(k);
                self.guarded(false, || self.poll_flushing(k % INLINE_REQUEST_FLUSH == 0));
            } else if !loopback {
                self.look_later();
            }
        }
        // The counter says whether the loopback queue has work now (the poll may have queued
        // some, or drained it), so the turns that only poll skip looking at it.
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
    /// A worker running a loop of cheap inline applies that nobody sends to spent a good part of
    /// its time looking (a look is a chain of dependent loads through the ring's state, several
    /// times the cost of an apply, and few looks found a batch).
    /// A client that keeps sending finds the worker looking every `INLINE_POLL` applies as before
    /// (its batches end each streak within a few looks), so round trips to a worker busy with
    /// inline applies keep their latency. A request that arrives after a quiet spell waits at
    /// most about `2 × LOOK_GAP` more, or 32 applies when those are slower; yields keep their
    /// own cadence of polls throughout (see `in_share`). Every step also publishes
    /// what the worker staged for others, so that a loop of inline applies that never yields
    /// cannot hold back its own remote requests (and wait on them) forever.
    #[cold]
    pub(super) fn look_later(&self) {
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
    pub(super) fn loopback_pending(&self) {
        self.door.close_gate();
        self.inline_runs.set(INLINE_POLL);
    }

    /// Serves the requests waiting in the loopback queue and completes the responses they
    /// produce, up to a bound. Returns whether work is left.
    pub(super) fn drain_loopback(&self) -> bool {
        let me = self.id;
        for _ in 0..1024 {
            if !self.outbox.loopback_dirty() {
                return false;
            }
            if let Some(b) = self.outbox.take_loopback(true) {
                self.inbox.serve_batch(self, me, &b, true);
                self.outbox.recycle_loopback(true, b);
            }
            if let Some(b) = self.outbox.take_loopback(false) {
                self.inbox.complete_batch(self, me, &b, true);
                self.outbox.recycle_loopback(false, b);
            }
        }
        self.outbox.loopback_dirty()
    }

    /// Publishes every staged batch now (`gossamer::flush`).
    pub(crate) fn flush_now(&self) {
        self.flush_all(true);
        self.publish_traffic();
    }

    /// Publishes the staged batches to every other worker (request batches only if `requests`);
    /// returns whether any slot was published. What is left for a later flush closes the gate,
    /// so that the looks of inline applies make it.
    pub(super) fn flush_all(&self, requests: bool) -> bool {
        let done = self.outbox.flush_all(requests);
        if done.left {
            self.door.close_gate();
        }
        done.any
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
        let Some(id) = self.sched.current() else {
            return;
        };
        if self.sched.nothing_ready()
            && !self.stopping()
            && !self.shared.draining.load(Ordering::Relaxed)
        {
            let n = self.quick_yields.get() + 1;
            if n < POLL_EVERY as u32 || self.in_share() {
                self.quick_yields.set(n);
                return;
            }
            self.quick_yields.set(0);
            self.guarded(false, || self.poll());
            if self.sched.nothing_ready() {
                return;
            }
        }
        self.sched.wake(id);
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
    fn in_share(&self) -> bool {
        let r = self.inline_runs.get();
        r != self.runs_at_yield.replace(r)
            && ((r < 0 && self.empty_looks.get() == 0) || self.share_left.get() > 0)
    }
}
