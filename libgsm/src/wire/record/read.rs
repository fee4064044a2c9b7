//! Reading: [`RequestReader`] and [`ResponseReader`] walk one batch record by record, checking
//! every length against the batch, and stop at the first malformed record with the reason
//! (`malformed`), so that the worker can end the job instead of skipping records unseen.
//! `next_plain` and `next_continuation` hand out a run of records of one kind without the
//! general decoding (the trustee's `serve_run`).
//!
//! It does not know what a record means (the trampolines do), run anything, or read a slot that
//! holds a piece of a large record (`large` sorts those out first).

use super::layout::{
    ARG, Byte, CONT, CONT_HEADER, FAR, FAR_STATUS, FAR_WORDS, HEADER, KIND_BATCH, LARGE,
    LARGE_STATUS, REQ_HEADER, RESP_CONT, bytes_at, u32_at, u64_at,
};

/// A body that is either in the slot or in a large-message box now owned by the reader. Its
/// bytes may include padding, so it is only ever viewed as `MaybeUninit<u8>`.
#[derive(Debug)]
pub(crate) enum Body<'a> {
    Inline(&'a [Byte]),
    Large(Box<[Byte]>),
    /// A body parked in the sender's memory (`FAR`): `len` bytes at `addr` in the sender's
    /// process, released with `token`. It must be fetched before use; until then it has no bytes.
    Far {
        addr: u64,
        len: u64,
        token: u64,
        /// The RMA key (0 when read with `process_vm_readv`).
        key: u64,
    },
}

impl Body<'_> {
    #[inline]
    pub(crate) fn bytes(&self) -> &[Byte] {
        match self {
            Body::Inline(b) => b,
            Body::Large(b) => b,
            Body::Far { .. } => &[],
        }
    }
}

/// # Safety
/// `ptr`/`len` must come from `Box::into_raw` of a `Box<[Byte]>` written by `OutQueue` and not
/// yet reclaimed; each large record is reclaimed exactly once.
pub(super) unsafe fn take_large(ptr: u64, len: u64) -> Box<[Byte]> {
    let slice = std::ptr::slice_from_raw_parts_mut(ptr as usize as *mut Byte, len as usize);
    // SAFETY: per the contract, this is the raw pointer of a live `Box<[Byte]>` of this length.
    unsafe { Box::from_raw(slice) }
}

/// One decoded request record.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub fidx: u8,
    pub flags: u8,
    pub req: u32,
    pub idx: u32,
    pub gn: u32,
    pub cap_len: usize,
    pub body: Body<'a>,
}

impl Request<'_> {
    /// The first header word that records of the same kind as this one share, if this record
    /// is *plain*: no argument, its captured bytes inline (not large, not parked). A run of
    /// records with this word can be served without the general decoding
    /// ([`RequestReader::next_plain`]).
    #[inline(always)]
    pub(crate) fn plain_head(&self) -> Option<u32> {
        if self.flags & (ARG | LARGE | FAR) != 0 || !matches!(self.body, Body::Inline(_)) {
            return None;
        }
        let cap_len = u16::try_from(self.cap_len).ok()?;
        Some(u32::from_le_bytes([self.fidx, self.flags, 0, 0]) | (u32::from(cap_len) << 16))
    }

    #[inline]
    pub(crate) fn cap(&self) -> &[Byte] {
        &self.body.bytes()[..self.cap_len]
    }
    #[inline]
    pub(crate) fn arg(&self) -> &[Byte] {
        &self.body.bytes()[self.cap_len..]
    }
}

/// Reads a request batch. Iteration stops at the first malformed record, and
/// [`malformed`](Self::malformed) then says what was wrong, so that the server can report it
/// instead of dropping the rest of the batch unseen.
#[derive(Debug)]
pub(crate) struct RequestReader<'a> {
    b: &'a [Byte],
    pos: usize,
    end: usize,
    pointers: bool,
    /// The batch's code table.
    pub table: &'a [Byte],
    /// Records handed out so far (by `next` and `next_plain`).
    pub taken: u32,
    /// The plain record handed out last, which a continuation repeats: `(first header word,
    /// idx, gn)`; `None` after any other record and at the start.
    run: Option<(u32, u32, u32)>,
    /// Why iteration stopped before the end of the batch, where a record said so itself.
    broken: Option<&'static str>,
}

impl<'a> RequestReader<'a> {
    /// # Safety
    /// The batch's header, record headers and table must be initialised bytes (true of every
    /// batch an `OutQueue` wrote, in this process or, through a ring, in a peer). If `pointers`
    /// is true the batch must have been written by `OutQueue::push_request` of *this* process
    /// (large-record pointers inside it are reclaimed by `next`) and be read at most once; with
    /// `pointers` false, pointer-carrying records end the iteration instead.
    pub(crate) unsafe fn new(b: &'a [Byte], pointers: bool) -> Option<Self> {
        // SAFETY: the batch header is initialised (contract).
        let end = unsafe { u32_at(b, 0) }? as usize;
        // SAFETY: as above.
        let ntab = u16::from_le_bytes(unsafe { bytes_at::<2>(b, 4) }?) as usize;
        // SAFETY: as above.
        let kind = u16::from_le_bytes(unsafe { bytes_at::<2>(b, 6) }?);
        let table = b.get(end..end + ntab * 8)?;
        (end >= HEADER && kind == KIND_BATCH).then_some(RequestReader {
            b,
            pos: HEADER,
            end,
            pointers,
            table,
            taken: 0,
            run: None,
            broken: None,
        })
    }

    /// The code offset of table entry `i`.
    pub(crate) fn code(&self, i: u8) -> Option<u64> {
        // SAFETY: the table is initialised (contract of `new`).
        unsafe { u64_at(self.table, i as usize * 8) }
    }

    /// A reader with no records, for a record that did not come out of a batch (a reassembled
    /// or fetched one): its trampoline finds no run behind it.
    pub(crate) fn empty() -> RequestReader<'static> {
        RequestReader {
            b: &[],
            pos: 0,
            end: 0,
            pointers: false,
            table: &[],
            taken: 0,
            run: None,
            broken: None,
        }
    }

    /// Once iteration has ended: `None` if every record of the batch was read, else what was
    /// wrong with the record it stopped at (a batch our encoder wrote is never malformed).
    pub(crate) fn malformed(&self) -> Option<&'static str> {
        self.broken
            .or((self.pos < self.end).then_some("a record runs past the end of its batch"))
    }

    /// Ends iteration at a malformed record, for `why`.
    #[cold]
    fn stop(&mut self, why: &'static str) -> Option<Request<'a>> {
        self.pos = self.end;
        self.broken = Some(why);
        None
    }

    /// The next record if it is of the same kind as the record that started a run (its first
    /// header word equals `head`: the same function index, flags and capture length, see
    /// [`Request::plain_head`]), or a continuation of it: `(req, idx, gn, captured bytes)`.
    /// Otherwise `None`, and the reader stays where it is, for the general path to read that
    /// record.
    ///
    /// A plain record's body is its captured bytes, inline, so this reads no length or pointer
    /// word: one compare decides, and a trampoline can serve a run of records of its own kind in
    /// a loop of its own (`trust::serve::serve_run`).
    #[inline(always)]
    pub(crate) fn next_plain(&mut self, head: u32) -> Option<(u32, u32, u32, &'a [Byte])> {
        let p = self.pos;
        if p >= self.end {
            return None;
        }
        // SAFETY: record headers are initialised bytes (contract of `new`), and `p < end` is a
        // record boundary.
        if unsafe { bytes_at::<1>(self.b, p) }?[0] == CONT {
            let (h, idx, gn) = self.run?;
            if h != head {
                return None;
            }
            let (req, cap) = self.take_continuation(p, head)?;
            return Some((req, idx, gn, cap));
        }
        let q = p + REQ_HEADER + (head >> 16) as usize;
        if q > self.end {
            return None;
        }
        // SAFETY: a record header is initialised bytes (contract of `new`); `p` is a record
        // boundary and `p + REQ_HEADER <= q <= end` lies within the batch.
        let h: [u8; REQ_HEADER] = unsafe { bytes_at(self.b, p) }?;
        if u32::from_le_bytes([h[0], h[1], h[2], h[3]]) != head {
            return None;
        }
        let req = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        let idx = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        let gn = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        let cap = self.b.get(p + REQ_HEADER..q)?;
        self.pos = q;
        self.taken += 1;
        self.run = Some((head, idx, gn));
        Some((req, idx, gn, cap))
    }

    /// Whether the plain record handed out last had first header word `head` and named the
    /// property `(idx, gn)`: then every continuation right behind it is such a request too, and
    /// [`next_continuation`](Self::next_continuation) can hand them out without the compares.
    #[inline(always)]
    pub(crate) fn continues(&self, head: u32, idx: u32, gn: u32) -> bool {
        self.run == Some((head, idx, gn))
    }

    /// The next record if it is a continuation: `(req, captured bytes)`, of the run the last
    /// plain record started (see [`continues`](Self::continues)). Otherwise `None`, and the
    /// reader stays where it is.
    #[inline(always)]
    pub(crate) fn next_continuation(&mut self) -> Option<(u32, &'a [Byte])> {
        let p = self.pos;
        if p >= self.end {
            return None;
        }
        // SAFETY: record headers are initialised bytes (contract of `new`), and `p < end` is a
        // record boundary.
        if unsafe { bytes_at::<1>(self.b, p) }?[0] != CONT {
            return None;
        }
        let (head, _, _) = self.run?;
        self.take_continuation(p, head)
    }

    /// The continuation at `p` of the last plain record, as a request of its own; `None` (and
    /// the batch reported malformed) if no plain record came right before it, which our
    /// encoder never writes.
    #[cold]
    fn continuation(&mut self, p: usize) -> Option<Request<'a>> {
        let Some((head, idx, gn)) = self.run else {
            return self.stop("a continuation that follows no plain record");
        };
        let (req, cap) = self.take_continuation(p, head)?;
        Some(Request {
            fidx: head as u8,
            flags: (head >> 8) as u8,
            req,
            idx,
            gn,
            cap_len: cap.len(),
            body: Body::Inline(cap),
        })
    }

    /// Reads the continuation at record boundary `p` of a run whose first header word is
    /// `head`: its request id and captured bytes. `None` (the reader stays) if it does not fit
    /// in the batch.
    #[inline(always)]
    fn take_continuation(&mut self, p: usize, head: u32) -> Option<(u32, &'a [Byte])> {
        let q = p + CONT_HEADER + (head >> 16) as usize;
        if q > self.end {
            return None;
        }
        // SAFETY: a continuation's `CONT_HEADER` bytes are initialised (contract of `new`), and
        // `p + CONT_HEADER <= q <= end` lies within the batch.
        let req = unsafe { u32_at(self.b, p + 1) }?;
        let cap = self.b.get(p + CONT_HEADER..q)?;
        self.pos = q;
        self.taken += 1;
        Some((req, cap))
    }
}

impl<'a> Iterator for RequestReader<'a> {
    type Item = Request<'a>;
    #[inline(always)]
    fn next(&mut self) -> Option<Request<'a>> {
        if self.pos >= self.end {
            return None;
        }
        let b = &self.b[..self.end];
        let p = self.pos;
        // SAFETY: record headers, argument lengths and large-record words are initialised bytes
        // written by our encoder (contract of `new`); `p` and `q` walk record boundaries.
        if unsafe { bytes_at::<1>(b, p) }?[0] == CONT {
            return self.continuation(p);
        }
        // SAFETY: as above.
        let h: [u8; REQ_HEADER] = unsafe { bytes_at(b, p) }?;
        let (fidx, flags) = (h[0], h[1]);
        let cap_len = u16::from_le_bytes([h[2], h[3]]) as usize;
        let req = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        let idx = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        let gn = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        let mut q = p + REQ_HEADER;
        let mut arg_len = 0;
        if flags & ARG != 0 {
            // SAFETY: as above.
            arg_len = unsafe { u32_at(b, q) }? as usize;
            q += 4;
        }
        let body = if flags & LARGE != 0 && flags & FAR != 0 {
            // SAFETY: as above.
            let (addr, len, token, key) = unsafe {
                (
                    u64_at(b, q)?,
                    u64_at(b, q + 8)?,
                    u64_at(b, q + 16)?,
                    u64_at(b, q + 24)?,
                )
            };
            q += FAR_WORDS;
            if len != (cap_len + arg_len) as u64 {
                return self.stop("a parked record whose length disagrees with its header");
            }
            Body::Far {
                addr,
                len,
                token,
                key,
            }
        } else if flags & LARGE != 0 {
            if !self.pointers {
                return self.stop("a record that carries a pointer from another process");
            }
            // SAFETY: as above.
            let (ptr, len) = unsafe { (u64_at(b, q)?, u64_at(b, q + 8)?) };
            q += 16;
            if len as usize != cap_len + arg_len {
                return self.stop("a large record whose length disagrees with its header");
            }
            // SAFETY: per `new`'s contract this large record was written by our encoder and is
            // read exactly once.
            Body::Large(unsafe { take_large(ptr, len) })
        } else {
            let s = b.get(q..q + cap_len + arg_len)?;
            q += cap_len + arg_len;
            Body::Inline(s)
        };
        self.pos = q;
        self.taken += 1;
        let rec = Request {
            fidx,
            flags,
            req,
            idx,
            gn,
            cap_len,
            body,
        };
        self.run = rec.plain_head().map(|h| (h, idx, gn));
        Some(rec)
    }
}

/// Reads a response batch: `(req, status, body)`.
#[derive(Debug)]
pub(crate) struct ResponseReader<'a> {
    b: &'a [Byte],
    pos: usize,
    pointers: bool,
    /// The status and body length of the last inline record, which a continuation repeats.
    last: Option<(u8, usize)>,
    /// Why iteration stopped before the end of the batch, where a record said so itself.
    broken: Option<&'static str>,
}

impl<'a> ResponseReader<'a> {
    /// # Safety
    /// As for [`RequestReader::new`], for response batches.
    pub(crate) unsafe fn new(b: &'a [Byte], pointers: bool) -> Option<Self> {
        // SAFETY: the batch header is initialised (contract).
        let end = unsafe { u32_at(b, 0) }? as usize;
        // SAFETY: as above.
        let kind = u16::from_le_bytes(unsafe { bytes_at::<2>(b, 6) }?);
        // `then`, not `then_some`: the slice is taken only once `end` is known to be in range
        // (a peer's batch whose end lies past its slot is refused, not a panic).
        (end >= HEADER && end <= b.len() && kind == KIND_BATCH).then(|| ResponseReader {
            b: &b[..end],
            pos: HEADER,
            pointers,
            last: None,
            broken: None,
        })
    }

    /// Once iteration has ended: `None` if every record of the batch was read, else what was
    /// wrong with the record it stopped at (a batch our encoder wrote is never malformed).
    pub(crate) fn malformed(&self) -> Option<&'static str> {
        self.broken
            .or((self.pos < self.b.len()).then_some("a record runs past the end of its batch"))
    }

    /// Ends iteration at a malformed record, for `why`.
    #[cold]
    fn stop(&mut self, why: &'static str) -> Option<(u32, u8, Body<'a>)> {
        self.pos = self.b.len();
        self.broken = Some(why);
        None
    }
}

impl<'a> Iterator for ResponseReader<'a> {
    type Item = (u32, u8, Body<'a>);
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let p = self.pos;
        // SAFETY: record headers are initialised bytes written by our encoder (contract of
        // `new`), and `p` walks record boundaries.
        let req = unsafe { u32_at(self.b, p)? };
        if req & RESP_CONT != 0 {
            let Some((status, len)) = self.last else {
                return self.stop("a continuation that follows no inline response");
            };
            let body = self.b.get(p + 4..p + 4 + len)?;
            self.pos = p + 4 + len;
            return Some((req & !RESP_CONT, status, Body::Inline(body)));
        }
        // SAFETY: as above.
        let w = unsafe { u32_at(self.b, p + 4)? };
        let (len, status) = ((w >> 8) as usize, (w & 0xFF) as u8);
        let body = self.b.get(p + 8..p + 8 + len)?;
        self.pos = p + 8 + len;
        self.last = None;
        if status & FAR_STATUS != 0 {
            // SAFETY: a far response's body is four initialised words.
            let (Some(addr), Some(n), Some(token), Some(key)) = (unsafe {
                (
                    u64_at(body, 0),
                    u64_at(body, 8),
                    u64_at(body, 16),
                    u64_at(body, 24),
                )
            }) else {
                return self.stop("a parked response shorter than its four words");
            };
            return Some((
                req,
                status & !FAR_STATUS,
                Body::Far {
                    addr,
                    len: n,
                    token,
                    key,
                },
            ));
        }
        if status & LARGE_STATUS != 0 {
            if !self.pointers {
                return self.stop("a response that carries a pointer from another process");
            }
            // SAFETY: a large response's body is the pointer and length words, initialised.
            let (Some(ptr), Some(n)) = (unsafe { (u64_at(body, 0), u64_at(body, 8)) }) else {
                return self.stop("a large response shorter than its two words");
            };
            // SAFETY: written by our encoder as a large response, read once (contract of `new`).
            Some((
                req,
                status & !LARGE_STATUS,
                Body::Large(unsafe { take_large(ptr, n) }),
            ))
        } else {
            self.last = Some((status, len));
            Some((req, status, Body::Inline(body)))
        }
    }
}
