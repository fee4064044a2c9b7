//! The table of this worker's requests that await an answer, and their completion.

use super::*;

impl WorkerCore {
    /// Registers a pending request whose completer `complete` finds its data where `fill`
    /// wrote it; returns its id.
    ///
    /// `fill` writes into the slot itself. Handed over as a value, the data was copied from the
    /// caller's frame in 16-byte loads over the narrower stores (or none) the caller had just made
    /// there, and each such load waited for those stores to retire (a failed store-to-load
    /// forward).
    #[inline]
    pub(crate) fn add_pending(
        &self,
        dest: usize,
        complete: Completer,
        fill: impl FnOnce(&mut Data),
    ) -> u32 {
        self.outstanding.set(self.outstanding.get() + 1);
        let mut p = self.pending.borrow_mut();
        let (slots, free) = &mut *p;
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
                slots.push(PendingSlot {
                    complete: Some(complete),
                    data,
                    dest: dest as u32,
                });
                (slots.len() - 1) as u32
            }
        }
    }

    /// Completes pending request `req` (runs its completer as a callback). Returns `false`, and
    /// does nothing, if no request `req` is waiting for an answer.
    #[inline]
    #[must_use]
    pub(crate) fn complete(&self, from: usize, req: u32, st: u8, body: &[Byte]) -> bool {
        let slot = {
            let mut p = self.pending.borrow_mut();
            let (slots, free) = &mut *p;
            let Some(s) = slots.get_mut(req as usize) else {
                return false;
            };
            // Only the worker the request went to may answer it (a peer cannot answer, nor
            // consume, a request this worker sent elsewhere).
            if s.dest != from as u32 {
                return false;
            }
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
    pub(super) fn complete_from(&self, from: usize, req: u32, st: u8, body: &[Byte]) {
        if !self.complete(from, req, st, body) {
            self.unexpected_response(from, req);
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn unexpected_response(&self, from: usize, req: u32) {
        self.ring_broken(
            from,
            &format!("a response to request {req}, which is not waiting for one from it"),
        );
    }
}
