//! Socket readiness for fibers: a worker's own epoll set, polled once per turn of its loop and
//! slept in when the worker is idle, so that a fiber can wait for a socket (or any pollable
//! descriptor) without a thread of its own and without keeping its worker awake.
//!
//! A fiber wraps a non-blocking descriptor in [`Registered`]; the worker's reactor (made at the
//! first registration, one per worker) registers it edge-triggered for reading and writing. The
//! fiber tries its `read`/`write`; on `WouldBlock` it calls [`Registered::wait`], which suspends
//! it until an event comes for that descriptor (one flag for both directions: the fiber retries
//! whatever it was doing). [`Registered::retry`] is that loop. The worker, at every turn of its
//! loop, collects the events there are (`epoll_wait` with no timeout, one system call per turn
//! while anything is registered, as Redis's event loop makes one per iteration) and makes their
//! fibers ready. When it has nothing to do it sleeps in `epoll_wait` itself, with its doorbell's
//! *alarm*, an eventfd, in the same set (`wire::doorbell`): a socket event or a ring from another
//! worker ends the sleep, whichever comes first, and no thread is in between.
//!
//! What it does not do:
//! - A doorbell in a shared segment (a rank with shm peers on its host) has no alarm, since a
//!   ringer in another process cannot write this process's eventfd. Such a worker sleeps on its
//!   futex as before, for at most [`FOREIGN_NAP`], and polls its sockets after each nap; so is a
//!   sleep shorter than `epoll_wait`'s millisecond granularity.
//! - A fiber waiting here is running, not stuck: its worker is never found quiet while one waits,
//!   so a job whose fibers wait for clients that never come runs until it is stopped ([`close`]
//!   wakes every waiting fiber of the calling worker with an error, for a server that stops).
//! - It reads and writes nothing, accepts nothing and owns no socket logic: the caller does.

use std::cell::{Cell, OnceCell, RefCell};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;

use crate::fabric::Doorbell;
use crate::sys::net::{Epoll, Events, eventfd, eventfd_drain, ready};
use crate::worker::WorkerCore;

/// The token of the doorbell's alarm in the epoll set.
const ALARM: u64 = u64::MAX;
/// Events taken per `epoll_wait`.
const EVENTS: usize = 256;
/// The longest a worker without an alarm sleeps before it polls its sockets again.
pub const FOREIGN_NAP: Duration = Duration::from_micros(50);

/// One registration's state: set by the worker's poll, read by its fiber.
#[derive(Debug, Default)]
struct Entry {
    /// An event came since the fiber last waited.
    ready: Cell<bool>,
    /// The fiber suspended in [`Registered::wait`] on it, to be made ready by the event.
    fiber: Cell<Option<u32>>,
}

/// The epoll set and the table of registrations, shared by the reactor and its handles.
struct Inner {
    epoll: Epoll,
    /// The doorbell's alarm (a duplicate of the descriptor the doorbell holds), or `None` when
    /// the doorbell cannot have one.
    alarm: Option<OwnedFd>,
    events: RefCell<Events>,
    /// By slot: the generation and the entry (`None` when free). A token is the slot in the low
    /// 32 bits and its generation in the high ones, so that an event that outlived its
    /// registration in the same `epoll_wait` finds nobody.
    entries: RefCell<Vec<(u32, Option<Rc<Entry>>)>>,
    free: RefCell<Vec<u32>>,
    live: Cell<usize>,
    /// Fibers suspended in [`Registered::wait`].
    waiting: Cell<usize>,
    /// Set by [`close`]: every wait returns an error.
    closed: Cell<bool>,
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
    inner: OnceCell<Rc<Inner>>,
}

impl Reactor {
    /// The epoll set, made (and the doorbell's alarm given) at the first call.
    fn inner(&self, door: &Doorbell) -> io::Result<&Rc<Inner>> {
        if let Some(i) = self.inner.get() {
            return Ok(i);
        }
        let epoll = Epoll::new()?;
        let fd = eventfd()?;
        let alarm = match door.set_alarm(fd.try_clone()?) {
            Ok(()) => {
                epoll.add(fd.as_fd(), ready::IN | ready::ET, ALARM)?;
                Some(fd)
            }
            Err(_) => None,
        };
        let inner = Rc::new(Inner {
            epoll,
            alarm,
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

    /// One look without waiting, at a turn of the worker's loop; whether it made a fiber ready.
    #[inline]
    pub(crate) fn turn(&self, core: &WorkerCore) -> bool {
        match self.inner.get() {
            Some(i) if i.live.get() > 0 => i.collect(core, 0),
            _ => false,
        }
    }

    /// Sleeps the idle worker for at most `t` (see the module docs) unless `still_idle` (called
    /// after the sleep is announced) says otherwise; then collects the events. Without a
    /// registration this is the doorbell's plain sleep.
    pub(crate) fn park(
        &self,
        core: &WorkerCore,
        door: &Doorbell,
        t: Duration,
        still_idle: impl FnOnce() -> bool,
    ) {
        let Some(i) = self.inner.get().filter(|i| i.live.get() > 0) else {
            door.sleep(t, still_idle);
            return;
        };
        if i.alarm.is_none() || t < Duration::from_millis(1) {
            door.sleep(t.min(FOREIGN_NAP), still_idle);
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

    fn register(&self, fd: std::os::fd::BorrowedFd<'_>) -> io::Result<(u64, Rc<Entry>)> {
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

    fn deregister(&self, fd: std::os::fd::BorrowedFd<'_>, token: u64) {
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

/// A non-blocking descriptor registered with the calling worker's reactor (see the module docs).
/// It stays on that worker (it is not `Send`); dropping it deregisters, then drops the source.
#[derive(Debug)]
pub struct Registered<S: AsFd> {
    /// `None` only after [`into_inner`](Self::into_inner) took it.
    source: Option<S>,
    inner: Rc<Inner>,
    entry: Rc<Entry>,
    token: u64,
}

impl<S: AsFd> Registered<S> {
    /// Registers `source`, which must be in non-blocking mode (a blocking call would block the
    /// worker and every fiber on it), with the calling worker's reactor.
    ///
    /// # Panics
    /// Outside a worker of a running runtime.
    #[track_caller]
    pub fn new(source: S) -> io::Result<Self> {
        let core = crate::worker::core_or_panic("gossamer::reactor::Registered::new");
        let inner = core.reactor.inner(&core.shared.doors[core.local])?.clone();
        let (token, entry) = inner.register(source.as_fd())?;
        Ok(Self {
            source: Some(source),
            inner,
            entry,
            token,
        })
    }

    pub fn get_ref(&self) -> &S {
        self.source.as_ref().expect("taken only by into_inner")
    }

    pub fn get_mut(&mut self) -> &mut S {
        self.source.as_mut().expect("taken only by into_inner")
    }

    /// Whether an event came since the last [`wait`](Self::wait) or [`clear`](Self::clear).
    pub fn is_ready(&self) -> bool {
        self.entry.ready.get()
    }

    /// Forgets the events so far: the next [`wait`](Self::wait) waits for a new one. For a
    /// caller that, say, reads less than its buffer holds and so knows the socket is drained
    /// without a read that would block: clear before the read, then wait.
    pub fn clear(&self) {
        self.entry.ready.set(false);
    }

    /// Suspends the calling fiber until an event came for this descriptor since the last
    /// wait (at once if one did). `Err` (`ConnectionAborted`) after [`close`].
    ///
    /// # Panics
    /// Outside a fiber of this worker, or in a delegated closure or callback.
    #[track_caller]
    pub fn wait(&self) -> io::Result<()> {
        let core = crate::worker::core_or_panic("gossamer::reactor::Registered::wait");
        let e = &self.entry;
        let inner = &self.inner;
        if !e.ready.get() && !inner.closed.get() {
            let Some(id) = core.current_fiber() else {
                panic!("gossamer::reactor::Registered::wait: called outside a fiber");
            };
            e.fiber.set(Some(id));
            inner.waiting.set(inner.waiting.get() + 1);
            core.wait_until(|| e.ready.get() || inner.closed.get());
            inner.waiting.set(inner.waiting.get() - 1);
            e.fiber.set(None);
        }
        e.ready.set(false);
        if inner.closed.get() {
            return Err(io::ErrorKind::ConnectionAborted.into());
        }
        Ok(())
    }

    /// Calls `op` until it does not answer `WouldBlock`, waiting for an event in between
    /// (`Interrupted` is retried at once).
    #[track_caller]
    pub fn retry<R>(&mut self, mut op: impl FnMut(&mut S) -> io::Result<R>) -> io::Result<R> {
        loop {
            match op(self.get_mut()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait()?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    /// Deregisters and gives the source back.
    pub fn into_inner(mut self) -> S {
        let source = self.source.take().expect("taken only here");
        self.inner.deregister(source.as_fd(), self.token);
        source
    }
}

impl<S: AsFd> Drop for Registered<S> {
    fn drop(&mut self) {
        if let Some(s) = &self.source {
            self.inner.deregister(s.as_fd(), self.token);
        }
    }
}

/// Wakes every fiber waiting in [`Registered::wait`] on the calling worker, now and later:
/// their waits return `ConnectionAborted` (a server that stops closes its connections so).
/// Nothing happens on a worker that never registered anything.
///
/// # Panics
/// Outside a worker of a running runtime.
#[track_caller]
pub fn close() {
    let core = crate::worker::core_or_panic("gossamer::reactor::close");
    let Some(inner) = core.reactor.inner.get() else {
        return;
    };
    inner.closed.set(true);
    for (_, e) in inner.entries.borrow().iter() {
        if let Some(f) = e.as_ref().and_then(|e| e.fiber.take()) {
            core.wake_fiber(f);
        }
    }
}

#[cfg(test)]
mod tests;
