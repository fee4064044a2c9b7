//! One point of `gsm-bench scale`: a rank of `W` workers running the README's counter program,
//! then idling, as a child process of its own so that its peak RSS is its alone.
//!
//! The child side ([`child`], the hidden `scale-point` subcommand) runs the program and prints
//! one JSON line of what it measured inside; the parent side ([`measure`]) starts it, reaps it
//! with `wait4` for its peak RSS, and kills it past a time limit. This module measures one point;
//! the sweep, the fit and the report are `scale.rs` and `model.rs`.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gossamer::{Config, WorkerId, entrust_on, spawn, worker_count, yield_now};
use serde::{Deserialize, Serialize};

use crate::sys::{self, Usage, Who};

/// Fibers of the README's program, each applying [`APPLIES`] increments.
const FIBERS: u64 = 8;
const APPLIES: u64 = 1000;
/// Yields between two looks at the thread's CPU time in the yield loop.
const YIELD_BATCH: u64 = 1024;
/// Batches of [`RT_APPLIES`] blocking applies timed for the round trip.
const RT_BATCHES: usize = 7;
const RT_APPLIES: u32 = 2000;

/// What the child measures inside the rank.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Inside {
    /// Workers of the rank.
    pub workers: usize,
    /// The counter's final value (must be `FIBERS × APPLIES`).
    pub total: u64,
    /// Wall time of the counter program, from spawning the fibers to reading the total.
    pub counter_ms: f64,
    /// Wall time of the idle window.
    pub idle_ms: f64,
    /// CPU time of the whole rank during the idle window (the main fiber sleeps, nothing else
    /// has work).
    pub idle_cpu_ms: f64,
    /// CPU time of worker 0 per `yield_now` of its lone fiber while every other worker idles:
    /// each yield switches fibers, and every few yields the scheduler polls.
    pub yield_cpu_ns: f64,
    /// Wall time of one blocking apply from worker 0 to a property of worker 1 while every
    /// other worker sleeps (median of [`RT_BATCHES`] batches).
    #[serde(default)]
    pub round_trip_ns: f64,
}

/// One measured point: the child's figures and its peak RSS from `wait4`.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    #[serde(flatten)]
    pub inside: Inside,
    /// Peak resident set size of the rank in bytes.
    pub peak_rss: u64,
    /// Wall time of the whole child process, start to exit.
    pub wall_ms: f64,
}

/// The child: runs the counter program on `workers` workers, idles `idle`, yields for
/// `yield_budget` of CPU, and prints [`Inside`] as one JSON line.
pub fn child(workers: usize, idle: Duration, yield_budget: Duration) -> anyhow::Result<()> {
    anyhow::ensure!(workers >= 1, "scale-point: --workers must be at least 1");
    let config = Config::default().workers(workers).pin(false);
    let inside = gossamer::run(config, move || measure_inside(idle, yield_budget))
        .map_err(|e| anyhow::anyhow!("the runtime of {workers} workers could not run: {e}"))??;
    anyhow::ensure!(
        inside.total == FIBERS * APPLIES,
        "the counter ended at {} instead of {}",
        inside.total,
        FIBERS * APPLIES
    );
    println!("{}", serde_json::to_string(&inside)?);
    Ok(())
}

/// The body of the run: the README's counter program, the idle window, the yield loop.
fn measure_inside(idle: Duration, yield_budget: Duration) -> anyhow::Result<Inside> {
    let workers = worker_count();
    let start = Instant::now();
    let counter = entrust_on(WorkerId::new(1 % workers), || 0u64);
    let fibers: Vec<_> = (0..FIBERS)
        .map(|_| {
            let c = counter.clone();
            spawn(move || {
                for _ in 0..APPLIES {
                    c.apply(|n| *n += 1);
                }
            })
        })
        .collect();
    fibers.into_iter().for_each(|f| f.join());
    let total = counter.apply(|n| *n);
    let counter_ms = ms(start.elapsed());

    let before = sys::usage(Who::Process)?;
    let idle_start = Instant::now();
    gossamer::sleep(idle);
    let idle_ms = ms(idle_start.elapsed());
    let idle_cpu_ms = ms(cpu_since(before, Who::Process)?);

    let before = sys::usage(Who::Thread)?;
    let deadline = Instant::now() + yield_budget * 10;
    let mut yields = 0u64;
    let used = loop {
        for _ in 0..YIELD_BATCH {
            yield_now();
        }
        yields += YIELD_BATCH;
        let used = cpu_since(before, Who::Thread)?;
        if used >= yield_budget || Instant::now() >= deadline {
            break used;
        }
    };
    Ok(Inside {
        workers,
        total,
        counter_ms,
        idle_ms,
        idle_cpu_ms,
        yield_cpu_ns: used.as_nanos() as f64 / yields as f64,
        round_trip_ns: round_trip(&counter),
    })
}

/// The median time of a blocking apply to the counter (on worker 1 when there are two or more).
fn round_trip(counter: &gossamer::Trust<u64>) -> f64 {
    let mut batches: Vec<f64> = (0..RT_BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..RT_APPLIES {
                counter.apply(|n| *n += 1);
            }
            start.elapsed().as_nanos() as f64 / f64::from(RT_APPLIES)
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[RT_BATCHES / 2]
}

fn cpu_since(before: Usage, who: Who) -> anyhow::Result<Duration> {
    Ok(sys::usage(who)?.cpu.saturating_sub(before.cpu))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs one point as a child `exe scale-point …`, killed after `limit`.
pub fn measure(
    exe: &Path,
    workers: usize,
    idle: Duration,
    yield_budget: Duration,
    limit: Duration,
) -> anyhow::Result<Point> {
    let start = Instant::now();
    let mut child = Command::new(exe)
        .arg("scale-point")
        .args(["--workers", &workers.to_string()])
        .args(["--idle-ms", &idle.as_millis().to_string()])
        .args(["--yield-ms", &yield_budget.as_millis().to_string()])
        .env_remove("GSM_THREADS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", exe.display()))?;
    let pid = child.id() as i32;
    let mut stdout = child.stdout.take().expect("stdout was piped");
    // The child prints one short line at its end; read it on a thread so a hung child is
    // still noticed by the time limit below.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let (status, usage) = loop {
        if let Some(done) = sys::wait_child(pid, false)? {
            break done;
        }
        if start.elapsed() > limit {
            sys::kill(pid, sys::SIGKILL);
            let _ = sys::wait_child(pid, true);
            anyhow::bail!(
                "the point of {workers} workers did not end within {} s and was killed; give \
                 it longer with --limit-s",
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall_ms = ms(start.elapsed());
    let text = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader of the point's output panicked"))??;
    anyhow::ensure!(
        status.success(),
        "the point of {workers} workers failed ({status}); its error is above"
    );
    let inside: Inside = serde_json::from_str(text.trim()).map_err(|e| {
        anyhow::anyhow!("the point of {workers} workers printed no report ({e}): {text:?}")
    })?;
    Ok(Point {
        inside,
        peak_rss: usage.max_rss_kib * 1024,
        wall_ms,
    })
}
