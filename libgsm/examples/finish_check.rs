//! `finish_check`: completion scopes (`gossamer::finish`) across ranks, checked end to end, for
//! `tests/tests/finish.rs` in `gsm-tests`. Run it under `gsmrun -np N` (any N ≥ 1, any fabric,
//! 2 workers per rank); every rank runs the checks and prints `ok <check> (rank R)`:
//!
//! - `chains`: from `run`'s main, 16 chains of 40 hops over a counter on every worker of the job;
//!   each hop is a closure delegated to the next worker (of the next rank first), which starts
//!   the following hop from there, and every third hop's callback (on that other rank) spawns a
//!   fiber on yet another worker that adds to its counter. The counts are read back after
//!   `finish` returns, without waiting.
//! - `nested`: a scope inside a fiber spawned on another rank by the outer scope's body; the
//!   inner `finish` has seen all of its callbacks, the outer all of its own.
//! - `panic`: a closure delegated from a callback on another rank panics; `finish` panics in
//!   the caller with its message, after the scope's other tasks, and the run goes on.
//! - `spmd`: a second run, `spmd`, where every worker's scope sends work to the next worker
//!   (of another rank when there is one) and counts its callbacks.
//!
//! - `all`: in the same `spmd` run, one collective scope (`gossamer::finish_all_min`): every
//!   worker starts chains that visit every worker of the job once each, and each visit counts
//!   itself on the worker it lands on. The scope's minimum of those counts, read on every worker
//!   in its last wave with no barrier, must be every visit.
//!
//! Output ends with `finish_check: rank R of N passed` on every rank.

use std::cell::Cell;
use std::rc::Rc;

thread_local! {
    /// `all`: the visits that landed on this worker.
    static LANDED: Cell<u64> = const { Cell::new(0) };
}

/// `all`: a chain of visits over every worker from `at` on (`to`: a trust on each worker),
/// `left` more to go.
fn visit_all(to: Vec<Trust<()>>, at: usize, left: usize) {
    if left == 0 {
        return;
    }
    to[at].clone().apply_with_then(
        to,
        move |(), to| {
            LANDED.with(|c| c.set(c.get() + 1));
            visit_all(to, (at + 1) % worker_count(), left - 1);
        },
        |()| (),
    );
}

use gossamer::{
    Config, Trust, WorkerId, entrust, entrust_on, finish, rank, rank_count, spawn_on,
    spawn_on_with, worker_count, workers_of_rank,
};

const HOPS: u32 = 40;
const CHAINS: u32 = 16;

/// The worker after `w`, starting with the workers of the next rank.
fn next_worker(w: usize) -> usize {
    let ranks = rank_count();
    let here = gossamer::rank_of(WorkerId::new(w));
    let there = workers_of_rank((here + 1) % ranks);
    let offset = w - workers_of_rank(here).start;
    there.start + offset % there.len()
}

/// One hop of a chain: a delegated closure on worker `at` that starts the next hop there.
fn hop(counters: Vec<Trust<u64>>, at: usize, left: u32) {
    if left == 0 {
        return;
    }
    let t = counters[at].clone();
    t.apply_with_then(
        counters,
        move |n, counters| {
            *n += 1;
            // On the trustee, possibly another rank: the next hop starts from here.
            let next = next_worker(at);
            hop(counters.clone(), next, left - 1);
            if left % 3 == 0 { Some(counters) } else { None }
        },
        move |back: Option<Vec<Trust<u64>>>| {
            // In the callback, on the worker that sent this hop: a fiber on another worker.
            if let Some(counters) = back {
                let far = next_worker(next_worker(at));
                let _ = spawn_on_with(WorkerId::new(far), counters, move |c| {
                    c[far].apply(|n| *n += 1000);
                });
            }
        },
    );
}

fn chains() {
    let counters: Vec<Trust<u64>> = (0..worker_count())
        .map(|w| entrust_on(WorkerId::new(w), || 0u64))
        .collect();
    let start = workers_of_rank(rank()).start;
    finish(|| {
        for _ in 0..CHAINS {
            hop(counters.clone(), next_worker(start), HOPS);
        }
    });
    let total: u64 = counters.iter().map(|c| c.apply(|n| *n)).sum();
    let spawned = (1..=HOPS).filter(|l| l % 3 == 0).count() as u64;
    let expected = u64::from(CHAINS) * (u64::from(HOPS) + 1000 * spawned);
    assert_eq!(total, expected, "chains: counts read after finish");
    println!("ok chains (rank {})", rank());
}

fn nested() {
    let far = WorkerId::new(next_worker(workers_of_rank(rank()).start));
    let t = entrust_on(far, || 0u64);
    let answered = Rc::new(Cell::new(0u32));
    let a = answered.clone();
    let inner = finish(|| {
        for _ in 0..50 {
            let a = a.clone();
            t.apply_then(|n| *n += 1, move |()| a.set(a.get() + 1));
        }
        spawn_on_with(far, t.clone(), |t| {
            let seen = Rc::new(Cell::new(0u32));
            let s = seen.clone();
            let here = entrust_on(WorkerId::new(next_worker(far_index())), || 0u64);
            finish(|| {
                for _ in 0..50 {
                    let s = s.clone();
                    here.apply_then(|n| *n += 1, move |()| s.set(s.get() + 1));
                    t.apply_then(|n| *n += 1, |()| ());
                }
            });
            seen.get()
        })
        .join()
    });
    assert_eq!(inner, 50, "nested: the inner scope returned early");
    assert_eq!(answered.get(), 50, "nested: the outer scope returned early");
    assert_eq!(t.apply(|n| *n), 100);
    println!("ok nested (rank {})", rank());
}

fn far_index() -> usize {
    gossamer::current_worker().index()
}

fn panic_check() {
    let far = WorkerId::new(next_worker(workers_of_rank(rank()).start));
    let relay = entrust_on(far, || 0u64);
    let done = Rc::new(Cell::new(0u32));
    let d = done.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        finish(|| {
            for _ in 0..20 {
                let d = d.clone();
                relay.apply_then(|n| *n += 1, move |()| d.set(d.get() + 1));
            }
            // The victim lives on this rank; the closure that fails it is delegated from a
            // closure running on the other rank.
            let victim = entrust(0u32);
            relay.apply_with_then(
                victim,
                |_, victim| victim.apply_then(|_| panic!("relaxation failed"), |()| ()),
                |()| (),
            );
        })
    }));
    let message = match r {
        Ok(()) => panic!("panic: finish returned although a task panicked"),
        Err(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    };
    assert!(
        message.contains("relaxation failed"),
        "panic: the message {message:?} lacks the task's"
    );
    assert_eq!(
        done.get(),
        20,
        "panic: finish panicked before its other tasks"
    );
    println!("ok panic (rank {})", rank());
}

fn main() {
    let config = Config::default().workers(2);
    gossamer::run(config.clone(), || {
        chains();
        nested();
        panic_check();
    })
    .unwrap_or_else(|e| panic!("finish_check: {e}"));
    let counts = gossamer::spmd(config, |w| {
        let peer = WorkerId::new(next_worker(w.id()));
        let there = entrust_on(peer, || 0u64);
        let seen = Rc::new(Cell::new(0u32));
        let s = seen.clone();
        finish(|| {
            for _ in 0..500 {
                let s = s.clone();
                there.apply_then(|n| *n += 1, move |()| s.set(s.get() + 1));
                let _ = spawn_on(peer, || ());
            }
        });
        // `all`: 8 chains from every worker, each landing once on every worker.
        let workers = worker_count();
        let to: Vec<Trust<()>> = (0..workers)
            .map(|x| entrust_on(WorkerId::new(x), || ()))
            .collect();
        let ((), least) = gossamer::finish_all_min(
            || (0..8).for_each(|c| visit_all(to.clone(), (w.id() + c) % workers, workers)),
            || LANDED.with(Cell::get),
        );
        let landed = LANDED.with(Cell::get);
        (
            seen.get(),
            rank(),
            rank_count(),
            (landed, least, 8 * workers as u64),
        )
    })
    .unwrap_or_else(|e| panic!("finish_check: {e}"));
    assert!(counts.iter().all(|c| c.0 == 500), "spmd: {counts:?}");
    let (_, r, n, _) = counts[0];
    println!("ok spmd (rank {r})");
    assert!(
        counts.iter().all(|c| c.3.0 == c.3.1),
        "all: visits (minimum, expected) per worker {:?}",
        counts.iter().map(|c| c.3).collect::<Vec<_>>()
    );
    println!("ok all (rank {r})");
    println!("finish_check: rank {r} of {n} passed");
}
