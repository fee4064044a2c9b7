//! Tests of the `gsmrun` binary that need no MPI: the exact dry-run command lines for Open MPI and
//! Hydra (flavour forced with GSM_MPI_FLAVOUR), the exit status of bad input, and the rank
//! wrapper on its own (personality, control protocol, no orphans). One test binary, a file per
//! theme; the helpers that run gsmrun and clean up after it are in `common`.

mod bad_input;
mod bounded_input;
mod common;
mod dry_run;
mod environment;
mod fate;
mod hosts;
mod slurm;
mod wrapper;
