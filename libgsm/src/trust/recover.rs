//! A poisoned property's way back: [`Trust::reset`] lets its trustee put a fresh value in place
//! of one that a panicking closure may have left half-updated, and clears the poison, so that
//! applies work again. It runs only on the trustee, from code that is not itself a delegated
//! closure or callback: there no closure can be holding the property (closures run on the
//! trustee's poller, which does not run while the caller does).
//!
//! It does not send anything: a holder elsewhere asks the trustee to reset (`spawn_on_with`
//! with the trust as the argument).

use super::Trust;
use crate::error::DelegationError;
use crate::worker::core_or_panic;

impl<T: Send + 'static> Trust<T> {
    /// Replaces the property's value with `value` and clears its poison (a delegated closure
    /// that panicked on it poisoned it: later applies got [`DelegationError::Poisoned`]); returns
    /// the value it held, which may be half-updated. A live property that is not poisoned is
    /// replaced the same way.
    ///
    /// ```
    /// use gossamer::{Config, DelegationError, entrust};
    /// gossamer::run(Config::default().workers(1), || {
    ///     let t = entrust(vec![1u32]);
    ///     let r = t.try_apply(|v| -> usize { panic!("a bad update of {v:?}") });
    ///     assert!(matches!(r, Err(DelegationError::Panicked(_))));
    ///     assert_eq!(t.try_apply(|v| v.len()), Err(DelegationError::Poisoned));
    ///     let old = t.reset(vec![7]).unwrap();
    ///     assert_eq!(old, [1]);
    ///     assert_eq!(t.apply(|v| v[0]), 7);
    /// })
    /// .unwrap();
    /// ```
    ///
    /// # Errors
    /// [`DelegationError::DeadProperty`] if the trust names no live property of this runtime.
    ///
    /// # Panics
    /// Outside a gossamer worker, on a worker other than the trustee (the message says how to
    /// reset from elsewhere: `spawn_on_with(t.trustee(), t, |t| ...)`), or inside a delegated
    /// closure or callback.
    #[track_caller]
    pub fn reset(&self, value: T) -> Result<T, DelegationError> {
        let core = core_or_panic("Trust::reset");
        assert!(
            self.trustee_id() == core.id,
            "gossamer: Trust::reset was called on worker {}, but the property lives on worker {}: \
             only its trustee may reset it; from elsewhere, run it there with \
             `gossamer::spawn_on_with(trust.trustee(), trust.clone(), move |t| ...)`",
            core.id,
            self.trustee_id()
        );
        assert!(
            !core.delegated_or_callback(),
            "gossamer: Trust::reset was called inside a delegated closure or a callback, where a \
             closure may hold the property; call it from a fiber of the trustee"
        );
        if !self.current(core) {
            return Err(DelegationError::DeadProperty);
        }
        let p = core.props.borrow_mut().restore::<T>(self.idx, self.gn)?;
        // SAFETY: `restore` found the live `T` named (idx, gn) on this worker's table; no
        // closure holds it (we are on the trustee, outside delegated context, so its poller is
        // not running one), and the table's borrow has ended.
        Ok(unsafe { std::mem::replace(&mut *p, value) })
    }
}
