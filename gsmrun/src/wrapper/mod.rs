//! The rank wrapper: `gsmrun --rank-wrapper [--keep-aslr] -- PROGRAM ARGS…`, the process the
//! launcher starts on every rank (hidden from `--help`). An argument made of colons only comes
//! with one colon more than the program gets (see [`crate::launch::colons_escaped`]).
//!
//! It turns address-space randomisation off (`personality(ADDR_NO_RANDOMIZE)`, other personality
//! flags kept) unless `--keep-aslr`, connects to `gsmrun` at `GSM_CONTROL`, starts the program as
//! its child with the per-rank `GSM_*` variables, forwards the program's stdout/stderr and the
//! stages of its job (a socket named in `GSM_STATE_FD`, see [`crate::progress`]) over the control
//! connection, and reports how the program ended. It ends the program (SIGTERM, then
//! SIGKILL after a grace period) when `gsmrun` says `KILL`, when the control connection disappears
//! (so no rank outlives `gsmrun`), or when the wrapper itself gets SIGTERM/SIGINT/SIGHUP/SIGQUIT.
//! It passes SIGUSR1 and SIGUSR2 on to the program's process group, whether `gsmrun` sends them
//! (a `SIGNAL` frame) or they reach the wrapper itself.
//!
//! After the program has exited, in whatever way, the wrapper ends what it left running in its
//! process group (SIGTERM, SIGKILL after `LEFT_OVER_GRACE`), as Slurm ends a step's processes,
//! and removes its rank's shared-memory segment `/dev/shm/{GSM_JOB_ID}-r{rank}` if the program
//! left it (see [`crate::segments`]). A process that left the group (`setsid`) is not followed.
//!
//! After a failure report the wrapper stays alive until `gsmrun` answers, so that the MPI launcher
//! does not start its own (slower, noisier) teardown; `gsmrun` then ends the launcher. An exit 0
//! after the runtime gave MPI up (its run failed) counts as such a failure here, as it does in
//! `gsmrun` ([`crate::progress`]): Open MPI's `mpirun` would otherwise kill the other ranks and
//! print its page on a process "exiting improperly" before `gsmrun` could say what happened.
//! Without `GSM_CONTROL` (run by hand), the wrapper only sets the personality and `exec`s the
//! program.
//!
//! The pieces: the control connection to `gsmrun` and the signals that reach the wrapper
//! (`control.rs`), the per-rank variables (`rank.rs`), the program as a child and its output
//! (`child.rs`), ending or signalling it (`program.rs`), and the report of how it ended
//! (`report.rs`).

mod child;
mod control;
mod program;
mod rank;
mod report;

use crate::env;
use crate::launch::colons_restored;
use program::Program;
use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// How long what the program left running after it exited has, after SIGTERM, to end and close
/// the program's output before SIGKILL and the report.
const LEFT_OVER_GRACE: Duration = Duration::from_secs(2);
/// Time between SIGTERM and SIGKILL of the program.
const GRACE: Duration = Duration::from_millis(1000);
/// Longest wait for gsmrun's answer after a failure report.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

fn fail(msg: &str) -> i32 {
    eprintln!("gsmrun --rank-wrapper: {msg}");
    1
}

/// The wrapper's own arguments: `[--keep-aslr] -- PROGRAM ARGS…` as (keep ASLR, program, its
/// arguments), colons restored; `Err` with the wrapper's exit status when they are not that.
fn parse_args(args: Vec<OsString>) -> Result<(bool, OsString, Vec<OsString>), i32> {
    let mut keep_aslr = false;
    let mut it = args.into_iter();
    let mut program = None;
    for a in it.by_ref() {
        match a.to_str() {
            Some("--keep-aslr") => keep_aslr = true,
            Some("--") => {
                program = it.next().map(colons_restored);
                break;
            }
            _ => return Err(fail(&format!("unexpected argument {a:?}"))),
        }
    }
    let Some(program) = program else {
        return Err(fail("no program after `--`"));
    };
    Ok((keep_aslr, program, it.map(colons_restored).collect()))
}

/// Run the wrapper with the arguments after `--rank-wrapper`; returns the wrapper's exit status.
pub fn main(args: Vec<OsString>) -> i32 {
    let (keep_aslr, program, prog_args) = match parse_args(args) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    if !keep_aslr {
        if let Err(e) = crate::sys::disable_aslr() {
            return fail(&format!("cannot turn off address-space randomisation: {e}"));
        }
    }
    let mut cmd = Command::new(&program);
    cmd.args(&prog_args);

    let Ok(control) = std::env::var(env::job::CONTROL) else {
        let e = cmd.exec();
        return fail(&format!("cannot run {program:?}: {e}"));
    };
    // The ranks of this host inherit the wrapper's limit on open files; the tcp fabric's
    // connections grow with the job (see `crate::limits`).
    let var = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(size) = var(env::job::SIZE) {
        let threads = var(env::job::THREADS).unwrap_or(1);
        crate::limits::raise_soft_limit(crate::limits::needed(size, 1, threads, true));
    }
    let rank = rank::from_env();
    let host = crate::sys::hostname();
    let (link, reader) = match control::connect(&control, rank.as_deref(), &host) {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    rank::set_vars(&mut cmd, rank.as_deref(), &host);
    // The stage channel (see `crate::progress`): the program's end is inherited across its exec
    // and named with its inode, so the runtime never writes to a descriptor it merely inherited.
    let (stages, program_end) = match child::stage_channel() {
        Ok(pair) => pair,
        Err(e) => return fail(&format!("cannot create the rank's stage channel: {e}")),
    };
    child::prepare(&mut cmd, &program_end);

    // Control messages and signals both end the program; `told` says gsmrun has answered.
    let told = Arc::new(AtomicBool::new(false));
    let (answer_tx, answer_rx) = mpsc::channel::<()>();
    let program_handle = Program::default();
    control::listen(reader, program_handle.clone(), told.clone(), answer_tx);
    control::catch_signals(program_handle.clone());

    if let Ok(job) = std::env::var(env::job::JOB_ID) {
        crate::segments::prepare_mpi_dir(&job);
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return report::no_start(&link, &program, &e, &answer_rx),
    };
    let program_pid = child.id();
    program_handle.started(program_pid as i32);
    control::send_beats(link.clone(), program_handle.clone());
    // Only the program holds its end now: the channel reaches end of stream when it exits.
    drop(program_end);
    let (status, abandoned) = child::run_to_end(child, stages, &link);
    program_handle.reaped();
    // However the program ended, its shared-memory segment must not outlive it (a rank that
    // died before its runtime unlinked it leaves one; see `segments`).
    if let (Ok(job), Some(r)) = (
        std::env::var(env::job::JOB_ID),
        rank.as_deref().and_then(|r| r.parse::<u32>().ok()),
    ) {
        crate::segments::remove_rank_segment(&job, r);
    }
    // Reaped just now, so no other process has had time to take its pid and make regions.
    crate::segments::remove_fabric_regions(program_pid);
    // Ended by gsmrun: the listener removed this host's Open MPI leftovers before it ended the
    // program, which may have written there since (a rank inside `MPI_Init` makes its own
    // directory); reaped, it writes nothing more.
    if told.load(Ordering::SeqCst) {
        crate::janitor::remove_rank_leftovers();
    }
    let outcome = report::outcome(status);
    report::finish(&link, outcome, &told, abandoned, &answer_rx)
}

#[cfg(test)]
mod tests;
