//! `fault_job`: a small Gossamer job for the fault-injection suite (`tests/tests/faults.rs`) and
//! `gsm-bench launch`'s fault times. Every rank keeps a counter on the first worker of the next
//! rank, and its main fiber applies to it in a loop, sleeping between
//! rounds so that the job costs little CPU, for `--secs S` seconds (default 30).
//!
//! It prints `ready R of N on HOST (pid P)` once its first round trip to the next rank came back
//! (so the job is joined and its fabrics carry requests: a fault injected after every rank said
//! it hits a running job), `round R K` every 50 rounds, and `done R` at the end.
//!
//! `--exit-rank R` makes rank R exit with status 3 right after `ready`.
//!
//! `--spin-rank R` makes rank R's main fiber send the next rank's counter a closure that loops
//! for ever (`fault_job::spin_closure`), after `ready`: the trustee's worker never comes
//! back, and the runtime's stall report must name it and the closure's type.

use gossamer::{Config, Trust, WorkerId, entrust_on, rank, rank_count};
use std::time::{Duration, Instant};

/// The counter every rank keeps.
struct Counter(u64);

fn arg(name: &str) -> Option<String> {
    let mut it = std::env::args();
    it.find(|a| a == name)?;
    it.next()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Counts for ever: the body of the closure that `--spin-rank` sends.
fn spin(c: &mut Counter) -> u64 {
    loop {
        c.0 = std::hint::black_box(c.0.wrapping_add(1));
        if c.0 == u64::MAX {
            return c.0;
        }
    }
}

/// The closure `--spin-rank` sends, as a named item so that its type name is known:
/// `fault_job::spin_closure`.
fn spin_closure(c: &mut Counter) -> u64 {
    spin(c)
}

fn main() {
    let secs: f64 = arg("--secs").and_then(|s| s.parse().ok()).unwrap_or(30.0);
    let spin_rank: Option<usize> = arg("--spin-rank").and_then(|s| s.parse().ok());
    let exit_rank: Option<usize> = arg("--exit-rank").and_then(|s| s.parse().ok());
    let config = Config::from_env().unwrap_or_else(|e| {
        eprintln!("fault_job: {e}");
        std::process::exit(2);
    });
    let result = gossamer::run(config, move || {
        let (me, n) = (rank(), rank_count());
        // Each rank keeps a counter on the first worker of the next rank.
        let first = gossamer::workers_of_rank((me + 1) % n).start;
        let next: Trust<Counter> = entrust_on(WorkerId::new(first), || Counter(0));
        next.apply(|c| c.0 += 1);
        println!(
            "ready {me} of {n} on {} (pid {})",
            hostname(),
            std::process::id()
        );
        if exit_rank == Some(me) {
            std::process::exit(3);
        }
        if spin_rank == Some(me) {
            next.apply(spin_closure);
        }
        let start = Instant::now();
        let mut k = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            next.apply(|c| c.0 += 1);
            k += 1;
            if k % 50 == 0 {
                println!("round {me} {k}");
            }
            gossamer::sleep(Duration::from_millis(20));
        }
        println!("done {me}");
    });
    if let Err(e) = result {
        eprintln!(
            "fault_job: rank {}: {e}",
            std::env::var("GSM_RANK").unwrap_or_default()
        );
        std::process::exit(1);
    }
}
