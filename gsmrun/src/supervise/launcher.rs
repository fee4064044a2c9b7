//! The launcher (`mpirun`, `mpiexec`, `srun`) as the supervisor drives it: started in a process
//! group of its own with the plan's argv and environment, its output forwarded until the job
//! starts ending, its exit reported as an event, and, when the job ends, terminated (SIGTERM),
//! killed with its whole process group (SIGKILL) and the session directory a killed Open MPI
//! leaves removed. When to do which is the state machine's decision, not this module's.

use super::Event;
use super::output::{forward_launcher, join_bounded};
use crate::launch::{LaunchError, Plan};
use crate::sys;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, mpsc};

/// Said once by a thread when it is done.
type Done = mpsc::Receiver<()>;

/// The running launcher.
pub(super) struct Launcher {
    /// Its pid, which is also its process group's id.
    pub pid: i32,
    /// Its program name as given (`mpirun`), for messages.
    pub name: String,
    /// Said by the forwarders of its stdout and stderr once each has seen the end of its pipe;
    /// taken when they are joined.
    forwarders: Option<[Option<Done>; 2]>,
}

impl Launcher {
    /// Starts the launcher of `plan` with `env` added. Its output goes to gsmrun's until `quiet`
    /// is set; its exit comes on `tx` as [`Event::LauncherExited`].
    pub fn start(
        plan: &Plan,
        env: &[(String, String)],
        quiet: &Arc<AtomicBool>,
        tx: &mpsc::Sender<Event>,
    ) -> Result<Launcher, LaunchError> {
        let mut cmd = Command::new(&plan.argv[0]);
        cmd.args(&plan.argv[1..])
            .envs(env.iter().map(|(k, v)| (k, v)));
        cmd.process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A launcher in its own process group must not read a terminal (it would be stopped).
        if sys::stdin_is_terminal() {
            cmd.stdin(Stdio::null());
        }
        let name = plan.argv[0].to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|e| LaunchError::from_spawn(&name, e))?;
        let pid = child.id() as i32;
        tracing::debug!(launcher_pid = pid, "launcher started");
        let out_fwd = forward_launcher(child.stdout.take(), false, quiet.clone(), tx.clone());
        let err_fwd = forward_launcher(child.stderr.take(), true, quiet.clone(), tx.clone());
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send(Event::LauncherExited(child.wait()));
        });
        Ok(Launcher {
            pid,
            name,
            forwarders: Some([out_fwd, err_fwd]),
        })
    }

    /// Waits (at most a second) until the launcher's output has been forwarded.
    pub fn join_output(&mut self) {
        if let Some([out, err]) = self.forwarders.take() {
            join_bounded(out, err);
        }
    }

    /// Asks the launcher to end (SIGTERM to it alone).
    pub fn terminate(&self) {
        // A pid we started and have not reaped yet (or ESRCH).
        let _ = sys::kill(self.pid, sys::SIGTERM);
    }

    /// Kills the launcher's whole process group (it was started with `process_group(0)`, so its
    /// pgid is its pid; ESRCH if already empty).
    pub fn kill_group(&self) {
        let _ = sys::kill_group(self.pid, sys::SIGKILL);
    }

    /// Removes the session directory an Open MPI `mpirun` killed by a signal leaves behind.
    pub fn remove_session_dir(&self) {
        crate::janitor::remove_open_mpi_session_dir(self.pid);
    }
}
