//! A doorbell: the word an idle worker sleeps on and a producer rings after publishing a slot to
//! it, so that a sleeping consumer wakes up whether the producer is a thread of the same process,
//! a process that maps the same shared-memory segment, or a fabric's I/O thread.
//!
//! The word is a `futex` (Linux): 0 while the worker is awake, 1 while it sleeps or is about to.
//! The sleeper stores 1, issues a SeqCst fence, re-checks its rings, and only then waits on the
//! futex for value 1 (with a timeout as a safety net). A ringer publishes its slot, issues a
//! SeqCst fence, and if it reads 1 it swaps in 0 and wakes the futex. This is the Dekker pattern:
//! at least one side sees the other's store, so either the sleeper sees the slot or the ringer
//! sees the flag. A wake that comes between the store and the wait is not lost either: the wait
//! returns at once when the word no longer holds 1. The wait uses the shared (not the
//! process-private) futex operations, so it works for a word in a mapped segment.
//!
//! **The gate.** Beside the futex word, in the same line, a doorbell has a 64-bit *gate* word that
//! tells an awake consumer whether anything was published to it since it last looked. The
//! consumer opens the gate by storing a key of its own (never [`CLOSED`]), issuing a SeqCst fence,
//! and re-checking its rings; every ring, after its fence, stores [`CLOSED`] into an open gate.
//! The same Dekker argument holds: either the consumer's re-check sees the slot, or the ringer's
//! store closes the gate after the consumer opened it. So while the gate still holds the key,
//! nothing has been published to the consumer since its last look, and it need not look; the
//! runtime compares its trusts' home words against it, so that an inline apply learns "this
//! worker, and nothing to serve" from the one compare it makes anyway (`WorkerCore::gate`).
//!
//! **The alarm.** A worker that also waits for sockets (`crate::reactor`) sleeps in `epoll_wait`,
//! not on the futex. It then stores [`POLLING`] (2) instead of 1, and a ringer that swaps out 2
//! writes the doorbell's *alarm*, an eventfd in that epoll set, instead of waking the futex. Only
//! a doorbell in this process's heap has an alarm (its ringers are threads of this process); one
//! in a shared segment has none, since a ringer in another process could not write the eventfd,
//! and its sleeper must not wait on sockets for longer than it may miss a ring.
//!
//! This module does not know rings or workers; it only waits, wakes and closes the gate. The
//! futex calls themselves are in `sys::thread`, the eventfd's in `sys::net`. See `wire/README.md`
//! for who rings whom.

use std::any::Any;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::sys::net::eventfd_signal;
use crate::sys::thread::{futex_wait, futex_wake};

/// The futex word of a sleeper that waits in `epoll_wait` on its alarm (see the module docs).
pub const POLLING: u32 = 2;

/// The value of a closed gate: something was published since the consumer last looked, or the
/// consumer has not opened it. No key a consumer opens with may equal it.
pub const CLOSED: u64 = u64::MAX;

/// Where a doorbell's gate word lies after its futex word (the shm segment's doorbell lines
/// have the same layout).
pub const GATE_OFFSET: usize = 8;

/// A doorbell in this process's heap: the futex word and the gate, on a line of their own so
/// that ringing one worker does not disturb another's line.
#[repr(C, align(64))]
struct HeapLine {
    word: AtomicU32,
    gate: AtomicU64,
}

/// A handle to one doorbell (cheap to clone; every clone names the same words).
#[derive(Clone)]
pub struct Doorbell {
    word: *const AtomicU32,
    gate: *const AtomicU64,
    /// Keeps the words' memory alive (the heap line itself, or the mapped segment).
    _keep: Arc<dyn Any + Send + Sync>,
    /// The alarm eventfd, once a sleeper that polls sockets gave one; `None` for a doorbell in
    /// a shared segment, which cannot have one (see the module docs).
    alarm: Option<Arc<OnceLock<OwnedFd>>>,
}

// SAFETY: the words are only accessed atomically, and `_keep` keeps their memory valid for as
// long as any handle exists, whichever thread holds it.
unsafe impl Send for Doorbell {}
// SAFETY: as for `Send`.
unsafe impl Sync for Doorbell {}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorbell")
            .field("word", &self.word)
            .field("sleeping", &(self.word().load(Ordering::Relaxed) != 0))
            .field(
                "gate_open",
                &(self.gate().load(Ordering::Relaxed) != CLOSED),
            )
            .finish()
    }
}

impl Doorbell {
    /// A doorbell in this process's heap (for threads of one process), its gate closed.
    pub fn heap() -> Self {
        let keep = Arc::new(HeapLine {
            word: AtomicU32::new(0),
            gate: AtomicU64::new(CLOSED),
        });
        Doorbell {
            word: &keep.word,
            gate: &keep.gate,
            _keep: keep,
            alarm: Some(Arc::new(OnceLock::new())),
        }
    }

    /// A doorbell whose futex word lives at `word` and whose gate at `GATE_OFFSET` bytes past
    /// it, in memory that `keep` keeps mapped (a shared segment).
    ///
    /// # Safety
    /// The `GATE_OFFSET + 8` bytes at `word` are valid for atomic access for as long as `keep`
    /// lives, `word` is aligned to 8 bytes, and every process that maps them uses them only
    /// through this type.
    pub unsafe fn in_mapping(word: *const AtomicU32, keep: Arc<dyn Any + Send + Sync>) -> Self {
        assert!(
            !word.is_null() && (word as usize) % 8 == 0,
            "Doorbell::in_mapping: the word at {word:p} is null or not aligned to 8 bytes"
        );
        // SAFETY: within the bytes the caller vouches for (contract).
        let gate = unsafe { word.cast::<u8>().add(GATE_OFFSET) }.cast::<AtomicU64>();
        Doorbell {
            word,
            gate,
            _keep: keep,
            alarm: None,
        }
    }

    #[inline]
    fn word(&self) -> &AtomicU32 {
        // SAFETY: valid for as long as `_keep`, which `self` holds (constructor contracts).
        unsafe { &*self.word }
    }

    /// The gate word (see the module docs): the consumer reads it with a relaxed load.
    #[inline(always)]
    pub fn gate(&self) -> &AtomicU64 {
        // SAFETY: valid for as long as `_keep`, which `self` holds (constructor contracts).
        unsafe { &*self.gate }
    }

    /// Opens the gate with `key` (not [`CLOSED`]). The caller must then look at everything a
    /// ringer may have published to it, and close the gate again if anything waits: a ring that
    /// came before the open may have found the gate still closed.
    pub fn open_gate(&self, key: u64) {
        debug_assert_ne!(key, CLOSED);
        self.gate().store(key, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Closes the gate (a store only when it is open).
    #[inline]
    pub fn close_gate(&self) {
        let g = self.gate();
        if g.load(Ordering::Relaxed) != CLOSED {
            g.store(CLOSED, Ordering::Relaxed);
        }
    }

    /// Closes the gate, and wakes the sleeper if it sleeps. Call it after publishing (the fence
    /// inside orders the publication before both).
    #[inline]
    pub fn ring(&self) {
        fence(Ordering::SeqCst);
        self.close_gate();
        let w = self.word();
        if w.load(Ordering::Relaxed) != 0 {
            match w.swap(0, Ordering::SeqCst) {
                0 => {}
                POLLING => self.sound_alarm(),
                _ => futex_wake(w),
            }
        }
    }

    /// Wakes the sleeper unconditionally (used to stop a worker).
    pub fn force(&self) {
        self.gate().store(CLOSED, Ordering::SeqCst);
        let w = self.word();
        w.store(0, Ordering::SeqCst);
        futex_wake(w);
        self.sound_alarm();
    }

    #[cold]
    fn sound_alarm(&self) {
        if let Some(fd) = self.alarm.as_ref().and_then(|a| a.get()) {
            eventfd_signal(fd.as_fd());
        }
    }

    /// Gives this doorbell its alarm (an eventfd the sleeper polls); `Err` gives it back when
    /// the doorbell is in a shared segment or has one already.
    pub fn set_alarm(&self, fd: OwnedFd) -> Result<(), OwnedFd> {
        match &self.alarm {
            Some(a) => a.set(fd),
            None => Err(fd),
        }
    }

    /// Like [`sleep`](Self::sleep), for a sleeper whose doorbell has an alarm: announces
    /// [`POLLING`], so that a ringer writes the alarm, and calls `wait` (which waits for the
    /// alarm among other things, at most the timeout it is given) unless `still_idle` returns
    /// `false`.
    pub fn sleep_polling(
        &self,
        timeout: Duration,
        still_idle: impl FnOnce() -> bool,
        wait: impl FnOnce(Duration),
    ) {
        debug_assert!(self.alarm.as_ref().is_some_and(|a| a.get().is_some()));
        let w = self.word();
        w.store(POLLING, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if still_idle() {
            wait(timeout);
        }
        w.store(0, Ordering::Relaxed);
    }

    /// Sleeps for at most `timeout` unless `still_idle` (called after announcing the sleep)
    /// returns `false`, or a ringer wakes it.
    pub fn sleep(&self, timeout: Duration, still_idle: impl FnOnce() -> bool) {
        let w = self.word();
        w.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if still_idle() {
            futex_wait(w, 1, timeout);
        }
        w.store(0, Ordering::Relaxed);
    }

    /// Whether the sleeper has announced that it sleeps.
    pub fn is_sleeping(&self) -> bool {
        self.word().load(Ordering::Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    #[test]
    fn a_ring_wakes_a_sleeper_long_before_its_timeout() {
        let bell = Doorbell::heap();
        let flag = Arc::new(AtomicBool::new(false));
        let (b2, f2) = (bell.clone(), flag.clone());
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            while !f2.load(Ordering::Acquire) {
                b2.sleep(Duration::from_secs(10), || !f2.load(Ordering::Acquire));
            }
            start.elapsed()
        });
        while !bell.is_sleeping() {
            std::thread::yield_now();
        }
        flag.store(true, Ordering::Release);
        bell.ring();
        let waited = t.join().unwrap();
        assert!(waited < Duration::from_secs(5), "slept {waited:?}");
    }

    #[test]
    fn a_ring_closes_the_gate_or_the_opener_sees_what_was_published() {
        let bell = Doorbell::heap();
        assert_eq!(
            bell.gate().load(Ordering::Relaxed),
            CLOSED,
            "a new gate is closed"
        );
        bell.open_gate(7);
        assert_eq!(bell.gate().load(Ordering::Relaxed), 7);
        bell.ring();
        assert_eq!(
            bell.gate().load(Ordering::Relaxed),
            CLOSED,
            "a ring closes it"
        );
        // A publisher and a watcher racing, round after round: the watcher opens, then looks
        // for the publication; the publisher publishes, then rings. Never may the gate stay
        // open while the watcher missed the publication. (The rounds start together at a
        // barrier, which rarely lines up the few instructions where a missing fence would show;
        // the part above is what fails at once if a ring stops closing the gate.)
        let rounds = 20_000;
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let published = Arc::new(AtomicBool::new(false));
        let (b2, p2, bell2) = (barrier.clone(), published.clone(), bell.clone());
        let publisher = std::thread::spawn(move || {
            for _ in 0..rounds {
                b2.wait();
                p2.store(true, Ordering::Relaxed);
                bell2.ring();
                b2.wait();
            }
        });
        for round in 0..rounds {
            bell.close_gate();
            published.store(false, Ordering::Relaxed);
            barrier.wait();
            bell.open_gate(7);
            let seen = published.load(Ordering::Relaxed);
            barrier.wait();
            let open = bell.gate().load(Ordering::Relaxed) != CLOSED;
            assert!(
                seen || !open,
                "round {round}: the gate stayed open over an unseen publication"
            );
        }
        publisher.join().unwrap();
    }

    #[test]
    fn a_sleep_with_work_pending_returns_at_once() {
        let bell = Doorbell::heap();
        let start = Instant::now();
        bell.sleep(Duration::from_secs(10), || false);
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(!bell.is_sleeping());
    }
}
