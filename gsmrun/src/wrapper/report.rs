//! The wrapper's report to `gsmrun`: how the program ended ([`Outcome`]), or why it could not
//! start (naming a directory, a missing `#!` interpreter, or a program only in the working
//! directory), then the wait for `gsmrun`'s answer after a failure, so that the MPI launcher
//! does not start its own teardown first. The wrapper's exit status follows from it.

use super::ANSWER_WAIT;
use super::control::Link;
use crate::supervise::{Outcome, wire};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

/// How the program ended, from its wait status.
pub(super) fn outcome(status: std::io::Result<ExitStatus>) -> Outcome {
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => Outcome::Exited(c),
            (_, Some(sig)) => Outcome::Signaled(sig),
            _ => Outcome::Exited(1),
        },
        Err(e) => Outcome::NoStart(format!("waiting for the program failed: {e}")),
    }
}

/// Reports `outcome`; returns the wrapper's exit status. Ended by gsmrun (`told`), it exits 0
/// (gsmrun owns the job's status) once the listener has cleaned up; after a failure (or an exit 0
/// after the runtime abandoned its run) it waits for gsmrun's answer first.
pub(super) fn finish(
    link: &Link,
    outcome: Outcome,
    told: &AtomicBool,
    abandoned: bool,
    answer: &mpsc::Receiver<()>,
) -> i32 {
    let code = outcome.exit_code();
    let _ = link.send(wire::EXIT, outcome.encode().as_bytes());
    if told.load(Ordering::SeqCst) {
        // gsmrun ended us; it owns the job's status. The listener answers once it has removed
        // this host's Open MPI leftovers (`control::listen`); returning sooner ended the process
        // in the middle of that removal and left a remote host's session directory behind.
        let _ = answer.recv_timeout(ANSWER_WAIT);
        let _ = link.send(wire::ENDED, b"");
        link.shutdown_write();
        return 0;
    }
    if !outcome.failed() && !abandoned {
        return 0;
    }
    // A failure: wait for gsmrun's answer (KILL or its end) before exiting.
    let _ = answer.recv_timeout(ANSWER_WAIT);
    let _ = link.send(wire::ENDED, b"");
    let _ = std::io::stderr().flush();
    code
}

/// Reports that `program` could not be started (`e`), waits for gsmrun's answer; exit status 127.
pub(super) fn no_start(
    link: &Link,
    program: &OsString,
    e: &std::io::Error,
    answer: &mpsc::Receiver<()>,
) -> i32 {
    let why = no_start_reason(program, e);
    let _ = link.send(wire::EXIT, Outcome::NoStart(why).encode().as_bytes());
    let _ = answer.recv_timeout(ANSWER_WAIT);
    let _ = link.send(wire::ENDED, b"");
    127
}

/// Why `program` could not be started, in words that point at the cause.
fn no_start_reason(program: &OsString, e: &std::io::Error) -> String {
    // exec(2) fails on a directory with EACCES, which reads as a permission problem. A name with
    // a `/` is a path, not looked up in PATH.
    let is_path = program.as_encoded_bytes().contains(&b'/');
    if is_path && std::path::Path::new(program).is_dir() {
        format!("{program:?} is a directory, not a program")
    } else if let Some(interpreter) = missing_interpreter(program, e) {
        format!(
            "{program:?}: its interpreter {interpreter:?} (its #! line) was not found; the script \
             itself exists"
        )
    } else if !is_path
        && e.kind() == std::io::ErrorKind::NotFound
        && std::path::Path::new(program).is_file()
    {
        // `mpirun` also looks in the working directory; a shell, and this wrapper, run only what
        // PATH or the path given names, so that a file left in the directory cannot stand in for
        // a command. The user is told how to name it.
        let shown = program.to_string_lossy();
        format!(
            "{program:?} is not in PATH; there is a file of that name in the working directory: \
             to run it, write ./{shown}"
        )
    } else {
        format!("{program:?}: {e}")
    }
}

/// The interpreter named by the `#!` line of `program` when exec(2) failed with ENOENT although
/// the script exists: the kernel then reports the missing interpreter as a missing program.
fn missing_interpreter(program: &OsString, e: &std::io::Error) -> Option<String> {
    if e.kind() != std::io::ErrorKind::NotFound {
        return None;
    }
    let path = if program.as_encoded_bytes().contains(&b'/') {
        std::path::PathBuf::from(program)
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(program))
            .find(|p| p.is_file())?
    };
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n]
        .strip_prefix(b"#!")?
        .split(|&b| b == b'\n')
        .next()?;
    let text = String::from_utf8_lossy(line);
    Some(text.split_whitespace().next()?.to_string())
}
