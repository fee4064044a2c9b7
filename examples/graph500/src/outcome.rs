//! What a run gives back (its results, or why there are none) and the checks every engine makes
//! before it runs: that the `--json` file can be written and that the graph fits in memory.
//! A `--json` path is checked before anything runs ([`check_json_path`]): a bad one found only
//! after minutes of searching lost the JSON of the whole run.

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::kronecker::Vertex;
use crate::report::Results;
use crate::validate::ValidationFailure;

/// What a run gives this process.
#[derive(Debug)]
pub struct Outcome {
    /// Whether this process prints the results or the error: the only process of a sequential
    /// run, rank 0 of a distributed one (all ranks get the same results).
    pub reporter: bool,
    /// The results, or why there are none.
    pub result: Result<Results, RunError>,
}

/// Why a run produced no results.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The run would need more memory than this machine has available.
    #[error(
        "SCALE {scale} with edgefactor {edgefactor} needs about {need_gib:.1} GiB {place}, \
         more than the {available_gib:.1} GiB available there; choose a smaller SCALE"
    )]
    TooLarge {
        /// Requested SCALE.
        scale: u32,
        /// Requested edgefactor.
        edgefactor: u32,
        /// Estimated need.
        need_gib: f64,
        /// Available memory (MemAvailable, or the address space if unknown).
        available_gib: f64,
        /// Where: "on one core", or a host and the members it runs.
        place: String,
    },
    /// The members of a distributed run were not started with the same arguments.
    #[error(
        "member {member} of the job was started with {theirs}, member 0 with {ours}; every rank \
         must get the same arguments"
    )]
    Mismatch {
        /// The first member whose arguments differ from member 0's.
        member: usize,
        /// Member 0's plan.
        ours: String,
        /// That member's plan.
        theirs: String,
    },
    /// The `--json` file cannot be written; found before the run ([`check_json_path`]), so nothing
    /// was generated or searched.
    #[error(
        "cannot write the JSON results to {}{place}: {reason}; nothing was run: give --json a \
         path that can be written",
        .path.display()
    )]
    Json {
        /// The `--json` path, as the reporting member has it.
        path: PathBuf,
        /// Where it was checked: empty for the sequential engine, the host and member that
        /// write it for a distributed run.
        place: String,
        /// The OS error.
        reason: String,
    },
    /// The Gossamer runtime could not be configured or started, or stopped (`--engine gsm`).
    #[error("the Gossamer runtime failed for --engine gsm: {0}")]
    Gsm(String),
    /// MPI could not be started (`--engine mpi`).
    #[error("cannot start MPI for --engine mpi: {0}")]
    Mpi(#[from] CommError),
    /// A search failed validation; the reference prints no results for such a run.
    #[error("{kernel} from root {root} (search {index}): {failure}")]
    Invalid {
        /// "BFS" or "SSSP".
        kernel: &'static str,
        /// The root of the failed search.
        root: Vertex,
        /// Its index among the roots.
        index: usize,
        /// What was wrong.
        failure: ValidationFailure,
    },
    /// `--engine seq` in a process that is one of several ranks: each rank would run the whole
    /// benchmark alone and print its own results block.
    #[error(
        "--engine seq runs the whole benchmark in one process, but this process is one of {size} \
         ranks ({var}={size}); start it without gsmrun or mpirun, or use --engine gsm or mpi"
    )]
    SeqInJob {
        /// The launcher's variable that gave the job's size.
        var: &'static str,
        /// The number of ranks it gave.
        size: u64,
    },
}

/// Why MPI could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// `MPI_Init` was already called in this process.
    #[error("MPI is already initialised in this process")]
    AlreadyInitialised,
    /// `MPI_COMM_WORLD` is not the job the launcher started (another MPI's launcher).
    #[error(transparent)]
    World(#[from] gossamer::bootstrap::BootstrapError),
}

/// Checks that the JSON results could be written to `path`, without changing what is there. The
/// reporting member calls it before the run; the write itself comes at the end (in `main`), and
/// still reports what only it can meet (a full disk, a file removed in between).
///
/// Decision: the check opens `path` itself rather than creating a temporary name beside it, so it
/// also refuses a path that is a directory or a file that may not be written, not only a missing
/// or read-only directory. A missing file is created with `create_new` and removed at once: only
/// a file this check created is ever removed, and a run that fails later leaves no empty file
/// behind. An existing regular file is opened for writing without truncation and closed: nothing
/// is written, so its contents survive a run that fails. Anything else that exists (a FIFO, which
/// would block the open until a reader comes; a device such as `/dev/stdout`; a symbolic link to
/// nothing, which the write would create through) is left to the write.
pub fn check_json_path(path: &Path) -> std::io::Result<()> {
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(file) => {
            drop(file);
            std::fs::remove_file(path)
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() || meta.is_dir() => {
                // A directory fails here with EISDIR, as the write would.
                OpenOptions::new().write(true).open(path).map(drop)
            }
            _ => Ok(()),
        },
        Err(e) => Err(e),
    }
}

/// Bytes in a GiB.
pub(crate) const GIB: f64 = (1u64 << 30) as f64;

/// `MemAvailable` from `/proc/meminfo`, if there is one.
pub(crate) fn available_bytes() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_check_refuses_bad_paths_and_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("graph500-json-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();

        // A new file would be writable: the check leaves no file behind.
        let fresh = dir.join("fresh.json");
        check_json_path(&fresh).unwrap();
        assert!(!fresh.exists(), "the check left {}", fresh.display());

        // An existing file would be writable: its contents stay.
        let existing = dir.join("existing.json");
        std::fs::write(&existing, "earlier results\n").unwrap();
        check_json_path(&existing).unwrap();
        assert_eq!(
            std::fs::read_to_string(&existing).unwrap(),
            "earlier results\n"
        );

        // A directory that does not exist, and a path that is a directory.
        let missing = check_json_path(&dir.join("no-such-dir/results.json")).unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        let is_dir = check_json_path(&dir).unwrap_err();
        assert_eq!(is_dir.kind(), ErrorKind::IsADirectory);

        std::fs::remove_dir_all(&dir).unwrap();
    }
}
