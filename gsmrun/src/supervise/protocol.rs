//! The control protocol between `gsmrun` and the rank wrappers: the framing ([`wire`]), how a
//! rank's program ended ([`Outcome`]), and the serving of one control connection, which turns
//! its frames into the supervisor's events (a connection counts as a rank only once it presents
//! the job's key). It decides nothing about the job: that is the supervisor's state machine.
//! See `supervise/README.md`.

use super::Event;
use super::output::{LineOut, Output};
use crate::sys::signal_name;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

/// Framing of the control connection: one tag byte, a 4-byte little-endian length, the payload.
pub mod wire {
    use std::io::{self, Read, Write};

    /// wrapper → gsmrun: `key \0 rank \0 host` (rank empty when unknown).
    pub const HELLO: u8 = b'H';
    /// wrapper → gsmrun: bytes the program wrote to stdout.
    pub const STDOUT: u8 = b'O';
    /// wrapper → gsmrun: bytes the program wrote to stderr.
    pub const STDERR: u8 = b'E';
    /// wrapper → gsmrun: how the program ended, as [`super::Outcome::encode`].
    pub const EXIT: u8 = b'X';
    /// wrapper → gsmrun: the program is gone after a `KILL`.
    pub const ENDED: u8 = b'D';
    /// wrapper → gsmrun: stages of the rank's job the runtime entered, one byte each (see
    /// [`crate::progress`]); all of them come before the `EXIT` report.
    pub const STATE: u8 = b'S';
    /// gsmrun → wrapper: end the program now.
    pub const KILL: u8 = b'K';
    /// wrapper → gsmrun: the program's state, one byte, at least every
    /// [`crate::supervise::BEAT_EVERY`] and at once when it changes: [`RUNNING`] or [`STOPPED`].
    /// A wrapper that sends none for a while is frozen itself (stopped with its program).
    pub const BEAT: u8 = b'B';
    /// [`BEAT`]'s payload: the program runs (or sleeps, or waits).
    pub const RUNNING: u8 = b'R';
    /// [`BEAT`]'s payload: the program is stopped (SIGSTOP, SIGTSTP, a debugger's stop).
    pub const STOPPED: u8 = b'T';
    /// wrapper → gsmrun: the process that started the wrapper (the launcher's daemon on its
    /// host: Open MPI's `orted`, Hydra's `hydra_pmi_proxy`, `slurmstepd`) is gone; the payload
    /// is its command name. The wrapper ends its program.
    pub const ORPHANED: u8 = b'P';
    /// gsmrun → wrapper, once after `HELLO`: how long (milliseconds, 4 bytes little-endian)
    /// either side waits for an answer from the other's host before taking it for lost
    /// (`--lost-timeout`).
    pub const LOST: u8 = b'L';
    /// gsmrun → wrapper: send the program's process group the signal whose number is the
    /// payload (4 bytes, little-endian); one of [`crate::supervise::FORWARDED`].
    pub const SIGNAL: u8 = b'G';
    /// Largest payload accepted.
    pub const MAX_PAYLOAD: usize = 1 << 20;

    /// Write one frame.
    pub fn write_frame(w: &mut impl Write, tag: u8, payload: &[u8]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(5 + payload.len());
        buf.push(tag);
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        buf.extend_from_slice(payload);
        w.write_all(&buf)?;
        w.flush()
    }

    /// Read one frame; `None` at a clean end of stream.
    pub fn read_frame(r: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
        let mut head = [0u8; 5];
        match r.read_exact(&mut head[..1]) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        r.read_exact(&mut head[1..])?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "control frame too large",
            ));
        }
        let mut payload = vec![0u8; len];
        r.read_exact(&mut payload)?;
        Ok(Some((head[0], payload)))
    }
}

/// How a rank's program ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Exited with this status.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
    /// Could not be started (the message says why).
    NoStart(String),
}

impl Outcome {
    /// Text form on the wire.
    pub fn encode(&self) -> String {
        match self {
            Outcome::Exited(c) => format!("exit {c}"),
            Outcome::Signaled(s) => format!("signal {s}"),
            Outcome::NoStart(m) => format!("nostart {m}"),
        }
    }

    /// Parse [`Outcome::encode`]'s form.
    pub fn decode(text: &str) -> Option<Outcome> {
        let (kind, rest) = text.split_once(' ')?;
        match kind {
            "exit" => rest.parse().ok().map(Outcome::Exited),
            "signal" => rest.parse().ok().map(Outcome::Signaled),
            "nostart" => Some(Outcome::NoStart(rest.to_string())),
            _ => None,
        }
    }

    /// The exit status gsmrun reports for it.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Exited(c) => *c,
            Outcome::Signaled(s) => 128 + s,
            Outcome::NoStart(_) => 127,
        }
    }

    /// Is this a failure that ends the job?
    pub fn failed(&self) -> bool {
        *self != Outcome::Exited(0)
    }

    /// The one line printed for a failing rank.
    pub fn failure_line(&self, rank: &str, host: &str) -> String {
        let what = match self {
            // Open MPI ends the ranks of a host whose daemon it lost (a host gone from the
            // network, a killed `orted`) with this status: the rank is where it showed, not
            // what failed.
            Outcome::Exited(195) => "exited with status 195 (Open MPI's status for a rank \
                                     whose host's daemon it lost: see mpirun's message above)"
                .to_string(),
            Outcome::Exited(c) => format!("exited with status {c}"),
            Outcome::Signaled(s) => format!("was killed by signal {s} ({})", signal_name(*s)),
            Outcome::NoStart(m) => format!("could not start its program: {m}"),
        };
        format!("gsmrun: rank {rank} on host {host} {what}; ending the job")
    }
}

/// How long a new control connection has to present the job's key before it is dropped.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// What every control connection is served with.
#[derive(Clone)]
pub(super) struct Serving {
    pub key: String,
    pub tag: bool,
    /// `--lost-timeout`: a connection whose peer's host does not answer for this long fails.
    pub lost: Duration,
}

pub(super) fn spawn_acceptor(listener: TcpListener, tx: mpsc::Sender<Event>, how: Serving) {
    std::thread::spawn(move || {
        for (conn, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { continue };
            let _ = stream.set_nodelay(true);
            // A wrapper's host cut off (or gone) is noticed by its connection failing.
            let _ = crate::sys::fail_when_unanswered(&stream, how.lost);
            let tx = tx.clone();
            let how = how.clone();
            std::thread::spawn(move || serve(conn, stream, &tx, &how));
        }
    });
}

fn serve(conn: usize, mut stream: TcpStream, tx: &mpsc::Sender<Event>, how: &Serving) {
    let (key, tag) = (how.key.as_str(), how.tag);
    let closed = |tx: &mpsc::Sender<Event>| {
        let _ = tx.send(Event::Closed { conn });
    };
    // Anyone may connect (a port scanner, a stray process of the launcher's); a connection counts
    // as a rank only once it presents the key, and one that says nothing valid in time is dropped.
    let _ = stream.set_read_timeout(Some(HELLO_WAIT));
    let hello = match wire::read_frame(&mut stream) {
        Ok(Some((wire::HELLO, p))) => p,
        _ => return closed(tx),
    };
    let text = String::from_utf8_lossy(&hello).into_owned();
    let mut parts = text.split('\0');
    if parts.next() != Some(key) {
        tracing::warn!(conn, "control connection without the job key; dropped");
        return closed(tx);
    }
    let rank = parts.next().unwrap_or("").to_string();
    let host = parts.next().unwrap_or("?").to_string();
    let lost_ms = (how.lost.as_millis().min(u128::from(u32::MAX)) as u32).to_le_bytes();
    let writer = match stream
        .set_read_timeout(None)
        .and_then(|()| wire::write_frame(&mut stream, wire::LOST, &lost_ms))
        .and_then(|()| stream.try_clone())
    {
        Ok(w) => w,
        Err(_) => return closed(tx),
    };
    // A wrapper frozen with its program does not read: a KILL must not block the supervisor.
    let _ = writer.set_write_timeout(Some(Duration::from_millis(500)));
    let _ = tx.send(Event::Hello {
        conn,
        rank: rank.clone(),
        host,
        writer,
    });
    let prefix = |s: &str| {
        if tag {
            format!("[1,{rank}]<{s}>:").into_bytes()
        } else {
            Vec::new()
        }
    };
    let mut out = LineOut::new(conn, prefix("stdout"), Output::new(false, tx.clone()));
    let mut err = LineOut::new(conn, prefix("stderr"), Output::new(true, tx.clone()));
    loop {
        match wire::read_frame(&mut stream) {
            Ok(Some((wire::STDOUT, p))) => out.push(&p),
            Ok(Some((wire::STDERR, p))) => err.push(&p),
            Ok(Some((wire::EXIT, p))) => {
                out.flush();
                err.flush();
                let text = String::from_utf8_lossy(&p).into_owned();
                match Outcome::decode(&text) {
                    Some(outcome) => {
                        let _ = tx.send(Event::Report { conn, outcome });
                    }
                    None => {
                        let _ = tx.send(Event::BadReport { conn, text });
                    }
                }
            }
            Ok(Some((wire::ENDED, _))) => {
                let _ = tx.send(Event::Ended { conn });
            }
            Ok(Some((wire::STATE, bytes))) => {
                let _ = tx.send(Event::Stages { conn, bytes });
            }
            Ok(Some((wire::ORPHANED, name))) => {
                let parent = String::from_utf8_lossy(&name).into_owned();
                let _ = tx.send(Event::Orphaned { conn, parent });
            }
            Ok(Some((wire::BEAT, state))) => {
                let stopped = state.first() == Some(&wire::STOPPED);
                let _ = tx.send(Event::Beat { conn, stopped });
            }
            Ok(Some((tag, _))) => tracing::warn!(conn, tag, "unknown control frame"),
            Ok(None) => break,
            Err(e) => {
                // The keepalive or the user timeout gave up: the wrapper's host stopped answering.
                if e.kind() == std::io::ErrorKind::TimedOut {
                    let _ = tx.send(Event::Lost { conn });
                }
                break;
            }
        }
    }
    out.flush();
    err.flush();
    closed(tx);
}
