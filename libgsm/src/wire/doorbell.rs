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
//! This module does not know rings or workers; it only waits and wakes.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering, fence};
use std::time::Duration;

/// A handle to one doorbell word (cheap to clone; every clone names the same word).
#[derive(Clone)]
pub struct Doorbell {
    word: *const AtomicU32,
    /// Keeps the word's memory alive (the heap word itself, or the mapped segment).
    _keep: Arc<dyn Any + Send + Sync>,
}

// SAFETY: the word is only accessed atomically, and `_keep` keeps its memory valid for as long as
// any handle exists, whichever thread holds it.
unsafe impl Send for Doorbell {}
// SAFETY: as for `Send`.
unsafe impl Sync for Doorbell {}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorbell")
            .field("word", &self.word)
            .field("sleeping", &(self.word().load(Ordering::Relaxed) != 0))
            .finish()
    }
}

impl Doorbell {
    /// A doorbell in this process's heap (for threads of one process).
    pub fn heap() -> Self {
        let keep = Arc::new(AtomicU32::new(0));
        Doorbell {
            word: Arc::as_ptr(&keep),
            _keep: keep,
        }
    }

    /// A doorbell whose word lives in memory that `keep` keeps mapped (a shared segment).
    ///
    /// # Safety
    /// `word` is valid for atomic access and aligned to 4 bytes for as long as `keep` lives, and
    /// every process that maps it uses it only through this type (values 0 and 1).
    pub unsafe fn in_mapping(word: *const AtomicU32, keep: Arc<dyn Any + Send + Sync>) -> Self {
        assert!(
            !word.is_null() && (word as usize) % 4 == 0,
            "Doorbell::in_mapping: the word at {word:p} is null or misaligned"
        );
        Doorbell { word, _keep: keep }
    }

    #[inline]
    fn word(&self) -> &AtomicU32 {
        // SAFETY: valid for as long as `_keep`, which `self` holds (constructor contracts).
        unsafe { &*self.word }
    }

    /// Wakes the sleeper if it sleeps. Call it after publishing (the fence inside orders the
    /// publication before the check).
    #[inline]
    pub fn ring(&self) {
        fence(Ordering::SeqCst);
        let w = self.word();
        if w.load(Ordering::Relaxed) != 0 && w.swap(0, Ordering::SeqCst) != 0 {
            futex_wake(w);
        }
    }

    /// Wakes the sleeper unconditionally (used to stop a worker).
    pub fn force(&self) {
        let w = self.word();
        w.store(0, Ordering::SeqCst);
        futex_wake(w);
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

fn futex_wait(w: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `w` is a valid, aligned 32-bit word for the duration of the call and `ts` a valid
    // timespec; FUTEX_WAIT only reads the word and sleeps.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

fn futex_wake(w: &AtomicU32) {
    // SAFETY: `w` is a valid, aligned 32-bit word; FUTEX_WAKE does not access memory beyond it.
    unsafe {
        libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
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
    fn a_sleep_with_work_pending_returns_at_once() {
        let bell = Doorbell::heap();
        let start = Instant::now();
        bell.sleep(Duration::from_secs(10), || false);
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(!bell.is_sleeping());
    }
}
