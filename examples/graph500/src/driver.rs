//! The benchmark driver: runs the engine the command line names, and the sequential engine
//! itself.
//!
//! The sequential engine runs the benchmark's sequence: generate the edge list (timed as
//! `graph_generation`), build the graph (kernel 1, `construction_time`), choose the roots
//! (warning on stderr when the graph is too small for them to be distinct vertices with an edge,
//! see [`crate::roots`]), then for each kernel one untimed warm-up search (validated, as the
//! reference does) and the timed searches, each validated unless asked not to; then the results
//! block. `--engine mpi` hands the whole run to [`crate::mpi_engine`], `--engine gsm` to
//! [`crate::gsm_engine`]. Progress goes to stderr, and only when it is a terminal (in a
//! distributed run, rank 0's).

use std::io::IsTerminal as _;
use std::time::Instant;

use crate::bfs;
use crate::cli::{Args, Engine, Kernel};
use crate::csr::Csr;
use crate::kronecker::{EdgeList, KroneckerGenerator, Vertex};
use crate::outcome::{GIB, Outcome, RunError, available_bytes, check_json_path};
use crate::report::{KernelRuns, Results};
use crate::roots::choose_roots_counted;
use crate::sssp;
use crate::validate::{Claimed, validate};

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
    [
        gsm_contract::table::SIZE.name,
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
    ]
    .into_iter()
    .find_map(|name| Some((name, var(name)?.trim().parse::<u64>().ok()?)))
    .filter(|&(_, size)| size > 1)
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

/// Peak bytes of a sequential run: the edge list with weights (12 bytes per edge), the CSR with
/// weights (8 bytes per entry, two entries per edge, 8 per offset), and the per-search and
/// validation arrays (about 32 bytes per vertex).
fn estimated_bytes(n: f64, m: f64) -> f64 {
    12.0 * m + 16.0 * m + 8.0 * n + 32.0 * n
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
