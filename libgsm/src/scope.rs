//! Completion scopes: [`finish`] runs a body and returns when every task it started, and every
//! task those started in turn on any worker of any rank, has finished (X10's `finish`, Grappa's
//! `GlobalCompletionEvent`). The counting is `worker::tasks`'s; this module opens and closes a
//! scope and decides, by waves over the workers, when it is done. It does not track tagged
//! messages (`send`/`recv`) or host-board writes: a fiber of the scope that waits for one is a
//! task until it returns, but the message itself is not. See ARCHITECTURE.md.
//!
//! **When a scope is done.** Every worker counts, per scope, the tasks started on it and the
//! tasks finished on it (a request's start and its callback both on the issuing worker, a
//! fiber's start where it was spawned and its end where it ran). Every task is started by
//! another task of the scope that has not finished yet (the body first), so the scope is done
//! once, at some instant, every task started has finished. The caller's fiber reads the counts
//! of every worker in *waves* (one probe per other worker, all in flight at once) and applies
//! Mattern's four-counter rule (1987), as the run's own termination does between ranks
//! (`runtime/quiesce.rs`): when the tasks started, summed in wave k, equal the tasks finished,
//! summed in wave k − 1, then at the end of wave k − 1 every task started had finished (the
//! counts only grow, and no task finishes before it starts), and nothing can start a task of
//! the scope any more. With one worker a wave is one read, and one wave that finds the two sums
//! equal is enough.
//!
//! **Cost.** After the body, the caller first waits, without a message, until the answers to
//! its own requests are in (its own counts balance). A body that started no task costs nothing
//! more. Otherwise a wave sends one probe (a `spawn_on` of a reading closure) to each of the
//! other W − 1 workers of the job and takes an answer from each: 2 (W − 1) messages. A scope
//! needs at least two waves, so a completion costs at least 4 (W − 1) messages beyond the
//! body's own: 4 on 2 workers, 12 on 4. Every wave that finds work still in flight adds
//! 2 (W − 1); waves run back to back (each waits for its answers) for [`EAGER_WAVES`] waves, then
//! the caller sleeps between them, up to [`MAX_PAUSE`]. Each task costs a few counter updates
//! on its workers and 8 bytes more in its request; with no scope open, a delegation call pays
//! one thread-local read.
//!
//! **Failures.** A panic of the body, of a task's fiber, of a task's callback or of a closure
//! delegated with `apply_then` (which its callback turns into a panic) is the caller's: the scope
//! still waits for its other tasks, then `finish` panics in the caller with the body's panic or
//! the first task failure it saw. A fiber of the scope that panics is not a failure of the run
//! when nobody joins it, since the scope reports it. A task that never finishes (a fiber waiting
//! for a message never sent) keeps the scope waiting, and the caller's waves keep the job from
//! being found quiet: such a run does not end as deadlocked.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::time::Duration;

use crate::spawn::{WorkerId, current_worker, sleep, spawn_on, worker_count, yield_now};
use crate::worker::tasks;

/// The longest pause between two waves of a scope still in progress.
pub const MAX_PAUSE: Duration = Duration::from_micros(200);

/// How many waves run back to back (each waits for its probes' answers) before the caller pauses
/// between them.
const EAGER_WAVES: u32 = 64;

/// Runs `body` and returns its result once every request (`apply_then`, `apply_with_then`),
/// callback and fiber (`spawn`, `spawn_on`, `spawn_on_with`) it started has finished, and
/// everything those started in turn, on any worker of any rank. Scopes nest: a `finish` inside
/// a body, a fiber or a callback waits for its own tasks only, which are not the outer scope's.
/// Blocking calls (`apply`, `join`) in the body run as usual, and their closures carry the scope
/// to their trustees. Call it from a fiber (`run`'s main, an `spmd` body, a spawned fiber); in
/// an `spmd` body each worker's `finish` is its own scope.
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
///
/// gossamer::run(gossamer::Config::default().workers(2), || {
///     let counter = gossamer::entrust_on(gossamer::WorkerId::new(1), || 0u64);
///     let seen = Rc::new(Cell::new(0));
///     let s = seen.clone();
///     gossamer::finish(|| {
///         for _ in 0..100 {
///             let s = s.clone();
///             counter.apply_then(|n| *n += 1, move |()| s.set(s.get() + 1));
///         }
///     });
///     assert_eq!(seen.get(), 100); // every callback has run
/// })
/// .unwrap();
/// ```
///
/// # Panics
/// Outside a fiber; with the body's panic, or with the first panic of a task of the scope
/// (after the scope's other tasks have finished). See the module docs for its cost.
#[track_caller]
pub fn finish<R>(body: impl FnOnce() -> R) -> R {
    let home = current_worker().index();
    let scope = tasks::open(home);
    tasks::started(scope);
    let r = catch_unwind(AssertUnwindSafe(|| tasks::within(scope, body)));
    tasks::finished(scope, None);
    let failure = tasks::within(0, || wait(scope));
    tasks::close(scope);
    match r {
        Err(p) => resume_unwind(p),
        Ok(_) if failure.is_some() => panic!(
            "gossamer: finish: a task of the scope panicked: {}",
            failure.unwrap_or_default()
        ),
        Ok(v) => v,
    }
}

/// Waits until every task of `scope` has finished (see the module docs); returns the first
/// failure of a task the waves saw.
fn wait(scope: u64) -> Option<String> {
    // A body that started no task needs no wave: nothing of the scope can be anywhere else.
    if tasks::started_here(scope) == 1 && tasks::balanced_here(scope) {
        return None;
    }
    let workers = worker_count();
    let mut failure = None;
    let mut finished_before: Option<u64> = None;
    let mut pause = Duration::ZERO;
    let mut waves = 0;
    // The answers to this worker's own requests come first, without a message: until they are
    // in, a wave could only find the scope busy.
    while waves < EAGER_WAVES * 16 && !tasks::balanced_here(scope) {
        waves += 1;
        yield_now();
    }
    waves = 0;
    loop {
        let (started, finished) = wave(scope, workers, &mut failure);
        if finished_before == Some(started) || (workers == 1 && started == finished) {
            return failure;
        }
        finished_before = Some(finished);
        if started == finished {
            // Likely done: the confirming wave at once.
            continue;
        }
        // A wave is paced by its probes' round trips; only a scope that stays busy for many
        // waves is probed less often.
        waves += 1;
        if waves < EAGER_WAVES {
            yield_now();
        } else {
            sleep(pause);
            pause = (pause * 2).clamp(Duration::from_micros(10), MAX_PAUSE);
        }
    }
}

/// One wave: the sums over every worker of the tasks of `scope` started and finished there;
/// the first failure seen goes to `failure` if it holds none.
fn wave(scope: u64, workers: usize, failure: &mut Option<String>) -> (u64, u64) {
    let home = tasks::home(scope);
    let floor = tasks::floor();
    let probes: Vec<_> = (0..workers)
        .filter(|&w| w != home)
        .map(|w| spawn_on(WorkerId::new(w), move || tasks::probe(scope, floor)))
        .collect();
    let mut sums = tasks::probe(scope, floor);
    for p in probes {
        let (s, f, e) = p.join();
        sums.0 += s;
        sums.1 += f;
        if sums.2.is_none() {
            sums.2 = e;
        }
    }
    if failure.is_none() {
        *failure = sums.2;
    }
    (sums.0, sums.1)
}

#[cfg(test)]
mod tests;
