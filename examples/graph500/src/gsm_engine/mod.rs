//! `--engine gsm` and `--engine gsm-bsp`: the three kernels as SPMD graph kernels on Gossamer,
//! on the same graph as the other engines.
//!
//! The whole run is one `gossamer::spmd` body, run by every worker of every rank (`gsmrun -np N`
//! ranks of `GSM_THREADS` / `gsmrun -t T` workers each, or one process alone). The vertices are
//! partitioned over all workers of the job (1-D blocks over global worker ids,
//! [`crate::dist::graph`]); each worker generates its share of the edges
//! ([`share`](crate::kronecker::share) over the workers), sends them to their owner workers and
//! builds its rows (kernel 1, `construction_time`). The roots are the reference's, each
//! candidate's degree answered by its owner worker and broadcast. Validation
//! ([`crate::dist::validate`]) gathers the trees and distributes the edge rules over the workers.
//!
//! The searches differ between the two engines:
//!
//! - `gsm` ([`kernels`], with `bfs.rs` and `sssp.rs`): written with trusts. Each worker's search
//!   state is a property it owns; visits and relaxations of another worker's vertices are closures
//!   delegated to that worker (`apply_with_then`, one closure per destination and step through
//!   `gossamer::Batches`), and each top-down BFS level and each delta-stepping bucket ends when
//!   its job-wide completion scope (`gossamer::finish_all`) is done, not after an exchange round.
//!   The engine's glue here, [`Delegation`], makes every worker's property once
//!   (`gossamer::entrust_all`) and hands the searches to `bfs.rs` and `sssp.rs`, as `Bsp` does for
//!   the bulk-synchronous ones.
//! - `gsm-bsp`: the bulk-synchronous kernels of [`crate::dist`], shared with the MPI baseline
//!   ([`crate::mpi_engine`]) step for step: each BFS level and delta-stepping phase is one
//!   all-to-all of the world team, one message per destination worker, so that the runtime and
//!   MPI are compared on identical work.
//!
//! Worker 0 (on rank 0) reports; `num_mpi_processes` is the number of workers (the unit the graph
//! is partitioned over, as the reference's processes are). Timings are worker 0's, each phase
//! starting after a team barrier and ending with a collective. This module abstracts the driver
//! glue: starting the workers, their fiber stacks, which worker reports, and the delegation
//! kernels' property; [`comm`] is the [`Exchange`] over the runtime's team.
//!
//! # Kernel lines
//!
//! Counted as non-blank lines that are not `//` comments (`grep -cvE '^\s*(//.*)?$' FILE`), the
//! delegation kernels are `gsm_engine/bfs.rs` + `sssp.rs` + `kernels.rs` (the property), and the
//! bulk-synchronous ones `dist/bfs.rs` + `dist/sssp.rs` (with their reusable buffers and the
//! result type); neither counts what both use (`dist/levels.rs`: the BFS directions and the
//! bottom-up step; the graph, roots, validation) or its engine's glue (`Delegation` here, `Bsp`
//! in `dist/mod.rs`). docs/performance-log.md has the counts.
//!
//! The bulk-synchronous engine does the MPI baseline's work step for step, and that work is
//! compute-bound on a small machine (a search spends little of its time in the exchanges), so
//! the two run close to each other; its construction is slower (more, smaller rounds, and the
//! team's all-to-all copies each bundle on its way). docs/performance.md has the figures and how
//! to reproduce them (`gsm-bench graph500`).

mod bfs;
pub mod comm;
pub mod kernels;
mod sssp;

use std::sync::Arc;

use comm::Comm;
use gossamer::{Batches, Trust, entrust_all};
use kernels::Owned;

use crate::cli::Args;
use crate::dist::graph::LocalGraph;
use crate::dist::sssp::LocalPaths;
use crate::dist::{Bsp, Exchange, Kernels, Plan};
use crate::kronecker::Vertex;
use crate::outcome::{Outcome, RunError};

/// Fiber stack the engine asks for at least (the kernels keep their arrays on the heap; this is
/// room for the generator, validation and formatting with margin).
const STACK_BYTES: usize = 1 << 20;

/// Runs the benchmark on Gossamer: every worker of this rank runs the kernels; worker 0 (on rank
/// 0) is the reporter. Every worker gets the same results.
/// `delegated`: the delegation kernels ([`kernels`], `--engine gsm`), or else the
/// bulk-synchronous ones of [`crate::dist`] (`--engine gsm-bsp`).
pub fn run(args: &Args, delegated: bool) -> Outcome {
    let plan = Plan::from_args(args);
    // The collectives' tuning is read here too, before the run: read first by `Team::world`
    // inside it, a malformed variable would end the job from every worker at once.
    let config = gossamer::Config::from_env()
        .map_err(|e| e.to_string())
        .and_then(|c| {
            gsm_collectives::Tuning::from_env()
                .map(|_| c)
                .map_err(|e| e.to_string())
        });
    let mut config = match config {
        Ok(c) => c,
        Err(e) => {
            return Outcome {
                reporter: true,
                result: Err(RunError::Gsm(e)),
            };
        }
    };
    config.stack_size = config.stack_size.max(STACK_BYTES);
    let plan = Arc::new(plan);
    let json = args.json.clone();
    let outcome = gossamer::spmd(config, move |w| {
        let comm = Comm::world();
        let result = if delegated {
            let mut kernels = Delegation::default();
            crate::dist::run(&comm, &mut kernels, &plan, json.as_deref())
        } else {
            crate::dist::run(&comm, &mut Bsp::default(), &plan, json.as_deref())
        };
        // A collective before leaving, so that no worker ends while another still validates.
        comm.barrier();
        (w.id(), result)
    });
    match outcome {
        Ok(results) => {
            let reporter = results.iter().any(|(id, _)| *id == 0);
            let result = results
                .into_iter()
                .next()
                .map(|(_, r)| r)
                .unwrap_or_else(|| Err(RunError::Gsm("this rank ran no worker".into())));
            Outcome { reporter, result }
        }
        Err(e) => Outcome {
            reporter: true,
            result: Err(RunError::Gsm(e.to_string())),
        },
    }
}

/// The delegation kernels of one worker: its own property, made at the first search.
#[derive(Debug, Default)]
pub struct Delegation {
    me: Option<Trust<Owned>>,
}

impl Delegation {
    /// This worker's property (collective the first time: every worker's trust goes to every
    /// property; each search starts with a collective, so none is reached before that is done).
    fn owned(&mut self, g: &Arc<LocalGraph>) -> &Trust<Owned> {
        self.me.get_or_insert_with(|| {
            let (g, part) = (g.clone(), *g.partition());
            let all = entrust_all(Owned {
                g,
                part,
                ..Owned::default()
            });
            let me = all[part.rank()].clone();
            me.apply_with(all, |o, all| o.out = Batches::new(all));
            me
        })
    }
}

impl Drop for Delegation {
    /// Lets the properties go: each holds a trust to every other one.
    fn drop(&mut self) {
        if let Some(me) = self.me.take() {
            let _ = me.try_apply(|o| o.out.clear());
        }
    }
}

impl Kernels<Comm> for Delegation {
    fn bfs(&mut self, comm: &Comm, g: &Arc<LocalGraph>, root: Vertex) -> Vec<Vertex> {
        bfs::search(self.owned(g), comm, g, root)
    }

    fn sssp(&mut self, comm: &Comm, g: &Arc<LocalGraph>, root: Vertex, delta: f32) -> LocalPaths {
        sssp::search(self.owned(g), comm, root, delta)
    }

    /// The SSSP kernel relaxes the edges that stay in a bucket apart from those that leave it.
    fn prepare(&mut self, g: &mut LocalGraph) {
        g.sort_rows_by_weight();
    }
}
