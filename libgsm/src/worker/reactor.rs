//! The worker's half of `crate::reactor`: its epoll set, the table of registrations, the look
//! at each turn of the loop and the sleep in `epoll_wait` with the doorbell's alarm. The fibers'
//! half (`Registered`, `close`) and the design are in `crate::reactor`.

use std::cell::{Cell, OnceCell, RefCell};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;

use super::WorkerCore;
use crate::fabric::Doorbell;
use crate::sys::net::{Epoll, Events, eventfd, eventfd_drain, ready};

/// The token of the doorbell's alarm in the epoll set.
const ALARM: u64 = u64::MAX;
/// Events taken per `epoll_wait`.
const EVENTS: usize = 256;
/// The longest a worker without an alarm sleeps before it polls its sockets again.
pub const FOREIGN_NAP: Duration = Duration::from_micros(50);
/// The longest such a nap grows to while nothing comes (see [`Reactor::park`]).
pub const FOREIGN_NAP_MAX: Duration = Duration::from_millis(1);

/// One registration's state: set by the worker's poll, read by its fiber.
#[derive(Debug, Default)]
pub(crate) struct Entry {
    /// An event came since the fiber last waited.
    pub(crate) ready: Cell<bool>,
    /// The fiber suspended in `Registered::wait` on it, to be made ready by the event.
    pub(crate) fiber: Cell<Option<u32>>,
}

/// The epoll set and the table of registrations, shared by the reactor and its handles.
pub(crate) struct Inner {
    epoll: Epoll,
    /// The doorbell's alarm (a duplicate of the descriptor the doorbell holds), or `None` when
    /// the doorbell cannot have one.
    alarm: Option<OwnedFd>,
    /// Whether the rank's socket watch rings this worker for its sockets (no alarm).
    watched: bool,
    events: RefCell<Events>,
    /// By slot: the generation and the entry (`None` when free). A token is the slot in the low
    /// 32 bits and its generation in the high ones, so that an event that outlived its
    /// registration in the same `epoll_wait` finds nobody.
    pub(crate) entries: RefCell<Vec<(u32, Option<Rc<Entry>>)>>,
    free: RefCell<Vec<u32>>,
    live: Cell<usize>,
    /// Fibers suspended in `Registered::wait`.
    pub(crate) waiting: Cell<usize>,
    /// Set by `close`: every wait returns an error.
    pub(crate) closed: Cell<bool>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reactor")
            .field("live", &self.live.get())
            .field("waiting", &self.waiting.get())
            .field("alarm", &self.alarm.is_some())
            .field("closed", &self.closed.get())
            .finish_non_exhaustive()
    }
}

/// A worker's reactor: nothing until the first registration.
#[derive(Debug, Default)]
pub(crate) struct Reactor {
    pub(crate) inner: OnceCell<Rc<Inner>>,
    /// Idle turns per look at the sockets (`crate::reactor::look_every`; 0 and 1: every turn).
    pub(crate) every: Cell<u32>,
    /// Idle turns counted towards the next look.
    pub(crate) turns: Cell<u32>,
}

impl Reactor {
    /// The epoll set, made (and the doorbell's alarm given, or the set handed to the rank's
    /// socket watch, `sockets.rs`) at the first call.
    pub(crate) fn inner(&self, core: &WorkerCore) -> io::Result<&Rc<Inner>> {
        if let Some(i) = self.inner.get() {
            return Ok(i);
        }
        let door = &core.shared.doors[core.local];
        let epoll = Epoll::new()?;
        let fd = eventfd()?;
        let alarm = match door.set_alarm(fd.try_clone()?) {
            Ok(()) => {
                epoll.add(fd.as_fd(), ready::IN | ready::ET, ALARM)?;
                Some(fd)
            }
            Err(_) => None,
        };
        let watched = alarm.is_none()
            && core
                .shared
                .sockets
                .watch(&core.shared, core.local, epoll.as_fd())
                .is_ok();
        let inner = Rc::new(Inner {
            epoll,
            alarm,
            watched,
            events: RefCell::new(Events::with_capacity(EVENTS)),
            entries: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            live: Cell::new(0),
            waiting: Cell::new(0),
            closed: Cell::new(false),
        });
        Ok(self.inner.get_or_init(|| inner))
    }

    /// Whether anything is registered (then the worker polls and sleeps here).
    #[cfg(test)]
    pub(crate) fn active(&self) -> bool {
        self.inner.get().is_some_and(|i| i.live.get() > 0)
    }

    /// Fibers waiting for a descriptor (the worker is not quiet while there are any).
    #[inline]
    pub(crate) fn waiting(&self) -> usize {
        self.inner.get().map_or(0, |i| i.waiting.get())
    }

    /// One look without waiting, at an idle turn of the worker's loop (at every `every`-th one
    /// only, when set); whether it made a fiber ready.
    #[inline]
    pub(crate) fn turn(&self, core: &WorkerCore) -> bool {
        let every = self.every.get();
        if every > 1 {
            let t = self.turns.get() + 1;
            self.turns.set(if t == every { 0 } else { t });
            if t != every {
                return false;
            }
        }
        match self.inner.get() {
            Some(i) if i.live.get() > 0 => i.collect(core, 0),
            _ => false,
        }
    }

    /// Sleeps the idle worker for at most `t` (see the module docs) unless `still_idle` (called
    /// after the sleep is announced) says otherwise; then collects the events. Without a
    /// registration this is the doorbell's plain sleep. `naps`: the sleeps in a row before this
    /// one that found nothing to do.
    pub(crate) fn park(
        &self,
        core: &WorkerCore,
        door: &Doorbell,
        t: Duration,
        naps: u32,
        still_idle: impl FnOnce() -> bool,
    ) {
        let Some(i) = self.inner.get().filter(|i| i.live.get() > 0) else {
            door.sleep(t, still_idle);
            return;
        };
        if i.watched {
            // Re-armed after the sleep is announced: an event from here on rings the doorbell.
            let sockets = &core.shared.sockets;
            door.sleep(t, || {
                sockets.arm(core.local, i.epoll.as_fd()).is_ok() && still_idle()
            });
            i.collect(core, 0);
            return;
        }
        if i.alarm.is_none() || t < Duration::from_millis(1) {
            // Each nap in a row that found nothing is twice as long, up to `FOREIGN_NAP_MAX`: a
            // socket then waits that long at most, and an idle rank no longer wakes its workers
            // twenty thousand times a second.
            let nap = FOREIGN_NAP
                .saturating_mul(1 << naps.min(5))
                .min(FOREIGN_NAP_MAX);
            door.sleep(t.min(nap), still_idle);
            i.collect(core, 0);
            return;
        }
        // `epoll_wait` counts whole milliseconds: rounded up, so that a deadline is not missed.
        let ms = i32::try_from(t.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        door.sleep_polling(t, still_idle, |_| {
            i.collect(core, ms);
        });
    }
}

impl Inner {
    /// Waits up to `timeout_ms` for events and makes their fibers ready; whether it made any.
    fn collect(&self, core: &WorkerCore, timeout_ms: i32) -> bool {
        let mut events = self.events.borrow_mut();
        let n = self.epoll.wait(&mut events, timeout_ms);
        let entries = self.entries.borrow();
        let mut woke = false;
        for (_, token) in events.ready(n) {
            if token == ALARM {
                if let Some(a) = &self.alarm {
                    eventfd_drain(a.as_fd());
                }
                continue;
            }
            let (slot, generation) = (token as u32, (token >> 32) as u32);
            if let Some((g, Some(e))) = entries.get(slot as usize)
                && *g == generation
            {
                e.ready.set(true);
                if let Some(f) = e.fiber.take() {
                    core.wake_fiber(f);
                    woke = true;
                }
            }
        }
        woke
    }

    pub(crate) fn register(&self, fd: BorrowedFd<'_>) -> io::Result<(u64, Rc<Entry>)> {
        let entry = Rc::new(Entry {
            // Set, so that the first wait returns at once and the caller tries its operation.
            ready: Cell::new(true),
            fiber: Cell::new(None),
        });
        let mut entries = self.entries.borrow_mut();
        let slot = self.free.borrow_mut().pop().unwrap_or_else(|| {
            entries.push((0, None));
            (entries.len() - 1) as u32
        });
        let generation = entries[slot as usize].0.wrapping_add(1);
        let token = (u64::from(generation) << 32) | u64::from(slot);
        let bits = ready::IN | ready::OUT | ready::RDHUP | ready::ET;
        if let Err(e) = self.epoll.add(fd, bits, token) {
            self.free.borrow_mut().push(slot);
            return Err(e);
        }
        entries[slot as usize] = (generation, Some(entry.clone()));
        self.live.set(self.live.get() + 1);
        Ok((token, entry))
    }

    pub(crate) fn deregister(&self, fd: BorrowedFd<'_>, token: u64) {
        // Cannot fail for a descriptor this set holds; one closed early is gone from it anyway.
        let _ = self.epoll.delete(fd);
        let slot = token as u32;
        if let Some(e) = self.entries.borrow_mut().get_mut(slot as usize) {
            e.1 = None;
            self.free.borrow_mut().push(slot);
            self.live.set(self.live.get() - 1);
        }
    }
}
