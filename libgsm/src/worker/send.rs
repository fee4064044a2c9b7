//! Sending a request from this worker: staging it in the outbox, closing the gate so that the
//! looks of inline applies publish it, and the back-pressure on a fiber that issues faster than
//! its requests are taken or answered. Only a batch that filled its slot leaves from here; when
//! partly filled batches are published is the poller's choice (`poll.rs`).

use super::*;

impl WorkerCore {
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
        let backlog = self
            .outbox
            .push_request(dest, code, idx, gn, req, cap, arg, ser);
        if backlog > self.backlog_limit && self.can_block() {
            self.wait_for_room(|| self.outbox.backlog(dest) <= self.backlog_limit);
        }
    }

    /// Counts an `apply_then` request about to be staged; past
    /// [`MAX_THEN_IN_FLIGHT`](pending::MAX_THEN_IN_FLIGHT) unanswered ones, a fiber that may
    /// block waits until fewer are.
    #[inline]
    pub(crate) fn then_issued(&self) {
        if self.pending.then_issued() && self.can_block() {
            self.wait_for_room(|| self.pending.then_room());
        }
    }

    /// Back-pressure for a fiber that issues faster than its requests are taken or answered:
    /// polls (which publishes what is staged, serves, and completes answers) and yields until
    /// `room` holds or the runtime stops. When nothing moves it gives the thread away: on an
    /// oversubscribed machine the trustee may need this core.
    #[cold]
    #[inline(never)]
    pub(super) fn wait_for_room(&self, room: impl Fn() -> bool) {
        while !room() && !self.stopping() {
            if !self.guarded(true, || self.poll()) {
                std::thread::yield_now();
            }
            self.yield_fiber();
        }
    }
}
