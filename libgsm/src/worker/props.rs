//! The worker's side of its property table (`property.rs`): a trust id toggled on behalf of a
//! worker, the property dropped in delegated context when that left no trust, and a toggle
//! that names a dead property reported. What a closure on a property means is delegation's
//! (`trust/serve.rs`).

use super::*;

impl WorkerCore {
    /// Toggles a trust id on a local property, on behalf of worker `from`, and drops the
    /// property if that left no trust. A toggle that names a dead property ends the job with a
    /// report ([`Error::TrustCount`]): the counts of that property's trusts no longer hold, so
    /// it could be freed while a trust still names it, or never.
    pub(crate) fn toggle(&self, from: usize, idx: u32, gn: u32, id: u64, what: Toggle) {
        let dead = match self.props.borrow_mut().toggle(idx, gn, id, what) {
            Ok(dead) => dead,
            Err(_) => {
                self.count_broken(from, idx, gn, id, what);
                return;
            }
        };
        if let Some(v) = dead {
            let r = self.context.caught(DELEGATED, move || drop(v));
            if let Err(e) = r {
                std::panic::resume_unwind(e);
            }
        }
    }

    /// A registration or release from worker `from` named property `idx` (generation `gn`),
    /// which is not alive.
    #[cold]
    #[inline(never)]
    fn count_broken(&self, from: usize, idx: u32, gn: u32, id: u64, what: Toggle) {
        let verb = match what {
            Toggle::Register { .. } => "registers",
            Toggle::Release { .. } => "releases",
        };
        let place = &self.shared.place;
        self.shared.fail(Error::TrustCount {
            worker: self.id,
            rank: place.rank,
            from,
            from_rank: place.rank_of(from),
            detail: format!(
                "a reference-counting record {verb} trust {id} of property {idx} (generation \
                 {gn}), which is not alive"
            ),
        });
    }

    /// Live properties on this worker.
    pub(crate) fn live_properties(&self) -> usize {
        self.props.borrow().live()
    }
}
