//! An authenticated connection shared by the I/O thread and this rank's workers, and what a
//! worker does with the connections on its own thread: write its outgoing connection when it
//! rings a bell, read the incoming ones when it polls, and hand them to the I/O thread before it
//! sleeps. It does not accept connections or report failures (the I/O thread does both).
//!
//! # Who touches a link
//!
//! A link's buffers and rings are behind one mutex. A worker only ever `try_lock`s it: when the
//! I/O thread or another worker holds it, the holder does the work (it reads until `EAGAIN`, and
//! looks at the shadow rings again when `pending` says a slot came while it held the lock). What
//! a worker finds fatal (EOF, an error, a frame no peer sends) it leaves in `ended` and wakes the
//! I/O thread, which reports it exactly as if it had found it itself (`LOSS_GRACE`, closing).
//!
//! # Who watches an incoming socket
//!
//! An incoming socket is registered level-triggered and `EPOLLONESHOT`: after one event the I/O
//! thread is not woken by it again until it is re-armed. While some worker of this rank polls
//! (`Shared::pollers` > 0), nobody re-arms it: the workers read it at every poll, and the I/O
//! thread sleeps through the traffic. The last worker to park re-arms every incoming socket
//! (after counting itself out), and the I/O thread re-arms a socket after reading it while no
//! worker polls. Arming is level-triggered, so bytes that came before it wake the thread at
//! once: no data waits unseen whatever the order of a park, an arrival and a re-arm. See
//! `fabric/tcp/README.md`.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::recv::pump_in;
use super::send::pump_out;
use super::{Fate, LinkState, Rx, Shared, Side};
use crate::fabric::{Hooks, Turn};
use crate::sys::net::{Epoll, ready};

/// What an incoming socket is armed for (see the module docs).
pub(in crate::fabric::tcp) const ARMED: u32 = ready::IN | ready::RDHUP | ready::ONESHOT;

/// Where the workers' bells find an outgoing half: set by `create` for a connection it made, by
/// the I/O thread for a peer's two-way connection once it authenticated.
pub(in crate::fabric::tcp) type OutCell = Arc<OnceLock<Arc<Link>>>;

/// An authenticated connection, or one half of a two-way one (see the module docs).
pub(in crate::fabric::tcp) struct Link {
    pub(super) sock: TcpStream,
    pub(super) addr: SocketAddr,
    /// The peer rank.
    pub(super) rank: u32,
    /// Its epoll token (its index in the I/O thread's table).
    pub(super) token: u64,
    pub(super) state: Mutex<LinkState>,
    /// Outgoing: a slot was published since the holder of `state` last looked at the rings.
    pub(super) pending: AtomicBool,
    /// Readiness bits from epoll events the I/O thread could not apply yet (the link was held).
    pub(super) events: AtomicU32,
}

impl Link {
    pub(in crate::fabric::tcp) fn new(
        sock: TcpStream,
        addr: SocketAddr,
        token: u64,
        side: Side,
    ) -> Link {
        // A bell rung before an outgoing link existed found nothing to mark.
        let pending = matches!(side, Side::Out(_));
        let rank = match &side {
            Side::In(i) => i.rank,
            Side::Out(o) => o.rank,
        };
        Link {
            sock,
            addr,
            rank,
            token,
            state: Mutex::new(LinkState {
                readable: true,
                writable: true,
                side,
                ended: None,
                closed: false,
            }),
            pending: AtomicBool::new(pending),
            events: AtomicU32::new(0),
        }
    }

    /// Arms an incoming socket for one event of the I/O thread. Failing (the link was dropped)
    /// is harmless.
    pub(super) fn arm(&self, epoll: &Epoll) {
        let _ = epoll.modify(self.sock.as_fd(), ARMED, self.token);
    }

    /// Hands what a worker found fatal (`ended`, set) to the I/O thread: an event it looks at,
    /// and a wake.
    fn leave_to_io(&self, shared: &Shared) {
        self.events.fetch_or(ready::ERR, Ordering::SeqCst);
        shared.wake();
    }

    /// A publisher's bell, on its own thread: writes what the shadow rings hold to the socket
    /// now, unless another thread holds the link (then that thread does, seeing `pending`).
    /// A fate that ends the link is left for the I/O thread.
    pub(in crate::fabric::tcp) fn send_now(&self, shared: &Shared) {
        self.pending.store(true, Ordering::SeqCst);
        loop {
            let Ok(mut st) = self.state.try_lock() else {
                return;
            };
            self.pending.store(false, Ordering::SeqCst);
            if st.closed || st.ended.is_some() {
                return;
            }
            if let Side::Out(o) = &mut st.side {
                o.pending = true;
            }
            let mut progress = false;
            let fate = pump_out(&self.sock, &mut st, &mut progress);
            if !matches!(fate, Fate::Keep) {
                st.ended = Some(fate);
                drop(st);
                self.leave_to_io(shared);
                return;
            }
            drop(st);
            // Pairs with the store at the top of a bell that found the link held by us.
            if !self.pending.load(Ordering::SeqCst) {
                return;
            }
        }
    }
}

/// The worker side of the fabric: what each local worker's [`Progress`](crate::fabric::Progress)
/// hook does.
pub(in crate::fabric::tcp) struct Direct {
    pub(in crate::fabric::tcp) shared: Arc<Shared>,
    pub(in crate::fabric::tcp) epoll: Arc<Epoll>,
    pub(in crate::fabric::tcp) hooks: Hooks,
    pub(in crate::fabric::tcp) rx: Rx,
    pub(in crate::fabric::tcp) incoming: Vec<Arc<Link>>,
    /// Per local worker: when it yields the CPU while polling.
    pub(in crate::fabric::tcp) rhythm: Box<[Rhythm]>,
    /// Per incoming link: the local worker that reads it first (see [`Direct::new`]), or
    /// `u32::MAX` for a link every polling worker reads (a writing half has no home).
    homes: Box<[u32]>,
    /// Per (local worker, incoming link), index `worker × links + link`: the home's poll count
    /// this worker saw last, and how many of its own polls in a row have seen it unchanged.
    seen: Box<[(AtomicU64, AtomicU32)]>,
}

/// A polling worker gives its CPU away after this many polls in a row that found nothing while
/// its yields find other threads waiting for the CPU (see [`Direct::turn`]).
const YIELD_AFTER: u32 = 2;
/// ... and after this many while its yields return at once: nobody else wanted the CPU, and a
/// yield is a system call on the path of the answer it polls for.
const YIELD_AFTER_ALONE: u32 = 16;
/// A worker reads another worker's incoming link once that home's poll count has stood still
/// for this many of its own polls in a row (see [`Direct::mine`]).
pub(in crate::fabric::tcp) const STALE_POLLS: u32 = 32;
/// A yield that returned within this long found no other thread to run.
const YIELD_ALONE: Duration = Duration::from_micros(5);

/// One local worker's polling rhythm (only that worker writes it).
#[derive(Default)]
pub(in crate::fabric::tcp) struct Rhythm {
    /// Polls so far (read by the other workers: a home whose count stands still reads nothing).
    polls: AtomicU64,
    /// Polls in a row that found nothing.
    empty: AtomicU32,
    /// Yield after this many (0: not decided yet, [`YIELD_AFTER`]).
    every: AtomicU32,
}

impl Rhythm {
    /// After a poll that found something (`got`) or nothing: yields the CPU when the rhythm says
    /// so, and learns from how long the yield took.
    fn after_poll(&self, got: bool) {
        if got {
            self.empty.store(0, Ordering::Relaxed);
            return;
        }
        let n = self.empty.load(Ordering::Relaxed) + 1;
        self.empty.store(n, Ordering::Relaxed);
        let every = match self.every.load(Ordering::Relaxed) {
            0 => YIELD_AFTER,
            e => e,
        };
        if n % every == 0 {
            let t = Instant::now();
            std::thread::yield_now();
            let alone = t.elapsed() < YIELD_ALONE;
            let next = if alone {
                YIELD_AFTER_ALONE
            } else {
                YIELD_AFTER
            };
            self.every.store(next, Ordering::Relaxed);
        }
    }
}

impl Direct {
    /// The workers' side of the fabric over the authenticated `incoming` links. Each link has a
    /// home, the local worker that reads it first: the one with the index of the remote worker
    /// that connected (on a two-way connection, the one that writes back on it), modulo this
    /// rank's workers. A link carries frames for every worker of the rank; when every polling
    /// worker read every link, a request for worker 0 was as often read by worker 1, which then
    /// had to wake worker 0, and, having "worked", kept polling on a CPU the two others needed
    /// (see `fabric/tcp/README.md`).
    pub(in crate::fabric::tcp) fn new(
        shared: Arc<Shared>,
        epoll: Arc<Epoll>,
        hooks: Hooks,
        rx: Rx,
        incoming: Vec<Arc<Link>>,
    ) -> Direct {
        let homes: Box<[u32]> = incoming
            .iter()
            .map(|link| {
                let st = link.state.lock().unwrap_or_else(|p| p.into_inner());
                match &st.side {
                    Side::In(inc) => inc.home,
                    _ => u32::MAX,
                }
            })
            .collect();
        let seen = (0..rx.nlocal as usize * homes.len())
            .map(|_| (AtomicU64::new(u64::MAX), AtomicU32::new(0)))
            .collect();
        Direct {
            shared,
            epoll,
            hooks,
            rx,
            incoming,
            rhythm: (0..rx.nlocal).map(|_| Rhythm::default()).collect(),
            homes,
            seen,
        }
    }

    /// Local worker `l`'s turn `t`; whether it delivered a slot.
    pub(in crate::fabric::tcp) fn turn(&self, l: u32, t: Turn) -> bool {
        let sh = &self.shared;
        match t {
            Turn::Poll => {
                let me = &sh.polling[l as usize];
                if !me.load(Ordering::Relaxed) {
                    me.store(true, Ordering::Relaxed);
                    sh.pollers.fetch_add(1, Ordering::SeqCst);
                }
                self.rhythm[l as usize]
                    .polls
                    .fetch_add(1, Ordering::Relaxed);
                let got = self.read_all(l);
                // Under load, the kernel defers the delivery of loopback and veth packets to
                // `ksoftirqd`, a thread of the CPU that sent them: a worker that sent a request
                // and now polls for the answer without ever yielding holds up its own request
                // (see `fabric/tcp/README.md`). So it yields every few empty
                // polls; every 16 while its yields come straight back (an idle machine, where
                // each yield only delays noticing the answer), every 2 once one did not.
                self.rhythm[l as usize].after_poll(got);
                got
            }
            Turn::Park => {
                if self.read_all(l) {
                    return true;
                }
                if sh.polling[l as usize].swap(false, Ordering::Relaxed)
                    && sh.pollers.fetch_sub(1, Ordering::SeqCst) == 1
                {
                    self.hand_over();
                }
                false
            }
        }
    }

    /// Reads every incoming link not held by another thread and delivers its frames.
    fn read_all(&self, l: u32) -> bool {
        let mut any = false;
        for (k, link) in self.incoming.iter().enumerate() {
            if !self.mine(l, k) {
                continue;
            }
            let Ok(mut st) = link.state.try_lock() else {
                continue;
            };
            if st.closed || st.ended.is_some() {
                continue;
            }
            st.readable = true;
            let wake = &self.hooks.wake;
            let fate = pump_in(&link.sock, &mut st, &self.rx, &mut any, &mut |w| {
                if w != l {
                    wake(w)
                }
            });
            if !matches!(fate, Fate::Keep) {
                st.ended = Some(fate);
                drop(st);
                link.leave_to_io(&self.shared);
            }
        }
        any
    }

    /// Whether worker `l` reads incoming link `k` in this poll: always its home's; another's
    /// only while that home does not poll (it sleeps, so this is the worker that must), or its
    /// poll count has stood still for [`STALE_POLLS`] of `l`'s polls in a row (it runs a long
    /// task, and the frames for the other workers on its link must not wait for it).
    fn mine(&self, l: u32, k: usize) -> bool {
        let h = self.homes[k];
        if h == l || h == u32::MAX || !self.shared.polling[h as usize].load(Ordering::Relaxed) {
            return true;
        }
        let now = self.rhythm[h as usize].polls.load(Ordering::Relaxed);
        let (seen, still) = &self.seen[l as usize * self.homes.len() + k];
        if seen.load(Ordering::Relaxed) != now {
            seen.store(now, Ordering::Relaxed);
            still.store(0, Ordering::Relaxed);
            return false;
        }
        let n = still.load(Ordering::Relaxed) + 1;
        still.store(n, Ordering::Relaxed);
        n >= STALE_POLLS
    }

    /// The last polling worker parks: every incoming socket goes back to the I/O thread, and
    /// it is woken for a delivery that waits for a full ring (which no socket event announces).
    fn hand_over(&self) {
        let mut stalled = false;
        for link in &self.incoming {
            link.arm(&self.epoll);
            let waits = match link.state.try_lock() {
                Ok(st) => matches!(&st.side, Side::In(inc) if inc.stalled),
                // Whoever holds it may leave a delivery waiting.
                Err(_) => true,
            };
            if waits {
                link.events.fetch_or(ready::IN, Ordering::SeqCst);
                stalled = true;
            }
        }
        if stalled {
            self.shared.wake();
        }
    }
}
