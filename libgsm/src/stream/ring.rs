//! A stream's ring: a byte ring in a memory file of the reader's process, written by one
//! producer (the writer itself within a host, or the reader rank's handler of the writer's
//! chunks between hosts) and read by the reader.
//!
//! ```text
//! offset 0     magic "GSMSTRM1", then capacity, stream id    written once by the reader
//!        64    tail: bytes produced so far                   producer only (Release)
//!        128   head: bytes consumed so far                   reader only (Release)
//!        192   writer state: 0 open, 1 finished, 2 aborted   producer only
//!        200   reader state: 0 open, 1 gone                  reader only
//!        208   the writer's pid (0 until it attached)        the writer
//!        4096  the data: `capacity` bytes, position p at p mod capacity
//! ```
//!
//! Credit is `capacity - (tail - head)`: the producer writes only into free bytes, then publishes
//! `tail` with Release; the reader loads `tail` with Acquire, reads, and gives bytes back by
//! storing `head` with Release (the slot ring's protocol, `wire/README.md`, on bytes instead of
//! slots). Values read from the other side are checked (`tail` never behind `head`
//! nor more than `capacity` ahead), since the other side is another process.

use std::io;
use std::sync::atomic::Ordering;

use crate::segment::copy::copy;
use crate::segment::memfile::MemFile;

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"GSMSTRM1");
const CAP: usize = 8;
const ID: usize = 16;
const TAIL: usize = 64;
const HEAD: usize = 128;
const WSTATE: usize = 192;
const RSTATE: usize = 200;
const WPID: usize = 208;
pub(crate) const DATA: usize = 4096;

pub(crate) const OPEN: u64 = 0;
pub(crate) const FINISHED: u64 = 1;
pub(crate) const ABORTED: u64 = 2;

/// A ring over a mapped memory file (the reader's own, or a writer's mapping of it).
#[derive(Debug)]
pub(crate) struct Ring {
    file: MemFile,
    cap: u64,
    /// The reader's process (the file's owner).
    owner: u32,
}

impl Ring {
    /// The reader's new ring of `cap` bytes for stream `id`.
    pub(crate) fn create(id: u64, cap: usize) -> io::Result<Ring> {
        let name = c"gsm-stream";
        let file = MemFile::create(name, DATA + cap)?;
        file.word(CAP).store(cap as u64, Ordering::Relaxed);
        file.word(ID).store(id, Ordering::Relaxed);
        file.word(0).store(MAGIC, Ordering::Release);
        Ok(Ring {
            file,
            cap: cap as u64,
            owner: std::process::id(),
        })
    }

    /// The writer's mapping of the reader's ring: descriptor `fd` of process `pid`, checked to be
    /// stream `id` of `cap` bytes.
    pub(crate) fn open(pid: u32, fd: u32, id: u64, cap: u64) -> io::Result<Ring> {
        let want = (DATA as u64)
            .checked_add(cap)
            .filter(|&n| n <= isize::MAX as u64);
        let want = want.ok_or_else(|| io::Error::other(format!("a ring of {cap} bytes")))?;
        let file = MemFile::open(pid, fd, want as usize)?;
        if file.word(0).load(Ordering::Acquire) != MAGIC
            || file.word(CAP).load(Ordering::Relaxed) != cap
            || file.word(ID).load(Ordering::Relaxed) != id
        {
            return Err(io::Error::other(
                "the reader's file is not this stream's ring",
            ));
        }
        file.word(WPID)
            .store(u64::from(std::process::id()), Ordering::Release);
        Ok(Ring {
            file,
            cap,
            owner: pid,
        })
    }

    pub(crate) fn fd(&self) -> u32 {
        self.file.raw_fd()
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.cap
    }

    pub(crate) fn tail(&self) -> u64 {
        self.file.word(TAIL).load(Ordering::Acquire)
    }

    pub(crate) fn head(&self) -> u64 {
        self.file.word(HEAD).load(Ordering::Acquire)
    }

    pub(crate) fn writer_state(&self) -> u64 {
        self.file.word(WSTATE).load(Ordering::Acquire)
    }

    pub(crate) fn set_writer_state(&self, s: u64) {
        self.file.word(WSTATE).store(s, Ordering::Release);
    }

    pub(crate) fn reader_gone(&self) -> bool {
        self.file.word(RSTATE).load(Ordering::Acquire) != 0
    }

    pub(crate) fn set_reader_gone(&self) {
        self.file.word(RSTATE).store(1, Ordering::Release);
    }

    /// The reader's process id.
    pub(crate) fn owner(&self) -> u32 {
        self.owner
    }

    pub(crate) fn writer_pid(&self) -> u32 {
        self.file.word(WPID).load(Ordering::Acquire) as u32
    }

    /// Free bytes as the producer sees them, checking what the reader wrote.
    pub(crate) fn free(&self, tail: u64) -> io::Result<u64> {
        let head = self.head();
        if head > tail || tail - head > self.cap {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "stream ring corrupt: head {head}, tail {tail}, capacity {}",
                    self.cap
                ),
            ));
        }
        Ok(self.cap - (tail - head))
    }

    /// The byte at stream position `pos`.
    fn at(&self, pos: u64) -> *mut u8 {
        // SAFETY: `pos % cap < cap`, and the mapping holds DATA + cap bytes (create/open).
        unsafe {
            self.file
                .base()
                .as_ptr()
                .add(DATA + (pos % self.cap) as usize)
        }
    }

    /// The contiguous free bytes from `tail` on, at most `max` (the producer's own bytes until it
    /// publishes them).
    #[allow(clippy::mut_from_ref)] // the producer's bytes, lent once at a time (see SAFETY)
    pub(crate) fn writable(&self, tail: u64, free: u64, max: usize) -> &mut [u8] {
        let room = (self.cap - tail % self.cap).min(free).min(max as u64) as usize;
        // SAFETY: `room` bytes from `tail` are free (no reader looks at them until `publish`) and
        // inside the data; one producer exists, so no other `&mut` aliases them.
        unsafe { std::slice::from_raw_parts_mut(self.at(tail), room) }
    }

    /// Copies `data` in at `tail` (it must fit in the free bytes); wraps as needed.
    pub(crate) fn copy_in(&self, tail: u64, data: &[u8]) {
        let first = ((self.cap - tail % self.cap) as usize).min(data.len());
        // SAFETY: free bytes of the data area (the caller checked `free`), ours until published.
        unsafe {
            copy(data.as_ptr(), self.at(tail), first);
            copy(data[first..].as_ptr(), self.at(0), data.len() - first);
        }
    }

    /// Publishes bytes up to `tail`.
    pub(crate) fn publish(&self, tail: u64) {
        self.file.word(TAIL).store(tail, Ordering::Release);
    }

    /// The contiguous published bytes from `head` (reader side), checking the producer's tail.
    pub(crate) fn readable(&self, head: u64) -> io::Result<&[u8]> {
        let tail = self.tail();
        if tail < head || tail - head > self.cap {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "stream ring corrupt: head {head}, tail {tail}, capacity {}",
                    self.cap
                ),
            ));
        }
        let n = (tail - head).min(self.cap - head % self.cap) as usize;
        // SAFETY: published bytes (Acquire on `tail`), which the producer does not touch until
        // `head` passes them.
        Ok(unsafe { std::slice::from_raw_parts(self.at(head), n) })
    }

    /// Gives bytes up to `head` back to the producer.
    pub(crate) fn release(&self, head: u64) {
        self.file.word(HEAD).store(head, Ordering::Release);
    }
}
