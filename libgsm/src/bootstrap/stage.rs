//! Telling `gsmrun` how far this rank has got in its job.
//!
//! MPI cannot tell a rank that will never come from one that is late. A rank that exits with
//! status 0 without joining the job (its program returned early, or it runs another program)
//! leaves the others waiting in the bootstrap's first all-gather for ever, and Open MPI's `mpirun`
//! counts a process that never called `MPI_Init` and exited 0 as a success. The same holds for a
//! rank that runs fewer `run`/`spmd`s than the others (it then waits in `MPI_Finalize` for them,
//! and they for it in their next run). So each rank tells its rank wrapper, and through it
//! `gsmrun`, each stage it enters; `gsmrun` ends the job with a report when a rank leaves or exits
//! 0 short of a stage another rank has reached, or exits 0 in the middle of its job.
//!
//! The channel is a Unix stream socket the wrapper hands down in `GSM_STATE_FD` as `FD:INODE`
//! (the wrapper's side of the contract is `gsmrun`'s `env::rank::STATE_FD`). A descriptor that is
//! not a socket with that inode (the variable came down to a process the wrapper did not start)
//! is never written. Each stage is one byte, sent without blocking and without `SIGPIPE`: a rank
//! never waits on its wrapper, and one started by hand or by plain `mpirun` sends nothing.

use std::os::fd::RawFd;
use std::sync::OnceLock;

/// The variable the rank wrapper sets: `FD:INODE` of this rank's end of the stage channel.
pub const STATE_FD_VAR: &str = "GSM_STATE_FD";

/// A stage of a rank's job, as one byte on the channel (`gsmrun`'s `progress::stage` names the
/// same bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Stage {
    /// About to initialise MPI and wait for every rank in the bootstrap exchange.
    Joining = b'J',
    /// About to start one collective `run`/`spmd` (its first exchange).
    Run = b'R',
    /// About to finalise MPI at the end of the job: this rank starts no more runs (it may then
    /// wait in `MPI_Finalize` for ranks that do, which is why this comes first). In a program
    /// that owns MPI, its own `MPI_Finalize` says it (`mpi_calls::LeavingMark`).
    Leaving = b'L',
    /// MPI given up after a failure (never finalised): the job no longer waits for this rank,
    /// and has failed even if the process then exits 0 (a program that goes on past the error).
    Abandoned = b'A',
    /// The job was found deadlocked (`runtime::quiesce::terminate`): every rank found it in the same
    /// wave and fails its run with its own report, so the launcher waits a little for the
    /// others' reports before it ends them.
    Deadlocked = b'D',
    /// This rank's run failed because another rank's did: a peer vanished, or told its failure
    /// (`Error::PeerLost`, `Error::PeerFailed`). The launcher then waits a little for the report
    /// of the rank whose failure it was, and names that one.
    Follows = b'F',
}

/// This rank's end of the channel, found once: `None` when there is none to use.
fn channel() -> Option<RawFd> {
    static CHANNEL: OnceLock<Option<RawFd>> = OnceLock::new();
    *CHANNEL.get_or_init(|| checked_channel(&std::env::var(STATE_FD_VAR).ok()?))
}

/// The descriptor `FD:INODE` names if it is open, a socket, and that inode; it is then made
/// close-on-exec (programs this rank starts are not ranks and must not inherit it).
fn checked_channel(text: &str) -> Option<RawFd> {
    let (fd, inode) = text.split_once(':')?;
    let fd: RawFd = fd.parse().ok()?;
    let inode: u64 = inode.parse().ok()?;
    if fd < 3 {
        return None;
    }
    crate::sys::proc::inherited_socket(fd, inode)
}

/// Tells the rank wrapper that this rank enters `stage` (nothing when there is no wrapper).
pub(crate) fn tell(stage: Stage) {
    if let Some(fd) = channel() {
        send_stage(fd, stage);
    }
}

fn send_stage(fd: RawFd, stage: Stage) {
    // A failure (the wrapper is gone, or a buffer of some 200 KB is full, which a few bytes per
    // job never fill) loses a stage only for the report of a job that ends anyway.
    let _ = crate::sys::proc::send_byte_nowait(fd, stage as u8);
}

#[cfg(test)]
mod tests;
