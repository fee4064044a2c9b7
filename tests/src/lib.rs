//! The harness and test bed behind the multi-process integration tests in `tests/tests/`.
//!
//! - [`bins`]: where the workspace's built binaries (`gsmrun`, `gsm-hello`) and the test-bed
//!   scripts (`tests/testbed/`) are;
//! - [`process`]: running a command under a hard time limit, killing its process group on expiry,
//!   and a guard that kills the processes a job reported;
//! - [`hello`]: parsing what `gsm-hello` ranks print and checking the rank set;
//! - [`netns`]: two simulated hosts in network namespaces with their own host names;
//! - [`slurm`]: a single-node Slurm cluster owned by the test;
//! - [`scratch`]: per-run scratch directories that never collide;
//! - [`shm`]: what libfabric and Open MPI leave in `/dev/shm`.
//!
//! Everything a test bed creates is named after the test process's pid, removed on drop even if
//! the test panics, and removed by the next run if the process was killed. The test bed needs
//! root (namespaces, Slurm daemons), as the project's CI machine has. It does not build anything:
//! run `cargo build --release --workspace` (or `make test`) first.

pub mod bins;
pub mod cluster;
pub mod error;
pub mod hello;
pub mod job;
pub mod netns;
pub mod process;
pub mod scratch;
pub mod shm;
pub mod slurm;
mod sys;

pub use error::TestbedError;

/// The README's Rust examples, compiled and run by `cargo test --doc -p gsm-tests` so that the
/// first program a user copies keeps working.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
