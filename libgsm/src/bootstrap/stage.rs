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
//! (the variable and the stage bytes are the launch contract of the `gsm-contract` crate,
//! which `gsmrun` reads with the same types). A descriptor that is
//! not a socket with that inode (the variable came down to a process the wrapper did not start)
//! is never written. Each stage is one byte, sent without blocking and without `SIGPIPE`: a rank
//! never waits on its wrapper, and one started by hand or by plain `mpirun` sends nothing.

use std::os::fd::RawFd;
use std::sync::OnceLock;

/// The variable the rank wrapper sets: `FD:INODE` of this rank's end of the stage channel.
pub const STATE_FD_VAR: &str = gsm_contract::table::STATE_FD.name;

/// A stage of a rank's job, as one byte on the channel: the launch contract's, which `gsmrun`
/// reads with the same type.
pub(crate) use gsm_contract::contract::Stage;

/// This rank's end of the channel, found once: `None` when there is none to use.
fn channel() -> Option<RawFd> {
    static CHANNEL: OnceLock<Option<RawFd>> = OnceLock::new();
    *CHANNEL.get_or_init(|| {
        let text: Option<String> = gsm_contract::get(&gsm_contract::table::STATE_FD).ok()?;
        checked_channel(&text?)
    })
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
    let _ = crate::sys::proc::send_byte_nowait(fd, stage.byte());
}

#[cfg(test)]
mod tests;
