//! Socket readiness for the fibers of one worker: an `epoll` instance (through `mio`) polled
//! without blocking from the worker's own loop, never from a thread of its own.
//!
//! The runtime has no socket I/O of its own. What it has is [`gossamer::wait_for`]: a fiber
//! waits for a condition that the worker tests once per turn of its loop, between its other
//! fibers and the requests it serves, and sleeps in spells of 20 µs when nothing else is to be
//! done. So each worker runs one *reactor* fiber whose condition is a non-blocking
//! `epoll_wait` (timeout 0); the events it collects set the readiness flag of each connection,
//! and a connection fiber waits on its flag (a `Cell` load, no system call). Sockets are
//! non-blocking and registered edge-triggered: a fiber reads or writes until the call would block,
//! clears its flag and waits; an edge that comes after sets the flag again. One `epoll_wait` per
//! turn of a busy worker serves all its connections, as Redis's event loop does; an idle worker
//! costs one every ~20 µs (and nothing between its wake-ups). The other designs were a
//! thread per rank in a blocking `epoll_wait` handing readiness to the workers, which costs a
//! thread switch per wake-up and a third thread on each core, or a `recv` attempt per
//! connection per turn, a system call per connection.
//!
//! This module does not read or write sockets (`conn.rs` does) and does not accept them
//! (`server.rs` does); it knows readiness only.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::time::Duration;

use mio::{Events, Interest, Poll, Token};

/// The token of the rank's listener, on the worker that accepts.
pub const LISTENER: Token = Token(usize::MAX - 1);

/// One worker's readiness table.
#[derive(Debug)]
pub struct Reactor {
    poll: RefCell<Poll>,
    events: RefCell<Events>,
    /// The readiness flag of each registered socket, by token.
    flags: RefCell<Vec<Option<Rc<Cell<bool>>>>>,
    free: RefCell<Vec<usize>>,
    /// Set when the listener has connections waiting.
    pub listener_ready: Cell<bool>,
}

impl Reactor {
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            poll: RefCell::new(Poll::new()?),
            events: RefCell::new(Events::with_capacity(256)),
            flags: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            listener_ready: Cell::new(false),
        })
    }

    /// Registers `source` for readability and writability; returns its token and the flag
    /// that [`poll_now`](Self::poll_now) sets when it becomes ready. The flag starts set, so
    /// that the first read is tried at once.
    pub fn register(
        &self,
        source: &mut impl mio::event::Source,
    ) -> io::Result<(Token, Rc<Cell<bool>>)> {
        let flag = Rc::new(Cell::new(true));
        let mut flags = self.flags.borrow_mut();
        let slot = match self.free.borrow_mut().pop() {
            Some(i) => i,
            None => {
                flags.push(None);
                flags.len() - 1
            }
        };
        let token = Token(slot);
        if let Err(e) = self.poll.borrow().registry().register(
            source,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            self.free.borrow_mut().push(slot);
            return Err(e);
        }
        flags[slot] = Some(flag.clone());
        Ok((token, flag))
    }

    /// Registers the listener under [`LISTENER`].
    pub fn register_listener(&self, listener: &mut mio::net::TcpListener) -> io::Result<()> {
        self.poll
            .borrow()
            .registry()
            .register(listener, LISTENER, Interest::READABLE)
    }

    /// Forgets `source` (before it is closed).
    pub fn deregister(&self, source: &mut impl mio::event::Source, token: Token) {
        // A socket that was never registered or is already gone: nothing to undo.
        let _ = self.poll.borrow().registry().deregister(source);
        if let Some(f) = self.flags.borrow_mut().get_mut(token.0) {
            *f = None;
            self.free.borrow_mut().push(token.0);
        }
    }

    /// Collects the events that are there, without waiting, and sets the flags they name.
    /// Returns whether any was set. A failed `epoll_wait` (it cannot fail for a valid instance
    /// but for a signal) is taken as no event.
    pub fn poll_now(&self) -> bool {
        let mut events = self.events.borrow_mut();
        if self
            .poll
            .borrow_mut()
            .poll(&mut events, Some(Duration::ZERO))
            .is_err()
        {
            return false;
        }
        let flags = self.flags.borrow();
        let mut any = false;
        for ev in events.iter() {
            any = true;
            if ev.token() == LISTENER {
                self.listener_ready.set(true);
            } else if let Some(Some(f)) = flags.get(ev.token().0) {
                f.set(true);
            }
        }
        any
    }
}
