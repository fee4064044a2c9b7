//! The rank's program as the wrapper's child: set up to lead its own process group, to die with
//! the wrapper and to inherit its end of the stage channel; its output and stages pumped over the
//! control connection; and, once it has exited, what it left running in its group ended before
//! it is reaped. Ending it on request is `program.rs`'s. What is reported is `report.rs`'s business.

use super::LEFT_OVER_GRACE;
use super::control::Link;
use crate::env;
use crate::supervise::wire;
use crate::sys;
use std::io::Read;
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Instant;

/// A connected pair of Unix stream sockets, both close-on-exec: the wrapper's end, and the
/// program's end with its inode.
pub(super) fn stage_channel() -> std::io::Result<(UnixStream, (UnixStream, u64))> {
    let (ours, theirs) = UnixStream::pair()?;
    let inode = sys::inode(&theirs)?;
    Ok((ours, (theirs, inode)))
}

/// Sets up `cmd` to run the program: `GSM_STATE_FD` naming `program_end` (inherited across the
/// exec), its output piped to the wrapper, its own process group, and death with the wrapper.
pub(super) fn prepare(cmd: &mut Command, program_end: &(UnixStream, u64)) {
    let program_fd = program_end.0.as_raw_fd();
    cmd.env(
        env::rank::STATE_FD,
        format!("{program_fd}:{}", program_end.1),
    );
    // The program leads its own process group so that ending it also ends what it started.
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Outside the launcher's process group, nothing ends the program when the wrapper is
    // SIGKILLed (by the launcher or the OOM killer) unless the kernel does: the parent-death
    // signal. It fires when the thread that forked ends; that is this main thread, which lives
    // as long as the wrapper.
    sys::die_with_parent(cmd, program_fd);
}

/// A reader that notes whether `byte` ever passed through it (a stage of the rank's job).
struct Watch<R> {
    inner: R,
    byte: u8,
    seen: Arc<AtomicBool>,
}

impl<R: Read> Read for Watch<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if buf[..n].contains(&self.byte) {
            self.seen.store(true, Ordering::SeqCst);
        }
        Ok(n)
    }
}

/// Copies `pipe` to the control connection as `tag` frames until its end (or a failed send), on
/// a thread of its own; said on the receiver when done.
fn pump(pipe: Option<Box<dyn Read + Send>>, tag: u8, link: &Link) -> mpsc::Receiver<()> {
    let link = link.clone();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Some(mut pipe) = pipe {
            let mut buf = vec![0u8; 32 * 1024];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if link.send(tag, &buf[..n]).is_err() {
                    break;
                }
            }
        }
        let _ = done_tx.send(());
    });
    done_rx
}

/// Forwards the program's output and stages until it has exited, ends what it left in its
/// process group, and reaps it: how it ended, and whether the runtime abandoned its run (the
/// `ABANDONED` stage passed).
pub(super) fn run_to_end(
    mut child: Child,
    stages: UnixStream,
    link: &Link,
) -> (std::io::Result<ExitStatus>, bool) {
    let out_done = pump(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        wire::STDOUT,
        link,
    );
    let err_done = pump(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        wire::STDERR,
        link,
    );
    let abandoned = Arc::new(AtomicBool::new(false));
    let stages = Watch {
        inner: stages,
        byte: crate::progress::stage::ABANDONED,
        seen: abandoned.clone(),
    };
    let stages_done = pump(
        Some(Box::new(stages) as Box<dyn Read + Send>),
        wire::STATE,
        link,
    );
    // The program has exited, but stays unreaped while what it left in its process group (a
    // `sleep 100 &`, say) is ended: until it is reaped its pid cannot name another process, so
    // the group's id stays its own. Left running, such a process kept the output pipes and the
    // stage channel open (the report waited 2 s for each) and outlived the job.
    let pid = child.id() as i32;
    let exited = sys::wait_exited(pid);
    let left_over = Instant::now();
    if exited {
        // The process group our unreaped child leads (ESRCH if empty).
        let _ = sys::kill_group(pid, sys::SIGTERM);
    }
    // Output still in the pipes belongs before the report; a process that ignores SIGTERM and
    // holds them must not keep us here for long.
    let until = left_over + LEFT_OVER_GRACE;
    let _ = out_done.recv_timeout(until.saturating_duration_since(Instant::now()));
    let _ = err_done.recv_timeout(until.saturating_duration_since(Instant::now()));
    // The stages come before the report, which gsmrun judges by them.
    let _ = stages_done.recv_timeout(until.saturating_duration_since(Instant::now()));
    if exited {
        // As above; the child is still unreaped.
        let _ = sys::kill_group(pid, sys::SIGKILL);
    }
    let status = child.wait();
    (status, abandoned.load(Ordering::SeqCst))
}
