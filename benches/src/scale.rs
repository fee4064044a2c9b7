//! `gsm-bench scale`: what one rank costs as its worker count grows, and what the fitted model
//! says of a rank in a job of many hosts.
//!
//! ```text
//! gsm-bench scale [--quick] [--workers 8,16,…] [--json FILE] [--plot DIR]
//! ```
//!
//! Each point is a child process (`point.rs`): one rank of `W` workers (more workers than cores:
//! this measures memory and behaviour, not speed) runs the README's counter program (a counter
//! on worker 1, eight fibers applying a thousand increments each), then measures, inside:
//! - the CPU the whole rank uses over an idle window (`--idle-ms`) in which the main fiber
//!   sleeps and nothing else has work, as a share of one core;
//! - the CPU time of worker 0 per `yield_now` of its lone fiber while every other worker idles
//!   (a fiber switch, and every few switches a poll of every ring of the worker);
//!
//! and the parent reads its peak RSS from `wait4`. The points are swept at 8 to 256 workers
//! (`--quick`: 8, 32, 128), each within `--limit-s`; a point the fit of the points before it
//! says would need more than `--max-rss-mib` is skipped, not run. The peak RSS is fitted to
//! `a + b·w + c·w²` (`model.rs`), and the model is asked for a rank of 128 workers in jobs of 64
//! and 1,024 hosts, each worker talking to 8 remote peers or to all, with what the places for
//! other ranks' workers, the rings, buffers and connections of the runtime's ring geometry
//! (`Config::default()`) and tcp fabric give by formula, beside main's figures before issue 47.
//!
//! Output: a table per point, the fit, the predictions; `--json FILE` writes all three as one
//! object; `--plot DIR` draws peak RSS and the fitted curve against workers (`scale-rss.svg`).

mod model;
mod point;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use model::{Fit, Prediction};
pub use point::{Point, child};

/// The worker counts of a full sweep and of `--quick`.
pub const FULL: [usize; 6] = [8, 16, 32, 64, 128, 256];
pub const QUICK: [usize; 3] = [8, 32, 128];
/// The hosts and workers per host of the predictions, and the remote peers each worker talks
/// to in the "some peers" case (the other is all-to-all).
const PREDICT_HOSTS: [u64; 2] = [64, 1024];
const PREDICT_WORKERS: u64 = 128;
const PREDICT_PEERS: u64 = 8;

/// Options of `gsm-bench scale`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Worker counts, one point each, in this order.
    pub workers: Vec<usize>,
    /// The idle window of each point.
    pub idle: Duration,
    /// CPU time each point spends in its yield loop.
    pub yield_budget: Duration,
    /// Time limit of one point.
    pub limit: Duration,
    /// Points the fit so far predicts above this many bytes are skipped.
    pub max_rss: u64,
}

/// Everything `--json` writes.
#[derive(Debug, Serialize)]
struct Report {
    points: Vec<Point>,
    /// Worker counts not run, with why.
    skipped: Vec<(usize, String)>,
    fit: Option<Fit>,
    ring_bytes: u64,
    predictions: Vec<Prediction>,
}

/// The command line of `gsm-bench scale`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// A shorter sweep: 8, 32 and 128 workers, a shorter idle window and yield loop.
    #[arg(long)]
    pub quick: bool,
    /// Worker counts, comma-separated [default: 8,16,32,64,128,256; with --quick 8,32,128].
    #[arg(long, value_delimiter = ',')]
    pub workers: Option<Vec<usize>>,
    /// Milliseconds of each point's idle window [default: 1000; with --quick 300].
    #[arg(long)]
    pub idle_ms: Option<u64>,
    /// Milliseconds of CPU of each point's yield loop [default: 200; with --quick 50].
    #[arg(long)]
    pub yield_ms: Option<u64>,
    /// Seconds a point may take before it is killed (and the sweep fails).
    #[arg(long, default_value_t = 120)]
    pub limit_s: u64,
    /// Skip a point whose predicted peak RSS is above this [default: half the memory available].
    #[arg(long)]
    pub max_rss_mib: Option<u64>,
    /// Also write the points, the fit and the predictions as one JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also draw peak RSS against workers, with the fit, into DIR/scale-rss.svg.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

/// The command line of one point (`gsm-bench scale-point`, run by `scale` only).
#[derive(Debug, Clone, clap::Args)]
pub struct PointArgs {
    #[arg(long)]
    pub workers: usize,
    #[arg(long)]
    pub idle_ms: u64,
    #[arg(long)]
    pub yield_ms: u64,
}

/// `gsm-bench scale`.
pub fn command(args: &Args) -> anyhow::Result<bool> {
    let workers = match &args.workers {
        Some(w) => w.clone(),
        None if args.quick => QUICK.to_vec(),
        None => FULL.to_vec(),
    };
    if let Some(bad) = workers.iter().find(|w| !(1..=4096).contains(*w)) {
        anyhow::bail!("--workers: {bad} is outside 1..=4096");
    }
    let ms = |v: Option<u64>, full, quick| {
        Duration::from_millis(v.unwrap_or(if args.quick { quick } else { full }).max(1))
    };
    let max_rss = match args.max_rss_mib {
        Some(m) => m << 20,
        None => half_available()?,
    };
    let opts = Options {
        workers,
        idle: ms(args.idle_ms, 1000, 300),
        yield_budget: ms(args.yield_ms, 200, 50),
        limit: Duration::from_secs(args.limit_s.max(1)),
        max_rss,
    };
    run(&opts, args.json.as_deref(), args.plot.as_deref())?;
    Ok(true)
}

/// `gsm-bench scale-point`.
pub fn point_command(args: &PointArgs) -> anyhow::Result<bool> {
    child(
        args.workers,
        Duration::from_millis(args.idle_ms),
        Duration::from_millis(args.yield_ms),
    )?;
    Ok(false)
}

/// Half of `MemAvailable` in `/proc/meminfo`: a point is not worth starving the machine.
fn half_available() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo")?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no MemAvailable in /proc/meminfo; give --max-rss-mib"))?;
    Ok(kib * 1024 / 2)
}

/// Bytes of one ring of the runtime's default geometry.
fn ring_bytes() -> anyhow::Result<u64> {
    let c = gossamer::Config::default();
    let layout = gossamer::wire::ring::RingLayout::new(
        u32::try_from(c.slots_per_ring)?,
        u32::try_from(c.slot_size)?,
    )?;
    Ok(layout.bytes() as u64)
}

/// Runs the sweep and prints the report.
pub fn run(opts: &Options, json: Option<&Path>, plot: Option<&Path>) -> anyhow::Result<()> {
    crate::report::check_json(json)?;
    let exe = std::env::current_exe()?;
    let ring_bytes = ring_bytes()?;
    let mut points: Vec<Point> = Vec::new();
    let mut skipped = Vec::new();
    for &w in &opts.workers {
        if let Some(why) = too_big(&points, w, opts.max_rss) {
            crate::report::progress(format_args!("scale: {w} workers skipped: {why}"));
            skipped.push((w, why));
            continue;
        }
        crate::report::progress(format_args!("scale: {w} workers"));
        points.push(point::measure(
            &exe,
            w,
            opts.idle,
            opts.yield_budget,
            opts.limit,
        )?);
    }
    crate::report::progress_done();
    let fit = model::fit(&rss_points(&points));
    let predictions: Vec<Prediction> = PREDICT_HOSTS
        .iter()
        .flat_map(|&h| {
            [Some(PREDICT_PEERS), None]
                .map(|k| model::predict(fit.as_ref(), h, PREDICT_WORKERS, ring_bytes, k))
        })
        .collect();
    let report = Report {
        points,
        skipped,
        fit,
        ring_bytes,
        predictions,
    };
    print!("{}", text(&report));
    if let Some(dir) = plot {
        println!("(chart: {})", draw(dir, &report)?.display());
    }
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n").map_err(|e| {
            anyhow::anyhow!("cannot write the JSON report to {}: {e}", path.display())
        })?;
    }
    Ok(())
}

/// `(workers, peak RSS)` of every point.
fn rss_points(points: &[Point]) -> Vec<(f64, f64)> {
    points
        .iter()
        .map(|p| (p.inside.workers as f64, p.peak_rss as f64))
        .collect()
}

/// A generous bound of what a rank keeps per pair of workers at start (places, not rings, which
/// are made on first use), for predicting a point before three are measured.
const PAIR_BOUND: f64 = 4096.0;

/// Why `w` workers should not be run: the fit of the points so far (or, with fewer than three,
/// the largest point plus [`PAIR_BOUND`] per added pair) predicts more than `max` bytes.
fn too_big(points: &[Point], w: usize, max: u64) -> Option<String> {
    let pts = rss_points(points);
    let wf = w as f64;
    let predicted = match model::fit(&pts) {
        Some(f) => f.at(wf),
        None => pts
            .iter()
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|&(pw, py)| py + PAIR_BOUND * (wf * wf - pw * pw).max(0.0))?,
    };
    (predicted > max as f64).then(|| {
        format!(
            "predicted peak RSS {} is above --max-rss-mib {}",
            human(predicted),
            max >> 20
        )
    })
}

fn human(bytes: f64) -> String {
    let mib = bytes / (1u64 << 20) as f64;
    if mib >= 1024.0 * 1024.0 {
        format!("{:.2} TiB", mib / (1024.0 * 1024.0))
    } else if mib >= 1024.0 {
        format!("{:.2} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

/// The printed report.
fn text(r: &Report) -> String {
    let mut out = String::from(
        "one rank, the README's counter program, then idle (workers oversubscribed: memory and \
         behaviour, not speed)\n",
    );
    out.push_str(&format!(
        "{:>8} {:>12} {:>11} {:>15} {:>17} {:>13} {:>9}\n",
        "workers",
        "peak RSS",
        "counter ms",
        "idle CPU % core",
        "yield CPU ns (w0)",
        "round trip ns",
        "wall s"
    ));
    for p in &r.points {
        let i = &p.inside;
        out.push_str(&format!(
            "{:>8} {:>12} {:>11.1} {:>15.1} {:>17.0} {:>13.0} {:>9.2}\n",
            i.workers,
            human(p.peak_rss as f64),
            i.counter_ms,
            100.0 * i.idle_cpu_ms / i.idle_ms.max(1e-9),
            i.yield_cpu_ns,
            i.round_trip_ns,
            p.wall_ms / 1e3
        ));
    }
    for (w, why) in &r.skipped {
        out.push_str(&format!("{w:>8} skipped: {why}\n"));
    }
    match &r.fit {
        Some(f) => out.push_str(&format!(
            "fit of peak RSS: a + b·w + c·w², a = {}, b = {:.1} KiB per worker, c = {:.1} KiB per \
             pair of workers (largest residual {:.1}%)\n",
            human(f.a),
            f.b / 1024.0,
            f.c / 1024.0,
            100.0 * f.max_rel_residual
        )),
        None => out.push_str("fit of peak RSS: needs at least 3 worker counts\n"),
    }
    out.push_str(&format!(
        "per rank at H hosts x {PREDICT_WORKERS} workers (one rank per host, tcp between hosts; \
         rings of {} B, the runtime's default geometry; each worker talks to {PREDICT_PEERS} \
         remote peers, or to all; ARCHITECTURE.md section 9):\n",
        r.ring_bytes
    ));
    out.push_str(&format!(
        "{:>6} {:>11} {:>12} {:>13} {:>13} {:>14} {:>14} {:>12} {:>12} {:>8}\n",
        "hosts",
        "talks to",
        "fit a+bL+cL²",
        "places main",
        "places now",
        "rings at start",
        "rings on use",
        "total main",
        "total now",
        "conns"
    ));
    for p in &r.predictions {
        let h = |b: f64| {
            if b.is_nan() {
                "-".to_string()
            } else {
                human(b)
            }
        };
        let talks = match p.peers {
            Some(k) => format!("{k} peers"),
            None => "all".to_string(),
        };
        out.push_str(&format!(
            "{:>6} {:>11} {:>12} {:>13} {:>13} {:>14} {:>14} {:>12} {:>12} {:>8}\n",
            p.hosts,
            talks,
            h(p.model_bytes),
            h(p.places_main),
            h(p.places_now),
            h(p.rings_at_start),
            h(p.rings_on_use),
            h(p.main()),
            h(p.now()),
            p.connections
        ));
    }
    out.push_str(
        "(rings on use: what tcp's rings would cost made on first use, not done; the shm, ofi and \
         verbs rings are made at start too)\n",
    );
    out
}

/// The chart: measured peak RSS and the fitted curve against workers.
fn draw(dir: &Path, r: &Report) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create the plot directory {}: {e}", dir.display()))?;
    let mib = |b: f64| b / (1u64 << 20) as f64;
    let mut series = vec![crate::plot::Series {
        name: "peak RSS, 1 rank (measured)".into(),
        points: rss_points(&r.points)
            .into_iter()
            .map(|(w, b)| (w, mib(b)))
            .collect(),
    }];
    if let Some(f) = &r.fit {
        let (lo, hi) = series[0]
            .points
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
                (lo.min(p.0), hi.max(p.0))
            });
        let steps = 32;
        series.push(crate::plot::Series {
            name: "fit a + b·w + c·w²".into(),
            points: (0..=steps)
                .map(|i| lo * (hi / lo).powf(i as f64 / steps as f64))
                .map(|w| (w, mib(f.at(w)).max(1e-3)))
                .collect(),
        });
    }
    let path = dir.join("scale-rss.svg");
    crate::plot::lines(
        &path,
        "gsm-bench scale: peak RSS of one rank",
        "workers",
        "MiB",
        &series,
        true,
    )?;
    Ok(path)
}
