//! The running program as the threads that end it or signal it see it (the control listener,
//! the wrapper's signal handler, the main thread once it spawned or reaped it): its process group
//! ended (SIGTERM, SIGKILL after a grace period) or passed a forwarded signal, never once it has
//! been reaped. Starting and reaping it are `child.rs`'s business.

use super::GRACE;
use crate::sys;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The program, as the threads that may end it or signal it see it.
///
/// `requested` says someone asked to end it: one asking before the program has a pid stored is
/// acted on just after the spawn (the request is stored before the pid is read, and the pid
/// before the request is read, so under SeqCst at least one side sees the other).
#[derive(Clone, Default)]
pub(super) struct Program {
    pid: Arc<AtomicI32>,
    /// The program has been reaped: its pid may name another process.
    done: Arc<AtomicBool>,
    requested: Arc<AtomicBool>,
}

impl Program {
    /// Ends the program's process group: SIGTERM, SIGKILL after [`GRACE`].
    pub fn end(&self) {
        self.requested.store(true, Ordering::SeqCst);
        let pid = self.pid.load(Ordering::SeqCst);
        if pid <= 0 || self.done.load(Ordering::SeqCst) {
            return;
        }
        // Our own child's process group (the child leads it and has not been reaped: `done` is
        // false), so its own children end too.
        let _ = sys::kill_group(pid, sys::SIGTERM);
        // A stopped program acts on SIGTERM only once it continues.
        let _ = sys::kill_group(pid, sys::SIGCONT);
        let done = self.done.clone();
        std::thread::spawn(move || {
            std::thread::sleep(GRACE);
            if !done.load(Ordering::SeqCst) {
                // As above; the child has not been reaped.
                let _ = sys::kill_group(pid, sys::SIGKILL);
            }
        });
    }

    /// Passes a signal of `supervise::FORWARDED` on to the program's process group, from gsmrun
    /// or sent to the wrapper itself (by a batch system that signals every process of the job,
    /// say).
    pub fn pass_on(&self, sig: i32) {
        let pid = self.pid.load(Ordering::SeqCst);
        if crate::supervise::FORWARDED.contains(&sig)
            && pid > 0
            && !self.done.load(Ordering::SeqCst)
        {
            // Our own child's process group, not reaped (as above).
            let _ = sys::kill_group(pid, sig);
        }
    }

    /// The program runs as `pid`; a request to end it that came before is acted on now.
    pub fn started(&self, pid: i32) {
        self.pid.store(pid, Ordering::SeqCst);
        if self.requested.load(Ordering::SeqCst) {
            self.end();
        }
    }

    /// The program's pid while it has not been reaped.
    pub fn running_pid(&self) -> Option<i32> {
        let pid = self.pid.load(Ordering::SeqCst);
        (pid > 0 && !self.done.load(Ordering::SeqCst)).then_some(pid)
    }

    /// The program has been reaped.
    pub fn reaped(&self) {
        self.done.store(true, Ordering::SeqCst);
    }
}
