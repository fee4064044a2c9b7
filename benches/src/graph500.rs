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
//! Beside them, in every layout, the shared-memory peer (`graph500_peer/`): direction-optimising
//! BFS and delta-stepping SSSP with bucket fusion on `--peer-threads` plain threads of one
//! process, over the same generated graph and roots; every engine's figure is also given as a
//! ratio to the peer's (the rows "ENGINE against the shm peer").
//!
//! Every repetition runs each engine once, in turn, then the peer, so that all see the same load;
//! a figure is the median over `--runs` repetitions. The engines' searches are not validated
//! (`--no-validate`; the example's tests validate every engine); the peer validates each of its
//! searches with the example's validation, untimed. `--roots` bounds the time. Peak memory is
//! `/usr/bin/time`'s maximum resident set of the launcher's descendants, which is the largest
//! rank's (the peer's: its one process). It measures; the example's own output (its JSON, which
//! the peer writes too) is what it reads.

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
    /// Threads of the shared-memory peer; 0 leaves the peer out.
    pub peer_threads: u32,
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

/// The command of one engine's run, under `/usr/bin/time`.
fn engine_command(layout: &Layout, engine: &str, scale: u32, roots: u32, json: &Path) -> Command {
    let mut cmd = timed_command();
    cmd.arg(crate::launch::sibling("gsmrun"))
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
    cmd
}

/// The command of one run of the shared-memory peer (this program's `graph500-peer`), which
/// validates its searches.
fn peer_command(threads: u32, scale: u32, roots: u32, json: &Path) -> anyhow::Result<Command> {
    let me = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find gsm-bench itself to run its peer: {e}"))?;
    let mut cmd = timed_command();
    cmd.arg(me)
        .arg("graph500-peer")
        .arg(scale.to_string())
        .args(["--threads", &threads.to_string(), "--roots"])
        .arg(roots.to_string())
        .arg("--json")
        .arg(json);
    Ok(cmd)
}

fn timed_command() -> Command {
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "gsm-bench-maxrss-kib=%M"]);
    cmd
}

/// Runs `cmd` (a run described as `what`) once; its figures, read from its JSON at `json`.
fn once(mut cmd: Command, what: &str, json: &Path) -> anyhow::Result<Sample> {
    let _ = std::fs::remove_file(json);
    let out = cmd.output().map_err(|e| {
        anyhow::anyhow!("cannot run /usr/bin/time (install the `time` package): {e}")
    })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
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
            // One list per engine, then the peer's (empty when it is left out).
            let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); layout.engines.len() + 1];
            for r in 0..opts.runs {
                let progress = |who: &str| {
                    crate::report::progress(format_args!(
                        "{} SCALE {scale}: run {}/{} {who}",
                        layout.name,
                        r + 1,
                        opts.runs
                    ))
                };
                for (i, engine) in layout.engines.iter().enumerate() {
                    progress(&format!("--engine {engine}"));
                    let cmd = engine_command(&layout, engine, scale, opts.roots, &results);
                    let what = format!("graph500 {scale} --engine {engine} on {}", layout.name);
                    samples[i].push(once(cmd, &what, &results)?);
                }
                if opts.peer_threads > 0 {
                    progress("shm peer");
                    let cmd = peer_command(opts.peer_threads, scale, opts.roots, &results)?;
                    let what = format!("the shm peer at SCALE {scale}");
                    samples[layout.engines.len()].push(once(cmd, &what, &results)?);
                }
            }
            crate::report::progress_done();
            cases.extend(cases_of(&layout, scale, opts.peer_threads, &samples));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    emit(&cases, json)
}

/// The table's cases of one layout and scale: BFS, SSSP (TEPS) and, where `rss`, peak memory,
/// `gsm` against each other engine and the shm peer (the last list of `samples`, empty when it
/// was left out); then, for BFS and SSSP, each other engine against the peer.
fn cases_of(layout: &Layout, scale: u32, peer_threads: u32, samples: &[Vec<Sample>]) -> Vec<Case> {
    let pick =
        |f: fn(&Sample) -> f64, i: usize| summarize(&samples[i].iter().map(f).collect::<Vec<_>>());
    let engines = layout.engines.len();
    let peer_name = format!("shm peer, {peer_threads} threads");
    let peer = |f: fn(&Sample) -> f64| Figure {
        name: peer_name.clone(),
        summary: pick(f, engines),
    };
    let with_peer = peer_threads > 0;
    let name = |what: &str| format!("graph500 {what}, SCALE {scale}, {}", layout.name);
    let case = |what: &str, unit: &str, higher: bool, f: fn(&Sample) -> f64| Case {
        case: name(what),
        unit: unit.into(),
        higher_is_better: higher,
        gsm: pick(f, 0),
        peers: (1..engines)
            .map(|i| Figure {
                name: layout.engines[i].into(),
                summary: pick(f, i),
            })
            .chain(with_peer.then(|| peer(f)))
            .collect(),
    };
    let against_peer = |what: &str, f: fn(&Sample) -> f64| {
        (1..engines)
            .filter(|_| with_peer)
            .map(|i| Case {
                case: format!("{}: {} against the shm peer", name(what), layout.engines[i]),
                unit: "TEPS".into(),
                higher_is_better: true,
                gsm: pick(f, i),
                peers: vec![peer(f)],
            })
            .collect::<Vec<_>>()
    };
    let mut cases = vec![
        case("BFS", "TEPS", true, |s| s.0),
        case("SSSP", "TEPS", true, |s| s.1),
    ];
    if layout.rss {
        cases.push(case("peak RSS per rank", "MiB", false, |s| s.2));
    }
    cases.extend(against_peer("BFS", |s| s.0));
    cases.extend(against_peer("SSSP", |s| s.1));
    cases
}
