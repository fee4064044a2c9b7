//! Handing the runtime to the fabrics' callbacks once it exists, and a failure they report
//! before then to the runtime, whatever the interleaving. It knows nothing of what either is.

use std::sync::{Mutex, OnceLock};

/// Hands the runtime (`S`) to the fabrics' callbacks once it exists, and the first failure
/// (`E`) they report before then to the runtime: neither is lost whatever the interleaving. The
/// failure is kept and the runtime set under one lock; checked apart, a failure reported while
/// the runtime was being set could land in the "before" box just after it had been emptied, and
/// the job went on with a link the fabric had given up on (it reports each failure once).
pub(crate) struct Handoff<S, E> {
    runtime: OnceLock<S>,
    early: Mutex<Option<E>>,
}

impl<S, E> Default for Handoff<S, E> {
    fn default() -> Self {
        Handoff {
            runtime: OnceLock::new(),
            early: Mutex::new(None),
        }
    }
}

impl<S: Clone, E> Handoff<S, E> {
    /// The runtime, once attached.
    pub(crate) fn get(&self) -> Option<&S> {
        self.runtime.get()
    }

    /// A failure from a fabric: the runtime to report it to, or `None` if it was kept (the
    /// first of those before the runtime exists is kept, for [`attach`](Self::attach)).
    pub(crate) fn report(&self, e: E) -> Option<(S, E)> {
        let mut early = self.early.lock().unwrap_or_else(|p| p.into_inner());
        match self.runtime.get() {
            Some(s) => Some((s.clone(), e)),
            None => {
                early.get_or_insert(e);
                None
            }
        }
    }

    /// Sets the runtime; returns the failure reported before, if any.
    pub(crate) fn attach(&self, s: S) -> Option<E> {
        let mut early = self.early.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self.runtime.set(s);
        early.take()
    }
}

#[cfg(test)]
mod tests;
