//! A property on every worker, and batched delegation to them: [`entrust_all`] (collective, from
//! an `spmd` body) entrusts one value per worker and hands every worker the trusts of all of them,
//! in worker order (UPC++'s `dist_object`); [`Batches`] gathers small items per destination worker
//! and sends each destination's items as one delegated closure (`apply_with_then`, counted by an
//! enclosing completion scope like any request), so that a kernel that visits another worker's
//! vertices one at a time pays one request per destination and step, not one per item.
//!
//! It does not order items between destinations, flush by itself (a kernel calls
//! [`Batches::send`] at the end of each step), or cap a batch's size (the caller bounds what it
//! pushes per step).

use crate::mail::{recv, send};
use crate::noref::{NoRef, Wire};
use crate::spawn::{WorkerId, worker_count};
use crate::trust::{Trust, entrust};

/// The tag of [`entrust_all`]'s messages (bit 61, as `finish_all`'s; the top two bits are the
/// collectives' and the segments').
pub const ENTRUST_ALL_TAG: u64 = 1 << 61 | 0xe7a11;

/// Collective: every worker of the job entrusts `value` to itself, and gets every worker's trust,
/// indexed by worker id (its own among them). Call it from an `spmd` body, on every worker, the
/// same number of times. A property that holds the returned trusts (to delegate onward from
/// where its closures run) keeps the others alive: clear them when done.
///
/// Cost: one message to each other worker (W − 1 per worker), and one receive from each.
///
/// # Panics
/// Outside a gossamer worker.
pub fn entrust_all<T: Send + 'static>(value: T) -> Vec<Trust<T>> {
    let me = entrust(value);
    let workers = worker_count();
    // A serialised trust is read once, so each worker gets its own copy, by message.
    for w in 0..workers {
        send(WorkerId::new(w), ENTRUST_ALL_TAG, me.clone());
    }
    (0..workers)
        .map(|w| recv(WorkerId::new(w), ENTRUST_ALL_TAG))
        .collect()
}

/// Items of type `I` for the properties `T` of several workers, gathered per destination and sent
/// as one delegated closure per destination by [`send`](Self::send).
#[derive(Debug)]
pub struct Batches<T: Send + 'static, I> {
    to: Vec<Trust<T>>,
    out: Vec<Vec<I>>,
}

impl<T: Send + 'static, I> Default for Batches<T, I> {
    fn default() -> Self {
        Self {
            to: Vec::new(),
            out: Vec::new(),
        }
    }
}

impl<T: Send + 'static, I: Wire> Batches<T, I> {
    /// Batches for the properties `to`, by index (such as [`entrust_all`]'s).
    pub fn new(to: Vec<Trust<T>>) -> Self {
        let out = to.iter().map(|_| Vec::new()).collect();
        Self { to, out }
    }

    /// The trusts the batches go to.
    pub fn trusts(&self) -> &[Trust<T>] {
        &self.to
    }

    /// Adds `item` to destination `w`'s batch.
    ///
    /// # Panics
    /// If `w` is not an index of the trusts.
    #[inline]
    pub fn push(&mut self, w: usize, item: I) {
        self.out[w].push(item);
    }

    /// Adds `items` to destination `w`'s batch.
    #[inline]
    pub fn extend(&mut self, w: usize, items: impl IntoIterator<Item = I>) {
        self.out[w].extend(items);
    }

    /// Sends every non-empty batch to its destination, where `f(property, items)` runs
    /// (`apply_with_then`, with no answer but the request's completion).
    #[track_caller]
    pub fn send(&mut self, f: impl Fn(&mut T, Vec<I>) + NoRef) {
        for (items, t) in self.out.iter_mut().zip(&self.to) {
            if !items.is_empty() {
                t.apply_with_then(std::mem::take(items), f, |()| ());
            }
        }
    }

    /// Lets the trusts go (a property holding batches to its peers holds their trusts).
    pub fn clear(&mut self) {
        self.to.clear();
        self.out.clear();
    }
}

#[cfg(test)]
mod tests;
