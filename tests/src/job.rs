//! Shorthands the test files share: a `gsmrun` or plain `mpirun` command line, and checks that
//! print the whole run (command, status, stdout, stderr) when they fail.
//!
//! Plain `mpirun` is here only to validate the test bed itself, so that a failing `gsmrun` test
//! can be told apart from a broken bed. Nothing here decides what a test expects.

use crate::hello::{Hello, check_ranks, hellos};
use crate::process::{Finished, PidGuard};
use std::process::Command;

/// `gsmrun` with `args`. Open MPI's run-as-root permission is *not* set: `gsmrun` must supply it.
pub fn gsmrun<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new(crate::bins::gsmrun());
    cmd.args(args)
        .env_remove("OMPI_ALLOW_RUN_AS_ROOT")
        .env_remove("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM");
    cmd
}

/// Plain Open MPI `mpirun` with `args`, allowed to run as root, for validating the test bed.
pub fn mpirun<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new("mpirun");
    cmd.args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_pml", "ob1");
    cmd
}

/// Asserts the run exited with `code` (a shell's code: 128 + signal for a signal).
#[track_caller]
pub fn assert_exit(done: &Finished, code: i32, what: &str) {
    assert!(
        !done.timed_out && done.shell_code() == code,
        "{what}: expected exit status {code}, got {}\n{}",
        done.shell_code(),
        done.report()
    );
}

/// Asserts ranks 0..size each said hello once with the right size, records their PIDs in `guard`,
/// and returns the greetings.
#[track_caller]
pub fn assert_ranks(done: &Finished, size: u32, guard: &PidGuard, what: &str) -> Vec<Hello> {
    let found = hellos(&done.stdout);
    for hello in &found {
        guard.watch(hello.pid, "gsm-hello");
    }
    if let Err(problem) = check_ranks(&found, size) {
        panic!("{what}: {problem}\n{}", done.report());
    }
    found
}
