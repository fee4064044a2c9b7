//! `gsm-bench`: Gossamer's figures beside their peers', measured in the same run.
//!
//! Thin: parses the command line and hands over to a subcommand module; every subcommand prints
//! the shared table (and JSON with `--json FILE`, see `report.rs`).
//!
//! ```text
//! cargo build --release -p gsm-bench -p gsmrun -p gsm-hello
//! target/release/gsm-bench local  [--runs N] [--ops M] [--budget-ms B] [--json FILE]
//! target/release/gsm-bench launch [--runs N] [--gsmrun P] [--hello P] [--mpirun P] [--json FILE]
//! target/release/gsmrun -np 2 target/release/gsm-bench remote [--runs N] [--json FILE]
//! OMPI_MCA_btl=self,tcp target/release/gsmrun -np 2 --fabric tcp target/release/gsm-bench remote
//! target/release/gsm-bench remote --two-hosts [--runs N]      (as root: across two namespaces)
//! target/release/gsmrun -np 2 target/release/gsm-bench collectives [--runs N] [--sweep] [--json FILE]
//! target/release/gsm-bench collectives --two-hosts --curve [--runs N] [--plot DIR]   (as root)
//! target/release/gsmrun -np 2 target/release/gsm-bench segments [--runs N] [--json FILE]
//! target/release/gsmrun -np 2 target/release/gsm-bench streams [--runs N] [--json FILE]
//! target/release/gsm-bench streams --two-hosts [--runs N]     (as root: across two namespaces)
//! target/release/gsm-bench kv [--runs N] [--json FILE] [--plot DIR]
//! target/release/gsmrun -np 2 target/release/gsm-bench curves --what apply [--plot DIR]
//! taskset -c 1 target/release/gsm-bench curves --what kv [--plot DIR]
//! target/release/gsm-bench graph500 [--runs N] [--scales 18,20] [--roots R] [--layouts 2x1,1x2,hosts] [--peer-threads 2] [--json FILE]
//! target/release/gsm-bench scale [--quick] [--workers 8,16,32] [--json FILE] [--plot DIR]
//! target/release/gsm-bench inbox [--runs N] [--producers 1,2,4] [--batch 8] [--json FILE]
//! ```
//!
//! Every subcommand also takes `--plot DIR`: one SVG chart per group of cases (`plot.rs`).
//!
//! `graph500` (`graph500.rs`) runs the Graph500 example's engines (`gsm` by delegation, `gsm-bsp`,
//! `mpi`) alternately on one host and on two network-namespace hosts, beside a shared-memory peer
//! on plain threads (`graph500_peer/`).
//!
//! `local` (`local.rs`, `peers.rs`, `gsm.rs`) compares delegation on 2 workers with locks,
//! atomics, a channel server and dashmap on 2 threads; `launch` (`launch.rs`) compares `gsmrun`
//! with plain `mpirun` on start-up time and on the time from a rank's failure to the launcher's
//! exit; `remote` (`remote.rs`, run under `gsmrun -np 2`) compares delegation between two ranks
//! with MPI messages measured in the same job; `segments` (`segments.rs`, `rma.rs`) compares
//! one-sided segment operations with MPI's RMA in the same job, the cache-line round trip and
//! memcpy; `streams` (`streams.rs`) compares a stream between two ranks with `iperf3` on the same
//! link and memcpy; `kv` (`kv.rs`) compares `gsm-kv` with `redis-server` under
//! `redis-benchmark`; `curves` (`curves.rs`) draws latency against offered load, open loop, for
//! `apply` against an MPI server and for `gsm-kv` against Redis. Every figure is a median over
//! `--runs` (at least 5) repetitions, and each case's peers are
//! measured in the same run as Gossamer's figure.
//!
//! `scale` (`scale.rs`) has no peer: it measures one rank's peak memory, idle CPU and poll cost
//! as its worker count grows, and fits them to the cost model of `scale/model.rs`.

mod case;
mod curves;
mod kv;
mod launch;
mod local;
mod peers;
mod plot;
mod report;
mod stats;
mod sys;

#[cfg(feature = "gossamer")]
mod coll_curve;
#[cfg(feature = "gossamer")]
mod collectives;
mod graph500;
#[cfg(feature = "gossamer")]
mod graph500_peer;
#[cfg(feature = "gossamer")]
mod gsm;
#[cfg(feature = "gossamer")]
mod inbox;
#[cfg(feature = "gossamer")]
mod record;
#[cfg(feature = "gossamer")]
mod remote;
#[cfg(feature = "gossamer")]
mod rma;
#[cfg(feature = "ofi")]
mod rma_rate;
#[cfg(feature = "gossamer")]
mod scale;
#[cfg(feature = "gossamer")]
mod segments;
#[cfg(feature = "gossamer")]
mod streams;
mod twohosts;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "gsm-bench",
    version,
    about = "Gossamer benchmarks beside their peers, same run, medians"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Args)]
struct Common {
    /// Timed repetitions per figure; each figure is their median (at least 5).
    #[arg(long, default_value_t = stats::MIN_RUNS)]
    runs: usize,
    /// Also write the rows as a JSON array to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also draw SVG charts into DIR: one per group of cases, Gossamer beside its peers.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// gsm-kv against redis-server, both driven by redis-benchmark in the same run (see `kv.rs`).
    Kv {
        #[command(flatten)]
        common: Common,
        /// The gsm-kv to measure [default: next to gsm-bench].
        #[arg(long)]
        gsm_kv: Option<PathBuf>,
        /// The peer server.
        #[arg(long, default_value = "redis-server")]
        redis_server: PathBuf,
        /// The client both are driven by.
        #[arg(long, default_value = "redis-benchmark")]
        redis_benchmark: PathBuf,
        /// The first of the two TCP ports the servers use.
        #[arg(long, default_value_t = 7400)]
        port: u16,
        /// A smoke run for tests: a twentieth of the requests and any --runs (even 1).
        #[arg(long)]
        quick: bool,
    },
    /// Latency against offered load (open loop, Poisson arrivals) until saturation: blocking
    /// apply between ranks against an MPI request-response server, and gsm-kv against Redis
    /// (see `curves.rs`).
    Curves {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        opts: curves::Args,
    },
    /// `gsmrun -np 2 gsm-hello` against `mpirun -np 2 gsm-hello`: start-up and failure-to-exit time.
    Launch {
        #[command(flatten)]
        common: Common,
        /// The gsmrun to measure [default: next to gsm-bench].
        #[arg(long)]
        gsmrun: Option<PathBuf>,
        /// The gsm-hello both launchers start [default: next to gsm-bench].
        #[arg(long)]
        hello: Option<PathBuf>,
        /// The peer launcher.
        #[arg(long, default_value = "mpirun")]
        mpirun: PathBuf,
    },
    /// Delegation within one process (2 workers) against Mutex, parking_lot, atomics, channels,
    /// dashmap and the cache-line round trip.
    Local {
        #[command(flatten)]
        common: Common,
        /// At most this many operations per throughput repetition, over both threads (latency
        /// cases: ops/10 round trips). The default is high enough that --budget-ms decides: a
        /// fixed small count lets the first thread finish before the second has woken, and the
        /// figure then measures one uncontended thread.
        #[arg(long, default_value_t = 1_000_000_000)]
        ops: u64,
        /// Each repetition of each figure stops after this many milliseconds, whichever of
        /// --ops and this comes first; rates use the operations actually done.
        #[arg(long, default_value_t = 250)]
        budget_ms: u64,
        /// Seed of the map workload's keys.
        #[arg(long, default_value_t = 0x5EED)]
        seed: u64,
        /// A smoke run for tests: 10 ms per figure and any --runs (even 1).
        #[arg(long)]
        quick: bool,
    },
    /// Delegation between 2 ranks against MPI messages, in the same job: run it as
    /// `gsmrun -np 2 gsm-bench remote`, and for TCP as
    /// `OMPI_MCA_btl=self,tcp gsmrun -np 2 --fabric tcp gsm-bench remote`. Only rank 0 prints.
    Remote {
        #[command(flatten)]
        common: Common,
        /// Timed milliseconds of each repetition of each figure (after a warm-up of a tenth).
        #[arg(long, default_value_t = 300)]
        budget_ms: u64,
        /// Workers per rank (the first worker of each rank takes part, the others only serve)
        /// [default: GSM_THREADS, else 1].
        #[arg(long)]
        workers: Option<usize>,
        /// A smoke run for tests: 20 ms per figure and any --runs (even 1).
        #[arg(long)]
        quick: bool,
        /// Run as a 2-rank job across the two network-namespace hosts of the test bed (not
        /// under gsmrun; needs root), see `twohosts.rs`.
        #[arg(long)]
        two_hosts: bool,
        /// MiB of the large-record bandwidth case, against iperf3 (0: skip it), see
        /// `record.rs`.
        #[arg(long, default_value_t = 64)]
        record_mib: usize,
        /// Where rank 0's iperf3 client connects to rank 1's server [default:
        /// GSM_BENCH_PEER_HOST (set by --two-hosts), else 127.0.0.1].
        #[arg(long)]
        iperf_host: Option<String>,
        /// The iperf3 program.
        #[arg(long, default_value = "iperf3")]
        iperf3: String,
    },
    /// The Graph500 example's engines alternately, same graphs: `gsm` (delegation) against
    /// `gsm-bsp` and `mpi`, BFS and SSSP harmonic-mean TEPS and peak memory per rank, on one host
    /// (2 ranks x 1 worker, 1 rank x 2 workers) and on two network-namespace hosts over tcp (needs
    /// root). Needs `graph500` and `gsmrun` built beside gsm-bench.
    Graph500 {
        #[command(flatten)]
        common: Common,
        /// Graph scales, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [18u32, 20])]
        scales: Vec<u32>,
        /// Search roots per run.
        #[arg(long, default_value_t = 16)]
        roots: u32,
        /// Host layouts, comma-separated: 2x1, 1x2 (one host), hosts (two namespaces, tcp).
        #[arg(long, value_delimiter = ',', default_values_t = ["2x1".to_string(), "1x2".to_string(), "hosts".to_string()])]
        layouts: Vec<String>,
        /// Threads of the shared-memory peer (direction-optimising BFS, delta-stepping SSSP on
        /// plain threads, same graph); 0 leaves it out. Needs the `gossamer` feature.
        #[arg(long, default_value_t = 2)]
        peer_threads: u32,
    },
    /// gsm-collectives against MPI's collectives in the same job:
    /// `gsmrun -np 2 gsm-bench collectives` (see `collectives.rs`). Only rank 0 prints.
    #[cfg(feature = "gossamer")]
    Collectives {
        #[command(flatten)]
        common: Common,
        /// A smoke run for tests: every loop divided by 20, any --runs (even 1).
        #[arg(long)]
        quick: bool,
        /// Time both algorithms of every switch point of gsm_collectives::Tuning instead.
        #[arg(long)]
        sweep: bool,
        /// Bandwidth against size (8 B to 64 MiB) for allreduce, broadcast and a point-to-point
        /// message instead, with a line chart per operation under --plot (see `coll_curve.rs`).
        #[arg(long, conflicts_with = "sweep")]
        curve: bool,
        /// Run as a 2-rank job across the two network-namespace hosts of the test bed (not
        /// under gsmrun; needs root), see `twohosts.rs`.
        #[arg(long)]
        two_hosts: bool,
    },
    /// One-sided segment operations against MPI RMA, the cache-line round trip and memcpy:
    /// `gsmrun -np 2 gsm-bench segments` (see `segments.rs`). Only rank 0 prints.
    #[cfg(feature = "gossamer")]
    Segments {
        #[command(flatten)]
        common: Common,
        /// Timed milliseconds of each repetition of each figure.
        #[arg(long, default_value_t = 300)]
        budget_ms: u64,
        /// A smoke run for tests: 20 ms per figure and any --runs (even 1).
        #[arg(long)]
        quick: bool,
    },
    /// The thesis's figures 12-13: RMA write rate (32 B, 256 B) with one libfabric endpoint
    /// per worker pair against one per (worker, host), 2 ranks: `gsm-bench rma-rate
    /// --two-hosts` (see `rma_rate/mod.rs`; needs `--features ofi`). Only rank 0 prints.
    RmaRate {
        #[command(flatten)]
        common: Common,
        /// Timed milliseconds of each repetition of each figure (after a warm-up of a fifth).
        #[arg(long, default_value_t = 300)]
        budget_ms: u64,
        /// Writer threads per rank.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// A smoke run for tests: 20 ms per figure and any --runs (even 1).
        #[arg(long)]
        quick: bool,
        /// Run as a 2-rank job across the two network-namespace hosts of the test bed (not
        /// under gsmrun; needs root), see `twohosts.rs`.
        #[arg(long)]
        two_hosts: bool,
    },
    /// A stream from rank 0 to rank 1 against iperf3 on the same link and memcpy:
    /// `gsmrun -np 2 gsm-bench streams` (see `streams.rs`). Only rank 0 prints.
    #[cfg(feature = "gossamer")]
    Streams {
        #[command(flatten)]
        common: Common,
        /// Timed milliseconds of each repetition of each Gossamer figure (iperf3 runs for the
        /// whole seconds of it, at least 1).
        #[arg(long, default_value_t = 1000)]
        budget_ms: u64,
        /// The address rank 0's iperf3 client connects to (rank 1 runs the server) [default:
        /// GSM_BENCH_PEER_HOST (set by --two-hosts), else 127.0.0.1].
        #[arg(long)]
        iperf_host: Option<String>,
        /// The iperf3 program.
        #[arg(long, default_value = "iperf3")]
        iperf3: String,
        /// A smoke run for tests: 50 ms per Gossamer figure and any --runs (even 1).
        #[arg(long)]
        quick: bool,
        /// Run as a 2-rank job across the two network-namespace hosts of the test bed (not
        /// under gsmrun; needs root), see `twohosts.rs`: the stream crosses the veth link over
        /// tcp, and iperf3 runs between the same two hosts.
        #[arg(long)]
        two_hosts: bool,
    },
    /// One rank of 8 to 256 workers (oversubscribed): peak RSS, idle CPU and the poll's cost,
    /// fitted to a + b·w + c·w², and the model's memory and connections per rank at 64 and
    /// 1,024 hosts x 128 workers (see `scale.rs`).
    #[cfg(feature = "gossamer")]
    Scale(scale::Args),
    /// The shared-memory peer of `graph500`, one run in a process of its own (started by
    /// `graph500`; see `graph500_peer/mod.rs`).
    #[cfg(feature = "gossamer")]
    #[command(hide = true)]
    Graph500Peer(graph500_peer::Args),
    /// One point of `scale`, in a process of its own (started by `scale`).
    #[cfg(feature = "gossamer")]
    #[command(hide = true)]
    ScalePoint(scale::PointArgs),
    /// The wire's multi-producer inbox against a slot ring per producer: records per second
    /// with 1, 2 and 4 producer threads and one consumer (see `inbox.rs`).
    #[cfg(feature = "gossamer")]
    Inbox {
        #[command(flatten)]
        common: Common,
        /// Timed milliseconds of each repetition of each figure.
        #[arg(long, default_value_t = 300)]
        budget_ms: u64,
        /// Producer thread counts, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [1u32, 2, 4])]
        producers: Vec<u32>,
        /// Slots per batch (one reservation of the inbox).
        #[arg(long, default_value_t = 8)]
        batch: u32,
        /// A smoke run for tests: 20 ms per figure and any --runs (even 1).
        #[arg(long)]
        quick: bool,
    },
}

impl Cmd {
    /// `--plot DIR` and the subcommand's name, when given.
    fn plot(&self) -> Option<(&std::path::Path, &'static str)> {
        let (common, name) = match self {
            Cmd::Launch { common, .. } => (common, "launch"),
            Cmd::Local { common, .. } => (common, "local"),
            Cmd::Remote { common, .. } => (common, "remote"),
            #[cfg(feature = "gossamer")]
            Cmd::Collectives { common, .. } => (common, "collectives"),
            #[cfg(feature = "gossamer")]
            Cmd::Segments { common, .. } => (common, "segments"),
            #[cfg(feature = "gossamer")]
            Cmd::Streams { common, .. } => (common, "streams"),
            Cmd::RmaRate { common, .. } => (common, "rma-rate"),
            Cmd::Kv { common, .. } => (common, "kv"),
            Cmd::Curves { common, .. } => (common, "curves"),
            Cmd::Graph500 { common, .. } => (common, "graph500"),
            // Draws its own chart (`scale.rs`).
            #[cfg(feature = "gossamer")]
            Cmd::Scale(_) | Cmd::ScalePoint(_) => return None,
            #[cfg(feature = "gossamer")]
            Cmd::Graph500Peer(_) => return None,
            #[cfg(feature = "gossamer")]
            Cmd::Inbox { common, .. } => (common, "inbox"),
        };
        common.plot.as_deref().map(|d| (d, name))
    }
}

/// Refuses a `--runs` too few to report medians from: fewer than [`stats::MIN_RUNS`], or, for
/// a `--quick` smoke run (which allows fewer), none.
pub(crate) fn check_runs(runs: usize, quick: bool) -> anyhow::Result<()> {
    if runs == 0 || (!quick && runs < stats::MIN_RUNS) {
        anyhow::bail!(
            "--runs {runs} is too few: every figure is a median of at least {} runs (--quick \
             allows fewer, but at least 1)",
            stats::MIN_RUNS
        );
    }
    Ok(())
}

/// The machine's load average, printed beside the table: this 2-core machine is shared, and a
/// load well above 2 means the threads of a case did not always run at the same time.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

#[cfg(feature = "gossamer")]
fn remote(
    common: Common,
    budget_ms: u64,
    workers: Option<usize>,
    quick: bool,
    (record_mib, iperf_host, iperf3): (usize, Option<String>, String),
) -> anyhow::Result<bool> {
    check_runs(common.runs, quick)?;
    let workers = match workers {
        Some(w) => w,
        None => gsm_contract::get::<Option<u64>>(&gsm_contract::table::THREADS)
            .map_err(|e| anyhow::anyhow!("{e}; or use --workers N"))?
            .map_or(1, |n| n as usize),
    };
    if workers == 0 {
        anyhow::bail!("--workers must be at least 1");
    }
    let opts = remote::Options {
        runs: common.runs,
        budget: std::time::Duration::from_millis(if quick { 20 } else { budget_ms.max(1) }),
        workers,
        record_mib: if quick { record_mib.min(1) } else { record_mib },
        iperf_host: peer_host(iperf_host),
        iperf3,
    };
    remote::run(&opts, common.json.as_deref())
}

/// Where an iperf3 client connects: `--iperf-host`, else the second host of `--two-hosts`, else
/// loopback.
fn peer_host(iperf_host: Option<String>) -> String {
    iperf_host
        .or_else(|| std::env::var(twohosts::PEER_HOST).ok())
        .unwrap_or_else(|| "127.0.0.1".into())
}

#[cfg(feature = "ofi")]
fn rma_rate(common: Common, budget_ms: u64, workers: usize, quick: bool) -> anyhow::Result<bool> {
    check_runs(common.runs, quick)?;
    anyhow::ensure!(workers > 0, "--workers must be at least 1");
    let opts = rma_rate::Options {
        runs: common.runs,
        budget: std::time::Duration::from_millis(if quick { 20 } else { budget_ms.max(1) }),
        workers,
    };
    rma_rate::run(&opts, common.json.as_deref())
}

#[cfg(not(feature = "ofi"))]
fn rma_rate(_: Common, _: u64, _: usize, _: bool) -> anyhow::Result<bool> {
    anyhow::bail!(
        "`rma-rate` needs the `ofi` feature: cargo build --release -p gsm-bench --features ofi \
         (libfabric-dev)"
    )
}

#[cfg(not(feature = "gossamer"))]
fn remote(
    _: Common,
    _: u64,
    _: Option<usize>,
    _: bool,
    _: (usize, Option<String>, String),
) -> anyhow::Result<bool> {
    anyhow::bail!(
        "`remote` needs the `gossamer` feature (a default feature; this binary was built with \
         --no-default-features)"
    )
}

/// Runs one subcommand; whether this process printed a table (in `remote`, only rank 0 does).
fn run(command: Cmd) -> anyhow::Result<bool> {
    match command {
        Cmd::Launch {
            common,
            gsmrun,
            hello,
            mpirun,
        } => {
            check_runs(common.runs, false)?;
            report::check_json(common.json.as_deref())?;
            let opts = launch::Options {
                runs: common.runs,
                gsmrun: gsmrun.unwrap_or_else(|| launch::sibling("gsmrun")),
                hello: hello.unwrap_or_else(|| launch::sibling("gsm-hello")),
                mpirun,
            };
            report::emit(&launch::run(&opts)?, common.json.as_deref())?;
            Ok(true)
        }
        Cmd::Local {
            common,
            ops,
            budget_ms,
            seed,
            quick,
        } => local(&common, ops, budget_ms, seed, quick),
        Cmd::Graph500 {
            common,
            scales,
            roots,
            layouts,
            peer_threads,
        } => graph500(&common, scales, roots, layouts, peer_threads),
        Cmd::Remote {
            common,
            budget_ms,
            workers,
            quick,
            record_mib,
            iperf_host,
            iperf3,
            ..
        } => remote(
            common,
            budget_ms,
            workers,
            quick,
            (record_mib, iperf_host, iperf3),
        ),
        #[cfg(feature = "gossamer")]
        Cmd::Collectives {
            common,
            quick,
            sweep,
            curve,
            ..
        } => collectives::command(common.runs, common.json.as_deref(), quick, sweep, curve),
        #[cfg(feature = "gossamer")]
        Cmd::Segments {
            common,
            budget_ms,
            quick,
        } => {
            check_runs(common.runs, quick)?;
            let opts = segments::Options {
                runs: common.runs,
                budget: std::time::Duration::from_millis(if quick { 20 } else { budget_ms.max(1) }),
            };
            segments::run(&opts, common.json.as_deref())
        }
        #[cfg(feature = "gossamer")]
        Cmd::Streams {
            common,
            budget_ms,
            iperf_host,
            iperf3,
            quick,
            ..
        } => {
            check_runs(common.runs, quick)?;
            let opts = streams::Options {
                runs: common.runs,
                budget: std::time::Duration::from_millis(if quick { 50 } else { budget_ms.max(1) }),
                iperf_host: peer_host(iperf_host),
                iperf3,
            };
            streams::run(&opts, common.json.as_deref())
        }
        Cmd::RmaRate {
            common,
            budget_ms,
            workers,
            quick,
            ..
        } => rma_rate(common, budget_ms, workers, quick),
        Cmd::Kv {
            common,
            gsm_kv,
            redis_server,
            redis_benchmark,
            port,
            quick,
        } => kv(&common, gsm_kv, redis_server, redis_benchmark, port, quick),
        Cmd::Curves { common, opts } => curves::command(&common, &opts),
        #[cfg(feature = "gossamer")]
        Cmd::Scale(args) => scale::command(&args),
        #[cfg(feature = "gossamer")]
        Cmd::ScalePoint(args) => scale::point_command(&args),
        #[cfg(feature = "gossamer")]
        Cmd::Graph500Peer(args) => graph500_peer::command(&args),
        #[cfg(feature = "gossamer")]
        Cmd::Inbox {
            common,
            budget_ms,
            producers,
            batch,
            quick,
        } => {
            check_runs(common.runs, quick)?;
            report::check_json(common.json.as_deref())?;
            let opts = inbox::Options {
                runs: common.runs,
                budget: std::time::Duration::from_millis(if quick { 20 } else { budget_ms.max(1) }),
                producers,
                batch,
            };
            report::emit(&inbox::run(&opts)?, common.json.as_deref())?;
            Ok(true)
        }
    }
}

/// `gsm-bench local`.
fn local(
    common: &Common,
    ops: u64,
    budget_ms: u64,
    seed: u64,
    quick: bool,
) -> anyhow::Result<bool> {
    check_runs(common.runs, quick)?;
    if ops < 1000 {
        anyhow::bail!("--ops {ops} is too few to time; use at least 1000");
    }
    report::check_json(common.json.as_deref())?;
    let opts = local::Options {
        runs: common.runs,
        ops,
        budget: std::time::Duration::from_millis(if quick { 10 } else { budget_ms.max(1) }),
        seed,
    };
    report::emit(&local::run(&opts)?, common.json.as_deref())?;
    Ok(true)
}

/// `gsm-bench graph500`.
fn graph500(
    common: &Common,
    scales: Vec<u32>,
    roots: u32,
    layouts: Vec<String>,
    peer_threads: u32,
) -> anyhow::Result<bool> {
    check_runs(common.runs, false)?;
    report::check_json(common.json.as_deref())?;
    if let Some(bad) = layouts
        .iter()
        .find(|l| !["2x1", "1x2", "hosts"].contains(&l.as_str()))
    {
        anyhow::bail!("--layouts: unknown layout {bad:?}; use 2x1, 1x2 or hosts");
    }
    if let Some(bad) = scales.iter().find(|s| !(1..=31).contains(*s)) {
        anyhow::bail!("--scales: SCALE {bad} is outside 1..=31");
    }
    if peer_threads > 0 && !cfg!(feature = "gossamer") {
        anyhow::bail!(
            "--peer-threads {peer_threads}: the shm peer needs the `gossamer` feature (a default \
             feature); give --peer-threads 0 to leave it out"
        );
    }
    let opts = graph500::Options {
        runs: common.runs,
        scales,
        roots: roots.max(1),
        layouts,
        peer_threads,
    };
    graph500::run(&opts, common.json.as_deref())?;
    Ok(true)
}

/// `gsm-bench kv`.
fn kv(
    common: &Common,
    gsm_kv: Option<PathBuf>,
    redis_server: PathBuf,
    redis_benchmark: PathBuf,
    port: u16,
    quick: bool,
) -> anyhow::Result<bool> {
    check_runs(common.runs, quick)?;
    report::check_json(common.json.as_deref())?;
    let opts = kv::Options {
        runs: common.runs,
        gsm_kv: gsm_kv.unwrap_or_else(|| launch::sibling("gsm-kv")),
        redis_server,
        redis_benchmark,
        port,
        scale: if quick { 20 } else { 1 },
    };
    report::emit(&kv::run(&opts)?, common.json.as_deref())?;
    Ok(true)
}

fn main() {
    let cli = Cli::parse();
    if twohosts::wanted() {
        match twohosts::relaunch() {
            Ok(code) => std::process::exit(code),
            Err(e) => {
                eprintln!("gsm-bench: {e:#}");
                std::process::exit(1);
            }
        }
    }
    let load_before = loadavg();
    if let Some((dir, name)) = cli.command.plot() {
        report::plot_to(dir, name);
    }
    let result = run(cli.command);
    match result {
        Ok(true) => println!("(load average before: {load_before}; after: {})", loadavg()),
        Ok(false) => {}
        Err(e) => {
            eprintln!("gsm-bench: {e:#}");
            std::process::exit(1);
        }
    }
}
