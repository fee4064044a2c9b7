//! Streams of bytes from a writer on one worker to a reader on another (of any rank): the writer
//! is a [`std::io::Write`], the reader a [`std::io::Read`] and [`std::io::BufRead`], carried by a
//! byte ring in the reader's memory with credit-based flow control (after the Network Vortex's
//! streams: a producer and a consumer, the consumer's buffer bounding what is in flight).
//!
//! ```
//! use std::io::{BufRead, Write};
//! use gossamer::{WorkerId, stream};
//! gossamer::run(gossamer::Config::default().workers(2), || {
//!     let w = gossamer::spawn_on(WorkerId::new(1), || {
//!         let mut w = stream::connect(WorkerId::new(0), 7).unwrap();
//!         w.write_all(b"one\ntwo\n").unwrap();
//!         w.finish().unwrap();
//!     });
//!     let r = stream::accept(WorkerId::new(1), 7).unwrap();
//!     let lines: Vec<String> = r.lines().map(|l| l.unwrap()).collect();
//!     assert_eq!(lines, ["one", "two"]);
//!     w.join();
//! })
//! .unwrap();
//! ```
//!
//! **Opening.** The reader calls [`accept`]`(writer_worker, tag)` on its worker and the writer
//! [`connect`]`(reader_worker, tag)` on its worker, in either order: the reader makes the ring
//! and sends its description to the writer's worker as a tagged message (tags with bits 63..61 =
//! `011`; the stream's tag goes in the low 61 bits). Several streams between the same workers
//! or ranks differ by tag.
//!
//! **Carrying.** Within a host the writer maps the reader's ring and copies into it; no fiber runs
//! on the reader's side to receive. Between hosts (or with `GSM_FABRIC=tcp` or `ofi`) the writer sends
//! chunks of up to [`Options::chunk`] bytes as delegated requests to the reader's worker, whose
//! handler (`remote.rs`, runtime code) copies them into the ring; the writer sends a chunk only
//! when the ring has room for it (credit, learnt from the answers), so at most one ring's worth
//! is in flight. [`Writer::lend`] lends the writer the ring's free bytes to fill in place (within
//! a host; between hosts it lends a buffer that is sent on commit), and [`BufRead::fill_buf`]
//! lends the reader the ring's published bytes: the zero-copy form.
//!
//! **Ending.** [`Writer::finish`] (or dropping the writer) ends the stream: the reader reads what
//! is left, then end of file. A writer dropped while its fiber panics aborts the stream: the
//! reader's next read fails with [`std::io::ErrorKind::ConnectionAborted`]. A writer whose
//! process died on the same host is seen by the reader within a few milliseconds of waiting
//! (`ConnectionAborted` too); on another host the job's fate sharing ends the run. A reader
//! dropped early makes the writer's next write fail with `BrokenPipe`.
//!
//! **Memory.** The ring holds [`Options::capacity`] bytes (1 MiB by default) plus a 4 KiB header,
//! in the reader's process. A writer within a host holds nothing; between hosts it holds its
//! unsent chunk and up to one ring's worth of chunks in flight.
//!
//! This module does not multiplex several writers into one stream, nor reorder or retransmit
//! (the rings below are reliable and ordered). See `stream/README.md`.

mod nonblocking;
mod reader;
mod remote;
mod ring;
mod writer;

use std::collections::HashMap;
use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::WorkerId;
pub use reader::Reader;
pub use writer::{Lent, Writer};

/// The stream's sizes.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The ring's bytes (at least 4 KiB).
    pub capacity: usize,
    /// The largest chunk sent between hosts (at most the capacity).
    pub chunk: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            capacity: 1 << 20,
            chunk: 128 << 10,
        }
    }
}

/// What the reader tells the writer.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Offer {
    rank: u32,
    worker: u32,
    pid: u32,
    fd: u32,
    id: u64,
    capacity: u64,
    chunk: u64,
}

/// A ring this process reads, as its handler of remote chunks finds it.
#[derive(Debug)]
struct Entry {
    ring: ring::Ring,
    /// The only worker whose chunks are taken.
    writer: usize,
}

static RINGS: Mutex<Option<HashMap<u64, Arc<Entry>>>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn ring_of(id: u64) -> Option<Arc<Entry>> {
    RINGS.lock().ok()?.as_ref()?.get(&id).cloned()
}

fn tag_of(tag: u64) -> u64 {
    0b011 << 61 | tag & ((1 << 61) - 1)
}

/// What a stream's message tag stands for in the runtime's reports ([`crate::name_tags`]): a
/// `connect` that waits names the stream and the `accept` it waits for; an offer nobody took
/// names the `connect` that never came.
fn name_tag(tag: u64) -> Option<String> {
    (tag >> 61 == 0b011).then(|| {
        let t = tag & ((1 << 61) - 1);
        format!(
            "stream {t}'s offer: stream::connect(reader, {t}) waits for it until the reader calls \
             stream::accept(writer, {t}); an offer left unreceived had no stream::connect"
        )
    })
}

/// Opens the reading end of the stream `tag` from worker `writer` (see the module docs).
pub fn accept(writer: WorkerId, tag: u64) -> io::Result<Reader> {
    accept_with(writer, tag, Options::default())
}

/// [`accept`] with other sizes.
pub fn accept_with(writer: WorkerId, tag: u64, opts: Options) -> io::Result<Reader> {
    if opts.capacity < 4096 || opts.chunk == 0 || opts.chunk > opts.capacity {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "stream options {opts:?}: the capacity must be at least 4096 and the chunk between 1 and the capacity"
            ),
        ));
    }
    crate::name_tags(name_tag);
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ring = ring::Ring::create(id, opts.capacity)?;
    let offer = Offer {
        rank: crate::rank() as u32,
        worker: crate::current_worker().index() as u32,
        pid: std::process::id(),
        fd: ring.fd(),
        id,
        capacity: opts.capacity as u64,
        chunk: opts.chunk as u64,
    };
    let entry = Arc::new(Entry {
        ring,
        writer: writer.index(),
    });
    RINGS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(id, entry.clone());
    crate::send(writer, tag_of(tag), offer);
    crate::flush();
    Ok(Reader::new(entry, id))
}

/// Opens the writing end of the stream `tag` to worker `reader`, waiting (this fiber only) for
/// the reader's [`accept`].
pub fn connect(reader: WorkerId, tag: u64) -> io::Result<Writer> {
    crate::name_tags(name_tag);
    let offer: Offer = crate::recv(reader, tag_of(tag));
    if offer.worker as usize != reader.index() {
        return Err(io::Error::other(format!(
            "stream {tag}: the offer came from worker {}, not {}",
            offer.worker,
            reader.index()
        )));
    }
    Writer::new(offer)
}

#[cfg(test)]
mod tests;
