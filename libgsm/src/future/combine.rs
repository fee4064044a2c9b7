//! Combinators: [`when_all`] waits for many promises and gives their results in order;
//! [`join_all`] does the same for any futures. UPC++'s `when_all`, the `futures` crate's
//! `join_all`, in a few lines, so that the runtime takes no dependency for them. They do not
//! race or select (the first of several): promises are eager, so awaiting them in turn already
//! overlaps them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Promise;

/// Waits for every promise of `promises`; the results in the same order. See [`WhenAll`].
pub fn when_all<T>(promises: impl IntoIterator<Item = Promise<T>>) -> WhenAll<T> {
    WhenAll {
        pending: promises.into_iter().collect(),
        next: 0,
        out: Vec::new(),
    }
}

/// The future of [`when_all`]; in a fiber, [`wait`](WhenAll::wait) for it.
#[derive(Debug)]
#[must_use = "a combinator does nothing unless awaited or waited for"]
pub struct WhenAll<T> {
    pending: Vec<Promise<T>>,
    /// The first promise not yet taken: every earlier one's result is in `out`.
    next: usize,
    out: Vec<T>,
}

impl<T> WhenAll<T> {
    /// Suspends the calling fiber until every result is in; the results in order.
    ///
    /// # Panics
    /// With the first failure among the promises (in their order); as [`Promise::wait`].
    #[track_caller]
    pub fn wait(self) -> Vec<T> {
        let mut out = self.out;
        out.reserve(self.pending.len() - self.next);
        out.extend(self.pending.into_iter().skip(self.next).map(Promise::wait));
        out
    }
}

// The results are never pinned: they are only moved out.
impl<T> Unpin for WhenAll<T> {}

impl<T> Future for WhenAll<T> {
    type Output = Vec<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<T>> {
        let me = self.get_mut();
        // In order, from the first not taken: the promise that was pending last time is the one
        // whose waker woke this task, and those before it need no look again.
        while me.next < me.pending.len() {
            match Pin::new(&mut me.pending[me.next]).poll(cx) {
                Poll::Ready(v) => {
                    me.out.push(v);
                    me.next += 1;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        me.pending.clear();
        Poll::Ready(std::mem::take(&mut me.out))
    }
}

/// Waits for every future of `futures` (polled together); their outputs in the same order.
pub fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> JoinAll<F> {
    JoinAll {
        items: futures
            .into_iter()
            .map(|f| Item::Running(Box::pin(f)))
            .collect(),
    }
}

enum Item<F: Future> {
    Running(Pin<Box<F>>),
    Done(F::Output),
    Taken,
}

/// The future of [`join_all`].
#[must_use = "a combinator does nothing unless awaited"]
pub struct JoinAll<F: Future> {
    items: Vec<Item<F>>,
}

impl<F: Future> std::fmt::Debug for JoinAll<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let done = self
            .items
            .iter()
            .filter(|i| !matches!(i, Item::Running(_)))
            .count();
        f.debug_struct("JoinAll")
            .field("futures", &self.items.len())
            .field("done", &done)
            .finish()
    }
}

impl<F: Future> Unpin for JoinAll<F> {}

impl<F: Future> Future for JoinAll<F> {
    type Output = Vec<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<F::Output>> {
        let me = self.get_mut();
        let mut all = true;
        for item in &mut me.items {
            if let Item::Running(f) = item {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *item = Item::Done(v),
                    Poll::Pending => all = false,
                }
            }
        }
        if !all {
            return Poll::Pending;
        }
        Poll::Ready(
            me.items
                .iter_mut()
                .map(|i| match std::mem::replace(i, Item::Taken) {
                    Item::Done(v) => v,
                    _ => unreachable!("every future of a JoinAll is done once it is ready"),
                })
                .collect(),
        )
    }
}
