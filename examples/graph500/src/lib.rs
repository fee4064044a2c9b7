//! Graph500 BFS and SSSP, output-compatible with the reference code.
//!
//! The benchmark's graph, roots, validation and results block, reproduced from the Graph500
//! reference code (3.0) so that results compare across systems and existing scripts parse them:
//! [`mrg`] (the splittable random stream), [`kronecker`] (the generator), [`roots`], [`csr`]
//! (kernel 1), [`bfs`] (kernel 2), [`sssp`] (kernel 3), [`validate`] (the five rules and the edge
//! count), [`report`] (the results block and JSON), [`cli`] (arguments), [`outcome`] (results or
//! the error, and the checks before a run) and [`driver`] (the engine chosen, and the sequential
//! one).
//!
//! The kernels at the top level are sequential, for tests, validation and small runs;
//! [`dist`] holds the distributed kernels, written once over a communicator trait;
//! [`mpi_engine`] runs them as the bulk-synchronous MPI baseline (`--engine mpi`), and
//! [`gsm_engine`] over the workers of a Gossamer job (`--engine gsm`).

pub mod bfs;
pub mod cli;
pub mod csr;
pub mod dist;
pub mod driver;
pub mod gsm_engine;
pub mod kronecker;
pub mod mpi_engine;
pub mod mrg;
pub mod outcome;
pub mod report;
pub mod roots;
pub mod sssp;
pub mod validate;
