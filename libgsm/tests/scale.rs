//! A rank of many workers costs what its workers use, not the square of their number: one rank of
//! 256 workers (oversubscribed here) runs the README's counter program within a bound on its peak
//! memory, and idles without taking a CPU.
//!
//! Each point runs in a child process (this test binary again, with `SCALE_CHILD` set), so that
//! its peak resident set, read by `wait4`, is its alone. With a request and a response ring for
//! every ordered pair of workers made at start, 256 workers held 8.7 GB of rings.

use std::process::Command;
use std::time::{Duration, Instant};

use gossamer::{Config, WorkerId, entrust_on, spawn};

const CHILD: &str = "SCALE_CHILD";

/// CPU time of this process.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The child: the counter program on `workers` workers, then a second of idling; prints the
/// share of a CPU the rank used while idle.
fn child(workers: usize) {
    let idle = gossamer::run(Config::default().workers(workers), move || {
        let counter = entrust_on(WorkerId::new(1), || 0u64);
        let fibers: Vec<_> = (0..8)
            .map(|_| {
                let c = counter.clone();
                spawn(move || {
                    for _ in 0..1000 {
                        c.apply(|n| *n += 1);
                    }
                })
            })
            .collect();
        fibers.into_iter().for_each(|f| f.join());
        assert_eq!(counter.apply(|n| *n), 8000);
        // Let the workers that started the job settle into their sleep first.
        gossamer::sleep(Duration::from_millis(300));
        let (cpu, wall) = (process_cpu(), Instant::now());
        gossamer::sleep(Duration::from_secs(1));
        (process_cpu() - cpu).as_secs_f64() / wall.elapsed().as_secs_f64()
    })
    .expect("the run");
    println!("idle-share {idle}");
}

/// Runs the child of `workers` workers; its peak RSS in bytes and its idle share of a CPU.
// The child is reaped by `wait4` below, which also reads its peak RSS; clippy sees no `wait`.
#[allow(clippy::zombie_processes)]
fn point(workers: usize) -> (u64, f64) {
    let exe = std::env::current_exe().expect("the test binary");
    let mut c = Command::new(exe)
        .args([
            "--exact",
            "a_rank_of_256_workers_stays_small",
            "--nocapture",
        ])
        .env(CHILD, workers.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the child starts");
    let mut out = String::new();
    std::io::Read::read_to_string(c.stdout.as_mut().expect("piped"), &mut out).expect("stdout");
    let mut status = 0;
    // SAFETY: all-zero bytes are a valid `rusage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child's pid, valid out-pointers.
    let pid = unsafe { libc::wait4(c.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, c.id() as i32, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child of {workers} workers failed (status {status}): {out}"
    );
    let idle = out
        .lines()
        .find_map(|l| l.strip_prefix("idle-share "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no idle share in the child's output: {out}"));
    (usage.ru_maxrss as u64 * 1024, idle)
}

#[test]
fn a_rank_of_256_workers_stays_small() {
    if let Ok(w) = std::env::var(CHILD) {
        child(w.parse().expect("a worker count"));
        return;
    }
    let (rss, idle) = point(256);
    let mib = rss as f64 / (1 << 20) as f64;
    eprintln!(
        "256 workers: peak RSS {mib:.1} MiB, idle {:.1}% of a CPU",
        idle * 100.0
    );
    assert!(
        mib <= 128.0,
        "one rank of 256 workers peaked at {mib:.1} MiB (bound: 128 MiB)"
    );
    // Sleeping workers wake only when rung, or after a growing timeout: a quarter of a CPU is far
    // above that and far below the spinning and yielding of 256 workers that do not sleep.
    assert!(
        idle < 0.25,
        "256 idle workers used {:.0}% of a CPU",
        idle * 100.0
    );
}
