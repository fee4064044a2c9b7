//! Who turns the RMA ring protocol (`rings.rs`): the rank's polling workers while any poll, its
//! progress thread (`gsm-ofi`, `gsm-verbs`) while every worker sleeps.
//!
//! libfabric's `tcp;ofi_rxm` and `shm` progress manually: a write lands in the target's memory,
//! and its completion is seen, only when some thread of the target reads the completion queue;
//! and on any transport a completion becomes a published header only in a turn.
//! A progress thread alone puts two thread hand-offs on each hop of a round trip (the
//! publisher's bell wakes its thread, the target's thread wakes the consumer), which on two
//! busy cores cost a quarter of a millisecond per round trip. So, as Open MPI's caller polls its
//! own transport, a worker that polls drives the whole rank's progress itself ([`Rings::turn`]
//! under a lock: completions, published slots, credits) from its [`Progress`] hook, and its bell
//! posts its writes at once. The thread only backs the workers up while any of them polls
//! (one look per millisecond when no worker took a turn since its last look, e.g. a worker stuck
//! in a long task); when the last worker parks ([`Turn::Park`]), the thread takes over: it
//! naps 1 ms at a time on the bells' eventfd and turns between naps. When the transport has a
//! wait descriptor ([`Transport::wait_fd`]: verbs' completion channel; ofi's completion queue
//! only with `GSM_OFI_CQ_WAIT=fd`, since libfabric signals it on every completion, a cost on
//! every hop of a polling worker's round trip) the thread sleeps on it too, for up to 20 ms.
//!
//! It does not know the protocol (`rings.rs` does) or what a ring holds.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;

use super::Transport;
use super::rings::{Rings, Shared, Turned};
use crate::fabric::{Bell, Links, Progress, Turn};
use crate::sys::net::{self, Epoll, Events, ready};

/// The state and the workers' bookkeeping, shared by the thread, the workers' hooks and the
/// adapter's own users (ofi's rendezvous and segment port).
pub(crate) struct Engine<T: Transport> {
    shared: Arc<Shared>,
    state: Mutex<Rings<T>>,
    /// A turn was asked for while another thread held the state: its holder turns again.
    pending: AtomicBool,
    /// Local workers between a `Turn::Poll` and their next `Turn::Park`.
    pollers: AtomicUsize,
    /// Per local worker: counted in `pollers`.
    polling: Box<[AtomicBool]>,
    /// Per local worker: its polls in a row that found nothing (only that worker writes it).
    empty: Box<[AtomicU32]>,
    /// Workers' turns so far (the thread's sign that workers still poll).
    turns: AtomicU64,
}

/// Idle turns the thread spins (each reads the completion queue) before it sleeps.
const SPIN: u32 = 256;

/// A polling worker gives its CPU away after this many polls in a row that found nothing: under
/// load the kernel defers a loopback or veth packet to `ksoftirqd` of the CPU that sent it, so a
/// worker that polls for its answer without yielding holds up its own request (the tcp fabric's
/// measurement, in docs/performance-log.md).
const YIELD_AFTER: u32 = 2;

/// While workers poll, the thread looks whether they still take turns this often (ms).
const BACKUP_MS: i32 = 1;

/// Makes the hooks and bells of `local` workers, and starts the thread `name`; returns it and
/// the engine, which the adapter's own users lock.
pub(crate) fn start<T: Transport>(
    state: Rings<T>,
    shared: Arc<Shared>,
    local: u32,
    links: &mut Links,
    name: &str,
) -> std::io::Result<(JoinHandle<()>, Arc<Engine<T>>)> {
    let cq = Epoll::new()?;
    cq.add(shared.eventfd.as_fd(), ready::IN, 0)?;
    if let Some(fd) = state.transport_ref().wait_fd() {
        cq.add(fd, ready::IN, 1)?;
    }
    let bell = Epoll::new()?;
    bell.add(shared.eventfd.as_fd(), ready::IN, 0)?;
    let engine = Arc::new(Engine {
        shared,
        state: Mutex::new(state),
        pending: AtomicBool::new(false),
        pollers: AtomicUsize::new(0),
        polling: (0..local).map(|_| AtomicBool::new(false)).collect(),
        empty: (0..local).map(|_| AtomicU32::new(0)).collect(),
        turns: AtomicU64::new(0),
    });
    let remotes: Vec<u32> = links.bells.iter().map(|(g, _)| *g).collect();
    for l in 0..local {
        let e = engine.clone();
        let hook = Progress(Arc::new(move |t| e.hook(l as usize, t)));
        links.progress.push((l, hook));
        for &g in &remotes {
            let e = engine.clone();
            let bell = Bell::Call(Arc::new(move || e.bell()));
            links.worker_bells.push((l, g, bell));
        }
    }
    let e = engine.clone();
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || e.run(&cq, &bell))?;
    Ok((thread, engine))
}

impl<T: Transport> Engine<T> {
    /// Turns while this thread can take the state, and again while another thread asked for a
    /// turn meanwhile; `None` when another thread holds it (that one then turns again).
    pub(crate) fn drive(&self) -> Option<Turned> {
        self.pending.store(true, Ordering::Relaxed);
        // Pairs with the fence after a holder's unlock: either it sees `pending`, or we get the
        // lock after it let go.
        fence(Ordering::SeqCst);
        let mut out: Option<Turned> = None;
        loop {
            let mut st = match self.state.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return out,
            };
            self.pending.store(false, Ordering::Relaxed);
            let t = st.turn();
            drop(st);
            let o = out.get_or_insert_with(Turned::default);
            o.work |= t.work;
            o.delivered |= t.delivered;
            fence(Ordering::SeqCst);
            if !self.pending.load(Ordering::Relaxed) {
                return out;
            }
        }
    }

    /// The state, for the adapter's own operations.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Rings<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A worker's bell after it published to a remote worker: post the write now.
    fn bell(&self) {
        if self.drive().is_none() {
            // Held by the thread, which may be about to sleep without a turn's `pending` check
            // (it checks `unsent` after announcing its sleep instead).
            self.shared.ring();
        }
    }

    /// Local worker `l`'s [`Progress`] hook.
    fn hook(&self, l: usize, t: Turn) -> bool {
        match t {
            Turn::Poll => {
                if !self.polling[l].load(Ordering::Relaxed) {
                    self.polling[l].store(true, Ordering::Relaxed);
                    self.pollers.fetch_add(1, Ordering::SeqCst);
                }
                self.turns.fetch_add(1, Ordering::Relaxed);
                let got = self.drive().is_some_and(|t| t.delivered);
                let empty = &self.empty[l];
                if got {
                    empty.store(0, Ordering::Relaxed);
                } else {
                    let n = empty.load(Ordering::Relaxed) + 1;
                    empty.store(n, Ordering::Relaxed);
                    if n % YIELD_AFTER == 0 {
                        std::thread::yield_now();
                    }
                }
                got
            }
            Turn::Park => {
                if self.drive().is_some_and(|t| t.delivered) {
                    return true;
                }
                if self.polling[l].swap(false, Ordering::Relaxed)
                    && self.pollers.fetch_sub(1, Ordering::SeqCst) == 1
                {
                    // The last poller parks: the thread watches the completion queue again.
                    net::eventfd_signal(self.shared.eventfd.as_fd());
                }
                false
            }
        }
    }

    /// The thread: backs the polling workers up, or drives alone while every worker sleeps.
    fn run(&self, cq: &Epoll, bell: &Epoll) {
        let mut events = Events::with_capacity(4);
        let mut idle = 0u32;
        let mut seen = self.turns.load(Ordering::Relaxed);
        while !self.shared.stop.load(Ordering::Acquire) {
            if self.pollers.load(Ordering::SeqCst) > 0 {
                idle = 0;
                let rung = bell.wait(&mut events, BACKUP_MS) > 0;
                net::eventfd_drain(self.shared.eventfd.as_fd());
                let now = self.turns.load(Ordering::Relaxed);
                if rung || now == seen {
                    self.drive();
                }
                seen = now;
                continue;
            }
            let work = {
                let t = self.lock().turn();
                fence(Ordering::SeqCst);
                self.pending.swap(false, Ordering::Relaxed) || t.work
            };
            if work {
                idle = 0;
                continue;
            }
            idle += 1;
            if idle < SPIN {
                std::hint::spin_loop();
                continue;
            }
            self.sleep(cq, &mut events);
        }
    }

    /// Sleeps until a bell, a completion, a worker polling again, or a time-out: 20 ms, or
    /// 1 ms while a consumer holds half a ring or more uncredited, or the transport has no
    /// wait descriptor, or one that does not wake on a peer's write ([`Transport::naps_short`]).
    /// Without a descriptor it does not nap while the transport is serving
    /// ([`Transport::serving`]: a body parked for a peer's read, whose bytes move only in this
    /// rank's turns); it yields instead.
    fn sleep(&self, cq: &Epoll, events: &mut Events) {
        let mut st = self.lock();
        let can_wait = st.transport_ref().wait_fd().is_some();
        let short = st.watching() || st.transport_ref().naps_short() || !can_wait;
        self.shared.sleeping.store(true, Ordering::Relaxed);
        // Pairs with `Shared::ring`: either the thread sees the header, or the bell sees it
        // asleep.
        fence(Ordering::SeqCst);
        let serving = st.transport_ref().serving() && !can_wait;
        let block = !st.unsent() && !serving && st.transport().may_sleep();
        drop(st);
        if block && !self.shared.stop.load(Ordering::Acquire) {
            cq.wait(events, if short { 1 } else { 20 });
            net::eventfd_drain(self.shared.eventfd.as_fd());
            if can_wait {
                self.lock().transport().woke();
            }
        } else if serving {
            std::thread::yield_now();
        }
        self.shared.sleeping.store(false, Ordering::Relaxed);
    }
}
