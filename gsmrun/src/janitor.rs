//! The janitor: `gsmrun --janitor JOB_ID LAUNCHER_PID JOB_DIR GSMRUN_PID` (hidden), a small
//! process that `gsmrun` starts beside the launcher and that cleans up after a `gsmrun` killed
//! with SIGKILL, which can run no code of its own.
//!
//! It waits for its parent, the `gsmrun` that started it, to go: its parent is no longer
//! `GSMRUN_PID`. The pid is passed rather than read at start, since a `gsmrun` killed before the
//! janitor ran would leave it waiting for a change that already happened. Then it ends the
//! launcher's process group and its other descendants (SIGTERM, SIGKILL [`TERM_WAIT`] later for
//! those still there) and removes, on this host, the job's private directory, its shared-memory
//! segments (`/dev/shm/{JOB_ID}-r*`), its Open MPI segment directory (`/dev/shm/{JOB_ID}-ompi`)
//! and the launcher's Open MPI session directory. The ranks end by themselves: each wrapper ends
//! its program when its connection to `gsmrun` closes. A `gsmrun` that ends normally has cleaned
//! up already, and its reaper (`supervise/reaper.rs`) ends the janitor with the rest of its
//! descendants.
//!
//! On other hosts each rank's wrapper does the same for its host once `gsmrun` ended the job or
//! vanished ([`remove_rank_leftovers`]), and exits only after it: the launcher's daemon there
//! (`orted`) is usually killed before it removes its session directory.

use std::path::PathBuf;
use std::time::Duration;

/// How long the launcher and what it started have between SIGTERM and SIGKILL (an Open MPI
/// daemon ended with SIGTERM removes its session directory).
const TERM_WAIT: Duration = Duration::from_millis(1000);
/// How often the janitor looks at its parent.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// Starts the janitor for job `job_id`, whose launcher runs as `launcher_pid` (leading its process
/// group) and whose private directory is `job_dir`. A janitor that cannot start only loses the
/// clean-up after a SIGKILL.
pub fn start(job_id: &str, launcher_pid: i32, job_dir: &std::path::Path) {
    use std::os::unix::process::CommandExt as _;
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let spawned = std::process::Command::new(me)
        .arg("--janitor")
        .arg(job_id)
        .arg(launcher_pid.to_string())
        .arg(job_dir)
        .arg(std::process::id().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        // Out of gsmrun's process group, so a Ctrl-C to gsmrun does not end it first.
        .process_group(0)
        .spawn();
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "cannot start the janitor");
    }
}

/// Runs the janitor with the arguments after `--janitor`; returns its exit status.
pub fn main(args: &[std::ffi::OsString]) -> i32 {
    let [job_id, launcher, dir, gsmrun] = args else {
        return 2;
    };
    let (Some(job_id), Some(launcher), Some(parent)) = (
        job_id.to_str(),
        launcher.to_str().and_then(|p| p.parse::<i32>().ok()),
        gsmrun.to_str().and_then(|p| p.parse::<u32>().ok()),
    ) else {
        return 2;
    };
    // A normal end of gsmrun kills the janitor; only a gsmrun that died gets here.
    while std::os::unix::process::parent_id() == parent {
        std::thread::sleep(LOOK_EVERY);
    }
    // The directory first: nothing reads it once the launcher has started.
    let _ = std::fs::remove_dir_all(PathBuf::from(dir));
    // What the launcher started out of its group (its `ssh` or agent to each host, and through
    // them the daemons) is read before the launcher goes, while they are still its descendants.
    let mut tree =
        crate::proctree::descendants(launcher as u32, &crate::proctree::process_parents());
    tree.push(launcher as u32);
    let _ = crate::sys::kill_group(launcher, crate::sys::SIGTERM);
    crate::proctree::end_gently(&tree, TERM_WAIT);
    let _ = crate::sys::kill_group(launcher, crate::sys::SIGKILL);
    crate::segments::remove_job_segments(job_id);
    crate::segments::remove_mpi_dir(job_id);
    remove_open_mpi_session_dir(launcher);
    0
}

/// A SIGKILLed Open MPI `mpirun` leaves its session directory
/// (`$TMPDIR/ompi.<host>.<uid>/pid.<pid>`, Open MPI 4's layout) behind; remove it.
pub fn remove_open_mpi_session_dir(launcher_pid: i32) {
    let uid = crate::sys::real_uid();
    let dir = std::env::temp_dir()
        .join(format!("ompi.{}.{uid}", crate::hostname()))
        .join(format!("pid.{launcher_pid}"));
    // Give the dying launcher a moment to release it.
    std::thread::sleep(Duration::from_millis(20));
    let _ = std::fs::remove_dir_all(dir);
}

/// What a job ended from outside leaves on a rank's host, removed by the rank's wrapper after its
/// program is gone: the job family's Open MPI session directory
/// (`OMPI_MCA_orte_jobfam_session_dir`, only a `jf.*` or `pid.*` directory inside
/// `OMPI_MCA_orte_top_session_dir`) and the job's Open MPI segment directory. The other ranks of
/// the host are being ended too, and a process that has the files mapped keeps them.
pub fn remove_rank_leftovers() {
    let var = |k: &str| std::env::var_os(k).map(PathBuf::from);
    if let (Some(top), Some(dir)) = (
        var("OMPI_MCA_orte_top_session_dir"),
        var("OMPI_MCA_orte_jobfam_session_dir"),
    ) {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ours = (name.starts_with("jf.") || name.starts_with("pid."))
            && dir.parent() == Some(top.as_path())
            && top
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ompi."));
        // A process still writing there (the daemon's progress thread, a rank's last words)
        // can make the last rmdir fail (ENOTEMPTY): the walk is tried again.
        for _ in 0..3 {
            if !ours || std::fs::remove_dir_all(&dir).is_ok() || !dir.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if let Ok(job) = std::env::var(crate::env::job::JOB_ID) {
        crate::segments::remove_mpi_dir(&job);
    }
}
