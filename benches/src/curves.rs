//! `gsm-bench curves`: latency against offered load, open loop, until saturation.
//!
//! ```text
//! gsmrun -np 2 gsm-bench curves --what apply [--plot DIR] [--json FILE]
//! OMPI_MCA_btl=self,tcp gsmrun -np 2 --fabric tcp gsm-bench curves --what apply
//! taskset -c 1 gsm-bench curves --what kv [--plot DIR] [--json FILE]
//! ```
//!
//! **Open loop.** Requests are sent at Poisson arrival times (exponential gaps at the offered
//! rate) whether or not earlier ones were answered, and each latency is measured from the
//! request's *intended* send time, so a server (or client) that falls behind shows its queueing
//! in the figures instead of slowing the load down (coordinated omission, as `wrk2` avoids it).
//! Latencies go into an HdrHistogram (`hdrhistogram`, 3 significant digits). The offered rate
//! starts at `--start` requests/s and grows by `--step` until a system saturates: it completed
//! less than 90% of the offered rate, or its p99 passed 50 ms; each system stops at its own
//! saturation. Each point runs for `--point-ms`.
//!
//! **`--what apply`** (a job of 2 ranks, `curves/apply.rs`): blocking `Trust::apply` of an
//! 8-byte closure on a `u64` owned by rank 1's first worker, issued from fibers of rank 0 (a pool
//! of [`apply::POOL`], each taking the next intended time), against an MPI request-response
//! server in the same job (rank 1 answers `MPI_Recv` with `MPI_Send`; rank 0 sends at the
//! intended times and takes answers as they come). The fabric and BTLs are the job's (see
//! `remote.rs`).
//!
//! **`--what kv`** (`curves/kv.rs`): `GET`s of 64-byte values over 100,000 keys, loaded first,
//! on [`kv::CONNECTIONS`] connections, against `gsm-kv` with 1 worker and one `redis-server`,
//! each pinned to CPU 0 (run the client on another CPU).
//!
//! Output: a table of the saturation throughput of each system and of the p99 latency at every
//! offered rate both systems sustained, as the shared rows (`--json`); with `--plot DIR`, the
//! points as JSON (`curves-<what>-points.json`) and two SVG charts (p50 and p99 latency against
//! achieved throughput, one line per system).

#[cfg(feature = "gossamer")]
pub mod apply;
pub mod kv;

use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::case::{Case, Figure};
use crate::stats::summarize;

/// The options of `gsm-bench curves`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What to load: `apply` (run under `gsmrun -np 2`) or `kv`.
    #[arg(long, default_value = "apply")]
    pub what: String,
    /// The first offered rate, requests per second.
    #[arg(long, default_value_t = 5_000.0)]
    pub start: f64,
    /// Each offered rate is the previous one times this.
    #[arg(long, default_value_t = 1.5)]
    pub step: f64,
    /// Milliseconds of load per point.
    #[arg(long, default_value_t = 400)]
    pub point_ms: u64,
    /// The gsm-kv to measure (`--what kv`) [default: next to gsm-bench].
    #[arg(long)]
    pub gsm_kv: Option<std::path::PathBuf>,
    /// The first of the ports the servers use (`--what kv`).
    #[arg(long, default_value_t = 7420)]
    pub port: u16,
    /// Runs of each system at each offered rate (`--what apply`), alternating MPI and gsm; a
    /// point's figures are the medians over its runs (a millisecond's stall of the machine in
    /// one run moves that run's p99 by milliseconds) [default: 3, 1 with --quick].
    #[arg(long)]
    pub runs: Option<usize>,
    /// A smoke run for tests: 50 ms per point.
    #[arg(long)]
    pub quick: bool,
}

/// Past this p99 a system counts as saturated.
const P99_LIMIT_US: f64 = 50_000.0;
/// Below this share of the offered rate completed, a system counts as saturated.
const KEEP_UP: f64 = 0.9;
/// A system stops after this many saturated points in a row (one alone, on a shared machine,
/// can be a stall of the machine rather than of the system).
pub const STRIKES: u8 = 2;
/// No offered rate beyond this.
const MAX_RATE: f64 = 50e6;

/// One point of a curve.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub system: String,
    /// Offered and achieved requests per second.
    pub offered: f64,
    pub achieved: f64,
    /// Latency from intended send time, microseconds.
    pub p50_us: f64,
    pub p99_us: f64,
    pub requests: u64,
}

impl Point {
    /// Builds a point from a histogram of nanoseconds.
    pub fn new(system: &str, offered: f64, h: &Histogram<u64>, elapsed: Duration) -> Self {
        let n = h.len();
        Point {
            system: system.to_string(),
            offered,
            achieved: n as f64 / elapsed.as_secs_f64().max(1e-9),
            p50_us: h.value_at_quantile(0.5) as f64 / 1e3,
            p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
            requests: n,
        }
    }

    /// Whether the system could not keep up at this point.
    pub fn saturated(&self) -> bool {
        self.requests == 0 || self.achieved < KEEP_UP * self.offered || self.p99_us > P99_LIMIT_US
    }
}

impl Point {
    /// The point of several runs at one offered rate: the median of each figure (the runs'
    /// requests are counted in all). `None` for no runs.
    pub fn median(runs: &[Point]) -> Option<Point> {
        let first = runs.first()?;
        let mid = |f: fn(&Point) -> f64| {
            let v: Vec<f64> = runs.iter().map(f).collect();
            summarize(&v).map_or(f64::NAN, |s| s.median)
        };
        Some(Point {
            system: first.system.clone(),
            offered: first.offered,
            achieved: mid(|p| p.achieved),
            p50_us: mid(|p| p.p50_us),
            p99_us: mid(|p| p.p99_us),
            requests: runs.iter().map(|p| p.requests).sum(),
        })
    }
}

/// Runs per point (see [`Args::runs`]).
pub fn runs(args: &Args) -> usize {
    args.runs.unwrap_or(if args.quick { 1 } else { 3 }).max(1)
}

/// A histogram of latencies in nanoseconds, 1 ns to 100 s.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// Poisson arrivals: exponential gaps at `rate` per second, from a xorshift generator.
#[derive(Debug, Clone)]
pub struct Arrivals {
    state: u64,
    gap_ns: f64,
    next_ns: f64,
}

impl Arrivals {
    pub fn new(rate: f64, seed: u64) -> Self {
        Arrivals {
            state: seed | 1,
            gap_ns: 1e9 / rate,
            next_ns: 0.0,
        }
    }

    /// The next intended send time, in nanoseconds from the start.
    pub fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let u = ((self.state >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        self.next_ns += -u.ln() * self.gap_ns;
        self.next_ns as u64
    }
}

/// The offered rates: from `start`, times `step`, up to [`MAX_RATE`].
pub fn rates(args: &Args) -> impl Iterator<Item = f64> + '_ {
    std::iter::successors(Some(args.start.max(1.0)), |r| Some(r * args.step.max(1.05)))
        .take_while(|r| *r <= MAX_RATE)
}

/// The table's cases from the curves of `gsm` and its `peer`: saturation throughput (the most
/// either achieved), and the p99 at every offered rate both sustained.
pub fn cases(what: &str, gsm: &[Point], peer: &[Point], peer_name: &str) -> Vec<Case> {
    let best = |ps: &[Point]| summarize(&[ps.iter().map(|p| p.achieved).fold(0.0, f64::max) / 1e3]);
    let mut out = vec![Case {
        case: format!("{what}: saturation throughput"),
        unit: "kreq/s".into(),
        higher_is_better: true,
        gsm: best(gsm),
        peers: vec![Figure {
            name: peer_name.into(),
            summary: best(peer),
        }],
    }];
    for p in peer.iter().filter(|p| !p.saturated()) {
        let Some(g) = gsm.iter().find(|g| g.offered == p.offered) else {
            continue;
        };
        out.push(Case {
            case: format!("{what}: p99 at {:.0} req/s offered", p.offered),
            unit: "µs".into(),
            higher_is_better: false,
            gsm: summarize(&[g.p99_us]),
            peers: vec![Figure {
                name: peer_name.into(),
                summary: summarize(&[p.p99_us]),
            }],
        });
    }
    out
}

/// Writes the points as JSON and the two charts into `dir`.
pub fn plot(dir: &Path, what: &str, title: &str, points: &[Point]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = dir.join(format!("curves-{what}-points.json"));
    std::fs::write(&json, serde_json::to_string_pretty(points)? + "\n")?;
    println!("(points: {})", json.display());
    let mut systems: Vec<&str> = Vec::new();
    for p in points {
        if !systems.contains(&p.system.as_str()) {
            systems.push(&p.system);
        }
    }
    for (pct, get) in [
        ("p50", (|p: &Point| p.p50_us) as fn(&Point) -> f64),
        ("p99", |p| p.p99_us),
    ] {
        let series: Vec<crate::plot::Series> = systems
            .iter()
            .map(|s| {
                // In the order of the offered rates, so that a saturated point bends back.
                let pts: Vec<(f64, f64)> = points
                    .iter()
                    .filter(|p| p.system == *s)
                    .map(|p| (p.achieved / 1e3, get(p)))
                    .collect();
                crate::plot::Series {
                    name: s.to_string(),
                    points: pts,
                }
            })
            .collect();
        let path = dir.join(format!("curves-{what}-{pct}.svg"));
        crate::plot::lines(
            &path,
            &format!("{title}: {pct} latency vs achieved throughput (open loop)"),
            "achieved throughput (kreq/s, log)",
            &format!("{pct} latency from intended send (µs, log)"),
            &series,
            true,
        )?;
        println!("(chart: {})", path.display());
    }
    Ok(())
}

/// Prints the points as they come (the curve is the result; the table only sums it up).
pub fn show(p: &Point) {
    println!(
        "  {:<28} offered {:>10.0}/s  achieved {:>10.0}/s  p50 {:>9.1} µs  p99 {:>9.1} µs{}",
        p.system,
        p.offered,
        p.achieved,
        p.p50_us,
        p.p99_us,
        if p.saturated() { "  (saturated)" } else { "" }
    );
}

/// `gsm-bench curves`.
pub fn command(common: &crate::Common, args: &Args) -> anyhow::Result<bool> {
    crate::report::check_json(common.json.as_deref())?;
    match args.what.as_str() {
        #[cfg(feature = "gossamer")]
        "apply" => apply::run(common, args),
        #[cfg(not(feature = "gossamer"))]
        "apply" => anyhow::bail!("`--what apply` needs the `gossamer` feature"),
        "kv" => kv::run(common, args),
        other => anyhow::bail!("--what {other:?}: expected `apply` or `kv`"),
    }
}

/// Milliseconds of load per point.
pub fn point(args: &Args) -> Duration {
    Duration::from_millis(if args.quick {
        50
    } else {
        args.point_ms.max(10)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_have_the_offered_mean_rate() {
        let mut a = Arrivals::new(100_000.0, 42);
        let mut last = 0;
        for _ in 0..100_000 {
            last = a.next();
        }
        // 100,000 arrivals at 100,000/s take about a second.
        assert!((0.97e9..1.03e9).contains(&(last as f64)), "{last}");
    }

    #[test]
    fn saturation_is_falling_behind_or_a_long_tail() {
        let mut h = histogram();
        for _ in 0..1000 {
            h.record(10_000).unwrap();
        }
        let p = Point::new("x", 1000.0, &h, Duration::from_secs(1));
        assert!(!p.saturated());
        let p = Point::new("x", 2000.0, &h, Duration::from_secs(1));
        assert!(p.saturated());
    }
}
