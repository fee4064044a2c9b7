//! The command line: `graph500 SCALE [EDGEFACTOR]` as the reference takes them, plus `--roots`,
//! `--kernels`, `--no-validate`, `--engine` and `--json`. Parsing only: `driver` runs what it
//! names.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::kronecker::MAX_SCALE;

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
