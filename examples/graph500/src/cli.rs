//! The command line and the benchmark driver.
//!
//! `graph500 SCALE [EDGEFACTOR]` as the reference takes them, plus `--roots`, `--kernels`,
//! `--no-validate`, `--engine` and `--json`. The driver runs the benchmark's sequence: generate
//! the edge list (timed as `graph_generation`), build the graph (kernel 1, `construction_time`),
//! choose the roots (warning on stderr when the graph is too small for them to be distinct
//! vertices with an edge, see [`crate::roots`]), then for each kernel one untimed warm-up search (validated, as the reference
//! does) and the timed searches, each validated unless asked not to; then the results block.
//! A `--json` path is checked before anything runs ([`check_json_path`]): a bad one found only
//! after minutes of searching lost the JSON of the whole run.
//!
//! This module abstracts argument parsing and the order of the phases of the sequential engine;
//! `--engine mpi` hands the whole run to [`crate::mpi_engine`], `--engine gsm` to
//! [`crate::gsm_engine`]. Progress goes to stderr,
//! and only when it is a terminal (in a distributed run, rank 0's).

use std::fs::OpenOptions;
use std::io::{ErrorKind, IsTerminal as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, ValueEnum};

use crate::bfs;
use crate::csr::Csr;
use crate::kronecker::{EdgeList, KroneckerGenerator, MAX_SCALE, Vertex};
use crate::report::{KernelRuns, Results};
use crate::roots::choose_roots_counted;
use crate::sssp;
use crate::validate::{Claimed, ValidationFailure, validate};

/// Graph500 BFS and SSSP: the reference's graph, roots, validation and results block.
#[derive(Debug, Parser)]
#[command(name = "graph500", version)]
pub struct Args {
    /// log2 of the number of vertices (1..=31).
    #[arg(value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_SCALE)))]
    pub scale: u32,
    /// Edges per vertex.
    #[arg(default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub edgefactor: u32,
    /// Number of search roots.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1 << 16))]
    pub roots: u32,
    /// Kernels to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_parser = KernelParser,
        value_delimiter = ',',
        default_values_t = [Kernel::Bfs, Kernel::Sssp]
    )]
    pub kernels: Vec<Kernel>,
    /// Skip validating the searches (validation times are then reported as -1).
    #[arg(long)]
    pub no_validate: bool,
    /// Which implementation runs the kernels.
    #[arg(long, value_enum, default_value_t = Engine::Gsm)]
    pub engine: Engine,
    /// Also write the results as JSON to this file (checked before the run, where the file will
    /// be written: on the reporting rank).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// A benchmark kernel after construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kernel {
    /// Breadth-first search (kernel 2).
    Bfs,
    /// Single-source shortest paths (kernel 3).
    Sssp,
}

/// Parses one entry of `--kernels` as clap's enum parser does, except that an empty entry
/// (`bfs,`, `bfs,,sssp`) is named as one: clap's own message, "a value is required for
/// '--kernels' but none was supplied", reads as if no list had been given.
#[derive(Clone, Copy, Debug)]
struct KernelParser;

impl clap::builder::TypedValueParser for KernelParser {
    type Value = Kernel;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Kernel, clap::Error> {
        if value.is_empty() {
            return Err(cmd.clone().error(
                clap::error::ErrorKind::InvalidValue,
                "the list given to --kernels has an empty entry (a stray comma, or nothing at \
                 all); write e.g. `--kernels bfs` or `--kernels bfs,sssp`",
            ));
        }
        clap::builder::EnumValueParser::<Kernel>::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            Kernel::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        ))
    }
}

/// The implementation that runs the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// Sequential, on one core: direction-optimising BFS and delta-stepping SSSP. One process;
    /// refused in a rank of several (`gsmrun -np 2`), where each rank would run it alone.
    Seq,
    /// Distributed on Gossamer, written with trusts: each worker owns its vertices' state, and
    /// visits and relaxations of another worker's vertices are closures delegated to it
    /// (`apply_with_then`, one closure per destination and step), each BFS level and
    /// delta-stepping bucket ending when its job-wide completion scope (`gossamer::finish_all`)
    /// is done; run under
    /// `gsmrun -np N [-t T]`, or alone as one rank of `GSM_THREADS` workers.
    Gsm,
    /// Distributed on Gossamer, bulk-synchronous: the MPI baseline's kernels step for step, with
    /// the runtime's team all-to-alls between workers in place of `MPI_Alltoallv`.
    GsmBsp,
    /// Bulk-synchronous MPI baseline (`MPI_Alltoallv` per BFS level and delta-stepping phase);
    /// run under `gsmrun -np N` or `mpirun`, or alone as one rank.
    Mpi,
}

/// Why a run produced no results.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The run would need more memory than this machine has available.
    #[error(
        "SCALE {scale} with edgefactor {edgefactor} needs about {need_gib:.1} GiB {place}, \
         more than the {available_gib:.1} GiB available there; choose a smaller SCALE"
    )]
    TooLarge {
        /// Requested SCALE.
        scale: u32,
        /// Requested edgefactor.
        edgefactor: u32,
        /// Estimated need.
        need_gib: f64,
        /// Available memory (MemAvailable, or the address space if unknown).
        available_gib: f64,
        /// Where: "on one core", or a host and the members it runs.
        place: String,
    },
    /// The members of a distributed run were not started with the same arguments.
    #[error(
        "member {member} of the job was started with {theirs}, member 0 with {ours}; every rank \
         must get the same arguments"
    )]
    Mismatch {
        /// The first member whose arguments differ from member 0's.
        member: usize,
        /// Member 0's plan.
        ours: String,
        /// That member's plan.
        theirs: String,
    },
    /// The `--json` file cannot be written; found before the run ([`check_json_path`]), so nothing
    /// was generated or searched.
    #[error(
        "cannot write the JSON results to {}{place}: {reason}; nothing was run: give --json a \
         path that can be written",
        .path.display()
    )]
    Json {
        /// The `--json` path, as the reporting member has it.
        path: PathBuf,
        /// Where it was checked: empty for the sequential engine, the host and member that
        /// write it for a distributed run.
        place: String,
        /// The OS error.
        reason: String,
    },
    /// The Gossamer runtime could not be configured or started, or stopped (`--engine gsm`).
    #[error("the Gossamer runtime failed for --engine gsm: {0}")]
    Gsm(String),
    /// MPI could not be started (`--engine mpi`).
    #[error("cannot start MPI for --engine mpi: {0}")]
    Mpi(#[from] crate::mpi_engine::comm::CommError),
    /// A search failed validation; the reference prints no results for such a run.
    #[error("{kernel} from root {root} (search {index}): {failure}")]
    Invalid {
        /// "BFS" or "SSSP".
        kernel: &'static str,
        /// The root of the failed search.
        root: Vertex,
        /// Its index among the roots.
        index: usize,
        /// What was wrong.
        failure: ValidationFailure,
    },
    /// `--engine seq` in a process that is one of several ranks: each rank would run the whole
    /// benchmark alone and print its own results block.
    #[error(
        "--engine seq runs the whole benchmark in one process, but this process is one of {size} \
         ranks ({var}={size}); start it without gsmrun or mpirun, or use --engine gsm or mpi"
    )]
    SeqInJob {
        /// The launcher's variable that gave the job's size.
        var: &'static str,
        /// The number of ranks it gave.
        size: u64,
    },
}

/// Progress lines on stderr, only when stderr is a terminal.
#[derive(Debug, Clone, Copy)]
struct Progress(bool);

impl Progress {
    fn say(&self, msg: impl FnOnce() -> String) {
        if self.0 {
            eprintln!("{}", msg());
        }
    }
}

/// What a run gives this process.
#[derive(Debug)]
pub struct Outcome {
    /// Whether this process prints the results or the error: the only process of a sequential
    /// run, rank 0 of a distributed one (all ranks get the same results).
    pub reporter: bool,
    /// The results, or why there are none.
    pub result: Result<Results, RunError>,
}

/// Runs the benchmark described by `args` with the engine it names.
pub fn run(args: &Args) -> Outcome {
    match args.engine {
        Engine::Seq => Outcome {
            reporter: true,
            result: run_sequential(args),
        },
        Engine::Gsm => crate::gsm_engine::run(args, true),
        Engine::GsmBsp => crate::gsm_engine::run(args, false),
        Engine::Mpi => crate::mpi_engine::run(args),
    }
}

/// The job's size, and the variable that gave it, when a launcher started this process as one of
/// several ranks: the variables the Gossamer runtime reads to know it is a rank (`GSM_SIZE` from
/// gsmrun, `OMPI_COMM_WORLD_SIZE` from Open MPI, `PMI_SIZE` from Hydra), first one set.
pub fn ranks_of_job(var: &dyn Fn(&str) -> Option<String>) -> Option<(&'static str, u64)> {
    ["GSM_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .into_iter()
        .find_map(|name| Some((name, var(name)?.trim().parse::<u64>().ok()?)))
        .filter(|&(_, size)| size > 1)
}

/// The sequential engine: the whole benchmark on one core, refused in a rank of several.
fn run_sequential(args: &Args) -> Result<Results, RunError> {
    if let Some((var, size)) = ranks_of_job(&|name| std::env::var(name).ok()) {
        return Err(RunError::SeqInJob { var, size });
    }
    let progress = Progress(std::io::stderr().is_terminal());
    if let Some(path) = &args.json {
        check_json_path(path).map_err(|e| RunError::Json {
            path: path.clone(),
            place: String::new(),
            reason: e.to_string(),
        })?;
    }
    let scale = args.scale;
    let n = 1usize << scale;
    let m = u64::from(args.edgefactor) << scale;
    let need = estimated_bytes(n as f64, m as f64);
    let available = available_bytes().unwrap_or(isize::MAX as f64);
    if need > available {
        return Err(RunError::TooLarge {
            scale,
            edgefactor: args.edgefactor,
            need_gib: need / GIB,
            available_gib: available / GIB,
            place: "on one core".into(),
        });
    }
    let want_bfs = args.kernels.contains(&Kernel::Bfs);
    let want_sssp = args.kernels.contains(&Kernel::Sssp);
    let validating = !args.no_validate;

    let t = Instant::now();
    let list = KroneckerGenerator::new(scale).range(0, m);
    let graph_generation = t.elapsed().as_secs_f64();
    progress.say(|| format!("graph_generation:               {graph_generation:.6} s"));

    let t = Instant::now();
    let graph = Csr::build(n, &[&list], want_sssp);
    let construction_time = t.elapsed().as_secs_f64();
    progress.say(|| format!("construction_time:              {construction_time:.6} s"));

    let (roots, census) = choose_roots_counted(scale, args.roots as usize, |v| graph.degree(v) > 0);
    if let Some(warning) = census.warning() {
        gossamer::eprint_line(warning);
    }
    let lists = [&list];
    let mut results = Results {
        scale,
        edgefactor: args.edgefactor,
        nbfs: roots.len(),
        graph_generation,
        num_mpi_processes: 1,
        construction_time,
        bfs: None,
        sssp: None,
        roots: roots.clone(),
    };
    if want_bfs {
        let search = |root: Vertex| {
            let parent = bfs::direction_optimizing(&graph, root);
            (parent, None)
        };
        results.bfs = Some(run_kernel(
            "BFS", &graph, &lists, &roots, validating, progress, search,
        )?);
    }
    if want_sssp {
        let delta = sssp::default_delta(&graph);
        let search = |root: Vertex| {
            let sp = sssp::delta_stepping(&graph, root, delta);
            (sp.parent, Some(sp.dist))
        };
        results.sssp = Some(run_kernel(
            "SSSP", &graph, &lists, &roots, validating, progress, search,
        )?);
    }
    Ok(results)
}

/// Checks that the JSON results could be written to `path`, without changing what is there. The
/// reporting member calls it before the run; the write itself comes at the end (in `main`), and
/// still reports what only it can meet (a full disk, a file removed in between).
///
/// Decision: the check opens `path` itself rather than creating a temporary name beside it, so it
/// also refuses a path that is a directory or a file that may not be written, not only a missing
/// or read-only directory. A missing file is created with `create_new` and removed at once: only
/// a file this check created is ever removed, and a run that fails later leaves no empty file
/// behind. An existing regular file is opened for writing without truncation and closed: nothing
/// is written, so its contents survive a run that fails. Anything else that exists (a FIFO, which
/// would block the open until a reader comes; a device such as `/dev/stdout`; a symbolic link to
/// nothing, which the write would create through) is left to the write.
pub fn check_json_path(path: &Path) -> std::io::Result<()> {
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(file) => {
            drop(file);
            std::fs::remove_file(path)
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() || meta.is_dir() => {
                // A directory fails here with EISDIR, as the write would.
                OpenOptions::new().write(true).open(path).map(drop)
            }
            _ => Ok(()),
        },
        Err(e) => Err(e),
    }
}

pub(crate) const GIB: f64 = (1u64 << 30) as f64;

/// Peak bytes of a sequential run: the edge list with weights (12 bytes per edge), the CSR with
/// weights (8 bytes per entry, two entries per edge, 8 per offset), and the per-search and
/// validation arrays (about 32 bytes per vertex).
fn estimated_bytes(n: f64, m: f64) -> f64 {
    12.0 * m + 16.0 * m + 8.0 * n + 32.0 * n
}

/// `MemAvailable` from `/proc/meminfo`, if there is one.
pub(crate) fn available_bytes() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// One kernel over all roots: a warm-up, then timed searches, each validated if asked.
fn run_kernel(
    name: &'static str,
    graph: &Csr,
    lists: &[&EdgeList],
    roots: &[Vertex],
    validating: bool,
    progress: Progress,
    search: impl Fn(Vertex) -> crate::report::Searched,
) -> Result<KernelRuns, RunError> {
    let count = |parent: &[Vertex]| graph.component_edges(|v| parent[v as usize] != bfs::NO_PARENT);
    let check = |index: usize, root: Vertex, parent: &[Vertex], dist: Option<&[f32]>, m: u64| {
        let claimed = Claimed { root, parent, dist };
        validate(&claimed, lists, m).map_err(|failure| RunError::Invalid {
            kernel: name,
            root,
            index,
            failure,
        })
    };
    crate::report::timed_searches(
        name,
        roots,
        validating,
        progress.0,
        search,
        count,
        check,
        || {},
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_check_refuses_bad_paths_and_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("graph500-json-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();

        // A new file would be writable: the check leaves no file behind.
        let fresh = dir.join("fresh.json");
        check_json_path(&fresh).unwrap();
        assert!(!fresh.exists(), "the check left {}", fresh.display());

        // An existing file would be writable: its contents stay.
        let existing = dir.join("existing.json");
        std::fs::write(&existing, "earlier results\n").unwrap();
        check_json_path(&existing).unwrap();
        assert_eq!(
            std::fs::read_to_string(&existing).unwrap(),
            "earlier results\n"
        );

        // A directory that does not exist, and a path that is a directory.
        let missing = check_json_path(&dir.join("no-such-dir/results.json")).unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        let is_dir = check_json_path(&dir).unwrap_err();
        assert_eq!(is_dir.kind(), ErrorKind::IsADirectory);

        std::fs::remove_dir_all(&dir).unwrap();
    }
}
