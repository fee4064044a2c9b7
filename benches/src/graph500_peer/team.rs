//! A team of scoped threads running one search together, OpenMP style: every member runs the
//! same loop, meets the others at a [`Team::barrier`], and shares work through [`Chunks`].
//!
//! The barrier spins (then yields) instead of sleeping: a search crosses it a few times per BFS
//! level or SSSP bucket, hundreds of times in all, and a futex wake per crossing would cost more
//! than a small bucket's work. It abstracts fork/join and work sharing only; the kernels own
//! their data and its atomics.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A sense-reversing spin barrier for a fixed number of threads.
#[derive(Debug)]
pub struct Barrier {
    size: usize,
    arrived: AtomicUsize,
    /// Bumped by the last thread to arrive; the others wait for it to change.
    generation: AtomicUsize,
    /// Set when a member panicked: the others must not wait for it for ever.
    abandoned: AtomicBool,
}

/// Spins before each yield while waiting at the barrier.
const SPINS: u32 = 1 << 10;

impl Barrier {
    /// A barrier for `size` threads.
    pub fn new(size: usize) -> Self {
        Self {
            size: size.max(1),
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            abandoned: AtomicBool::new(false),
        }
    }

    /// Waits until all `size` threads have called it. Everything a thread wrote before it is
    /// visible to every thread after it (the last arrival's Release on `generation` follows
    /// everyone's AcqRel on `arrived`; the waiters Acquire `generation`).
    ///
    /// # Panics
    /// If another member panicked (so that the team ends instead of hanging).
    pub fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.size {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                assert!(
                    !self.abandoned.load(Ordering::Relaxed),
                    "another thread of the team panicked"
                );
                std::thread::yield_now();
            }
        }
    }
}

/// Marks the barrier abandoned if its member unwinds.
struct Abandon<'a>(&'a Barrier);

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abandoned.store(true, Ordering::Relaxed);
        }
    }
}

/// Runs `body(member, barrier)` on `threads` scoped threads (the caller's being member 0) and
/// returns when all are done. A panic in one member ends the others at their next barrier and
/// is passed on to the caller.
pub fn run<F>(threads: usize, body: F)
where
    F: Fn(usize, &Barrier) + Sync,
{
    let threads = threads.max(1);
    let barrier = Barrier::new(threads);
    let member = |member: usize, barrier: &Barrier| {
        let _guard = Abandon(barrier);
        body(member, barrier);
    };
    std::thread::scope(|s| {
        for m in 1..threads {
            let (member, barrier) = (&member, &barrier);
            s.spawn(move || member(m, barrier));
        }
        member(0, &barrier);
    });
}

/// Dynamic scheduling of a range of indices in chunks, like OpenMP's `schedule(dynamic, n)`.
/// Reset it ([`Chunks::reset`]) in a serial section between two barriers.
#[derive(Debug, Default)]
pub struct Chunks {
    next: AtomicUsize,
}

impl Chunks {
    /// Starts handing out indices from 0 again.
    pub fn reset(&self) {
        self.next.store(0, Ordering::Relaxed);
    }

    /// The next chunk of at most `size` indices below `end`, or `None` when all are taken.
    #[inline]
    pub fn next(&self, size: usize, end: usize) -> Option<std::ops::Range<usize>> {
        let start = self.next.fetch_add(size, Ordering::Relaxed);
        (start < end).then(|| start..(start + size).min(end))
    }
}

/// The static share of `0..len` of member `member` of `threads`.
pub fn share(len: usize, member: usize, threads: usize) -> std::ops::Range<usize> {
    let per = len.div_ceil(threads.max(1));
    (member * per).min(len)..((member + 1) * per).min(len)
}
