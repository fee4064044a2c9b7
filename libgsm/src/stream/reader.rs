//! The reading end of a stream: `Read` and `BufRead` over the ring in this process, waiting
//! (the fiber only) for bytes, end of stream, or a writer that died or aborted.
//! It does not receive chunks from other hosts (`remote.rs` does, into the same ring).

use std::io::{self, BufRead, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Entry;
use super::ring::{ABORTED, FINISHED, OPEN};

/// How often a waiting reader (or a writer waiting for room) asks whether a writer process of its host is still alive.
pub(super) const LIVENESS: Duration = Duration::from_millis(5);

/// The reading end of a stream; see the module docs. Dropping it tells the writer (its writes
/// then fail with `BrokenPipe`).
#[derive(Debug)]
pub struct Reader {
    entry: Arc<Entry>,
    id: u64,
    head: u64,
}

impl Reader {
    pub(super) fn new(entry: Arc<Entry>, id: u64) -> Reader {
        Reader { entry, id, head: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> u64 {
        self.head
    }

    /// Bytes written and not yet read (at most the capacity).
    pub fn buffered(&self) -> u64 {
        self.entry.ring.tail().saturating_sub(self.head)
    }

    /// The ring's capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.entry.ring.capacity()
    }

    /// The writer process (on this host) is gone without finishing.
    fn writer_died(&self) -> bool {
        let pid = self.entry.ring.writer_pid();
        pid != 0 && pid != std::process::id() && crate::sys::segmem::process_gone(pid)
    }

    /// Waits until the ring has bytes past `head` or the writer's state changes.
    fn wait(&self) -> io::Result<()> {
        let ring = &self.entry.ring;
        let mut next_check = Instant::now() + LIVENESS;
        let mut died = false;
        crate::wait_for(|| {
            if ring.tail() != self.head || ring.writer_state() != OPEN {
                return true;
            }
            let now = Instant::now();
            if now >= next_check {
                next_check = now + LIVENESS;
                died = self.writer_died();
            }
            died
        });
        if died && ring.tail() == self.head && ring.writer_state() == OPEN {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!(
                    "stream {}: the writer's process ({}) died after {} bytes, without finishing",
                    self.id,
                    ring.writer_pid(),
                    self.head
                ),
            ));
        }
        Ok(())
    }
}

impl BufRead for Reader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        loop {
            let state = self.entry.ring.writer_state();
            let n = self.entry.ring.readable(self.head)?.len();
            if n > 0 {
                return self.entry.ring.readable(self.head);
            }
            match state {
                FINISHED => return Ok(&[]),
                ABORTED => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        format!(
                            "stream {}: the writer aborted after {} bytes",
                            self.id, self.head
                        ),
                    ));
                }
                OPEN => self.wait()?,
                s => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("stream {}: the writer's state word holds {s}", self.id),
                    ));
                }
            }
        }
    }

    fn consume(&mut self, amt: usize) {
        self.head += amt as u64;
        self.entry.ring.release(self.head);
    }
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let src = self.fill_buf()?;
        let n = src.len().min(buf.len());
        // SAFETY: `n` bytes fit both; the ring's bytes and the caller's buffer do not overlap.
        unsafe { crate::segment::copy::copy(src.as_ptr(), buf.as_mut_ptr(), n) };
        self.consume(n);
        Ok(n)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.entry.ring.set_reader_gone();
        if let Ok(mut m) = super::RINGS.lock() {
            if let Some(m) = m.as_mut() {
                m.remove(&self.id);
            }
        }
    }
}
