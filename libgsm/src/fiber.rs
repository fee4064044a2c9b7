//! Fibers: stackful coroutines (`corosensei`) with stacks from a per-worker pool, and the
//! suspend point every blocking operation goes through.
//!
//! Stacks are `corosensei::DefaultStack`s: an `mmap`ed region with a `PROT_NONE` guard page below
//! the usable stack, so an overflow faults (the process dies of SIGSEGV; Rust's "stack overflow"
//! message covers only thread stacks, so none is printed) instead
//! of overwriting memory. Finished fibers give their stack back to the pool (up to a bound) so
//! spawning does not `mmap` each time. A fiber never migrates between threads, which is what
//! makes the thread-local "current yielder" below valid. Scheduling lives in `worker.rs`.

use std::cell::Cell;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, Yielder};

/// A fiber's coroutine: resumed with `()`, yields `()`, returns `()` (results travel by side
/// channels owned by the spawner).
pub(crate) type Co = Coroutine<(), (), (), DefaultStack>;

thread_local! {
    static YIELDER: Cell<*const Yielder<(), ()>> = const { Cell::new(std::ptr::null()) };
}

/// Pool of fiber stacks of one size.
pub(crate) struct StackPool {
    size: usize,
    stacks: Vec<DefaultStack>,
}

impl std::fmt::Debug for StackPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackPool")
            .field("size", &self.size)
            .field("pooled", &self.stacks.len())
            .finish()
    }
}

const POOL_MAX: usize = 256;

/// Largest entry closure passed to `corosensei` by value (it takes at most 1 KiB, including
/// what this module adds around the closure).
const INLINE_ENTRY: usize = 512;

impl StackPool {
    pub(crate) fn new(size: usize) -> Self {
        StackPool {
            size,
            stacks: Vec::new(),
        }
    }

    /// Usable bytes of each stack.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Starts a coroutine running `f` on a pooled (or new) stack.
    ///
    /// `corosensei` moves the entry closure onto the new stack by value and refuses one of more
    /// than 1 KiB ("type is too big to transfer", a panic that ended the job for a `spawn` whose
    /// closure captured an array of 200 `u64`s); a closure larger than [`INLINE_ENTRY`] is boxed
    /// first, so any size goes, and the common small one costs no allocation.
    pub(crate) fn fiber<F: FnOnce() + 'static>(&mut self, f: F) -> std::io::Result<Co> {
        let stack = match self.stacks.pop() {
            Some(s) => s,
            None => DefaultStack::new(self.size)?,
        };
        let enter = |y: &Yielder<(), ()>| YIELDER.with(|c| c.set(y));
        Ok(if std::mem::size_of::<F>() <= INLINE_ENTRY {
            Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                enter(y);
                f();
            })
        } else {
            let f = Box::new(f);
            Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                enter(y);
                f();
            })
        })
    }

    /// Takes the stack back from a finished coroutine.
    pub(crate) fn recycle(&mut self, co: Co) {
        if self.stacks.len() < POOL_MAX {
            self.stacks.push(co.into_stack());
        }
    }
}

/// Suspends the running fiber until the scheduler resumes it.
///
/// # Panics
/// If not called on a fiber (callers check first).
pub(crate) fn suspend() {
    let y = YIELDER.with(|c| c.get());
    assert!(!y.is_null(), "gossamer: suspend() outside a fiber");
    // SAFETY: `y` was set by this fiber's own entry closure (or restored below after a previous
    // suspension of this same fiber); the fiber is running, so its `Yielder` is alive, and fibers
    // never leave their thread.
    unsafe { (*y).suspend(()) };
    YIELDER.with(|c| c.set(y));
}

/// Clears the current yielder after a fiber returns control to the scheduler.
pub(crate) fn clear_current() {
    YIELDER.with(|c| c.set(std::ptr::null()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn fibers_suspend_resume_and_recycle_stacks() {
        let mut pool = StackPool::new(64 * 1024);
        let log = Rc::new(Cell::new(0));
        let l2 = log.clone();
        let mut co = pool
            .fiber(move || {
                l2.set(1);
                suspend();
                l2.set(2);
            })
            .unwrap();
        assert!(co.resume(()).as_yield().is_some());
        clear_current();
        assert_eq!(log.get(), 1);
        assert!(co.resume(()).as_return().is_some());
        assert_eq!(log.get(), 2);
        pool.recycle(co);
        assert_eq!(pool.stacks.len(), 1);
        let co = pool.fiber(|| {}).unwrap();
        assert!(pool.stacks.is_empty());
        drop(co);
    }
}
