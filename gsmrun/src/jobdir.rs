//! The job's private directory, `$TMPDIR/gsmrun.{job_id}` (mode 0700, it holds the generated
//! hostfile), and the removal of what a `gsmrun` killed with SIGKILL leaves behind.
//!
//! A SIGKILLed `gsmrun` cannot clean up: its directory stays, and so does the job's Open MPI
//! segment directory `/dev/shm/{job_id}-ompi` (see [`crate::segments`]). Nothing would ever remove
//! them, so every `gsmrun` that launches a job first removes those of dead jobs on this host. A
//! job counts as dead only when all of these hold, and anything else is left alone:
//! - its directory's name is exactly `gsmrun.gsm-{pid}-{8 hex digits}` (a job id made by
//!   `gsmrun`, which names the pid of the `gsmrun` that made it), it is a directory, not a link,
//!   and it belongs to this user;
//! - no process has that pid (`kill(pid, 0)` says ESRCH);
//! - no process holds the directory's lock: every `gsmrun` holds an exclusive `flock` on its own
//!   directory from just after creating it until it has removed it, and the kernel drops the lock
//!   when its holder dies, however it dies. The pid alone would not do: a `gsmrun` in another
//!   pid namespace sharing `/tmp` (a container) has a pid that looks free here;
//! - it was last changed more than [`MIN_AGE`] ago, longer than a live `gsmrun` takes from
//!   creating its directory to locking it.
//!
//! Then the job's segments in `/dev/shm` (`{job_id}-r{rank}` and the `{job_id}-ompi` directory,
//! by [`crate::segments`]'s rules, and only when they belong to this user) and its directory's
//! regular files go, then the directory. Ranks of such a job on other hosts are not this host's
//! business. This module does not know what the hostfile says or what a segment holds.

use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How old a dead job's directory must be before it is removed (see the module docs).
pub const MIN_AGE: Duration = Duration::from_secs(10);

/// The prefix of a job directory's name, before the job id.
const PREFIX: &str = "gsmrun.";

/// The name of job `job_id`'s directory.
pub fn dir_name(job_id: &str) -> String {
    format!("{PREFIX}{job_id}")
}

/// The job id and the pid of its `gsmrun` when `name` is a job directory's name as `gsmrun` makes
/// it (`gsmrun.gsm-{pid}-{8 lowercase hex digits}`), else `None`.
pub fn parse_dir_name(name: &str) -> Option<(&str, i32)> {
    let job_id = name.strip_prefix(PREFIX)?;
    let (pid, tail) = job_id.strip_prefix("gsm-")?.split_once('-')?;
    let digits = |s: &str, ok: fn(&u8) -> bool| !s.is_empty() && s.bytes().all(|b| ok(&b));
    if !digits(pid, u8::is_ascii_digit)
        || pid.len() > 10
        || tail.len() != 8
        || !digits(tail, |b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return None;
    }
    let pid: i32 = pid.parse().ok()?;
    (pid > 0).then_some((job_id, pid))
}

/// A job's directory, locked while this value lives and removed (with what is in it) when it is
/// dropped.
#[derive(Debug)]
pub struct JobDir {
    path: PathBuf,
    /// Open on the directory, holding its `flock`; closed only after the directory is removed
    /// (fields drop after `drop`).
    lock: Option<File>,
}

impl JobDir {
    /// Creates `path` (mode 0700; it must not exist) and locks it.
    pub fn create(path: &Path) -> std::io::Result<JobDir> {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new().mode(0o700).create(path)?;
        // From here on, dropping `dir` removes the directory.
        let mut dir = JobDir {
            path: path.to_path_buf(),
            lock: None,
        };
        let file = File::open(path)?;
        if !try_lock(&file)? {
            return Err(std::io::Error::other(
                "the new job directory is locked by another process",
            ));
        }
        dir.lock = Some(file);
        Ok(dir)
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Takes `file`'s exclusive `flock` without waiting: `Ok(false)` when another holds it.
fn try_lock(file: &File) -> std::io::Result<bool> {
    crate::sys::try_lock_exclusive(file)
}

/// Whether no process has pid `pid` here.
fn pid_is_free(pid: i32) -> bool {
    crate::sys::pid_is_free(pid)
}

/// Removes, from `tmp` and this host's `/dev/shm`, what dead jobs left behind (see the module
/// docs for when a job counts as dead). Returns the job ids cleaned up.
pub fn remove_dead_jobs(tmp: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let me = crate::sys::effective_uid();
    let mut cleaned = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((job_id, pid)) = name.to_str().and_then(parse_dir_name) else {
            continue;
        };
        let path = tmp.join(&name);
        let old_and_mine = std::fs::symlink_metadata(&path).is_ok_and(|m| {
            m.file_type().is_dir()
                && m.uid() == me
                && m.modified()
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > MIN_AGE)
        });
        if !old_and_mine || !pid_is_free(pid) {
            continue;
        }
        let Ok(lock) = File::open(&path) else {
            continue;
        };
        if !try_lock(&lock).unwrap_or(false) {
            tracing::debug!(dir = %path.display(), "job directory locked: its gsmrun lives");
            continue;
        }
        // The job is dead: its gsmrun is gone and held the lock until it died.
        crate::segments::remove_dead_job_segments(job_id, me);
        if let Ok(files) = std::fs::read_dir(&path) {
            for f in files.flatten() {
                if f.file_type().is_ok_and(|t| t.is_file()) {
                    let _ = std::fs::remove_file(f.path());
                }
            }
        }
        match std::fs::remove_dir(&path) {
            Ok(()) => {
                tracing::debug!(job_id, "removed what a killed gsmrun left behind");
                cleaned.push(job_id.to_string());
            }
            Err(e) => tracing::debug!(dir = %path.display(), error = %e, "cannot remove"),
        }
        drop(lock);
    }
    cleaned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_gsmrun_makes_are_job_directories() {
        assert_eq!(
            parse_dir_name("gsmrun.gsm-1234-0a1b2c3d"),
            Some(("gsm-1234-0a1b2c3d", 1234))
        );
        for no in [
            "gsmrun.gsm-1234-0a1b2c3",   // short tail
            "gsmrun.gsm-1234-0a1b2c3d0", // long tail
            "gsmrun.gsm-1234-0A1B2C3D",  // not as gsmrun writes it
            "gsmrun.gsm-0-0a1b2c3d",     // no such pid
            "gsmrun.gsm--1-0a1b2c3d",
            "gsmrun.gsm-99999999999-0a1b2c3d",
            "gsmrun.gsm-12x-0a1b2c3d",
            "gsmrun.gsm-1234-0a1b2c3d.x",
            "gsmrun.gsm-test-wrapper-1",
            "gsm-1234-0a1b2c3d",
            "xgsmrun.gsm-1234-0a1b2c3d",
        ] {
            assert_eq!(parse_dir_name(no), None, "{no}");
        }
        assert_eq!(
            parse_dir_name(&dir_name("gsm-7-ffffffff")),
            Some(("gsm-7-ffffffff", 7))
        );
    }

    #[test]
    fn a_locked_directory_is_not_taken_twice() {
        let path = std::env::temp_dir().join(format!("gsmrun-jobdir-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let dir = JobDir::create(&path).unwrap();
        let other = File::open(&path).unwrap();
        assert!(!try_lock(&other).unwrap(), "a second lock was granted");
        drop(dir);
        assert!(!path.exists());
        // Linux pids stay below 2^22.
        assert!(pid_is_free(i32::MAX));
        assert!(!pid_is_free(std::process::id() as i32));
        assert!(!pid_is_free(0) && !pid_is_free(-1));
    }
}
