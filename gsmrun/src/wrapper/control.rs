//! The wrapper's side of the control connection: connecting to `gsmrun` and saying `HELLO`,
//! sending frames (output, stages, the report) from several threads, and listening for `KILL`,
//! `SIGNAL` or the connection's end; and the signals that reach the wrapper itself. What to do
//! with the program is [`Program`]'s business. See `supervise/README.md`.

use super::fail;
use super::program::Program;
use crate::env;
use crate::supervise::wire;
use std::io::{self, Read};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// The sending half of the control connection, shared by the threads that send.
#[derive(Clone)]
pub(super) struct Link {
    writer: Arc<Mutex<TcpStream>>,
}

impl Link {
    /// Sends one frame.
    pub fn send(&self, tag: u8, payload: &[u8]) -> io::Result<()> {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        wire::write_frame(&mut *w, tag, payload)
    }

    /// Says that nothing more comes from this side.
    pub fn shutdown_write(&self) {
        let _ = self
            .writer
            .lock()
            .map(|w| w.shutdown(std::net::Shutdown::Write));
    }
}

/// Connects to `gsmrun` at `control` (`GSM_CONTROL`) and says `HELLO` with the job's key, this
/// rank and host; the sending half and a reader. `Err` with the wrapper's exit status (and the
/// message printed) when `gsmrun` cannot be reached.
pub(super) fn connect(
    control: &str,
    rank: Option<&str>,
    host: &str,
) -> Result<(Link, TcpStream), i32> {
    let key = std::env::var(env::job::CONTROL_KEY).unwrap_or_default();
    let stream = match control
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| io::Error::other("not an address"))
        .and_then(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(10)))
    {
        Ok(s) => s,
        Err(e) => {
            return Err(fail(&format!(
                "cannot reach gsmrun at {control}: {e}; the program was not started"
            )));
        }
    };
    let _ = stream.set_nodelay(true);
    let Ok(reader) = stream.try_clone() else {
        return Err(fail("cannot clone the control socket"));
    };
    let link = Link {
        writer: Arc::new(Mutex::new(stream)),
    };
    let hello = format!("{key}\0{}\0{host}", rank.unwrap_or_default());
    if let Err(e) = link.send(wire::HELLO, hello.as_bytes()) {
        return Err(fail(&format!("cannot talk to gsmrun at {control}: {e}")));
    }
    Ok((link, reader))
}

/// Listens to `gsmrun` on `reader`: a `SIGNAL` is passed on to the program; any `KILL`, end of
/// stream or error sets `told`, removes this host's leftovers, ends the program and is said on
/// `answer`, which the main thread waits for before the wrapper exits.
pub(super) fn listen(
    mut reader: TcpStream,
    program: Program,
    told: Arc<AtomicBool>,
    answer: mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        // A SIGNAL is passed on, LOST sets how long gsmrun's host may not answer; any KILL, end
        // of stream or error (gsmrun's host lost: ETIMEDOUT) means: end the program.
        loop {
            match wire::read_frame(&mut reader) {
                Ok(Some((wire::SIGNAL, payload))) => {
                    if let Ok(n) = <[u8; 4]>::try_from(payload.as_slice()) {
                        program.pass_on(u32::from_le_bytes(n) as i32);
                    }
                }
                Ok(Some((wire::LOST, payload))) => {
                    if let Ok(ms) = <[u8; 4]>::try_from(payload.as_slice()) {
                        // Two seconds sooner than gsmrun (at least half its time): keepalive
                        // probes are a second apart, so either side may trip up to a second
                        // late, and the rank beyond a cut must have ended and cleaned up before
                        // gsmrun, having reported the host lost, ends what is left.
                        let lost = Duration::from_millis(u32::from_le_bytes(ms).into());
                        let after = lost.saturating_sub(Duration::from_secs(2)).max(lost / 2);
                        let _ = crate::sys::fail_when_unanswered(&reader, after);
                    }
                }
                _ => break,
            }
        }
        told.store(true, Ordering::SeqCst);
        // The job is over on this host: what the launcher's daemon here would leave if it is
        // killed goes now, before anything else can kill this wrapper (see `crate::janitor`).
        crate::janitor::remove_rank_leftovers();
        program.end();
        let _ = answer.send(());
        // Keep reading so a later EOF is noticed by nobody; nothing else to do.
        let mut sink = [0u8; 64];
        while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
    });
}

/// Says how the program is (`BEAT`: running or stopped) every [`crate::supervise::BEAT_EVERY`]
/// and at once when it changes, until it has been reaped; `gsmrun` judges stops
/// (`supervise/stops.rs`). When the process that started the wrapper goes (the wrapper's parent
/// changes), says `ORPHANED` and ends the program.
pub(super) fn send_beats(link: Link, program: Program) {
    let parent = std::os::unix::process::parent_id();
    let parent_name = std::fs::read_to_string(format!("/proc/{parent}/comm"))
        .map(|n| n.trim().to_string())
        .unwrap_or_else(|_| format!("pid {parent}"));
    std::thread::spawn(move || {
        let mut last: Option<(bool, std::time::Instant)> = None;
        while let Some(pid) = program.running_pid() {
            // The launcher's daemon that started us went away (killed, crashed): nothing will
            // collect this rank any more, so it is said and the program ended.
            if std::os::unix::process::parent_id() != parent {
                let _ = link.send(wire::ORPHANED, parent_name.as_bytes());
                program.end();
                return;
            }
            let stopped = stopped(pid);
            let due = last.is_none_or(|(was, at)| {
                was != stopped || at.elapsed() >= crate::supervise::BEAT_EVERY
            });
            if due {
                let byte = if stopped {
                    wire::STOPPED
                } else {
                    wire::RUNNING
                };
                if link.send(wire::BEAT, &[byte]).is_err() {
                    return;
                }
                last = Some((stopped, std::time::Instant::now()));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
}

/// Whether process `pid` is stopped: state `T` (a stop signal) or `t` (a debugger's stop) in
/// `/proc/PID/stat`.
fn stopped(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state …`: the name may hold anything, so the state follows the last ')'.
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next())
        .is_some_and(|state| state == 'T' || state == 't')
}

/// The signals that reach the wrapper itself: SIGINT, SIGTERM, SIGHUP and SIGQUIT end the
/// program; SIGUSR1 and SIGUSR2 are passed on to it (a batch system may signal every process of
/// the job).
pub(super) fn catch_signals(program: Program) {
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
        signal_hook::consts::SIGUSR1,
        signal_hook::consts::SIGUSR2,
    ]) {
        std::thread::spawn(move || {
            for sig in signals.forever() {
                if crate::supervise::FORWARDED.contains(&sig) {
                    program.pass_on(sig);
                } else {
                    program.end();
                }
            }
        });
    }
}
