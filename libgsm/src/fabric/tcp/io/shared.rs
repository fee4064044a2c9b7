//! What the bootstrap thread, the bells, the workers and the I/O thread share: the bitmap of
//! remote workers whose bell rang, the sleeping flag and eventfd that wake the I/O thread, the
//! outgoing links `create` hands over, the incoming links the workers read, how many workers
//! poll them, and the attach state `attach` waits on. The bell's protocol
//! (two fences, no system call while the thread is awake) is here; the thread's side of it is
//! `Io::main_loop` and `Io::collect_bells`. See `fabric/tcp/README.md`.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Condvar, Mutex};

use super::{Handover, IncomingLink};
use crate::fabric::FabricError;
use crate::sys::net;

/// The state shared by the bootstrap thread, the bells and the I/O thread.
pub(in crate::fabric::tcp) struct Shared {
    pub(in crate::fabric::tcp) eventfd: OwnedFd,
    /// The I/O thread announced that it is about to wait in epoll.
    pub(in crate::fabric::tcp) sleeping: AtomicBool,
    /// One bit per global worker: its bell rang since the I/O thread last looked.
    pub(in crate::fabric::tcp) dirty: Box<[AtomicU64]>,
    pub(in crate::fabric::tcp) stop: AtomicBool,
    pub(in crate::fabric::tcp) closing: AtomicBool,
    pub(in crate::fabric::tcp) attach: Mutex<AttachState>,
    pub(in crate::fabric::tcp) attached: Condvar,
    /// The outgoing links, with their index in `Io::conns`, once `create` made them all.
    pub(in crate::fabric::tcp) handover: Mutex<Handover>,
    pub(in crate::fabric::tcp) incoming: Mutex<Vec<IncomingLink>>,
    /// Local workers that poll the incoming links (called `Turn::Poll` since their last
    /// `Turn::Park`); while there are none, the I/O thread watches the sockets.
    pub(in crate::fabric::tcp) pollers: AtomicUsize,
    /// Per local worker: counted in `pollers`.
    pub(in crate::fabric::tcp) polling: Box<[AtomicBool]>,
    /// `handover` is filled and the I/O thread has not taken it yet.
    pub(in crate::fabric::tcp) handed: AtomicBool,
}

/// What `attach` waits on, filled by the I/O thread.
pub(in crate::fabric::tcp) struct AttachState {
    /// Authenticated connections per rank.
    pub(in crate::fabric::tcp) from: Vec<u32>,
    /// The first failure the I/O thread reported.
    pub(in crate::fabric::tcp) failed: Option<FabricError>,
    /// Why the last `accept` failed, while it keeps failing (`"accepting connections on ADDR:
    /// ERROR"`): a peer that seems not to connect may have been refused by this rank.
    pub(in crate::fabric::tcp) accept_failure: Option<String>,
}

impl Shared {
    /// The bell of remote worker `g`: cheap (two fences and two loads) while the thread is awake.
    pub(in crate::fabric::tcp) fn ring(&self, g: u32) {
        // Orders the caller's publication before the look at the bit: if the bit is already set
        // and the I/O thread clears it later, its fence after the clear makes the slot visible.
        fence(Ordering::SeqCst);
        let (w, bit) = ((g / 64) as usize, 1u64 << (g % 64));
        let word = &self.dirty[w];
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, Ordering::Release);
        }
        // Dekker with the I/O thread's `sleeping` store, fence, bitmap check.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::Relaxed) {
            net::eventfd_signal(self.eventfd.as_fd());
        }
    }

    pub(super) fn any_dirty(&self) -> bool {
        self.dirty.iter().any(|w| w.load(Ordering::Relaxed) != 0)
    }

    /// Offers an authenticated incoming link (or half) from rank `r` to the workers and counts
    /// it for `attach`.
    pub(in crate::fabric::tcp) fn offer_incoming(&self, link: IncomingLink, r: u32) {
        self.incoming
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(link);
        let mut st = self.attach.lock().unwrap_or_else(|p| p.into_inner());
        st.from[r as usize] += 1;
        drop(st);
        self.attached.notify_all();
    }

    pub(in crate::fabric::tcp) fn wake(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
        net::eventfd_signal(self.eventfd.as_fd());
    }
}
