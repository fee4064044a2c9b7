//! A stream between hosts: the writer's chunks as delegated requests to the reader's worker,
//! whose handler ([`Serve`], runtime code) copies each into the reader's ring and answers with
//! the reader's `head`, the writer's credit. The writer sends a chunk only when
//! `sent + len - head <= capacity`, so the handler always has room; a chunk that would overrun,
//! arrives out of order or comes from a worker that is not the stream's writer is refused.
//!
//! Each chunk is sent from a fiber of its own on the writer's worker, so that several are in
//! flight (the requests keep their order: one FIFO ring per pair of workers, and each names its
//! position, which the handler checks). A writer out of credit with nothing in flight asks the
//! reader's `head` again after a pause (20 µs, doubling to 1 ms). See `stream/README.md`.

use std::io;
use std::time::Duration;

use super::ring::{ABORTED, FINISHED, OPEN};
use super::ring_of;
use super::writer::Remote;
use crate::error::DelegationError;
use crate::segment::raw_arg;
use crate::trust::{block_on, captured};
use crate::wire::codeptr;
use crate::wire::record::{Request, RequestReader, Src};
use crate::worker::entry::{Delegated, trampoline};
use crate::worker::{NO_REPLY, WorkerCore};

const CHUNK: u8 = 1;
const CREDIT: u8 = 2;
const FIN: u8 = 3;
const ABORT: u8 = 4;

/// A request's fixed part (plain integers: any bytes are some `Ask`).
#[derive(Clone, Copy)]
#[repr(C)]
struct Ask {
    id: u64,
    pos: u64,
    kind: u8,
}

/// The answer: the reader's head, or why not (`true`: the reader is gone).
type Answer = Result<u64, (bool, String)>;

fn to_io(id: u64, r: Result<Answer, DelegationError>) -> io::Result<u64> {
    match r {
        Ok(Ok(h)) => Ok(h),
        Ok(Err((true, m))) => Err(io::Error::new(
            io::ErrorKind::BrokenPipe,
            format!("stream {id}: {m}"),
        )),
        Ok(Err((false, m))) => Err(io::Error::other(format!("stream {id}: {m}"))),
        Err(e) => Err(io::Error::other(format!(
            "stream {id}: the request to the reader failed: {e}"
        ))),
    }
}

/// One request to the reader's worker; a chunk's bytes travel raw (no encoding to copy them
/// through), read back with `raw_arg`.
fn request(dest: usize, a: Ask, data: Option<&[u8]>) -> Result<Answer, DelegationError> {
    let core = crate::worker::core_or_panic("a stream write");
    let tramp = trampoline::<Serve>();
    match data {
        Some(d) => block_on(
            core,
            dest,
            tramp,
            0,
            0,
            Src::of(&a),
            Some(Src::slice(d)),
            true,
        ),
        None => block_on(core, dest, tramp, 0, 0, Src::of(&a), None, false),
    }
}

impl Remote {
    fn check(&self) -> io::Result<()> {
        match self.failed.borrow_mut().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Sends what is staged, if anything.
    pub(super) fn send_staged(&mut self, id: u64) -> io::Result<()> {
        if self.staging.is_empty() {
            return self.check();
        }
        let v = std::mem::replace(&mut self.staging, Vec::with_capacity(self.chunk));
        self.send_chunk(id, v)
    }

    /// Sends one chunk once the reader's ring has room for it.
    pub(super) fn send_chunk(&mut self, id: u64, data: Vec<u8>) -> io::Result<()> {
        let len = data.len() as u64;
        let mut pause = Duration::from_micros(20);
        while self.sent + len - self.acked.get() > self.cap {
            self.check()?;
            if self.outstanding.get() > 0 {
                let (a, o) = (self.acked.get(), self.outstanding.get());
                crate::wait_for(|| self.acked.get() != a || self.outstanding.get() != o);
                continue;
            }
            let head = to_io(
                id,
                request(
                    self.dest,
                    Ask {
                        id,
                        pos: self.sent,
                        kind: CREDIT,
                    },
                    None,
                ),
            )?;
            if head <= self.acked.get() {
                crate::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(1));
            }
            self.acked.set(self.acked.get().max(head));
        }
        self.check()?;
        let (dest, pos) = (self.dest, self.sent);
        let (acked, out, failed) = (
            self.acked.clone(),
            self.outstanding.clone(),
            self.failed.clone(),
        );
        out.set(out.get() + 1);
        self.sent += len;
        drop(crate::spawn(move || {
            match to_io(
                id,
                request(
                    dest,
                    Ask {
                        id,
                        pos,
                        kind: CHUNK,
                    },
                    Some(&data),
                ),
            ) {
                Ok(h) => acked.set(acked.get().max(h)),
                Err(e) => {
                    failed.borrow_mut().get_or_insert(e);
                }
            }
            out.set(out.get() - 1);
        }));
        Ok(())
    }

    /// Waits until every chunk sent is answered.
    pub(super) fn drain(&mut self, _id: u64) -> io::Result<()> {
        let out = self.outstanding.clone();
        if out.get() > 0 {
            crate::wait_for(|| out.get() == 0);
        }
        self.check()
    }

    /// Ends the stream at `sent`: finished (waiting for the answer), or aborted (without).
    pub(super) fn fin(&mut self, id: u64, abort: bool) -> io::Result<()> {
        if abort {
            let Some(core) = crate::worker::core() else {
                return Ok(());
            };
            let a = Ask {
                id,
                pos: self.sent,
                kind: ABORT,
            };
            let code = Some(codeptr::offset_of(trampoline::<Serve>() as usize));
            core.send_request(self.dest, code, 0, 0, NO_REPLY, Src::of(&a), None, false);
            return Ok(());
        }
        to_io(
            id,
            request(
                self.dest,
                Ask {
                    id,
                    pos: self.sent,
                    kind: FIN,
                },
                None,
            ),
        )
        .map(drop)
    }
}

/// The handler of stream requests on the reader's worker.
pub(crate) struct Serve;

impl Serve {
    fn answer(client: usize, a: Ask, d: &[u8]) -> Answer {
        let Some(e) = ring_of(a.id) else {
            return Err((true, "the reader is gone".into()));
        };
        if e.writer != client {
            return Err((
                false,
                format!(
                    "worker {client} is not this stream's writer (worker {})",
                    e.writer
                ),
            ));
        }
        let ring = &e.ring;
        if ring.reader_gone() {
            return Err((true, "the reader is gone".into()));
        }
        let tail = ring.tail();
        match a.kind {
            CREDIT => {}
            CHUNK => {
                if a.pos != tail || ring.writer_state() != OPEN {
                    return Err((
                        false,
                        format!("a chunk at {} when the stream is at {tail}", a.pos),
                    ));
                }
                let free = ring.free(tail).map_err(|e| (false, e.to_string()))?;
                if d.len() as u64 > free {
                    return Err((
                        false,
                        format!(
                            "a chunk of {} bytes with {free} free: the writer overran its credit",
                            d.len()
                        ),
                    ));
                }
                ring.copy_in(tail, d);
                ring.publish(tail + d.len() as u64);
            }
            FIN | ABORT => {
                if a.kind == FIN && a.pos != tail {
                    return Err((
                        false,
                        format!("the end at {} when the stream is at {tail}", a.pos),
                    ));
                }
                ring.set_writer_state(if a.kind == FIN { FINISHED } else { ABORTED });
            }
            k => return Err((false, format!("unknown stream request {k}"))),
        }
        Ok(ring.head())
    }
}

impl Delegated for Serve {
    /// # Safety
    /// `rec` must be a record encoded by `request` or `fin` (captured bytes: one `Ask`; for a
    /// chunk, the argument is the chunk's raw bytes).
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        _more: &mut RequestReader<'_>,
    ) {
        // SAFETY: the sender copied one `Ask` there (size checked by `captured`; any bytes of that
        // size are an `Ask`).
        let a = match unsafe { captured::<Ask>(rec) } {
            Ok(a) => a,
            Err(e) => return core.outbox().respond::<Answer>(client, rec.req, Err(e)),
        };
        let data = if a.kind == CHUNK { raw_arg(rec) } else { &[] };
        let r = Serve::answer(client, a, data);
        if rec.req != NO_REPLY {
            core.outbox().respond(client, rec.req, Ok(r));
        }
    }
}
