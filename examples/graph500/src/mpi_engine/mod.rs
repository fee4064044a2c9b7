//! `--engine mpi`: the bulk-synchronous MPI baseline, on the same graph as the other engines.
//!
//! A plain message-passing implementation of the three kernels, written with the `mpi` crate, so
//! that delegation on Gossamer and message passing are compared on identical work in one binary:
//! each rank generates its share of the edges ([`share`]), the edges go to their owners (1-D
//! block partition, [`graph`]), and each search is a sequence of bulk-synchronous steps, one
//! `MPI_Alltoallv` per BFS level ([`bfs`]) or delta-stepping phase ([`sssp`]). The roots are the
//! reference's, each candidate's degree answered by its owner and broadcast. Validation
//! ([`validate`]) gathers the trees and distributes the edge rules. Rank 0 prints the results
//! block; `num_mpi_processes` is the number of ranks. Timings are rank 0's, each phase starting
//! after a barrier and ending with a collective.
//!
//! Run it under `gsmrun -np N graph500 SCALE --engine mpi` (or `mpirun`), or as a singleton.
//! This module abstracts the driver: the phases, their timing, and which rank reports. It does
//! not use Gossamer's runtime at all; [`comm`] is the only file that calls MPI.

pub mod bfs;
pub mod comm;
pub mod graph;
pub mod sssp;
pub mod validate;

use std::io::IsTerminal as _;
use std::time::Instant;

use comm::Comm;
use graph::{LocalGraph, Partition};

use crate::bfs::NO_PARENT;
use crate::cli::{Args, Kernel, Outcome, RunError};
use crate::kronecker::{EdgeList, KroneckerGenerator, Vertex, share};
use crate::report::{KernelRuns, Results};
use crate::roots::choose_roots;

/// Runs the benchmark under MPI: initialises MPI, runs every phase, finalises MPI. Every rank
/// gets the same results; rank 0 is the reporter.
pub fn run(args: &Args) -> Outcome {
    let comm = match Comm::init() {
        Ok(c) => c,
        Err(e) => {
            return Outcome {
                reporter: true,
                result: Err(RunError::Mpi(e)),
            };
        }
    };
    let reporter = comm.rank() == 0;
    let result = run_with(&comm, args);
    // A collective before finalising, so that no rank leaves while another still validates.
    comm.barrier();
    drop(comm);
    Outcome { reporter, result }
}

/// Bytes one rank needs, roughly: its edges (12 bytes each), its rows (two entries of 8 bytes per
/// edge), the degree sum and gathered validation arrays (about 24 bytes per vertex), and the
/// construction round's buffers and the searches' messages (64 MiB).
fn estimated_bytes_per_rank(n: f64, m: f64, ranks: f64) -> f64 {
    (12.0 + 16.0) * m / ranks + 24.0 * n + 64.0 * (1u64 << 20) as f64
}

fn run_with(comm: &Comm, args: &Args) -> Result<Results, RunError> {
    let progress = comm.rank() == 0 && std::io::stderr().is_terminal();
    let say = |msg: &dyn Fn() -> String| {
        if progress {
            eprintln!("{}", msg());
        }
    };
    let scale = args.scale;
    let n = 1usize << scale;
    let m = u64::from(args.edgefactor) << scale;
    let ranks = comm.size();
    // Every rank may share this host; ask for all of them at once, as the worst case.
    let need = estimated_bytes_per_rank(n as f64, m as f64, ranks as f64) * ranks as f64;
    if let Some(available) = crate::cli::available_bytes() {
        if need > available {
            return Err(RunError::TooLarge {
                scale,
                edgefactor: args.edgefactor,
                need_gib: need / crate::cli::GIB,
                available_gib: available / crate::cli::GIB,
            });
        }
    }
    let want_bfs = args.kernels.contains(&Kernel::Bfs);
    let want_sssp = args.kernels.contains(&Kernel::Sssp);
    let validating = !args.no_validate;
    let part = Partition::new(n, ranks, comm.rank());

    comm.barrier();
    let t = Instant::now();
    let (start, end) = share(m, comm.rank() as u64, ranks as u64);
    let list = KroneckerGenerator::new(scale).range(start, end);
    comm.barrier();
    let graph_generation = t.elapsed().as_secs_f64();
    say(&|| format!("graph_generation:               {graph_generation:.6} s"));

    comm.barrier();
    let t = Instant::now();
    let graph = LocalGraph::build(comm, part, &list, want_sssp);
    comm.barrier();
    let construction_time = t.elapsed().as_secs_f64();
    say(&|| format!("construction_time:              {construction_time:.6} s"));

    let roots = choose_roots(scale, args.roots as usize, |v| {
        let owner = part.owner(v);
        comm.broadcast_bool(owner, owner == comm.rank() && graph.has_edge(v))
    });
    let mut results = Results {
        scale,
        edgefactor: args.edgefactor,
        nbfs: roots.len(),
        graph_generation,
        num_mpi_processes: ranks,
        construction_time,
        bfs: None,
        sssp: None,
        roots: roots.clone(),
    };
    let ctx = Context {
        comm,
        graph: &graph,
        list: &list,
        validating,
        progress,
    };
    if want_bfs {
        let mut scratch = bfs::Scratch::default();
        let search = |root: Vertex| (bfs::search(comm, &graph, root, &mut scratch), None);
        results.bfs = Some(ctx.run_kernel("BFS", &roots, search)?);
    }
    if want_sssp {
        let delta = crate::sssp::delta_for(graph.total_entries(), n);
        let mut scratch = sssp::Scratch::default();
        let search = |root: Vertex| {
            let p = sssp::search(comm, &graph, root, delta, &mut scratch);
            (p.parent, Some(p.dist))
        };
        results.sssp = Some(ctx.run_kernel("SSSP", &roots, search)?);
    }
    Ok(results)
}

/// What every kernel's loop needs.
struct Context<'a> {
    comm: &'a Comm,
    graph: &'a LocalGraph,
    list: &'a EdgeList,
    validating: bool,
    progress: bool,
}

impl Context<'_> {
    /// One kernel over all roots: an untimed, validated warm-up, then the timed searches, each
    /// validated unless asked not to (as the sequential driver does).
    fn run_kernel(
        &self,
        name: &'static str,
        roots: &[Vertex],
        mut search: impl FnMut(Vertex) -> (Vec<Vertex>, Option<Vec<f32>>),
    ) -> Result<KernelRuns, RunError> {
        let count = |parent: &[Vertex]| {
            self.graph
                .component_edges(self.comm, |i| parent[i] != NO_PARENT)
        };
        let check = |index: usize, root: Vertex, parent: &[Vertex], dist: Option<&[f32]>, m| {
            validate::validate(self.comm, self.graph, self.list, root, parent, dist, m).map_err(
                |failure| RunError::Invalid {
                    kernel: name,
                    root,
                    index,
                    failure,
                },
            )
        };
        let (parent, dist) = search(roots[0]);
        if self.validating {
            check(0, roots[0], &parent, dist.as_deref(), count(&parent))?;
        }
        let mut runs = KernelRuns::default();
        for (i, &root) in roots.iter().enumerate() {
            if self.progress {
                eprintln!("Running {name} {i}");
            }
            self.comm.barrier();
            let t = Instant::now();
            let (parent, dist) = search(root);
            let time = t.elapsed().as_secs_f64();
            let m = count(&parent);
            if self.progress {
                eprintln!(
                    "Time for {name} {i} is {time:.6}; TEPS {:.6e}",
                    m as f64 / time
                );
            }
            runs.times.push(time);
            runs.edges.push(m as f64);
            if self.validating {
                self.comm.barrier();
                let t = Instant::now();
                check(i, root, &parent, dist.as_deref(), m)?;
                runs.validate_times.push(t.elapsed().as_secs_f64());
            } else {
                runs.validate_times.push(-1.0);
            }
        }
        Ok(runs)
    }
}
