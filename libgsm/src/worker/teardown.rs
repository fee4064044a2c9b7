//! The end of a worker: dropping its fibers and properties while its core is still installed.

use super::*;

impl WorkerCore {
    /// Drops every fiber and property (at shutdown, while the core is still installed).
    pub(crate) fn teardown(&self) {
        if !self.shared.failed() {
            if let Some(w) = self.mail.borrow().unreceived_warning(self.id) {
                crate::output::eprint_line(w);
            }
            // Read before the fibers go: dropping their trusts sends releases that no poll
            // will apply any more.
            let twice = self.props.borrow().released_twice();
            if twice > 0 {
                crate::output::eprint_line(format!(
                    "gossamer: warning: {twice} propert{} on worker {} outlived every trust: a \
                     trust id was released twice, as when the bytes of a serialised Trust are \
                     deserialised more than once (each copy releases the same id); the \
                     propert{} stayed alive until the end of the run",
                    if twice == 1 { "y" } else { "ies" },
                    self.id,
                    if twice == 1 { "y" } else { "ies" },
                ));
            }
        }
        let deadlocked = matches!(
            self.shared.failure.lock().as_deref(),
            Ok(Some(Error::Deadlock { .. }))
        );
        if deadlocked {
            let waits = self.waits();
            if !waits.is_empty() {
                if let Ok(mut all) = self.shared.waits.lock() {
                    all.push((self.id, waits));
                }
            }
        }
        self.sched.drop_fibers();
        // A property still here lost its last trust to a leak (or never had it released
        // before the end); its destructor runs now, in delegated context as during the run (a
        // blocking `try_apply` in it gets `BlockingInDelegatedContext`, where it panicked with
        // "called outside a fiber" and failed a run that had succeeded), and a panic in it is
        // reported as one during the run is (`toggle`), not lost.
        let vals = self.props.borrow_mut().drain();
        for v in vals {
            if let Err(p) = self.context.caught(DELEGATED, move || drop(v)) {
                self.callback_panicked(&*p);
            }
        }
    }
}
