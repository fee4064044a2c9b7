//! More workers than CPUs: the idle ones sleep and stay asleep, and two workers that talk to each
//! other meanwhile run about as fast as they do alone. (A test binary of its own: the timings
//! below must not share the CPUs with other tests of the same binary.)
//!
//! Both failed before the idle loop learned it: with 8 workers on 2 CPUs, each idle worker woke
//! the others again and again to count them for the deadlock watch (about a quarter of a CPU
//! each, 6 of them), and a worker waiting for an answer yielded its CPU at once instead of
//! spinning although only 2 workers were awake. A blocking apply to another worker cost
//! 3.6-4.4 us there against 0.5 us with 2 workers.

use std::time::{Duration, Instant};

use gossamer::{Config, WorkerId, entrust_on, spawn_on};

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time so far of each worker in `range`, read on that worker.
fn cpu_of(range: std::ops::Range<usize>) -> Vec<Duration> {
    let hs: Vec<_> = range
        .map(|w| spawn_on(WorkerId::new(w), thread_cpu))
        .collect();
    hs.into_iter().map(|h| h.join()).collect()
}

/// Blocking applies from worker 0 to a property on worker 1, in a runtime of `workers`: the
/// mean time of one (ns), and the CPU time the other workers used meanwhile against the wall time.
fn ping_pong(workers: usize, applies: u32) -> (f64, f64) {
    // Small rings: a rank of n workers holds 2 n (n - 1) of them, and the test must not need
    // gigabytes on a host with many CPUs.
    let config = Config::default()
        .workers(workers)
        .slot_size(1024)
        .slots_per_ring(4);
    gossamer::run(config, move || {
        let t = entrust_on(WorkerId::new(1), || 0u64);
        for _ in 0..10_000 {
            t.apply(|n| *n += 1);
        }
        let before = cpu_of(2..workers);
        let start = Instant::now();
        for _ in 0..applies {
            t.apply(|n| *n += 1);
        }
        let wall = start.elapsed();
        let after = cpu_of(2..workers);
        assert_eq!(t.apply(|n| *n), 10_000 + u64::from(applies));
        let idle_cpu: Duration = after.iter().zip(&before).map(|(a, b)| *a - *b).sum();
        (
            wall.as_nanos() as f64 / f64::from(applies),
            idle_cpu.as_secs_f64() / wall.as_secs_f64(),
        )
    })
    .unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn idle_workers_sleep_and_the_busy_pair_runs_as_fast_as_alone() {
    let cpus = gossamer::available_cpus();
    // Six more than the CPUs: 8 on this 2-CPU machine.
    let many = cpus + 6;
    let (mut alone, mut crowded, mut idle) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        alone.push(ping_pong(2, 200_000).0);
        let (ns, cpu) = ping_pong(many, 200_000);
        crowded.push(ns);
        idle.push(cpu);
    }
    let (alone, crowded, idle) = (median(alone), median(crowded), median(idle));
    eprintln!(
        "blocking apply: {alone:.0} ns with 2 workers, {crowded:.0} ns with {many}; \
         the {} idle ones used {:.0}% of a CPU",
        many - 2,
        idle * 100.0
    );
    assert!(
        idle < 0.25,
        "{} idle workers used {:.0}% of a CPU while two others worked",
        many - 2,
        idle * 100.0
    );
    assert!(
        crowded < 3.0 * alone,
        "a blocking apply took {crowded:.0} ns with {many} workers (mostly asleep), \
         {alone:.0} ns with 2"
    );
}
