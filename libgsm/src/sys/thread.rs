//! Threads waiting on a word: the futex wait and wake a doorbell sleeps and rings with (rustix's
//! `thread::futex`). The shared, not the process-private, operations, so that a word in a mapped
//! segment works between processes.
//!
//! It does not know doorbells or their protocol (`wire::doorbell` does); a wait or wake that
//! fails is ignored, as the doorbell's timeout and re-checks make it harmless.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use rustix::thread::futex;

/// Sleeps while `word` holds `expected`, for at most `timeout` (`FUTEX_WAIT`, shared); returns
/// at once if it does not, or early on a wake, a signal or a spurious wake-up.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = futex::Timespec {
        tv_sec: timeout.as_secs() as futex::Secs,
        tv_nsec: timeout.subsec_nanos() as futex::Nsecs,
    };
    // The result does not matter: the caller re-checks the word and its rings either way.
    let _ = futex::wait(word, futex::Flags::empty(), expected, Some(&ts));
}

/// Wakes every thread (of any process) waiting on `word` (`FUTEX_WAKE`, shared).
pub(crate) fn futex_wake(word: &AtomicU32) {
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}
