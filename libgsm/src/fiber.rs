//! Fibers: stackful coroutines (`corosensei`) with stacks from a per-worker pool, and the
//! suspend point every blocking operation goes through.
//!
//! Stacks are `corosensei::DefaultStack`s: an `mmap`ed region with a `PROT_NONE` guard page below
//! the usable stack, so an overflow faults instead of overwriting memory. Rust's "has overflowed
//! its stack" message covers only thread stacks, so [`watch_overflow`] installs a SIGSEGV handler
//! that says so for a fiber (worker, stack size, the variable that raises it) before the process
//! dies of the signal as it would have anyway (the handler's registration and its ways out are
//! `sys::signal`'s). A worker thread's own stack, where closures run that an idle worker serves,
//! is sized from the fibers' ([`worker_thread_stack`]). Finished fibers give their stack back to
//! the pool (up to a bound) so spawning does not `mmap` each time. A fiber never migrates between
//! threads, which is what makes the thread-local "current yielder" below valid. Scheduling lives
//! in `worker/sched.rs` (the `Scheduler`).

use std::cell::Cell;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, Yielder};

use crate::sys::signal::{FaultInfo, Then, write_stderr};

/// A fiber's coroutine: resumed with `()`, yields `()`, returns `()` (results travel by side
/// channels owned by the spawner).
pub(crate) type Co = Coroutine<(), (), (), DefaultStack>;

thread_local! {
    static YIELDER: Cell<*const Yielder<(), ()>> = const { Cell::new(std::ptr::null()) };
    /// The completion scope the running code belongs to (`worker::tasks`; 0: none). It is
    /// fiber-local: [`suspend`] keeps it across the switch and leaves 0 to the scheduler.
    static SCOPE: Cell<u64> = const { Cell::new(0) };
}

/// The completion scope of the running code (0: none).
#[inline(always)]
pub(crate) fn scope() -> u64 {
    SCOPE.with(Cell::get)
}

/// Makes `s` the running code's completion scope; returns the one it replaces.
#[inline(always)]
pub(crate) fn set_scope(s: u64) -> u64 {
    SCOPE.with(|c| c.replace(s))
}

/// Pool of fiber stacks of one size.
pub(crate) struct StackPool {
    size: usize,
    stacks: Vec<DefaultStack>,
    /// The last [`explain`](Self::explain)ed refusal: when, its OS error, and the text.
    explained: Option<(std::time::Instant, Option<i32>, String)>,
}

/// How long one explanation of a refused stack serves the refusals of the same error after it.
const EXPLAINED_FOR: std::time::Duration = std::time::Duration::from_secs(1);

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
            explained: None,
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

    /// Why a stack of this pool could not be had (`e`, from [`fiber`](Self::fiber)), and what
    /// to do about it. Each stack is two memory mappings (the stack and its guard page), and the
    /// kernel allows a process `vm.max_map_count` of them (65 530 by default): about 32 700 live
    /// fibers in a process, whatever their stack size. When the process is at that limit, a
    /// smaller stack does not help, so the message says which limit it met.
    ///
    /// Finding that out reads `/proc/self/maps`, which is slow at the limit (docs/performance-log.md,
    /// "Explaining a refused fiber stack"), so refusals of the same error within
    /// [`EXPLAINED_FOR`] of an explained one are told the same.
    pub(crate) fn explain(&mut self, e: &std::io::Error) -> String {
        let now = std::time::Instant::now();
        if let Some((at, code, text)) = &self.explained
            && *code == e.raw_os_error()
            && now.duration_since(*at) < EXPLAINED_FOR
        {
            return text.clone();
        }
        let text = self.explain_afresh(e);
        self.explained = Some((now, e.raw_os_error(), text.clone()));
        text
    }

    fn explain_afresh(&self, e: &std::io::Error) -> String {
        let what = format!(
            "gossamer: cannot allocate a fiber stack of {} bytes ({e})",
            self.size
        );
        let limit = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok());
        // The kernel does not count the `[vsyscall]` page against the limit.
        let held = std::fs::read_to_string("/proc/self/maps")
            .ok()
            .map(|s| s.lines().filter(|l| !l.ends_with("[vsyscall]")).count());
        match (limit, held) {
            // Within a few mappings of the limit: a new stack needs two, and a thread or an
            // allocation of this process may have taken one since.
            (Some(limit), Some(held)) if held + 16 >= limit => format!(
                "{what}: this process holds {held} memory mappings, the kernel's limit \
                 (vm.max_map_count = {limit}), and each live fiber holds two of them (its stack \
                 and its guard page), so about {} fibers can be alive at once in a process \
                 whatever their stack size. Keep fewer alive (start more as earlier ones finish), \
                 or raise the limit (sysctl -w vm.max_map_count=N, as root)",
                limit / 2
            ),
            _ => format!(
                "{what}: the memory for it was refused; lower GSM_STACK_SIZE (or \
                 Config::stack_size), or keep fewer fibers alive at once"
            ),
        }
    }

    /// Takes the stack back from a finished coroutine.
    pub(crate) fn recycle(&mut self, co: Co) {
        if self.stacks.len() < POOL_MAX {
            self.stacks.push(co.into_stack());
        }
    }
}

thread_local! {
    /// This worker thread's global id + 1 (0: not a worker), its fibers' stack size, its own
    /// stack's size and lowest address (0: unknown), for the SIGSEGV handler. Plain constants in
    /// a `const` thread-local: reading them there touches nothing that a signal could find
    /// half-changed.
    static WATCHED: Cell<Watched> = const { Cell::new(Watched::NONE) };
}

/// What the SIGSEGV handler knows of a worker thread (see [`WATCHED`]).
#[derive(Clone, Copy)]
struct Watched {
    worker_plus_one: usize,
    fiber_stack: usize,
    thread_stack: usize,
    thread_low: usize,
}

impl Watched {
    const NONE: Watched = Watched {
        worker_plus_one: 0,
        fiber_stack: 0,
        thread_stack: 0,
        thread_low: 0,
    };
}

/// The least stack a worker thread gets: Rust's default for the threads it starts.
const MIN_WORKER_STACK: usize = 2 << 20;

/// What a worker thread's own stack holds below a delegated closure it serves while idle: the
/// scheduler loop, the poll and the trampoline (a few KiB; the rest is margin).
const WORKER_FRAMES: usize = 64 << 10;

/// The stack of a worker thread whose fibers have stacks of `fiber_stack` bytes.
///
/// A worker that serves while none of its fibers runs (idle, or between fibers) runs delegated
/// closures and `apply_then` callbacks on its thread's own stack, so that stack must be at least
/// what a fiber leaves them: `fiber_stack` plus the worker's own frames. Then raising
/// `GSM_STACK_SIZE` is the one remedy for an overflow in a closure, wherever it happened to run;
/// with Rust's fixed 2 MiB a closure that fits a fiber of 8 MiB crashed the process whenever an
/// idle worker served it. Never less than 2 MiB, nor less than `RUST_MIN_STACK` when that is
/// set, which a user may have raised for exactly this (the thread builder ignores it once a size
/// is given). Thread stacks are reserved, not committed, so the size costs address space only.
pub(crate) fn worker_thread_stack(fiber_stack: usize) -> usize {
    let asked = std::env::var("RUST_MIN_STACK")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    fiber_stack
        .saturating_add(WORKER_FRAMES)
        .max(MIN_WORKER_STACK)
        .max(asked)
}

/// The SIGBUS handler of [`watch_overflow`]: a signal sent by a process ends this one; a real
/// fault goes to the action this one replaced, by restoring it and letting the fault recur.
fn on_bus(fault: &FaultInfo) -> Then {
    if fault.sent {
        Then::Die
    } else {
        Then::Previous
    }
}

/// Clears this thread's [`WATCHED`] entry when dropped.
pub(crate) struct Watch(());

impl Drop for Watch {
    fn drop(&mut self) {
        WATCHED.with(|w| w.set(Watched::NONE));
    }
}

/// Makes a fiber stack overflow on this thread (worker `worker`, stacks of `stack_size` bytes)
/// print what happened before the process dies of SIGSEGV, as a thread's overflow does, and an
/// overflow of the worker thread's own stack say what raises it before Rust reports it. The
/// handler is installed once per process, with `SA_ONSTACK` (Rust gives every thread it starts
/// an alternate signal stack), and passes every other fault on to the action it replaced. It
/// and a SIGBUS handler end the process at once for a signal sent by a process (`Then::Die`).
pub(crate) fn watch_overflow(worker: usize, stack_size: usize) -> Watch {
    crate::sys::signal::watch_faults(on_segv, on_bus);
    let watched = Watched {
        worker_plus_one: worker + 1,
        fiber_stack: stack_size,
        thread_stack: worker_thread_stack(stack_size),
        thread_low: crate::sys::mem::thread_stack_low(),
    };
    WATCHED.with(|w| w.set(watched));
    Watch(())
}

/// How close to the stack pointer a fault must be to count as the stack's overflow: a call or
/// push faults just below it, a stack probe at it, a frame's store a few KiB above it.
const NEAR_SP: usize = 64 << 10;

/// The SIGSEGV handler of [`watch_overflow`]. A fault near the stack pointer of a fiber running on
/// a watched worker is that fiber's overflow into its guard page: it writes one line and lets the
/// fault recur under the default action (the process dies of SIGSEGV, as before). A fault near
/// the stack pointer and the bottom of a watched worker thread's own stack, with no fiber
/// running, is that thread's overflow: it writes what ran there and what raises the stack, and
/// goes on as for any other fault, which goes to the action this one replaced (Rust's, which
/// reports a thread's overflow), by restoring it and letting the fault recur.
fn on_segv(fault: &FaultInfo) -> Then {
    if fault.sent {
        return Then::Die;
    }
    let Watched {
        worker_plus_one: worker,
        fiber_stack: stack,
        thread_stack,
        thread_low,
    } = WATCHED.with(|w| w.get());
    let on_fiber = !YIELDER.with(|c| c.get()).is_null();
    let addr = fault.addr;
    let near_sp = worker != 0 && fault.sp.is_some_and(|sp| addr.abs_diff(sp) < NEAR_SP);
    if near_sp && !on_fiber && thread_low != 0 && addr.abs_diff(thread_low) < NEAR_SP {
        // The worker thread's own stack, while it served with no fiber running: say what ran
        // there and what raises it, then let Rust's handler report the overflow as its own.
        let line = Line::overflow(
            b"gossamer: worker ",
            worker - 1,
            b" overflowed its thread's stack of ",
            thread_stack,
            &[
                b" bytes serving a delegated closure or an apply_then callback with no fiber ",
                b"running (raise GSM_STACK_SIZE or Config::stack_size: a worker thread's ",
                b"stack is that plus 64 KiB, at least 2 MiB)\n",
            ],
        );
        write_stderr(&line.buf[..line.len]);
    }
    if near_sp && on_fiber {
        let line = Line::overflow(
            b"gossamer: a fiber on worker ",
            worker - 1,
            b" overflowed its stack of ",
            stack,
            &[
                b" bytes (raise GSM_STACK_SIZE or Config::stack_size; closures delegated to a ",
                b"worker and apply_then callbacks run on the stack of the fiber that was running ",
                b"there)\n",
            ],
        );
        write_stderr(&line.buf[..line.len]);
        return Then::Default;
    }
    Then::Previous
}

/// A line built without allocating (in a signal handler).
struct Line {
    buf: [u8; 384],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            buf: [0; 384],
            len: 0,
        }
    }
}

impl Line {
    /// `head`, the worker's number, `middle`, the stack size and then `tail`: the shape of both
    /// overflow reports.
    fn overflow(head: &[u8], worker: usize, middle: &[u8], size: usize, tail: &[&[u8]]) -> Line {
        let mut line = Line::default();
        line.push(head);
        line.number(worker);
        line.push(middle);
        line.number(size);
        for piece in tail {
            line.push(piece);
        }
        line
    }

    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn number(&mut self, mut n: usize) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

/// Suspends the running fiber until the scheduler resumes it.
///
/// # Panics
/// If not called on a fiber (callers check first).
pub(crate) fn suspend() {
    let y = YIELDER.with(|c| c.get());
    assert!(!y.is_null(), "gossamer: suspend() outside a fiber");
    // The scheduler and whatever it runs next start outside this fiber's scope.
    let scope = set_scope(0);
    // SAFETY: `y` was set by this fiber's own entry closure (or restored below after a previous
    // suspension of this same fiber); the fiber is running, so its `Yielder` is alive, and fibers
    // never leave their thread.
    unsafe { (*y).suspend(()) };
    YIELDER.with(|c| c.set(y));
    set_scope(scope);
}

/// Clears the current yielder (and scope) after a fiber returns control to the scheduler.
pub(crate) fn clear_current() {
    YIELDER.with(|c| c.set(std::ptr::null()));
    SCOPE.with(|c| c.set(0));
}

#[cfg(test)]
mod tests;
