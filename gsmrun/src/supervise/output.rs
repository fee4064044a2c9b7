//! Output forwarding: the ranks' stdout and stderr (from their wrappers) and the launcher's, to
//! gsmrun's own, whole lines at a time so that ranks do not interleave inside a line, tagged with
//! `[1,RANK]<stdout>:` under `--tag-output`; and gsmrun's own lines ([`say`]). A write that fails
//! is reported to the supervisor once ([`Event::OutputFailed`]); what to do then is its choice.

use super::Event;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// Writes one line of gsmrun's own to stderr. Unlike `eprintln!`, a stderr that cannot be written
/// (a closed pipe) does not panic: the job still has to be ended.
pub(super) fn say(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

pub(super) fn join_bounded(a: Option<mpsc::Receiver<()>>, b: Option<mpsc::Receiver<()>>) {
    let deadline = Instant::now() + Duration::from_secs(1);
    for r in [a, b].into_iter().flatten() {
        let _ = r.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

/// Copy the launcher's stdout or stderr to ours, line by line, until `quiet` is set. A write
/// that fails is reported on `tx` once ([`Event::OutputFailed`]); later lines are dropped.
pub(super) fn forward_launcher(
    pipe: Option<impl Read + Send + 'static>,
    is_err: bool,
    quiet: Arc<AtomicBool>,
    tx: mpsc::Sender<Event>,
) -> Option<mpsc::Receiver<()>> {
    let pipe = pipe?;
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut line = Vec::new();
        let mut out = Output::new(is_err, tx);
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if quiet.load(Ordering::SeqCst) {
                        continue;
                    }
                    out.write(&line);
                }
            }
        }
        let _ = done_tx.send(());
    });
    Some(done_rx)
}

/// gsmrun's own stdout or stderr, as the job's output reaches it. A write that fails is reported
/// to the supervisor once and ends the job ([`Event::OutputFailed`]): a reader that closed the
/// pipe (`gsmrun … | head`) wants no more, and output that cannot be written (a full disk) must
/// not be dropped while the job runs on. Later writes are dropped without a word.
pub(super) struct Output {
    is_err: bool,
    tx: Option<mpsc::Sender<Event>>,
}

impl Output {
    pub(super) fn new(is_err: bool, tx: mpsc::Sender<Event>) -> Self {
        Output {
            is_err,
            tx: Some(tx),
        }
    }

    pub(super) fn write(&mut self, bytes: &[u8]) {
        if self.tx.is_none() {
            return;
        }
        let r = if self.is_err {
            io::stderr().lock().write_all(bytes)
        } else {
            let mut o = io::stdout().lock();
            o.write_all(bytes).and_then(|()| o.flush())
        };
        if let Err(error) = r {
            if let Some(tx) = self.tx.take() {
                let _ = tx.send(Event::OutputFailed {
                    stderr: self.is_err,
                    error,
                });
            }
        }
    }
}

/// Per-stream line buffer: output is written a whole line at a time so ranks do not interleave
/// inside a line. A line longer than [`PIECE`] goes out in pieces (memory stays bounded); its
/// stream then holds the [`Turn`] of gsmrun's stdout or stderr until the line ends, and only its
/// first piece is tagged.
pub(super) struct LineOut {
    buf: Vec<u8>,
    prefix: Vec<u8>,
    out: Output,
    /// The connection whose stream this is (the owner's name in the [`Turn`]).
    conn: usize,
    /// The last piece written ended inside a line.
    mid_line: bool,
}

/// Most bytes of one line a stream holds back before it writes them as a piece.
const PIECE: usize = 64 * 1024;

/// How long a stream waits for another one's long line to end before it writes anyway: the
/// rest of that line normally follows within milliseconds, but a rank stopped in the middle of a
/// line must not hold every other rank's output (and the reports behind it) for ever.
pub(super) const TURN_WAIT: Duration = Duration::from_secs(1);

/// Which connection's stream is in the middle of a line on one of gsmrun's outputs.
pub(super) struct Turn {
    owner: std::sync::Mutex<Option<usize>>,
    free: std::sync::Condvar,
}

impl Turn {
    pub(super) const fn new() -> Self {
        Turn {
            owner: std::sync::Mutex::new(None),
            free: std::sync::Condvar::new(),
        }
    }

    /// Waits (at most `wait`) until no other stream than `conn`'s is inside a line, writes with
    /// `write`, and then owns the output if `mid_line` (the write ended inside a line) or frees it.
    ///
    /// A stream that has held the output for `wait` without ending its line (a progress bar
    /// drawn with `\r`, a rank stopped mid-line) loses it to the stream that waited: the others
    /// then wait for it once, not at each write. (They waited a second at every line, so that a
    /// rank's ten lines took ten seconds, and its failure report came behind them.)
    pub(super) fn write_as(
        &self,
        conn: usize,
        wait: Duration,
        mid_line: bool,
        write: impl FnOnce(),
    ) {
        let owner = self.owner.lock().unwrap_or_else(|p| p.into_inner());
        let (mut owner, waited) = self
            .free
            .wait_timeout_while(owner, wait, |o| o.is_some_and(|o| o != conn))
            .unwrap_or_else(|p| p.into_inner());
        write();
        if mid_line {
            *owner = Some(conn);
        } else if *owner == Some(conn) || waited.timed_out() {
            *owner = None;
            self.free.notify_all();
        }
    }
}

/// The [`Turn`]s of gsmrun's stdout and stderr.
static TURNS: [Turn; 2] = [Turn::new(), Turn::new()];

impl LineOut {
    pub(super) fn new(conn: usize, prefix: Vec<u8>, out: Output) -> Self {
        LineOut {
            buf: Vec::new(),
            prefix,
            out,
            conn,
            mid_line: false,
        }
    }

    pub(super) fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
        if let Some(pos) = self.buf.iter().rposition(|&b| b == b'\n') {
            let rest = self.buf.split_off(pos + 1);
            let lines = std::mem::replace(&mut self.buf, rest);
            self.emit(&lines, false);
        } else if self.buf.len() > PIECE {
            let piece = std::mem::take(&mut self.buf);
            self.emit(&piece, true);
        }
    }

    /// Writes what is left of the last line. Without `--tag-output` it goes out as it is, so the
    /// job's bytes reach gsmrun's stdout unchanged (as `mpirun` passes them: a binary dump or a
    /// last line without a newline stays exact). Tagged output is made of lines, so there the
    /// tagged remainder gets its newline. Either way the stream's line is over: no more of it
    /// comes, so the output is free for the others.
    pub(super) fn flush(&mut self) {
        if !self.buf.is_empty() || self.mid_line {
            let mut rest = std::mem::take(&mut self.buf);
            if !self.prefix.is_empty() {
                rest.push(b'\n');
            }
            self.emit(&rest, false);
        }
    }

    /// Writes `bytes`, which end a line unless `mid_line`; each line is tagged, except the
    /// continuation of a line whose start an earlier piece wrote.
    fn emit(&mut self, bytes: &[u8], mid_line: bool) {
        let out = tagged(&self.prefix, bytes, self.mid_line);
        let turn = &TURNS[usize::from(self.out.is_err)];
        turn.write_as(self.conn, TURN_WAIT, mid_line, || self.out.write(&out));
        self.mid_line = mid_line;
    }
}

/// `bytes` with `prefix` before each line, except the first when it `continues` a line whose
/// start was written before.
pub(super) fn tagged(prefix: &[u8], bytes: &[u8], continues: bool) -> Vec<u8> {
    if prefix.is_empty() {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len() + 2 * prefix.len());
    for (i, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        if i > 0 || !continues {
            out.extend_from_slice(prefix);
        }
        out.extend_from_slice(line);
    }
    out
}
