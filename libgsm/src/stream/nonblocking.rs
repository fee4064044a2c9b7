//! The `_async` forms of a stream's reads and writes: each moves the reader or writer into a
//! fiber of its own on this worker, which does the blocking call, and the [`Promise`] gives the
//! reader or writer back with the outcome. One call at a time per stream, as with the blocking
//! calls (the stream is inside the promise meanwhile). It adds no path of its own.

use std::io::{self, Read, Write};

use super::{Reader, Writer};
use crate::Promise;

impl Reader {
    /// `read_exact` of `len` bytes without waiting: the promise of this reader and the bytes.
    pub fn read_exact_async(mut self, len: usize) -> Promise<(Reader, io::Result<Vec<u8>>)> {
        crate::spawn_async(move || {
            let mut b = vec![0u8; len];
            let r = self.read_exact(&mut b).map(|()| b);
            (self, r)
        })
    }

    /// `read_to_end` without waiting: the promise of every byte until the writer finishes.
    pub fn read_to_end_async(mut self) -> Promise<(Reader, io::Result<Vec<u8>>)> {
        crate::spawn_async(move || {
            let mut b = Vec::new();
            let r = self.read_to_end(&mut b).map(|_| b);
            (self, r)
        })
    }
}

impl Writer {
    /// `write_all` of `data` without waiting: the promise of this writer and the outcome.
    pub fn write_all_async(mut self, data: Vec<u8>) -> Promise<(Writer, io::Result<()>)> {
        crate::spawn_async(move || {
            let r = self.write_all(&data);
            (self, r)
        })
    }

    /// [`finish`](Self::finish) without waiting.
    pub fn finish_async(self) -> Promise<io::Result<()>> {
        crate::spawn_async(move || self.finish())
    }
}
