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
//!   futex as before, for at most [`FOREIGN_NAP`] at first and up to [`FOREIGN_NAP_MAX`] while
//!   nothing comes, and polls its sockets after each nap; so is a sleep shorter than
//!   `epoll_wait`'s millisecond granularity.
//! - A fiber waiting here is running, not stuck: its worker is never found quiet while one waits,
//!   so a job whose fibers wait for clients that never come runs until it is stopped ([`close`]
//!   wakes every waiting fiber of the calling worker with an error, for a server that stops).
//! - It reads and writes nothing, accepts nothing and owns no socket logic: the caller does.
//!
//! The design, and the alternatives measured and rejected, are in `reactor/README.md`.

use std::io;
use std::os::fd::AsFd;
use std::rc::Rc;

use crate::worker::reactor::{Entry, Inner};

pub use crate::worker::reactor::{FOREIGN_NAP, FOREIGN_NAP_MAX};

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
        let inner = core.reactor.inner(core)?.clone();
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

/// Makes the calling worker look at its sockets (a non-blocking `epoll_wait`) at every `n`-th
/// idle turn of its loop instead of at every one (`n` = 1, the default; 0 counts as 1). An idle
/// worker spins a few dozen turns before it yields and sleeps, and each look is a system call
/// that mostly finds nothing; a server whose workers share their CPUs with busy client
/// processes gives that CPU time to the clients with a larger `n` (gsm-kv uses 4). A socket
/// event then waits for at most `n` idle turns (each short while spinning). The
/// sleep in `epoll_wait` is unchanged, and a busy worker looks only at its idle turns anyway.
///
/// # Panics
/// Outside a worker of a running runtime.
#[track_caller]
pub fn look_every(n: u32) {
    crate::worker::core_or_panic("gossamer::reactor::look_every")
        .reactor
        .every
        .set(n.max(1));
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

/// A periodic timer that a fiber waits on through its worker's reactor (a timerfd in the epoll
/// set), for a server's housekeeping. Unlike [`crate::sleep`], whose deadline the worker tests
/// with a clock read at every turn of its loop (and at every look while it spins), it costs the
/// worker nothing until it expires, and the worker sleeps in `epoll_wait` until then. It stays
/// on the worker that made it; like any registration, a fiber waiting on it keeps that worker
/// from being found quiet, and [`close`] ends its wait.
#[derive(Debug)]
pub struct Interval {
    reg: Registered<std::os::fd::OwnedFd>,
}

impl Interval {
    /// A timer that expires every `period` (the first time one period from now); `Err` for a
    /// zero period or when the system refuses a timer.
    ///
    /// # Panics
    /// Outside a worker of a running runtime.
    #[track_caller]
    pub fn new(period: std::time::Duration) -> io::Result<Self> {
        let fd = crate::sys::net::timerfd_every(period)?;
        Ok(Self {
            reg: Registered::new(fd)?,
        })
    }

    /// Suspends the calling fiber until the timer expires; returns the periods that passed
    /// since the last tick (more than 1 when the fiber came late). `Err` after [`close`].
    ///
    /// # Panics
    /// Outside a fiber of this worker, or in a delegated closure or callback.
    #[track_caller]
    pub fn tick(&mut self) -> io::Result<u64> {
        loop {
            // Cleared before the read: an expiry after it is kept for the wait.
            self.reg.clear();
            match crate::sys::net::timerfd_take(self.reg.get_ref().as_fd()) {
                Ok(n) if n > 0 => return Ok(n),
                Ok(_) => self.reg.wait()?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.reg.wait()?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests;
