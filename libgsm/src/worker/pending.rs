//! The pending table: this worker's requests that await an answer, by request id, each with the
//! worker that must answer it and the completer its answer runs; and the counts that bound and
//! report them. It runs no completer itself: the inbox takes an entry out ([`Pending::take`]) and
//! runs it in callback context.

use std::cell::{Cell, RefCell};
use std::mem::MaybeUninit;

use super::WorkerCore;
use crate::wire::record::{Byte, RESP_CONT};

/// `apply_then` requests one worker may have unanswered before a fiber that issues one more
/// waits (polling, so answers come in and run their callbacks) until fewer are: the pending
/// queue's bound of the thesis (§3.2.4: the issuing fiber yields when its pending queue is
/// full). Without it nothing bounds them: a fiber that issues faster than it is answered and
/// yields rarely piles up pending entries, and answers queued on the trustee (whose full
/// response ring the client empties only at its rare polls), and runs slower than with the
/// bound. A full ring of continuations, like the fibers' share of a poll.
/// Blocking requests (`apply`, `join`) are not counted: each holds a fiber, so fibers bound
/// them, and a spawned fiber's answer may wait on work that the spawner has yet to issue.
pub(crate) const MAX_THEN_IN_FLIGHT: usize = 1 << 14;

/// Inline storage of a pending entry.
pub(crate) type Data = [MaybeUninit<u64>; 4];
/// Completes a pending entry with `(status, body)`, on the worker that made it.
pub(crate) type Completer = unsafe fn(&WorkerCore, &mut Data, u8, &[Byte]);

#[derive(Debug)]
struct Slot {
    complete: Option<Completer>,
    data: Data,
    /// The worker the request went to: only its response completes the entry.
    dest: u32,
}

/// The slots, and the free ones among them.
#[derive(Debug, Default)]
struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// This worker's requests awaiting an answer (one per fiber-blocking `apply`, `join`, and per
/// `apply_then` until its callback runs).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    table: RefCell<Table>,
    /// Entries not yet answered.
    outstanding: Cell<usize>,
    /// Of those, `spawn_on`s to other workers: answered when the fiber they started there ends,
    /// they wait for that fiber, which its worker's quiet report covers, not for anything in
    /// flight, so they do not keep this worker from being quiet (a fiber suspended for ever
    /// there is a deadlock, or at the end of the run a fiber left behind, as on this worker).
    fiber_results: Cell<usize>,
    /// Of those, `apply_then` requests (see [`MAX_THEN_IN_FLIGHT`]).
    then_in_flight: Cell<usize>,
}

impl Pending {
    /// Registers a pending request to worker `dest` whose completer `complete` finds its data
    /// where `fill` wrote it; returns its id.
    ///
    /// `fill` writes into the slot itself. Handed over as a value, the data was copied from the
    /// caller's frame in 16-byte loads over the narrower stores (or none) the caller had just made
    /// there, and each such load waited for those stores to retire (a failed store-to-load
    /// forward).
    #[inline]
    pub(crate) fn add(&self, dest: usize, complete: Completer, fill: impl FnOnce(&mut Data)) -> u32 {
        self.outstanding.set(self.outstanding.get() + 1);
        let mut t = self.table.borrow_mut();
        let Table { slots, free } = &mut *t;
        match free.pop() {
            Some(i) => {
                let s = &mut slots[i as usize];
                s.complete = Some(complete);
                s.dest = dest as u32;
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
                slots.push(Slot {
                    complete: Some(complete),
                    data,
                    dest: dest as u32,
                });
                (slots.len() - 1) as u32
            }
        }
    }

    /// Takes out entry `req` for its answer from worker `from`: its completer and data, to be
    /// run once. `None`, and nothing changes, if no request `req` waits for an answer from
    /// `from` (a peer can neither answer nor consume a request this worker sent elsewhere).
    #[inline]
    pub(crate) fn take(&self, from: usize, req: u32) -> Option<(Completer, Data)> {
        let mut t = self.table.borrow_mut();
        let Table { slots, free } = &mut *t;
        let s = slots.get_mut(req as usize)?;
        if s.dest != from as u32 {
            return None;
        }
        let c = s.complete.take()?;
        free.push(req);
        self.outstanding.set(self.outstanding.get() - 1);
        Some((c, s.data))
    }

    /// Hints the CPU to fetch entry `req` (no access, no effect on unknown ids).
    #[inline(always)]
    pub(crate) fn prefetch(&self, req: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            let t = self.table.borrow();
            if let Some(s) = t.slots.get(req as usize) {
                // SAFETY: a prefetch reads nothing architecturally and cannot fault.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        (s as *const Slot).cast::<i8>(),
                    );
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = req;
    }

    /// Whether every entry left waits only for a fiber that another worker runs (`spawn_on`):
    /// nothing of this worker is in flight.
    #[inline]
    pub(crate) fn settled(&self) -> bool {
        self.outstanding.get() == self.fiber_results.get()
    }

    /// Counts a pending `spawn_on` request in (`true`, once registered) or out (`false`, when
    /// its answer completes it); see `fiber_results`.
    pub(crate) fn fiber_result(&self, pending: bool) {
        let n = self.fiber_results.get();
        self.fiber_results
            .set(if pending { n + 1 } else { n.saturating_sub(1) });
    }

    /// Counts an `apply_then` request about to be staged; whether that makes more than
    /// [`MAX_THEN_IN_FLIGHT`] unanswered.
    #[inline]
    pub(crate) fn then_issued(&self) -> bool {
        let n = self.then_in_flight.get() + 1;
        self.then_in_flight.set(n);
        n > MAX_THEN_IN_FLIGHT
    }

    /// Whether unanswered `apply_then` requests are within [`MAX_THEN_IN_FLIGHT`].
    #[inline]
    pub(crate) fn then_room(&self) -> bool {
        self.then_in_flight.get() <= MAX_THEN_IN_FLIGHT
    }

    /// Counts the answer to an `apply_then` request (its completer runs).
    #[inline]
    pub(crate) fn then_answered(&self) {
        self.then_in_flight.set(self.then_in_flight.get() - 1);
    }
}
