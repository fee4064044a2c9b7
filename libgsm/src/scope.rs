//! Completion scopes: [`finish`] runs a body and returns when every task it started, and every
//! task those started in turn on any worker of any rank, has finished (X10's `finish`, Grappa's
//! `GlobalCompletionEvent`). The counting is `worker::tasks`'s; this module opens and closes a
//! scope and decides, by waves over the workers, when it is done. It does not track tagged
//! messages (`send`/`recv`) or host-board writes: a fiber of the scope that waits for one is a
//! task until it returns, but the message itself is not. The whole protocol, with the collective
//! form, is in `scope/README.md`.
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

use std::cell::Cell;

use crate::mail::{flush, recv, send};
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

/// The tag of the messages of [`finish_all`]'s waves. Bit 61: the top bit is `gsm-collectives`'
/// and bit 62 the segments' collective set-up; user tags with bit 61 set are not to be used.
pub const ALL_WAVE_TAG: u64 = 1 << 61 | 0x5c09e;

thread_local! {
    /// How many collective scopes this worker has opened in this run.
    static TOGETHER: Cell<u32> = const { Cell::new(0) };
}

/// Collective [`finish`]: every worker of the job calls it (from an `spmd` body, in the same
/// order on every worker), each with its own body, and it returns on every worker once every
/// task that any worker's body started, and everything those started in turn, has finished.
/// One scope for the whole job, so unlike one `finish` per worker it needs no barrier after it:
/// when it returns here, no task of the scope runs anywhere (a worker that returned first may
/// already have started later work, which can reach this one).
///
/// The waves are all-to-all messages instead of probes: each worker, once its own requests are
/// answered, sends its counts to every other one ([`ALL_WAVE_TAG`]) and sums what it receives,
/// so every worker reaches the same decision at the same wave. Cost: at least two waves, each
/// W (W − 1) messages of 40 bytes and one one-way latency (2 messages and 2 latencies on 2
/// workers, against `finish`'s 4 messages, 2 round trips, and then a barrier); more waves while
/// work is in flight.
///
/// # Panics
/// Outside a fiber; with the body's panic, or the first panic of a task of the scope that any
/// worker saw (after the scope is done, on every worker); if another worker is at a different
/// collective scope (they were not called in the same order).
#[track_caller]
pub fn finish_all<R>(body: impl FnOnce() -> R) -> R {
    finish_all_min(body, || u64::MAX).0
}

/// [`finish_all`], and also the minimum over the workers of `sample()` read once the scope is
/// done: `sample` runs on each worker at each wave, and the last wave's readings are taken after
/// every task of the scope has finished (the Mattern argument of the module docs), so the
/// minimum costs no collective of its own. For example the lowest non-empty bucket of a
/// delta-stepping search after a bucket's work.
#[track_caller]
pub fn finish_all_min<R>(body: impl FnOnce() -> R, mut sample: impl FnMut() -> u64) -> (R, u64) {
    let seq = TOGETHER.with(|c| {
        c.set(c.get().wrapping_add(1));
        c.get()
    });
    let scope = tasks::collective(seq);
    tasks::started(scope);
    let r = catch_unwind(AssertUnwindSafe(|| tasks::within(scope, body)));
    tasks::finished(scope, None);
    let (least, failure) = tasks::within(0, || waves_together(scope, seq, &mut sample));
    tasks::forget(scope);
    match r {
        Err(p) => resume_unwind(p),
        Ok(_) if failure.is_some() => panic!(
            "gossamer: finish_all: a task of the scope panicked: {}",
            failure.unwrap_or_default()
        ),
        Ok(v) => (v, least),
    }
}

/// What a worker sends in a wave of [`finish_all`]: scope number, wave number, tasks started
/// and finished here, the sample, the first failure seen here.
type AllWave = (u32, u32, u64, u64, u64, Option<String>);

/// The waves of the collective `scope` (the `seq`-th): returns the minimum of the last wave's
/// samples and the first failure.
fn waves_together(scope: u64, seq: u32, sample: &mut dyn FnMut() -> u64) -> (u64, Option<String>) {
    let (me, workers) = (current_worker().index(), worker_count());
    let mut finished_before: Option<u64> = None;
    let mut wave = 0u32;
    loop {
        // Until this worker's own requests are answered, a wave could only find the scope busy;
        // past a bound the waves go on anyway (each waits for its messages, not sleeping).
        let mut spins = 0u32;
        while spins < EAGER_WAVES * 16 && !tasks::balanced_here(scope) {
            spins += 1;
            yield_now();
        }
        wave += 1;
        let (s, f, e) = tasks::probe(scope, 0);
        let mine: AllWave = (seq, wave, s, f, sample(), e);
        for w in (0..workers).filter(|&w| w != me) {
            send(WorkerId::new(w), ALL_WAVE_TAG, mine.clone());
        }
        // Out now: `recv` flushes only when it must wait, so after the deciding wave this
        // worker's last message could sit staged through the caller's next step, which
        // does not poll, while the others wait for it.
        flush();
        let (mut started, mut finished, mut least, mut failure) = (s, f, mine.4, mine.5);
        for w in (0..workers).filter(|&w| w != me) {
            let (q, k, s, f, l, e): AllWave = recv(WorkerId::new(w), ALL_WAVE_TAG);
            assert!(
                (q, k) == (seq, wave),
                "gossamer::finish_all: worker {w} is at collective scope {q}, wave {k}, this \
                 worker ({me}) at scope {seq}, wave {wave}: every worker must call finish_all \
                 the same number of times, in the same order"
            );
            (started, finished, least) = (started + s, finished + f, least.min(l));
            failure = failure.or(e);
        }
        if finished_before == Some(started) || (workers == 1 && started == finished) {
            return (least, failure);
        }
        finished_before = Some(finished);
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
