//! `Notify`: one fiber waits until code of its own worker (another fiber, or an `apply_then`
//! callback run by the worker's poll) tells it to go on.
//!
//! `wait_for` would do the same by testing a condition once per turn of the worker's loop, but a
//! worker with fibers in `wait_for` cannot sleep long (their conditions may be written by other
//! processes, which ring no doorbell), so it yields and naps in 20 µs spells, taking CPU time that
//! processes sharing its cores need. A fiber in [`Notify::wait`] is suspended like one in `recv`:
//! the worker sleeps on its doorbell until a ring brings the answer whose callback notifies.
//!
//! A `Notify` stays on its worker (it is not `Send`; share it with `Rc`). It is not a queue:
//! notifications before a wait are one. A fiber that waits for a notification that never comes
//! is as stuck as one in `recv` that gets no message, and is reported so. See
//! `reactor/README.md`.

use std::cell::Cell;

/// A wake-up flag for one waiting fiber of this worker (see the module docs).
#[derive(Debug, Default)]
pub struct Notify {
    set: Cell<bool>,
    fiber: Cell<Option<u32>>,
}

impl Notify {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag and makes the waiting fiber, if any, ready. May be called in a callback.
    ///
    /// # Panics
    /// With a fiber waiting, outside its worker.
    pub fn notify(&self) {
        self.set.set(true);
        if let Some(f) = self.fiber.take() {
            crate::worker::core_or_panic("gossamer::Notify::notify").wake_fiber(f);
        }
    }

    /// Suspends the calling fiber until the flag is set (at once if it is), then clears it.
    ///
    /// # Panics
    /// Outside a fiber, in a delegated closure or callback, or while another fiber waits on it.
    #[track_caller]
    pub fn wait(&self) {
        if !self.set.get() {
            let core = crate::worker::core_or_panic("gossamer::Notify::wait");
            let Some(id) = core.current_fiber() else {
                panic!("gossamer::Notify::wait: called outside a fiber");
            };
            assert!(
                self.fiber.replace(Some(id)).is_none(),
                "gossamer::Notify::wait: another fiber waits on this Notify"
            );
            core.wait_until(|| self.set.get());
            self.fiber.set(None);
        }
        self.set.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, WorkerId, entrust_on};
    use std::rc::Rc;

    /// A fiber waits for the callback of a request to another worker, which notifies it; a
    /// notification before the wait is kept.
    #[test]
    fn a_callback_wakes_the_fiber_that_waits() {
        let got = crate::run(Config::default().workers(2), || {
            let n = Rc::new(Notify::new());
            n.notify();
            n.wait();
            let t = entrust_on(WorkerId::new(1), || 41u64);
            let out = Rc::new(Cell::new(0));
            let (n2, o2) = (n.clone(), out.clone());
            t.apply_then(
                |v| {
                    *v += 1;
                    *v
                },
                move |r| {
                    o2.set(r);
                    n2.notify();
                },
            );
            crate::flush();
            n.wait();
            out.get()
        })
        .expect("the run ends normally");
        assert_eq!(got, 42);
    }
}
