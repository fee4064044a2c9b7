//! Rank 1 panics once MPI runs while the other ranks wait in a barrier: run under `gsmrun -np 2`
//! as `mpi_panic`, the job must end with rank 1's status (101), not hang. (Unwinding dropped the
//! MPI engine's communicator, whose `MPI_Finalize` waited for the ranks in the barrier.)

use graph500::dist::Exchange;

fn main() {
    let comm = graph500::mpi_engine::comm::Comm::init().expect("MPI starts");
    if comm.rank() == 1 {
        panic!("deliberate panic on rank 1 while the others are in a barrier");
    }
    comm.barrier();
}
