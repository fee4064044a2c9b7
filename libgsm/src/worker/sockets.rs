//! The socket watch: one thread per rank that waits on the epoll sets of the workers whose
//! doorbells cannot have an alarm, and rings the doorbell of a worker whose sockets have events.
//!
//! A worker sleeps in `epoll_wait` with its doorbell's eventfd alarm in the set (`reactor.rs`),
//! but a doorbell in a shared segment (a rank with shm peers on its host) has no alarm: a ringer in
//! another process cannot write this process's eventfd. Without this thread such a worker napped
//! on its futex and polled its sockets after every nap, a thousand times a second or more while
//! idle. With it, the worker sleeps on its futex as long as any other worker: its epoll set is a
//! member of the watch's set (one-shot, re-armed by the worker as it goes to sleep, after it has
//! announced the sleep), so a socket event wakes the watch, and the watch rings the worker.
//!
//! No event is missed: an event before the re-arm leaves the worker's set readable, which the
//! re-arm reports at once; one after it reaches the watch, whose ring finds the sleep announced
//! (the doorbell's Dekker pair, `wire/doorbell.rs`).

use std::os::fd::BorrowedFd;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use super::Shared;
use crate::sys::net::{Epoll, Events, ready};

/// How often the watch looks whether its rank has stopped, when no event comes.
const CHECK_STOP: Duration = Duration::from_millis(200);

/// The rank's socket watch, started by the first worker that needs it.
#[derive(Debug, Default)]
pub(crate) struct SocketWatch {
    /// The watch's set, or `None` when its thread could not be started (then every worker naps).
    epoll: OnceLock<Option<Arc<Epoll>>>,
}

impl SocketWatch {
    /// Adds local worker `local`'s epoll set to the watch (starting the watch's thread the first
    /// time). An error leaves the worker to nap and poll its sockets.
    pub(crate) fn watch(
        &self,
        shared: &Arc<Shared>,
        local: usize,
        set: BorrowedFd<'_>,
    ) -> std::io::Result<()> {
        let epoll = self.epoll.get_or_init(|| {
            let e = Arc::new(Epoll::new().ok()?);
            start(e.clone(), Arc::downgrade(shared)).ok()?;
            Some(e)
        });
        let Some(epoll) = epoll else {
            return Err(std::io::Error::other("the socket watch could not start"));
        };
        epoll.add(set, ready::IN | ready::ONESHOT, local as u64)
    }

    /// Re-arms local worker `local`'s set, as it goes to sleep (after announcing it).
    pub(crate) fn arm(&self, local: usize, set: BorrowedFd<'_>) -> std::io::Result<()> {
        match self.epoll.get() {
            Some(Some(e)) => e.modify(set, ready::IN | ready::ONESHOT, local as u64),
            _ => Err(std::io::Error::other("the socket watch is not running")),
        }
    }
}

/// Starts the watch's thread, which ends when the rank stops or its state is dropped.
fn start(epoll: Arc<Epoll>, shared: Weak<Shared>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("gsm-sockets".into())
        .spawn(move || {
            let mut events = Events::with_capacity(64);
            let ms = CHECK_STOP.as_millis() as i32;
            loop {
                let n = epoll.wait(&mut events, ms);
                let Some(sh) = shared.upgrade() else { return };
                if sh.stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                for (_, local) in events.ready(n) {
                    if let Some(d) = sh.doors.get(local as usize) {
                        d.ring();
                    }
                }
            }
        })
        .map(|_| ())
}
