//! Why `gsmrun` could not run a job, and the exit status each reason maps to (2 for bad input,
//! 127 for a missing launcher, else 1). The statuses of a job that ran are the supervisor's
//! business ([`crate::supervise`]); this module only names what stopped one from starting.

use crate::hosts::HostsError;
use crate::launch::LaunchError;
use crate::placement::PlacementError;
use std::path::PathBuf;

/// Why `gsmrun` could not run the job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A bad hostfile, host list or scheduler environment.
    #[error(transparent)]
    Hosts(#[from] HostsError),
    /// The ranks do not fit the hosts (`from`: where the hosts came from, named when their
    /// slots are the problem).
    #[error("{error}{}", slots_from(error, from))]
    Placement { error: PlacementError, from: String },
    /// Options that do not go together or a bad value.
    #[error("{0}")]
    Usage(String),
    /// The hostfile cannot be read.
    #[error("cannot read hostfile {path}: {source}")]
    ReadHostfile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A limit of this host (`ulimit -n`) below what the job needs.
    #[error("{0}")]
    Limit(String),
    /// The launcher could not be found or started.
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

impl Error {
    /// gsmrun's exit status for this error: 2 for bad input (a `GSM_MPI_FLAVOUR` gsmrun does not
    /// know among it: the user's setting, like an option), 127 for a missing launcher, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Hosts(_)
            | Error::Placement { .. }
            | Error::Usage(_)
            | Error::ReadHostfile { .. }
            | Error::Launch(LaunchError::BadFlavourVariable(_)) => 2,
            Error::Launch(LaunchError::NotFound { .. }) => 127,
            Error::Launch(_) | Error::Limit(_) => 1,
        }
    }
}

/// What a placement error adds about the hosts' origin: where their slots came from, when the
/// slots are the problem (inside Slurm they are the allocation's, which `salloc -n` sets).
fn slots_from(error: &PlacementError, from: &str) -> String {
    match error {
        PlacementError::NotEnoughSlots { .. }
        | PlacementError::ExceedsMaxSlots { .. }
        | PlacementError::TooManySlots { .. } => format!(" (the hosts and slots of {from})"),
        _ => String::new(),
    }
}
