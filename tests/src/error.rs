//! The one error type of the test bed: a step of setting it up failed, or a tool it needs is
//! missing. Tests turn it into a panic whose message says what to do; nothing here retries.

use std::time::Duration;

/// Why the test bed could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestbedError {
    /// A system program the test bed needs is not installed.
    #[error(
        "`{tool}` is not installed ({why}); run `make test`, which installs slurm-wlm, munge and the other test dependencies"
    )]
    MissingTool {
        /// The program looked for.
        tool: String,
        /// What it is needed for.
        why: String,
    },
    /// A command of the set-up failed.
    #[error("test bed: `{command}` failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its status and output.
        detail: String,
    },
    /// Something the set-up waits for did not happen in time.
    #[error("test bed: {what} did not happen within {limit:?}; {hint}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long we waited.
        limit: Duration,
        /// Where to look (log files).
        hint: String,
    },
    /// A file of the set-up could not be written.
    #[error("test bed: {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Runs a short set-up command (bounded to 20 s) and returns its stdout, or the error.
pub(crate) fn command(program: &str, args: &[&str]) -> Result<String, TestbedError> {
    let mut cmd =
        std::process::Command::new(crate::bins::which(program).unwrap_or_else(|| program.into()));
    cmd.args(args);
    let done = crate::process::run(&mut cmd, Duration::from_secs(20));
    if done.status.success() {
        Ok(done.stdout)
    } else {
        Err(TestbedError::Command {
            command: done.command.clone(),
            detail: format!(
                "{:?}{}; stderr: {}",
                done.status,
                if done.timed_out { " (timed out)" } else { "" },
                done.stderr.trim()
            ),
        })
    }
}

/// Fails with [`TestbedError::MissingTool`] unless `tool` is on `PATH`.
pub(crate) fn require(tool: &str, why: &str) -> Result<(), TestbedError> {
    if crate::bins::on_path(tool) {
        Ok(())
    } else {
        Err(TestbedError::MissingTool {
            tool: tool.into(),
            why: why.into(),
        })
    }
}
