//! `cluster_check`: delegation across ranks, checked end to end, for the multi-process tests
//! (`tests/tests/cluster/` in `gsm-tests`). Run it under `gsmrun -np N` (any N ≥ 1, any
//! fabric); every rank runs the same checks against workers of every rank and compares every
//! result with the value it must have.
//!
//! Checks (each prints `ok <name>` on the rank that ran it, or panics with what differed):
//! - `entrust_on`: a counter on every worker of the job, incremented with `apply` from here;
//! - `apply_then`: many asynchronous increments to every counter, every callback counted, final
//!   values read back;
//! - `fibers`: 64 fibers applying to remote counters at once;
//! - `spawn_on`: a fiber on every worker returns its worker id, rank and a `String`;
//! - `messages`: a `Vec<u64>` sent with `gossamer::send` to a fiber on every worker, which
//!   receives it with `gossamer::recv`;
//! - `large`: 1 MiB and 64 MiB `apply_with` arguments whose bytes are checked on the trustee, and
//!   a 1 MiB result checked here, byte for byte; `apply_with_then` batches (one past a slot),
//!   answered in order;
//! - `trust_passing`: a trust sent inside an argument to a worker of another rank, cloned and
//!   dropped there; the property is dropped exactly once, on its trustee, after the last handle;
//!   and a trust plus a `Vec<String>` as the argument of a fiber started there (`spawn_on_with`)
//!   that applies back through the trust;
//! - `inline_loop`: a loop of inline applies here that never yields ends when a worker of the
//!   next rank sets the flag it reads, some milliseconds after the loop began;
//! - `errors`: a remote closure that panics reaches the caller with its message and poisons the
//!   property; a dead property is reported; a result that cannot be serialised for another rank
//!   is a wire failure naming its type, and leaves the property usable;
//! - a second `run` in the same process (fabrics set up again).
//!
//! Options: `--panic-rank R` makes rank R panic in a delegated closure's callback once the job
//! runs (for the failure tests); `--hang-rank R` makes rank R's main loop forever, applying to
//! other ranks (so a test can kill it); `--exit-rank R` makes rank R call
//! `std::process::exit(3)` (or the status `--exit-status C` gives) from its main fiber once the
//! job runs (the process must end, and the job with it, even with status 0);
//! `--skip-rank R` makes rank R exit 0 before its first run, and `--one-run-rank R` after its
//! first (the others must not wait for it for ever); `--recv-forever` makes every rank's main
//! fiber wait for a message nobody sends (the job must end as deadlocked), and `--slow-send`
//! makes rank 0's main fiber wait for a message that rank 1's sends 2.5 s later, after a sleep
//! (a slow job, which must not be taken for a deadlock), and `--fiber-sleep-send` the same with
//! `gossamer::sleep` on rank 1 (its workers idle meanwhile); `--own-mpi` initialises MPI in the
//! program before the first run and finalises it at the end (gossamer joins it);
//! `--panic-between-runs R` makes rank R panic between its first and second run, and
//! `--bad-config-rank R` gives rank R's second run a configuration it refuses (both must end the
//! job, not leave the other ranks waiting in the second run); `--run-on-thread` runs everything
//! on a thread other than the process's main thread; `--stay-rank R` makes rank R, when its run
//! fails, print the error and stay alive for 120 s (or the seconds `--stay-secs S` gives), then
//! exit 0 (a program that handles the failure and goes on: the others must not run on until it
//! ends), saying so on stdout, and `--stay-all` makes every rank do that; `--quick` skips the
//! 64 MiB argument.
//!
//! Output ends with `cluster_check: rank R of N passed C checks (W workers)` on every rank.

use gossamer::{
    Config, DelegationError, Trust, WorkerId, entrust, entrust_on, rank, rank_count, spawn,
    spawn_on, worker_count, workers_of_rank, yield_now,
};
use std::sync::atomic::{AtomicU64, Ordering};

/// Drops of `Tracked` values in this process.
static DROPS: AtomicU64 = AtomicU64::new(0);

/// A property whose drop is counted.
struct Tracked(#[allow(dead_code, reason = "gives the property a size")] u64);

impl Drop for Tracked {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

/// A value whose serialisation always fails (`errors`: a result that cannot cross ranks).
struct Unsendable;

impl serde::Serialize for Unsendable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "Unsendable refuses to be serialised",
        ))
    }
}

impl<'de> serde::Deserialize<'de> for Unsendable {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Ok(Unsendable)
    }
}

/// The rank of worker `w`.
fn far_rank(w: usize) -> usize {
    gossamer::rank_of(WorkerId::new(w))
}

fn arg(name: &str) -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ seed)
        .collect()
}

/// `apply_then`s each counter takes from this rank in `apply_then_everywhere`.
const PER: u64 = 2000;

fn checks(quick: bool) -> usize {
    let me = rank();
    let w = worker_count();
    let mut passed = 0;
    let mut ok = |name: &str| {
        println!("ok {name} (rank {me})");
        passed += 1;
    };
    let counters = entrust_on_every_worker(me, w);
    ok("entrust_on");
    apply_then_everywhere(me, w, &counters);
    ok("apply_then");
    fibers_applying(me, w, &counters);
    ok("fibers");
    spawn_on_every_worker(w);
    ok("spawn_on");
    messages_to_every_worker(me, w);
    ok("messages");
    // The last worker of the next rank.
    let far = gossamer::workers_of_rank((me + 1) % rank_count()).end - 1;
    large_values(me, far, quick);
    ok("large");
    trust_passing(far);
    ok("trust_passing");
    inline_loop(far);
    ok("inline_loop");
    errors(me, far);
    ok("errors");
    drop(counters);
    passed
}

fn entrust_on_every_worker(me: usize, w: usize) -> Vec<Trust<u64>> {
    // entrust_on + apply on every worker of the job.
    let counters: Vec<Trust<u64>> = (0..w)
        .map(|i| entrust_on(WorkerId::new(i), move || (me as u64) << 32))
        .collect();
    for (i, c) in counters.iter().enumerate() {
        let v = c.apply(|n| {
            *n += 1;
            *n
        });
        assert_eq!(v, ((me as u64) << 32) + 1, "counter on worker {i}");
        assert_eq!(c.trustee(), WorkerId::new(i));
    }
    counters
}

fn apply_then_everywhere(me: usize, w: usize, counters: &[Trust<u64>]) {
    // apply_then: asynchronous increments, each callback counted on this worker.
    let done = std::rc::Rc::new(std::cell::Cell::new(0u64));
    for c in counters {
        for k in 0..PER {
            let d = done.clone();
            c.apply_then(
                |n| {
                    *n += 1;
                    *n
                },
                // Only this fiber touches the counter: the k-th answer is the k-th increment.
                move |v| {
                    assert_eq!(v, ((me as u64) << 32) + 2 + k, "answer {k}");
                    d.set(d.get() + 1)
                },
            );
        }
    }
    for (i, c) in counters.iter().enumerate() {
        let v = c.apply(|n| *n);
        assert_eq!(v, ((me as u64) << 32) + 1 + PER, "counter on worker {i}");
    }
    assert_eq!(done.get(), PER * w as u64, "apply_then callbacks run");
    // A flood to the last worker of the next rank (another rank when there is one), yielding
    // only every 4096: a worker keeps at most 16 384 apply_thens unanswered (`apply_then`'s
    // docs), so the answers keep coming in while it issues.
    let next = (me + 1) % rank_count();
    let far = entrust_on(WorkerId::new(workers_of_rank(next).end - 1), || 0u64);
    let flood = 8 * 16_384u64;
    let answered = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let mut widest = 0;
    for i in 0..flood {
        let a = answered.clone();
        far.apply_then(|n| *n += 1, move |()| a.set(a.get() + 1));
        widest = widest.max(i + 1 - answered.get());
        if i % 4096 == 4095 {
            yield_now();
        }
    }
    while answered.get() < flood {
        yield_now();
    }
    assert!(
        widest <= 16_384,
        "{widest} apply_thens to worker {} were unanswered at once",
        far.trustee().index()
    );
    assert_eq!(far.apply(|n| *n), flood, "the flood's increments");
}

fn fibers_applying(me: usize, w: usize, counters: &[Trust<u64>]) {
    // 64 fibers applying at once.
    let handles: Vec<_> = (0..64)
        .map(|f| {
            let c = counters[f % w].clone();
            spawn(move || {
                for _ in 0..100 {
                    c.apply(|n| *n += 1);
                }
            })
        })
        .collect();
    for h in handles {
        h.join();
    }
    for (i, c) in counters.iter().enumerate() {
        let fibers_here = (0..64).filter(|f| f % w == i).count() as u64;
        assert_eq!(
            c.apply(|n| *n),
            ((me as u64) << 32) + 1 + PER + fibers_here * 100,
            "counter on worker {i} after 64 fibers"
        );
    }
}

fn spawn_on_every_worker(w: usize) {
    // spawn_on every worker.
    let joins: Vec<_> = (0..w)
        .map(|i| {
            spawn_on(WorkerId::new(i), move || {
                (
                    gossamer::current_worker().index(),
                    rank(),
                    format!("hello from worker {i}"),
                )
            })
        })
        .collect();
    for (i, j) in joins.into_iter().enumerate() {
        let (id, r, s) = j.join();
        assert_eq!(id, i);
        assert_eq!(r, gossamer::rank_of(WorkerId::new(i)));
        assert_eq!(s, format!("hello from worker {i}"));
    }
}

fn messages_to_every_worker(me: usize, w: usize) {
    // Tagged messages to a fiber on every worker.
    let me_w = gossamer::current_worker();
    let tag = 0xC0FF_EE00 + me as u64;
    let receivers: Vec<_> = (0..w)
        .map(|i| {
            spawn_on(WorkerId::new(i), move || {
                let v: Vec<u64> = gossamer::recv(me_w, tag);
                v.iter().sum::<u64>()
            })
        })
        .collect();
    for i in 0..w {
        let v: Vec<u64> = (0..1000u64).map(|x| x + i as u64).collect();
        gossamer::send(WorkerId::new(i), tag, v);
    }
    for (i, j) in receivers.into_iter().enumerate() {
        assert_eq!(j.join(), 499_500 + 1000 * i as u64, "message to worker {i}");
    }
}

fn large_values(me: usize, far: usize, quick: bool) {
    // Large arguments and results, to the last worker of the next rank.
    let sink = entrust_on(WorkerId::new(far), || 0u64);
    let sizes: &[usize] = if quick {
        &[1 << 20]
    } else {
        &[1 << 20, 64 << 20]
    };
    for &len in sizes {
        let seed = me as u8;
        let data = pattern(len, seed);
        let got = sink.apply_with(data, move |calls, data: Vec<u8>| {
            *calls += 1;
            (data.len(), data == pattern(len, seed))
        });
        assert_eq!(got, (len, true), "{len}-byte argument");
    }
    let big: Vec<u8> = sink.apply(|_| pattern(1 << 20, 0x5A));
    assert!(big == pattern(1 << 20, 0x5A), "1 MiB result");
    // Owned batches without waiting (`apply_with_then`): small ones and one past a slot, each
    // answered in issue order with the property's state after it.
    let log = entrust_on(WorkerId::new(far), Vec::<String>::new);
    let answers = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    for b in 0..50usize {
        let n = if b == 25 { 5000 } else { b % 4 };
        let batch: Vec<String> = (0..n).map(|i| format!("{me}:{b}:{i}")).collect();
        let a = answers.clone();
        log.apply_with_then(
            batch,
            |v, batch: Vec<String>| {
                v.extend(batch);
                (v.len(), v.last().cloned())
            },
            move |r| a.borrow_mut().push(r),
        );
    }
    let all = log.apply(|v| v.clone());
    let mut len = 0;
    for (b, (got, last)) in answers.borrow().iter().enumerate() {
        let n = if b == 25 { 5000 } else { b % 4 };
        len += n;
        assert_eq!(*got, len, "apply_with_then answer {b}");
        if n > 0 {
            assert_eq!(
                last.as_deref(),
                Some(format!("{me}:{b}:{}", n - 1).as_str())
            );
        }
    }
    assert_eq!((answers.borrow().len(), all.len()), (50, len));
}

fn trust_passing(far: usize) {
    // Trust passing: a tracked property here, a handle sent to another rank's worker, which
    // keeps a clone and drops the original; then we drop ours and ask it to drop its clone.
    let home = gossamer::current_worker();
    let before = spawn_on(home, || DROPS.load(Ordering::SeqCst)).join();
    let tracked = entrust(Tracked(7));
    let keeper: Trust<Vec<Trust<Tracked>>> = entrust_on(WorkerId::new(far), Vec::new);
    keeper.apply_with(tracked.clone(), |kept, t: Trust<Tracked>| {
        kept.push(t.clone());
        drop(t);
        kept.len()
    });
    drop(tracked);
    let value = keeper.apply(|kept| kept.len());
    assert_eq!(value, 1);
    assert_eq!(
        spawn_on(home, || DROPS.load(Ordering::SeqCst)).join(),
        before,
        "the property must live while another rank holds a handle"
    );
    keeper.apply(|kept| kept.clear());
    // The last release crosses to this rank on its own (over tcp, through two I/O threads), so
    // the wait is bounded by time, not by a count of polls that a loaded machine runs through
    // faster than the release travels.
    let mut freed = false;
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(30) {
        if spawn_on(home, || DROPS.load(Ordering::SeqCst)).join() == before + 1 {
            freed = true;
            break;
        }
        gossamer::yield_now();
    }
    assert!(
        freed,
        "the property was not freed within 30 s after the last handle went"
    );
}

fn inline_loop(far: usize) {
    // A loop of inline applies that never yields, on this worker, still serves a request that a
    // worker of the next rank sends it some milliseconds later (through the shm segment or a
    // tcp I/O thread, or within this process in a one-rank job): the ring that announces the
    // request closes this worker's gate, and the loop's applies look again
    // (`WorkerCore::gate`). That worker is not worker 0 of its rank, whose main fiber spins in
    // the same loop (`main` gives every rank 2 workers).
    let flag = entrust(false);
    let setter = gossamer::spawn_on_with(WorkerId::new(far), flag.clone(), |flag: Trust<bool>| {
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(20) {
            yield_now();
        }
        flag.apply(|f| *f = true);
    });
    let start = std::time::Instant::now();
    let mut spins = 0u64;
    while !flag.apply(|f| *f) {
        spins += 1;
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "a loop of {spins} inline applies never served the flag's request from worker {far}"
        );
    }
    setter.join();
}

fn errors(me: usize, far: usize) {
    // Errors across ranks.
    let fragile = entrust_on(WorkerId::new(far), || 1u32);
    let e = fragile
        .try_apply(|_| -> u32 { panic!("deliberate panic on a remote trustee") })
        .unwrap_err();
    match e {
        DelegationError::Panicked(m) => assert!(m.contains("deliberate panic"), "{m}"),
        other => panic!("expected a panic error, got {other}"),
    }
    assert_eq!(
        fragile.try_apply(|n| *n).unwrap_err(),
        DelegationError::Poisoned
    );
    // A panic in the middle of a run of requests of one kind (one batch, served in one loop):
    // the results before it, its panic, then `Poisoned`, in order.
    let runner = entrust_on(WorkerId::new(far), || 0u32);
    let got = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    for _ in 0..40 {
        let got = got.clone();
        runner.try_apply_then(
            |n| {
                *n += 1;
                assert!(*n != 20, "deliberate panic in a run");
                *n
            },
            move |r| got.borrow_mut().push(r),
        );
    }
    let start = std::time::Instant::now();
    while got.borrow().len() < 40 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{} of 40 answers to a run came back within 30 s",
            got.borrow().len()
        );
        gossamer::yield_now();
    }
    for (i, r) in got.borrow().iter().enumerate() {
        match (i + 1, r) {
            (k @ 1..20, Ok(v)) => assert_eq!(*v, k as u32),
            (20, Err(DelegationError::Panicked(m))) => assert!(m.contains("deliberate"), "{m}"),
            (21.., Err(DelegationError::Poisoned)) => {}
            (k, r) => panic!("request {k} of the run: {r:?}"),
        }
    }
    // A result that cannot be serialised for the caller's rank is a wire failure naming its
    // type, not a panic: the closure ran to its end, and the property is not poisoned.
    if far_rank(far) != me {
        let wired = entrust_on(WorkerId::new(far), || 5u32);
        match wired.try_apply(|n| {
            *n += 1;
            Unsendable
        }) {
            Err(DelegationError::Wire(m)) => {
                assert!(m.contains("Unsendable") && m.contains("serialised"), "{m}")
            }
            other => panic!("expected a wire failure, got {:?}", other.map(|_| ())),
        }
        assert_eq!(wired.try_apply(|n| *n), Ok(6), "after a wire failure");
    }
}

fn main() {
    if std::env::args().any(|a| a == "--run-on-thread") {
        // The job's thread is not the process's main thread, which runs the exit handlers.
        let on_thread = std::thread::spawn(checked_main);
        if on_thread.join().is_err() {
            std::process::exit(101);
        }
    } else {
        checked_main();
    }
}

fn checked_main() {
    // The `errors` check panics on purpose; keep its expected panic out of the output.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if !msg.contains("deliberate panic on a remote trustee") {
            default_hook(info);
        }
    }));
    let quick = std::env::args().any(|a| a == "--quick");
    // Dropped when this function returns, early or not: MPI_Finalize.
    let _universe = std::env::args().any(|a| a == "--own-mpi").then(|| {
        mpi::initialize_with_threading(mpi::Threading::Funneled)
            .expect("MPI is initialised once")
            .0
    });
    let panic_rank = arg("--panic-rank");
    let hang_rank = arg("--hang-rank");
    let exit_rank = arg("--exit-rank");
    let exit_status = arg("--exit-status").map_or(3, |c| c as i32);
    let recv_forever = std::env::args().any(|a| a == "--recv-forever");
    let slow_send = std::env::args().any(|a| a == "--slow-send");
    let fiber_sleep = std::env::args().any(|a| a == "--fiber-sleep-send");
    if arg("--skip-rank") == rank_number() {
        println!("cluster_check: rank {} skips the job", r_rank());
        return;
    }
    let config = Config::from_env().expect("configuration").workers(2);
    let r = gossamer::run(config.clone(), move || {
        let me = rank();
        if panic_rank == Some(me) {
            let t = entrust_on(WorkerId::new(0), || 0u64);
            t.apply_then(
                |n| *n,
                |_| panic!("deliberate panic in a callback on rank {}", rank()),
            );
            loop {
                gossamer::yield_now();
            }
        }
        if exit_rank == Some(me) {
            let far = entrust_on(WorkerId::new(0), || 0u64);
            far.apply(|n| *n += 1);
            std::process::exit(exit_status);
        }
        if recv_forever {
            let last = WorkerId::new(worker_count() - 1);
            let _: u64 = gossamer::recv(last, 0xd1);
        }
        if slow_send || fiber_sleep {
            let first_of_1 = WorkerId::new(workers_of_rank(1).start);
            let pause = std::time::Duration::from_millis(2500);
            match me {
                0 => assert_eq!(gossamer::recv::<u64>(first_of_1, 0x5e), 2500),
                1 if fiber_sleep => {
                    let start = std::time::Instant::now();
                    gossamer::sleep(pause);
                    assert!(start.elapsed() >= pause, "slept only {:?}", start.elapsed());
                    gossamer::send(WorkerId::new(0), 0x5e, 2500u64);
                }
                1 => {
                    std::thread::sleep(pause);
                    gossamer::send(WorkerId::new(0), 0x5e, 2500u64);
                }
                _ => {}
            }
            println!("ok slow_send (rank {me})");
            return (0, worker_count());
        }
        if hang_rank == Some(me) {
            let far = entrust_on(WorkerId::new(0), || 0u64);
            loop {
                far.apply(|n| *n += 1);
            }
        }
        let n = checks(quick);
        (n, worker_count())
    });
    let (n, w) = match r {
        Ok(v) => v,
        Err(e) => {
            gossamer::eprint_line(format_args!("cluster_check: {e}"));
            if arg("--stay-rank") == rank_number() || std::env::args().any(|a| a == "--stay-all") {
                // A program that handles the failure and goes on with other work.
                println!("cluster_check: rank {} stays after: {e}", r_rank());
                let secs = arg("--stay-secs").unwrap_or(120) as u64;
                std::thread::sleep(std::time::Duration::from_secs(secs));
                std::process::exit(0);
            }
            std::process::exit(1);
        }
    };
    if arg("--one-run-rank") == rank_number() {
        println!("cluster_check: rank {} leaves after one run", r_rank());
        return;
    }
    if arg("--panic-between-runs") == rank_number() {
        panic!("deliberate panic between two runs on rank {}", r_rank());
    }
    let config = if arg("--bad-config-rank") == rank_number() {
        config.slot_size(100)
    } else {
        config
    };
    // A second run in the same process: the fabrics are set up again.
    let again = gossamer::run(config, || {
        let t = entrust_on(WorkerId::new(worker_count() - 1), || 40u64);
        t.apply(|n| *n + 2)
    });
    match again {
        Ok(42) => println!("ok second_run (rank {})", r_rank()),
        Ok(v) => panic!("second run computed {v}"),
        Err(e) => {
            gossamer::eprint_line(format_args!("cluster_check: second run: {e}"));
            std::process::exit(1);
        }
    }
    println!(
        "cluster_check: rank {} of {} passed {} checks ({w} workers)",
        r_rank(),
        r_size(),
        n + 1
    );
}

/// This rank's number, as the launcher gave it.
fn rank_number() -> Option<usize> {
    r_rank().parse().ok()
}

fn r_rank() -> String {
    std::env::var("GSM_RANK")
        .or_else(|_| std::env::var("OMPI_COMM_WORLD_RANK"))
        .unwrap_or_else(|_| "0".into())
}

fn r_size() -> String {
    std::env::var("GSM_SIZE")
        .or_else(|_| std::env::var("OMPI_COMM_WORLD_SIZE"))
        .unwrap_or_else(|_| "1".into())
}
