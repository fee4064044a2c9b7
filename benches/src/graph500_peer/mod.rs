//! The shared-memory peer of `gsm-bench graph500`: Graph500 BFS and SSSP on plain threads of one
//! process, over the graph the example's engines search (its generator, CSR, roots, search loop,
//! validation and JSON), so that every engine can be compared with what shared memory reaches on
//! the same cores.
//!
//! `gsm-bench graph500-peer SCALE --threads T --json FILE` (started by `graph500.rs`, one process
//! per run as the engines are) generates the edge list, builds the CSR, chooses the reference's
//! roots, and runs each kernel through the example's own loop ([`::graph500::report::
//! timed_searches`]): a warm-up, then one timed search per root, each validated with the
//! example's five rules unless `--no-validate`. The kernels: [`bfs`] (direction-optimising) and
//! [`sssp`] (delta-stepping with bucket fusion), on a [`team`] of scoped threads sharing
//! [`frontier`]s. Buffers that do not depend on the root are allocated once per graph, outside the
//! timed searches; the parent and distance arrays are allocated in each search.

pub mod bfs;
pub mod frontier;
pub mod sssp;
pub mod team;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Instant;

use ::graph500::bfs::NO_PARENT;
use ::graph500::csr::Csr;
use ::graph500::kronecker::{KroneckerGenerator, Vertex};
use ::graph500::report::{Results, timed_searches};
use ::graph500::roots::choose_roots_counted;
use ::graph500::validate::{Claimed, validate};

/// `gsm-bench graph500-peer`'s command line.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// log2 of the number of vertices.
    #[arg(value_parser = clap::value_parser!(u32).range(1..=31))]
    pub scale: u32,
    /// Edges per vertex.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub edgefactor: u32,
    /// Threads of the team.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Number of search roots.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1 << 16))]
    pub roots: u32,
    /// SSSP bucket width [default: from the weights and the average degree, `sssp::delta_for`].
    #[arg(long)]
    pub delta: Option<f32>,
    /// Skip validating the searches.
    #[arg(long)]
    pub no_validate: bool,
    /// Write the results as the example's JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Runs the peer as `args` says: prints the example's results block, writes its JSON.
pub fn command(args: &Args) -> anyhow::Result<bool> {
    if let Some(d) = args.delta {
        if !(d > 0.0 && d <= 1.0) {
            anyhow::bail!("--delta {d}: the bucket width must be in (0, 1]");
        }
    }
    let results = run(args)?;
    print!("{}", results.text());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&results.json())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(false)
}

fn run(args: &Args) -> anyhow::Result<Results> {
    let scale = args.scale;
    let n = 1usize << scale;
    let m = u64::from(args.edgefactor) << scale;
    let threads = args.threads as usize;
    let t = Instant::now();
    let list = KroneckerGenerator::new(scale).range(0, m);
    let graph_generation = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let graph = Csr::build(n, &[&list], true);
    let construction_time = t.elapsed().as_secs_f64();
    let (roots, census) = choose_roots_counted(scale, args.roots as usize, |v| graph.degree(v) > 0);
    if let Some(warning) = census.warning() {
        eprintln!("{warning}");
    }
    let lists = [&list];
    let count = |parent: &[Vertex]| graph.component_edges(|v| parent[v as usize] != NO_PARENT);
    let check = |kernel: &'static str| {
        move |index: usize, root: Vertex, parent: &[Vertex], dist: Option<&[f32]>, m: u64| {
            validate(&Claimed { root, parent, dist }, &lists, m).map_err(|failure| {
                anyhow::anyhow!("{kernel} from root {root} (search {index}): {failure}")
            })
        }
    };
    let validating = !args.no_validate;
    let bfs_space = bfs::Space::new(&graph);
    let bfs = timed_searches(
        "BFS",
        &roots,
        validating,
        false,
        |root| (bfs::search(&graph, root, threads, &bfs_space), None),
        count,
        check("BFS"),
        || {},
    )?;
    drop(bfs_space);
    let delta = args.delta.unwrap_or_else(|| sssp::delta_for(&graph));
    let sssp_space = sssp::Space::new(&graph);
    let sssp = timed_searches(
        "SSSP",
        &roots,
        validating,
        false,
        |root| {
            let (parent, dist) = sssp::search(&graph, root, delta, threads, &sssp_space);
            (parent, Some(dist))
        },
        count,
        check("SSSP"),
        || {},
    )?;
    Ok(Results {
        scale,
        edgefactor: args.edgefactor,
        nbfs: roots.len(),
        graph_generation,
        num_mpi_processes: threads,
        construction_time,
        bfs: Some(bfs),
        sssp: Some(sssp),
        roots,
    })
}
