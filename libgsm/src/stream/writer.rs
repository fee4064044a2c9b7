//! The writing end of a stream: within a host, copies into the reader's ring mapped here; between
//! hosts, chunks sent within the credit the reader's answers grant (`remote.rs`).
//! It does not read (`reader.rs`).

use std::cell::{Cell, RefCell};
use std::io::{self, Write};
use std::rc::Rc;
use std::time::Instant;

use super::reader::LIVENESS;

use super::Offer;
use super::ring::{ABORTED, FINISHED, Ring};

/// The writing end of a stream; see the module docs.
#[derive(Debug)]
pub struct Writer {
    mode: Mode,
    id: u64,
    /// Bytes accepted so far (shm: published; remote: sent or staged).
    pos: u64,
    done: bool,
    /// The most written and not yet read, as this writer knew it (a bound checked by the tests).
    most_in_flight: u64,
}

#[derive(Debug)]
enum Mode {
    Shm(Ring),
    Remote(Remote),
}

/// What a writer to another host keeps.
#[derive(Debug)]
pub(super) struct Remote {
    pub(super) dest: usize,
    pub(super) cap: u64,
    pub(super) chunk: usize,
    /// Bytes sent (the next chunk's position).
    pub(super) sent: u64,
    /// The reader's `head` as the latest answer said.
    pub(super) acked: Rc<Cell<u64>>,
    pub(super) outstanding: Rc<Cell<usize>>,
    pub(super) failed: Rc<RefCell<Option<io::Error>>>,
    pub(super) staging: Vec<u8>,
}

fn broken(id: u64, at: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        format!("stream {id}: the reader is gone (after {at} bytes written)"),
    )
}

impl Writer {
    pub(super) fn new(o: Offer) -> io::Result<Writer> {
        if o.capacity < 4096 || o.chunk == 0 || o.chunk > o.capacity || o.capacity > 1 << 40 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "stream {}: the reader offered a ring of {} bytes with chunks of {}",
                    o.id, o.capacity, o.chunk
                ),
            ));
        }
        let me = crate::rank();
        let same_host = o.rank as usize == me
            || (!crate::segment::forced_remote()
                && crate::host_of_rank(o.rank as usize) == crate::host_of_rank(me));
        // A ring this process cannot map (another pid namespace, say) is written through the
        // reader's handler instead, as between hosts.
        let mapped = if same_host {
            Ring::open(o.pid, o.fd, o.id, o.capacity).ok()
        } else {
            None
        };
        let mode = if let Some(ring) = mapped {
            Mode::Shm(ring)
        } else {
            Mode::Remote(Remote {
                dest: o.worker as usize,
                cap: o.capacity,
                chunk: o.chunk as usize,
                sent: 0,
                acked: Rc::new(Cell::new(0)),
                outstanding: Rc::new(Cell::new(0)),
                failed: Rc::new(RefCell::new(None)),
                staging: Vec::with_capacity(o.chunk as usize),
            })
        };
        Ok(Writer {
            mode,
            id: o.id,
            pos: 0,
            done: false,
            most_in_flight: 0,
        })
    }

    /// Bytes written so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The most bytes this writer ever had written and not yet known read: at most the ring's
    /// capacity (the flow control's bound; between hosts, plus the unsent chunk).
    pub fn most_in_flight(&self) -> u64 {
        self.most_in_flight
    }

    /// Waits for free bytes in a mapped ring; returns how many.
    fn room(&mut self) -> io::Result<u64> {
        let Mode::Shm(ring) = &self.mode else {
            unreachable!()
        };
        let tail = self.pos;
        let mut free = ring.free(tail)?;
        if free == 0 {
            // Wait for room itself, not for `head` to move from a value loaded again here: the
            // reader may have moved it (and emptied the ring) since `free` was computed.
            let cap = ring.capacity();
            let mut next_check = Instant::now() + LIVENESS;
            let mut died = false;
            crate::wait_for(|| {
                if ring.head().wrapping_add(cap) != tail || ring.reader_gone() {
                    return true;
                }
                if Instant::now() >= next_check {
                    next_check = Instant::now() + LIVENESS;
                    died = ring.owner() != std::process::id()
                        && crate::sys::segmem::process_gone(ring.owner());
                }
                died
            });
            if died {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    format!(
                        "stream {}: the reader's process ({}) died after {} bytes written",
                        self.id,
                        ring.owner(),
                        self.pos
                    ),
                ));
            }
            free = ring.free(tail)?;
        }
        if ring.reader_gone() {
            return Err(broken(self.id, self.pos));
        }
        self.most_in_flight = self.most_in_flight.max(ring.capacity() - free);
        Ok(free)
    }

    /// Lends up to `max` bytes to fill in place (within a host: the ring's own free bytes);
    /// [`Lent::commit`] publishes the first `n` of them. Waits (this fiber) for room.
    pub fn lend(&mut self, max: usize) -> io::Result<Lent<'_>> {
        if matches!(self.mode, Mode::Shm(_)) {
            self.room()?;
        }
        let Writer { mode, pos, id, .. } = self;
        match mode {
            Mode::Shm(ring) => {
                let free = ring.free(*pos)?;
                let buf = ring.writable(*pos, free, max);
                Ok(Lent {
                    buf: LentBuf::Ring(buf, ring),
                    writer_pos: pos,
                    remote: None,
                    id: *id,
                })
            }
            Mode::Remote(r) => {
                let n = max.min(r.chunk);
                Ok(Lent {
                    buf: LentBuf::Owned(vec![0; n]),
                    writer_pos: pos,
                    remote: Some(r),
                    id: *id,
                })
            }
        }
    }

    /// Ends the stream: everything written reaches the reader, then its end of file.
    pub fn finish(mut self) -> io::Result<()> {
        self.end()
    }

    fn end(&mut self) -> io::Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        match &mut self.mode {
            Mode::Shm(ring) => {
                ring.set_writer_state(FINISHED);
                Ok(())
            }
            Mode::Remote(r) => {
                r.send_staged(self.id)?;
                r.drain(self.id)?;
                r.fin(self.id, false)
            }
        }
    }
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.done {
            return Err(io::Error::other(format!(
                "stream {}: write after finish",
                self.id
            )));
        }
        match &self.mode {
            Mode::Shm(_) => {
                let free = self.room()?;
                let Mode::Shm(ring) = &self.mode else {
                    unreachable!()
                };
                let n = (free as usize).min(buf.len());
                ring.copy_in(self.pos, &buf[..n]);
                self.pos += n as u64;
                ring.publish(self.pos);
                Ok(n)
            }
            Mode::Remote(_) => {
                let Mode::Remote(r) = &mut self.mode else {
                    unreachable!()
                };
                let n = (r.chunk - r.staging.len()).min(buf.len());
                r.staging.extend_from_slice(&buf[..n]);
                self.pos += n as u64;
                if r.staging.len() == r.chunk {
                    r.send_staged(self.id)?;
                }
                self.most_in_flight = self
                    .most_in_flight
                    .max(r.sent - r.acked.get() + r.staging.len() as u64);
                Ok(n)
            }
        }
    }

    /// Within a host every write is already in the ring; between hosts this sends the staged
    /// chunk (it does not wait for the reader to read it).
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.mode {
            Mode::Shm(_) => Ok(()),
            Mode::Remote(r) => r.send_staged(self.id),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if std::thread::panicking() {
            self.done = true;
            match &mut self.mode {
                Mode::Shm(ring) => ring.set_writer_state(ABORTED),
                Mode::Remote(r) => {
                    let _ = r.fin(self.id, true);
                }
            }
        } else {
            let _ = self.end();
        }
    }
}

enum LentBuf<'a> {
    Ring(&'a mut [u8], &'a Ring),
    Owned(Vec<u8>),
}

/// Bytes lent by [`Writer::lend`]: fill them, then [`commit`](Lent::commit) how many to send.
/// Dropped without a commit, nothing is sent.
pub struct Lent<'a> {
    buf: LentBuf<'a>,
    writer_pos: &'a mut u64,
    remote: Option<&'a mut Remote>,
    id: u64,
}

impl std::fmt::Debug for Lent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lent").field("len", &self.len()).finish()
    }
}

impl Lent<'_> {
    /// The lent bytes.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.buf {
            LentBuf::Ring(b, _) => b,
            LentBuf::Owned(v) => v,
        }
    }

    /// How many bytes are lent.
    pub fn len(&self) -> usize {
        match &self.buf {
            LentBuf::Ring(b, _) => b.len(),
            LentBuf::Owned(v) => v.len(),
        }
    }

    /// Whether nothing was lent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Publishes the first `n` lent bytes to the reader.
    ///
    /// # Panics
    /// If `n` is more than was lent.
    pub fn commit(self, n: usize) -> io::Result<()> {
        assert!(
            n <= self.len(),
            "commit of {n} bytes of {} lent",
            self.len()
        );
        match self.buf {
            LentBuf::Ring(_, ring) => {
                *self.writer_pos += n as u64;
                ring.publish(*self.writer_pos);
                Ok(())
            }
            LentBuf::Owned(mut v) => {
                v.truncate(n);
                *self.writer_pos += n as u64;
                let r = self.remote.expect("a remote lend");
                r.send_chunk(self.id, v)
            }
        }
    }
}
