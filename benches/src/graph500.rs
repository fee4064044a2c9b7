//! `gsm-bench graph500`: the Graph500 example's engines on identical graphs, alternately in one
//! run: `--engine gsm` (delegation kernels) beside `gsm-bsp` (the same runtime, bulk-synchronous
//! kernels) and `mpi` (the MPI baseline), for BFS and SSSP harmonic-mean TEPS and each run's peak
//! memory per rank, on three host layouts:
//!
//! - `1 host, 2x1`: `gsmrun -np 2 -t 1 --oversubscribe` (shm between the ranks; `mpi` too);
//! - `1 host, 1x2`: `gsmrun -np 1 -t 2` (the Gossamer engines only: MPI has no workers);
//! - `2 hosts, tcp`: two network namespaces of this machine (`gsm_tests::netns::TwoHosts`, needs
//!   root), one rank of one worker on each, tcp between them (`mpi` with `OMPI_MCA_btl=self,tcp`).
//!
//! Every repetition runs each engine once, in turn, so that the engines see the same load; a
//! figure is the median over `--runs` repetitions. Searches are not validated (`--no-validate`;
//! the example's tests validate every engine), and `--roots` bounds the time. Peak memory is
//! `/usr/bin/time`'s maximum resident set of the launcher's descendants, which is the largest
//! rank's. It measures; the example's own output (its JSON) is what it reads.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::case::{Case, Figure};
use crate::report::emit;
use crate::stats::summarize;

/// What the command line asks for.
#[derive(Debug)]
pub struct Options {
    pub runs: usize,
    pub scales: Vec<u32>,
    pub roots: u32,
    /// Layouts by name: `2x1`, `1x2`, `hosts`.
    pub layouts: Vec<String>,
}

const ENGINES: [&str; 3] = ["gsm", "gsm-bsp", "mpi"];

/// One run's figures: BFS and SSSP harmonic-mean TEPS, peak RSS in MiB.
type Sample = (f64, f64, f64);

/// A host layout: its name, the `gsmrun` arguments before the program, its environment, and
/// the engines it runs.
struct Layout {
    name: &'static str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    engines: &'static [&'static str],
    /// Whether `/usr/bin/time` sees the ranks: on the namespace hosts they are started by launch
    /// agents outside gsmrun's process tree, so its peak would be gsmrun's own, not a rank's.
    rss: bool,
}

fn layouts(
    opts: &Options,
    bed: Option<&gsm_tests::netns::TwoHosts>,
    hostfile: &Path,
) -> Vec<Layout> {
    let strings = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut all = Vec::new();
    for name in &opts.layouts {
        match name.as_str() {
            "2x1" => all.push(Layout {
                name: "1 host, 2x1",
                args: strings(&["-np", "2", "-t", "1", "--oversubscribe"]),
                env: Vec::new(),
                engines: &ENGINES,
                rss: true,
            }),
            "1x2" => all.push(Layout {
                name: "1 host, 1x2",
                args: strings(&["-np", "1", "-t", "2"]),
                env: Vec::new(),
                engines: &ENGINES[..2],
                rss: true,
            }),
            _ => {
                let bed = bed.expect("the bed is started for the hosts layout");
                let mut args = strings(&["-np", "2", "-t", "1", "--fabric", "tcp", "-hostfile"]);
                args.push(hostfile.display().to_string());
                args.push("--launch-agent".into());
                args.push(gsm_tests::netns::TwoHosts::agent().display().to_string());
                let mut env = bed.mpi_env();
                env.push(("OMPI_MCA_btl".into(), "self,tcp".into()));
                all.push(Layout {
                    name: "2 hosts, tcp",
                    args,
                    env,
                    engines: &ENGINES,
                    rss: false,
                });
            }
        }
    }
    all
}

/// Runs one engine once; its figures.
fn once(
    layout: &Layout,
    engine: &str,
    scale: u32,
    roots: u32,
    json: &Path,
) -> anyhow::Result<Sample> {
    let _ = std::fs::remove_file(json);
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "gsm-bench-maxrss-kib=%M"])
        .arg(crate::launch::sibling("gsmrun"))
        .args(&layout.args)
        .arg(crate::launch::sibling("graph500"))
        .args([
            &scale.to_string(),
            "--engine",
            engine,
            "--no-validate",
            "--roots",
        ])
        .arg(roots.to_string())
        .arg("--json")
        .arg(json)
        .envs(layout.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = cmd.output().map_err(|e| {
        anyhow::anyhow!("cannot run /usr/bin/time (install the `time` package): {e}")
    })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let what = format!("graph500 {scale} --engine {engine} on {}", layout.name);
    if !out.status.success() {
        anyhow::bail!("{what} failed ({}):\n{stderr}", out.status);
    }
    let kib: f64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("gsm-bench-maxrss-kib="))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("{what}: no peak memory from /usr/bin/time:\n{stderr}"))?;
    let text = std::fs::read_to_string(json)
        .map_err(|e| anyhow::anyhow!("{what}: no JSON results at {}: {e}", json.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    let teps = |k: &str| {
        v[format!("{k}_harmonic_mean_TEPS")]
            .as_f64()
            .ok_or_else(|| anyhow::anyhow!("{what}: no {k}_harmonic_mean_TEPS in its JSON"))
    };
    Ok((teps("bfs")?, teps("sssp")?, kib / 1024.0))
}

/// Runs the benchmark and prints the table; `json` gets the rows.
pub fn run(opts: &Options, json: Option<&Path>) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("gsm-bench-graph500-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let bed = if opts.layouts.iter().any(|l| l == "hosts") {
        Some(gsm_tests::netns::TwoHosts::start().map_err(|e| anyhow::anyhow!("{e}"))?)
    } else {
        None
    };
    let hostfile: PathBuf = dir.join("hosts");
    if let Some(bed) = &bed {
        std::fs::write(&hostfile, bed.hostfile(1))?;
    }
    let results = dir.join("results.json");
    let mut cases = Vec::new();
    for layout in layouts(opts, bed.as_ref(), &hostfile) {
        for &scale in &opts.scales {
            let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); layout.engines.len()];
            for r in 0..opts.runs {
                for (i, engine) in layout.engines.iter().enumerate() {
                    crate::report::progress(format_args!(
                        "{} SCALE {scale}: run {}/{} --engine {engine}",
                        layout.name,
                        r + 1,
                        opts.runs
                    ));
                    samples[i].push(once(&layout, engine, scale, opts.roots, &results)?);
                }
            }
            crate::report::progress_done();
            cases.extend(cases_of(&layout, scale, &samples));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    emit(&cases, json)
}

/// The table's cases of one layout and scale: BFS, SSSP (TEPS) and, where `rss`, peak memory,
/// `gsm` against each other engine.
fn cases_of(layout: &Layout, scale: u32, samples: &[Vec<Sample>]) -> Vec<Case> {
    let pick =
        |f: fn(&Sample) -> f64, i: usize| summarize(&samples[i].iter().map(f).collect::<Vec<_>>());
    let case = |what: &str, unit: &str, higher: bool, f: fn(&Sample) -> f64| Case {
        case: format!("graph500 {what}, SCALE {scale}, {}", layout.name),
        unit: unit.into(),
        higher_is_better: higher,
        gsm: pick(f, 0),
        peers: (1..layout.engines.len())
            .map(|i| Figure {
                name: layout.engines[i].into(),
                summary: pick(f, i),
            })
            .collect(),
    };
    let mut cases = vec![
        case("BFS", "TEPS", true, |s| s.0),
        case("SSSP", "TEPS", true, |s| s.1),
    ];
    if layout.rss {
        cases.push(case("peak RSS per rank", "MiB", false, |s| s.2));
    }
    cases
}
