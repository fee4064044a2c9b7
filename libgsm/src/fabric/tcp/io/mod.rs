//! The fabric's I/O thread (`gsm-tcp-io`, one per rank): it accepts and authenticates
//! connections, reports lost peers, and moves frames when the workers do not: it writes a
//! socket that became writable again after it was full (back-pressure), reads the incoming
//! sockets while every worker of the rank sleeps (see `link` for who watches what), and serves
//! workers without hooks (the conformance suite's threads) through the bells' bitmap as before.
//! Each pass applies the epoll events, takes the bells that rang, accepts, pumps the links it
//! may, wakes the workers it delivered to and reports failures. With nothing to do it spins
//! briefly, then sleeps in `epoll_wait` after announcing it (the bells' protocol, `shared`). Its
//! jobs are in `accept` (new connections and hellos), `send` (shadow rings to sockets), `recv`
//! (sockets to rings) and `link` (a connection shared with the workers, and the workers' side);
//! it does not make rings or connections (`setup`, `connect`). See `fabric/tcp/README.md`.

mod accept;
mod link;
mod recv;
mod send;
mod shared;

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::Instant;

#[cfg(test)]
pub(super) use self::link::STALE_POLLS;
pub(super) use self::link::{ARMED, Direct, Link, OutCell};
pub(super) use self::recv::{Dests, Incoming, Others};
pub(super) use self::send::{OutRing, Outgoing};
pub(super) use self::shared::{AttachState, Shared};
use super::groups::Groups;
use super::handshake::HELLO_LEN;
use super::{HELLO_TIMEOUT, IDLE_WAIT, LOSS_GRACE, SPIN, STALL_YIELD, os_error};
use super::{TOKEN_EVENTFD, TOKEN_LISTENER};
use super::{UNANSWERED_LIMIT, WATCH_EVERY};
use crate::bootstrap::KEY_LEN;
use crate::fabric::{FabricError, FabricKind, Hooks, Topology};
use crate::sys::net::{self, Epoll, Events, ready};
use crate::wire::ring::{Producer, RingLayout};

/// Producers of the incoming rings, per remote source worker this rank reads (index
/// `group index * 2 + lane`; another rank's are `None` until `attach`).
pub(in crate::fabric::tcp) type Unclaimed = Vec<Option<Vec<Option<Producer>>>>;
use accept::refuse;
use recv::pump_in;
use send::pump_out;

/// The outgoing links `create` hands to the I/O thread, with their index in `Io::conns`. The
/// link lists are named here, above `shared` and `link`, so that `shared` can hold them without
/// importing `link`, which uses `shared`.
pub(in crate::fabric::tcp) type Handover = Vec<(usize, Arc<Link>)>;
/// An incoming link, as it authenticates (the workers' hooks read them).
pub(in crate::fabric::tcp) type IncomingLink = Arc<Link>;

/// Outgoing halves waiting for a peer's two-way connection, by (peer rank, local worker): the
/// half, and the cell its worker's bells look in.
pub(in crate::fabric::tcp) type Awaited = HashMap<(u32, u32), (Outgoing, OutCell)>;

/// What delivering frames needs to know of this rank.
#[derive(Debug, Clone, Copy)]
pub(in crate::fabric::tcp) struct Rx {
    pub(in crate::fabric::tcp) nlocal: u32,
    pub(in crate::fabric::tcp) slot_size: u32,
}

/// Which way a link carries frames.
pub(in crate::fabric::tcp) enum Side {
    /// From a peer's worker to this rank.
    In(Box<Incoming>),
    /// From a local worker to a peer rank.
    Out(Box<Outgoing>),
}

/// A link's state behind its mutex.
pub(in crate::fabric::tcp) struct LinkState {
    /// Readiness the I/O thread saw (edge-triggered for outgoing sockets), cleared on EAGAIN.
    pub(super) readable: bool,
    pub(super) writable: bool,
    pub(super) side: Side,
    /// What a worker found fatal, for the I/O thread to report.
    pub(super) ended: Option<Fate>,
    /// The I/O thread dropped the link: nobody reads or writes it any more.
    pub(super) closed: bool,
}

/// An accepted connection whose hello is not complete yet; only the I/O thread has it.
pub(super) struct Pending {
    sock: TcpStream,
    addr: SocketAddr,
    /// Edge-triggered readiness, cleared on EAGAIN.
    readable: bool,
    buf: [u8; HELLO_LEN],
    got: usize,
    deadline: Instant,
}

/// A place in the I/O thread's table (its index is the epoll token).
pub(super) enum Entry {
    /// Accepted, its hello not yet complete.
    Hello(Box<Pending>),
    /// Authenticated (incoming) or made by `create` (outgoing), shared with the workers.
    Link(Arc<Link>),
}

/// What happened to a connection in one pass.
pub(super) enum Fate {
    /// It stays.
    Keep,
    /// Drop an unauthenticated connection with a line on stderr.
    Refuse(String),
    /// The peer went away (EOF or error).
    Lost(u32, String),
    /// The peer broke the protocol.
    Broke(u32, String),
}

/// The I/O thread's state: every socket and every fabric-side ring end.
pub(in crate::fabric::tcp) struct Io {
    /// Shared with `create`, which registers the outgoing connections while this thread runs.
    epoll: Arc<Epoll>,
    shared: Arc<Shared>,
    hooks: Hooks,
    listener: TcpListener,
    /// The listener signalled (edge-triggered) and has not yet returned EAGAIN.
    acceptable: bool,
    /// `accept` failed for want of resources; not retried before this time.
    accept_retry: Option<Instant>,
    rank: u32,
    workers: Vec<u32>,
    hosts: Vec<String>,
    key: [u8; KEY_LEN],
    layout: RingLayout,
    is_peer: Vec<bool>,
    rank_of: Vec<u32>,
    rx: Rx,
    conns: Vec<Option<Entry>>,
    free: Vec<usize>,
    /// Connections waiting for their hello.
    hellos: usize,
    /// Incoming producers per source global worker, until its connection authenticates.
    unclaimed: Unclaimed,
    /// Who reads what.
    groups: Groups,
    /// Where frames read here may go.
    dests: Arc<Dests>,
    /// Outgoing halves that wait for a peer's two-way connection.
    awaited: Awaited,
    /// Whether workers pair on two-way connections (`handshake::partner`).
    two_way: bool,
    outs_of_rank: Vec<Vec<usize>>,
    /// Peers whose failure was reported.
    reported: Vec<bool>,
    woke: Vec<bool>,
    woke_list: Vec<u32>,
    /// Connections whose delivery waits for a full ring (last pass).
    stalled: usize,
    /// Peers whose connection ended before `closing`, with when to report them.
    lost: Vec<(u32, String, Instant)>,
    /// When to look next for connections that wait for an acknowledgement.
    watch_at: Instant,
}

/// Which connections the I/O thread expects, from `create`.
pub(in crate::fabric::tcp) struct Wiring {
    /// Which ranks are this fabric's peers (index = rank).
    pub(in crate::fabric::tcp) is_peer: Vec<bool>,
    /// Incoming producers per source global worker, for its connection to claim.
    pub(in crate::fabric::tcp) unclaimed: Unclaimed,
    /// Who reads what.
    pub(in crate::fabric::tcp) groups: Groups,
    /// Where frames read here may go.
    pub(in crate::fabric::tcp) dests: Arc<Dests>,
    /// Per rank, the indices of the outgoing connections to it.
    pub(in crate::fabric::tcp) outs_of_rank: Vec<Vec<usize>>,
    /// How many places `create`'s connections take (their indices come first).
    pub(in crate::fabric::tcp) outgoing: usize,
    /// Outgoing halves that wait for a peer's two-way connection.
    pub(in crate::fabric::tcp) awaited: Awaited,
    /// Whether workers pair on two-way connections.
    pub(in crate::fabric::tcp) two_way: bool,
}

impl Io {
    /// The thread's state for `topo`, before any connection is made.
    pub(in crate::fabric::tcp) fn new(
        topo: &Topology,
        epoll: Arc<Epoll>,
        shared: Arc<Shared>,
        hooks: Hooks,
        listener: TcpListener,
        wiring: Wiring,
    ) -> Io {
        let nlocal = topo.local_workers();
        let mut rank_of = Vec::with_capacity(topo.total_workers() as usize);
        for (r, &n) in topo.workers.iter().enumerate() {
            rank_of.extend(std::iter::repeat_n(r as u32, n as usize));
        }
        Io {
            epoll,
            shared,
            hooks,
            listener,
            acceptable: true,
            accept_retry: None,
            rank: topo.rank,
            workers: topo.workers.clone(),
            hosts: topo.hosts.clone(),
            key: topo.key,
            layout: topo.layout,
            is_peer: wiring.is_peer,
            rank_of,
            rx: Rx {
                nlocal,
                slot_size: topo.layout.slot_size,
            },
            conns: (0..wiring.outgoing).map(|_| None).collect(),
            free: Vec::new(),
            hellos: 0,
            unclaimed: wiring.unclaimed,
            groups: wiring.groups,
            dests: wiring.dests,
            awaited: wiring.awaited,
            two_way: wiring.two_way,
            outs_of_rank: wiring.outs_of_rank,
            reported: vec![false; topo.ranks() as usize],
            woke: vec![false; nlocal as usize],
            woke_list: Vec::new(),
            stalled: 0,
            lost: Vec::new(),
            watch_at: Instant::now() + WATCH_EVERY,
        }
    }

    /// The thread's body: the loop, and a panic in it reported as the fabric's failure.
    pub(in crate::fabric::tcp) fn run(mut self) {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.main_loop()));
        if let Err(p) = result {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let e = os_error(
                "the tcp I/O thread",
                &std::io::Error::other(format!("it panicked: {msg}")),
            );
            self.record(e.clone());
            (self.hooks.fail)(e);
        }
    }

    fn main_loop(&mut self) {
        let mut events = Events::with_capacity(256);
        let mut idle_since: Option<Instant> = None;
        let mut stalled_since: Option<Instant> = None;
        let mut idle_passes = 0u32;
        let mut spun = false;
        let mut stall_yield = true;
        let mut passes = 0u32;
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return;
            }
            let mut timeout = 0;
            // Reading the clock every pass would cost as much as the pass itself.
            if self.stalled == 0 {
                stalled_since = None;
                stall_yield = true;
            } else if idle_passes % 16 == 15 {
                stall_yield =
                    stalled_since.get_or_insert_with(Instant::now).elapsed() < STALL_YIELD;
            }
            if !spun && idle_passes % 16 == 15 {
                spun = idle_since.is_some_and(|t| t.elapsed() >= SPIN);
            }
            if spun && self.stalled > 0 && stall_yield {
                // A ring is full and its consumer may need this core to drain it.
                std::thread::yield_now();
            } else if spun {
                self.shared.sleeping.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                if !self.shared.any_dirty() && !self.shared.stop.load(Ordering::Relaxed) {
                    timeout = self.sleep_ms();
                }
            }
            // While spinning, look at the sockets every 8th pass only (epoll_wait is the most
            // expensive part of an idle pass), and offer the core to other threads in between:
            // on a loaded machine the worker this thread just woke may need it.
            let n = if timeout > 0 || idle_passes % 8 == 0 {
                self.epoll.wait(&mut events, timeout)
            } else {
                if idle_passes > 0 {
                    std::thread::yield_now();
                }
                0
            };
            self.shared.sleeping.store(false, Ordering::Relaxed);
            let mut progress = n > 0;
            for (flags, token) in events.ready(n) {
                match token {
                    TOKEN_EVENTFD => net::eventfd_drain(self.shared.eventfd.as_fd()),
                    TOKEN_LISTENER => self.acceptable = true,
                    i => match self.conns.get_mut(i as usize) {
                        Some(Some(Entry::Hello(h)))
                            if flags & (ready::IN | ready::RDHUP | ready::HUP | ready::ERR)
                                != 0 =>
                        {
                            h.readable = true;
                        }
                        // Applied under the link's lock, by `pump_link`.
                        Some(Some(Entry::Link(l))) => {
                            l.events.fetch_or(flags, Ordering::SeqCst);
                        }
                        _ => {}
                    },
                }
            }
            if self.shared.handed.load(Ordering::Acquire) {
                self.take_outgoing();
                progress = true;
            }
            if self.acceptable && self.accept_retry.is_none_or(|t| t <= Instant::now()) {
                progress |= self.accept();
            }
            progress |= self.collect_bells();
            progress |= self.pump();
            self.wake_locals();
            // The clock is read before sleeping and every 1024 passes, not on every pass.
            if timeout > 0 || idle_passes % 1024 == 1023 || passes % 1024 == 1023 {
                self.watch_acks();
            }
            passes = passes.wrapping_add(1);
            self.report_losses();
            if progress {
                idle_since = None;
                idle_passes = 0;
                spun = false;
            } else {
                idle_passes = idle_passes.wrapping_add(1);
                if idle_since.is_none() {
                    idle_since = Some(Instant::now());
                }
            }
        }
    }

    /// How long to sleep in epoll, in milliseconds.
    fn sleep_ms(&self) -> i32 {
        if self.stalled > 0 {
            return 1;
        }
        let wait = if self.hellos > 0 || !self.lost.is_empty() {
            50
        } else {
            IDLE_WAIT.as_millis() as i32
        };
        // A failed `accept` is retried on time: nothing else wakes this thread for it.
        match self.accept_retry {
            Some(t) => wait.min(t.saturating_duration_since(Instant::now()).as_millis() as i32 + 1),
            None => wait,
        }
    }

    /// Every [`WATCH_EVERY`]: a connection whose data has waited [`UNANSWERED_LIMIT`] for an
    /// acknowledgement loses its peer (a host that vanished while this rank sent to it; an idle
    /// connection is keepalive's). Reported like an EOF, after `LOSS_GRACE`, unless closing.
    fn watch_acks(&mut self) {
        let now = Instant::now();
        if now < self.watch_at {
            return;
        }
        self.watch_at = now + WATCH_EVERY;
        let mut silent = Vec::new();
        for e in self.conns.iter().flatten() {
            let Entry::Link(l) = e else { continue };
            if let Ok(Some(d)) = net::unanswered(l.sock.as_fd())
                && d >= UNANSWERED_LIMIT
            {
                silent.push((l.rank, d, l.addr));
            }
        }
        for (r, d, addr) in silent {
            if self.reported[r as usize] {
                continue;
            }
            let detail = format!(
                "what this rank sent it has had no acknowledgement for {} s",
                d.as_secs()
            );
            self.after(Fate::Lost(r, detail), addr);
        }
    }

    /// Reports the peers whose connection ended more than [`LOSS_GRACE`] ago, unless the job
    /// has started closing since.
    fn report_losses(&mut self) {
        if self.lost.is_empty() {
            return;
        }
        if self.closing() {
            self.lost.clear();
            return;
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.lost.len() {
            if self.lost[i].2 > now {
                i += 1;
                continue;
            }
            let (r, detail, _) = self.lost.swap_remove(i);
            let e = FabricError::PeerLost {
                peer: r,
                host: self.host(r),
                detail,
            };
            self.report(r, e);
        }
    }

    /// Marks the connections to every remote worker whose bell rang as pending.
    fn collect_bells(&mut self) -> bool {
        let mut any = false;
        for w in 0..self.shared.dirty.len() {
            if self.shared.dirty[w].load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = self.shared.dirty[w].swap(0, Ordering::Acquire);
            any = true;
            while bits != 0 {
                let g = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let r = self.rank_of.get(g).copied().unwrap_or(u32::MAX) as usize;
                for &c in self
                    .outs_of_rank
                    .get(r)
                    .map(|v| v.as_slice())
                    .unwrap_or(&[])
                {
                    if let Some(Some(Entry::Link(l))) = self.conns.get(c) {
                        l.pending.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
        if any {
            // Pairs with the fence in `Shared::ring` for a bit that was already set.
            fence(Ordering::SeqCst);
        }
        any
    }

    /// One pass over every connection.
    fn pump(&mut self) -> bool {
        let mut progress = false;
        // A delivery that waited for a full ring is retried on every incoming link.
        let retry = std::mem::take(&mut self.stalled) > 0;
        // Only hellos have deadlines; the clock is not read on the data path.
        let now = (self.hellos > 0).then(Instant::now);
        for i in 0..self.conns.len() {
            let fate = match &mut self.conns[i] {
                None => continue,
                Some(Entry::Link(l)) => {
                    // Only a link something happened to: a pass must not hold a link a
                    // worker wants for nothing.
                    if l.events.load(Ordering::SeqCst) == 0
                        && !l.pending.load(Ordering::SeqCst)
                        && !retry
                    {
                        continue;
                    }
                    let l = l.clone();
                    let fate = self.pump_link(&l, &mut progress);
                    // A bell that found the link held by this pass left its slots to the holder
                    // (`Link::send_now`): now unlocked, look again.
                    if matches!(fate, Fate::Keep) && l.pending.load(Ordering::SeqCst) {
                        l.send_now(&self.shared);
                    }
                    match fate {
                        Fate::Keep => continue,
                        fate => {
                            let mut st = l.state.lock().unwrap_or_else(|p| p.into_inner());
                            st.closed = true;
                            drop(st);
                            // Workers may still hold the link: close it for them too.
                            let _ = self.epoll.delete(l.sock.as_fd());
                            let _ = l.sock.shutdown(Shutdown::Both);
                            (fate, l.addr)
                        }
                    }
                }
                Some(Entry::Hello(h)) => {
                    if now.is_some_and(|now| h.deadline <= now) {
                        self.hellos -= 1;
                        let why = format!("no complete hello within {} s", HELLO_TIMEOUT.as_secs());
                        (Fate::Refuse(why), h.addr)
                    } else if !h.readable {
                        continue;
                    } else {
                        let Some(Entry::Hello(h)) = self.conns[i].take() else {
                            unreachable!("the entry was a hello a moment ago")
                        };
                        match self.read_hello(h, i, &mut progress) {
                            Ok(e) => {
                                self.conns[i] = Some(e);
                                continue;
                            }
                            Err((fate, addr)) => {
                                self.hellos -= 1;
                                (fate, addr)
                            }
                        }
                    }
                }
            };
            self.after(fate.0, fate.1);
            progress = true;
            self.conns[i] = None;
            self.free.push(i);
            // Dropping a hello's socket closes it, which also removes it from the epoll set.
        }
        progress
    }

    /// One pass over a link the workers do not hold: applies its epoll events, then writes or
    /// reads it as they ask. An incoming socket read while no worker polls is re-armed.
    fn pump_link(&mut self, l: &Link, progress: &mut bool) -> Fate {
        let Ok(mut st) = l.state.try_lock() else {
            // Its holder does the work; events left for it are applied at the next pass.
            if l.events.load(Ordering::Relaxed) != 0 {
                *progress = true;
            }
            return Fate::Keep;
        };
        if st.closed {
            return Fate::Keep;
        }
        let ev = l.events.swap(0, Ordering::SeqCst);
        let hup = ready::HUP | ready::ERR;
        if ev & (ready::IN | ready::RDHUP | hup) != 0 {
            st.readable = true;
        }
        if ev & (ready::OUT | hup) != 0 {
            st.writable = true;
        }
        if let Some(f) = st.ended.take() {
            return f;
        }
        let rx = self.rx;
        let (woke, list) = (&mut self.woke, &mut self.woke_list);
        let mut mark = |w: u32| {
            if !std::mem::replace(&mut woke[w as usize], true) {
                list.push(w);
            }
        };
        let readable = st.readable;
        match &mut st.side {
            Side::Out(o) => {
                if l.pending.swap(false, Ordering::SeqCst) {
                    o.pending = true;
                }
                let unsent = o.wstart < o.wbuf.len();
                if o.pending || readable || (st.writable && unsent) {
                    return pump_out(&l.sock, &mut st, progress);
                }
                Fate::Keep
            }
            Side::In(inc) => {
                if !readable && !inc.stalled {
                    return Fate::Keep;
                }
                let fate = pump_in(&l.sock, &mut st, &rx, progress, &mut mark);
                if let Side::In(inc) = &st.side
                    && inc.stalled
                {
                    self.stalled += 1;
                }
                if self.shared.pollers.load(Ordering::SeqCst) == 0 {
                    l.arm(&self.epoll);
                }
                fate
            }
        }
    }

    /// Reports what ended a connection: a stranger's line, a lost peer after its grace, a broken
    /// protocol at once.
    fn after(&mut self, fate: Fate, addr: SocketAddr) {
        match fate {
            Fate::Keep => {}
            Fate::Refuse(why) => refuse(addr, &why),
            Fate::Lost(r, detail) => {
                tracing::debug!(
                    target: "gossamer::fabric",
                    fabric = "tcp",
                    peer = r,
                    %addr,
                    closing = self.closing(),
                    "connection ended: {detail}"
                );
                if !self.closing() && !self.lost.iter().any(|l| l.0 == r) {
                    self.lost.push((r, detail, Instant::now() + LOSS_GRACE));
                }
            }
            Fate::Broke(r, detail) => {
                if !self.closing() {
                    self.report(
                        r,
                        FabricError::Protocol {
                            fabric: FabricKind::Tcp,
                            peer: r,
                            host: self.host(r),
                            detail,
                        },
                    );
                }
            }
        }
    }

    fn closing(&self) -> bool {
        self.shared.closing.load(Ordering::SeqCst)
    }

    fn host(&self, r: u32) -> String {
        self.hosts.get(r as usize).cloned().unwrap_or_default()
    }

    /// Reports a failure of peer `r` once.
    fn report(&mut self, r: u32, e: FabricError) {
        if std::mem::replace(&mut self.reported[r as usize], true) {
            return;
        }
        tracing::info!(
            target: "gossamer::fabric",
            fabric = "tcp",
            peer = r,
            host = %self.host(r),
            "peer failed: {e}"
        );
        self.record(e.clone());
        (self.hooks.fail)(e);
    }

    fn record(&self, e: FabricError) {
        let mut st = self.shared.attach.lock().unwrap_or_else(|p| p.into_inner());
        st.failed.get_or_insert(e);
        self.shared.attached.notify_all();
    }

    fn wake_locals(&mut self) {
        for l in self.woke_list.drain(..) {
            self.woke[l as usize] = false;
            (self.hooks.wake)(l);
        }
    }
}
