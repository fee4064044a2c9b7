//! Removing the shared-memory segments a job leaves behind when a rank dies.
//!
//! The contract with the runtime's `shm` fabric: rank `r` of job `GSM_JOB_ID` names its segment
//! `/dev/shm/{GSM_JOB_ID}-r{r}` and unlinks it itself once every rank has attached, so after a
//! normal run nothing is left. A rank that dies during set-up (or is killed before the runtime
//! gets there) leaves its segment; the rank wrapper removes its own rank's file after the program
//! exits, and `gsmrun` removes every `{GSM_JOB_ID}-r*` file on the launching host after the job.
//!
//! Open MPI's own shared-memory transport (`vader`) also leaves its segment files in `/dev/shm`
//! when a rank is killed. So `gsmrun` points it at a directory of the job's own,
//! `/dev/shm/{job_id}-ompi` (`OMPI_MCA_btl_vader_backing_directory`, unless the user set it), the
//! rank wrapper creates that directory (mode 0700) before the program starts, and `gsmrun`
//! removes it with what is in it after the job on the launching host. On other hosts the
//! directory stays if a rank there is killed (the wrappers cannot tell which rank ends last).
//!
//! A `gsmrun` killed by SIGKILL removes nothing; a later `gsmrun` on the same host removes that
//! job's segments once the job is provably dead (see [`crate::jobdir`]), with
//! [`remove_dead_job_segments`].
//!
//! The `tcp` fabric's segment of a rank (per-host connections), `{job_id}-r{r}-tcp`, follows the
//! same contract and is removed the same way.
//!
//! libfabric's `shm` provider (the `ofi` fabric on one host) names its regions after the process,
//! `/dev/shm/{pid}:{domain}:{endpoint}`, and unlinks them when the endpoint closes or on SIGINT
//! or SIGTERM; after SIGKILL they stay. The rank wrapper removes its program's once it has
//! reaped it.
//!
//! This module only deletes files named exactly `{job_id}-r{digits}` (with or without `-tcp`),
//! `{pid}:{digits}:{digits}` for a reaped program's pid, and the directory `{job_id}-ompi` with
//! the regular files in it; it never looks at anything else in `/dev/shm`, and it does not know
//! what a segment contains.

use std::path::Path;

/// Where POSIX shared-memory segments appear on Linux.
pub const SHM_DIR: &str = "/dev/shm";

use gsm_contract::contract::usable_job_id as usable;
/// The file name of `rank`'s segment in job `job_id`, and whether a file name is one of a job's
/// segments: the launch contract's, which the runtime names its segments with.
pub use gsm_contract::contract::{is_job_segment, segment_name};

/// Removes `dir/name` if it is a regular file; a missing file is not an error. Returns whether a
/// file was removed.
fn remove_file(dir: &Path, name: &str) -> bool {
    let path = dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(_) => {
            tracing::debug!(path = %path.display(), "not a regular file; left alone");
            return false;
        }
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::debug!(path = %path.display(), error = %e, "cannot inspect segment");
            }
            return false;
        }
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {
            tracing::debug!(path = %path.display(), "removed a segment left by the job");
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "cannot remove segment");
            false
        }
    }
}

/// Removes rank `rank`'s segment of job `job_id` from `/dev/shm`, if it is still there (the
/// rank wrapper calls this after its program has exited, whatever the way). Returns whether a
/// file was removed.
pub fn remove_rank_segment(job_id: &str, rank: u32) -> bool {
    remove_rank_segment_in(Path::new(SHM_DIR), job_id, rank)
}

fn remove_rank_segment_in(dir: &Path, job_id: &str, rank: u32) -> bool {
    if !usable(job_id) {
        return false;
    }
    let name = segment_name(job_id, rank);
    // The tcp fabric's segment too (per-host connections), unlinked by the rank at `sealed`.
    let tcp = remove_file(dir, &format!("{name}-tcp"));
    remove_file(dir, &name) || tcp
}

/// Removes the regions libfabric's `shm` provider made for process `pid` (`/dev/shm/{pid}:{D}:{D}`,
/// named after the process and its domain and endpoint), which a process killed before it
/// closed its endpoints leaves behind. The rank wrapper calls this once it has reaped its
/// program, whose pid that is. Returns how many files were removed.
pub fn remove_fabric_regions(pid: u32) -> usize {
    remove_fabric_regions_in(Path::new(SHM_DIR), pid)
}

/// Whether `name` is a region libfabric's `shm` provider names after process `pid`.
pub fn is_fabric_region(name: &str, pid: u32) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mut parts = name.split(':');
    parts.next() == Some(pid.to_string().as_str())
        && parts.next().is_some_and(digits)
        && parts.next().is_some_and(digits)
        && parts.next().is_none()
}

fn remove_fabric_regions_in(dir: &Path, pid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    (entries.flatten())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| is_fabric_region(name, pid) && remove_file(dir, name))
        .count()
}

/// Open MPI's parameter for the directory of its shared-memory segments.
pub const MPI_DIR_VAR: &str = "OMPI_MCA_btl_vader_backing_directory";

/// The directory of job `job_id`'s Open MPI segments, `/dev/shm/{job_id}-ompi`, or `None` for a
/// job id that cannot name one.
pub fn mpi_dir(job_id: &str) -> Option<std::path::PathBuf> {
    usable(job_id).then(|| Path::new(SHM_DIR).join(format!("{job_id}-ompi")))
}

/// Creates the job's Open MPI segment directory (mode 0700) if [`MPI_DIR_VAR`] names it: the
/// rank wrapper calls this before starting the program. Other values are left alone.
pub fn prepare_mpi_dir(job_id: &str) {
    let Some(dir) = mpi_dir(job_id) else { return };
    if std::env::var_os(MPI_DIR_VAR).as_deref() != Some(dir.as_os_str()) {
        return;
    }
    use std::os::unix::fs::DirBuilderExt;
    if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            tracing::debug!(dir = %dir.display(), error = %e, "cannot create the MPI segment directory");
        }
    }
}

/// Removes the job's Open MPI segment directory and the regular files in it (gsmrun calls this
/// after the job). Returns how many files were removed.
pub fn remove_mpi_dir(job_id: &str) -> usize {
    mpi_dir(job_id).map_or(0, |d| remove_dir_files(&d))
}

fn remove_dir_files(dir: &Path) -> usize {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_dir() => {}
        _ => return 0,
    }
    let mut removed = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if let Some(name) = entry.file_name().to_str() {
                if remove_file(dir, name) {
                    removed += 1;
                }
            }
        }
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        tracing::debug!(dir = %dir.display(), error = %e, "cannot remove the MPI segment directory");
    }
    removed
}

/// Removes every segment of job `job_id` from `/dev/shm` on this host (gsmrun calls this after
/// the job). Returns how many files were removed.
pub fn remove_job_segments(job_id: &str) -> usize {
    remove_job_segments_in(Path::new(SHM_DIR), job_id)
}

fn remove_job_segments_in(dir: &Path, job_id: &str) -> usize {
    if !usable(job_id) {
        return 0;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            tracing::debug!(dir = %dir.display(), error = %e, "cannot list segments");
            return 0;
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if is_job_segment(name, job_id) && remove_file(dir, name) {
            removed += 1;
        }
    }
    removed
}

/// Removes job `job_id`'s segments and Open MPI directory from `/dev/shm` when they belong to
/// user `uid`: for a job whose `gsmrun` died without cleaning up ([`crate::jobdir`] decides that).
/// Returns how many files were removed.
pub fn remove_dead_job_segments(job_id: &str, uid: u32) -> usize {
    remove_dead_job_segments_in(Path::new(SHM_DIR), job_id, uid)
}

fn remove_dead_job_segments_in(dir: &Path, job_id: &str, uid: u32) -> usize {
    use std::os::unix::fs::MetadataExt as _;
    if !usable(job_id) {
        return 0;
    }
    let mine = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.uid() == uid);
    let mut removed = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if is_job_segment(name, job_id) && mine(&dir.join(name)) && remove_file(dir, name) {
                removed += 1;
            }
        }
    }
    let mpi = dir.join(format!("{job_id}-ompi"));
    if mine(&mpi) {
        removed += remove_dir_files(&mpi);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_dead_program_s_fabric_regions_go() {
        let dir = std::env::temp_dir().join(format!("gsmrun-segments-ofi-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "4242:0:0",
            "4242:0:1",
            "42424:0:0",
            "4242:0",
            "4242:a:0",
            "x4242:0:0",
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        assert_eq!(remove_fabric_regions_in(&dir, 4242), 2);
        let mut left: Vec<String> = (std::fs::read_dir(&dir).unwrap().flatten())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        left.sort();
        assert_eq!(left, ["42424:0:0", "4242:0", "4242:a:0", "x4242:0:0"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rank_s_tcp_segment_goes_with_it() {
        let dir = std::env::temp_dir().join(format!("gsmrun-segments-tcp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("gsm-6-ee-r1-tcp"), b"x").unwrap();
        assert!(remove_rank_segment_in(&dir, "gsm-6-ee", 1));
        assert!(!dir.join("gsm-6-ee-r1-tcp").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn removal_takes_only_the_job_s_files() {
        let dir = std::env::temp_dir().join(format!("gsmrun-segments-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let job = "gsm-5-ff";
        let mine = ["gsm-5-ff-r0", "gsm-5-ff-r3"];
        let others = ["gsm-5-ff0-r0", "gsm-5-f-r0", "gsm-5-ff-rank", "unrelated"];
        for f in mine.iter().chain(&others) {
            std::fs::write(dir.join(f), b"x").unwrap();
        }
        // A directory with a matching name is not a segment: left alone.
        std::fs::create_dir(dir.join("gsm-5-ff-r9")).unwrap();

        assert!(remove_rank_segment_in(&dir, job, 3));
        assert!(!dir.join("gsm-5-ff-r3").exists());
        assert!(!remove_rank_segment_in(&dir, job, 3), "already gone");
        assert_eq!(remove_job_segments_in(&dir, job), 1);
        assert!(!dir.join("gsm-5-ff-r0").exists());
        for f in others {
            assert!(dir.join(f).exists(), "{f} was removed");
        }
        assert!(dir.join("gsm-5-ff-r9").is_dir());
        assert_eq!(remove_job_segments_in(&dir, ""), 0);
        // The Open MPI directory: its files and itself go, nothing beside it.
        let mpi = dir.join(format!("{job}-ompi"));
        std::fs::create_dir_all(&mpi).unwrap();
        std::fs::write(mpi.join("vader_segment.h.1.0"), b"x").unwrap();
        std::fs::write(dir.join("keep-me"), b"x").unwrap();
        assert_eq!(remove_dir_files(&mpi), 1);
        assert!(!mpi.exists());
        assert!(dir.join("keep-me").exists());
        assert_eq!(mpi_dir(""), None);
        assert!(dir.join("unrelated").exists());
        // A dead job's segments and Open MPI directory go only when they are the user's.
        std::fs::write(dir.join("gsm-5-ff-r1"), b"x").unwrap();
        std::fs::create_dir_all(&mpi).unwrap();
        std::fs::write(mpi.join("vader_segment.h.1.0"), b"x").unwrap();
        let me = crate::sys::effective_uid();
        assert_eq!(
            remove_dead_job_segments_in(&dir, job, me.wrapping_add(1)),
            0
        );
        assert_eq!(remove_dead_job_segments_in(&dir, job, me), 2);
        assert!(!mpi.exists() && !dir.join("gsm-5-ff-r1").exists());
        assert!(dir.join("gsm-5-ff0-r0").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
