//! `--engine mpi`: the bulk-synchronous MPI baseline, on the same graph as the other engines.
//!
//! A plain message-passing implementation of the three kernels, written with the `mpi` crate, so
//! that delegation on Gossamer and message passing are compared on identical work in one binary:
//! each rank generates its share of the edges, the edges go to their owners (1-D block partition),
//! and each search is a sequence of bulk-synchronous steps, one `MPI_Alltoallv` per BFS level or
//! delta-stepping phase. The roots are the reference's, each candidate's degree answered by its
//! owner and broadcast. Validation gathers the trees and distributes the edge rules. The kernels,
//! graph building, validation and phases are [`crate::dist`]'s, shared with the Gossamer engine;
//! this engine's part is [`comm`], the [`Exchange`] over MPI. Rank 0 prints the results block;
//! `num_mpi_processes` is the number of ranks. Timings are rank 0's, each phase starting after a
//! barrier and ending with a collective.
//!
//! Run it under `gsmrun -np N graph500 SCALE --engine mpi` (or `mpirun`), or as a singleton. This
//! module abstracts the driver glue: starting and finalising MPI, and which rank reports. It does
//! not use Gossamer's runtime at all; [`comm`] is the only file that calls MPI.

pub mod comm;

use comm::Comm;

use crate::cli::Args;
use crate::dist::{Exchange, Plan};
use crate::outcome::{Outcome, RunError};

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
    let result = crate::dist::run(
        &comm,
        &mut crate::dist::Bsp::default(),
        &Plan::from_args(args),
        args.json.as_deref(),
    );
    // A collective before finalising, so that no rank leaves while another still validates.
    comm.barrier();
    drop(comm);
    Outcome { reporter, result }
}
