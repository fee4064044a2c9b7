//! Entry points for the fuzz targets (`libgsm/fuzz/`) and the seeded mutation test: each takes
//! arbitrary bytes, runs one of the wire's readers over them to the end as a worker does for a
//! peer in another process (records that carry a pointer are refused, never followed), and
//! checks that every record it hands out lies inside its batch, after the record before it.
//!
//! A refusal (`Err`, with the reason the worker would report) is the expected answer to a
//! corrupt batch; a panic is a bug, in a reader or in these checks. This is not the runtime's
//! API: it is hidden from the docs, and it runs no record (the dispatcher is tested elsewhere).

use std::ops::Range;

use crate::wire::record::{
    Body, Byte, CONT_HEADER, HEADER, Large, Partial, RequestReader, ResponseReader, classify,
};

/// What a reader handed out, for a batch or a sequence of slots it read to the end.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Records handed out.
    pub records: usize,
    /// Body bytes of those records that lie in the input (captures, arguments, results).
    pub body_bytes: usize,
    /// Records whose body is parked in the sender's memory (only their three words were read).
    pub parked: usize,
    /// Streamed records reassembled from their pieces ([`read_slots`]).
    pub reassembled: usize,
    /// Whether the input ended in the middle of a streamed record ([`read_slots`]).
    pub unfinished: bool,
    /// A digest of every record's ids and where its body lies, to compare two readings.
    pub digest: u64,
}

impl Summary {
    fn mix(&mut self, words: &[u64]) {
        for &w in words {
            // FNV-1a over 64-bit words: order-sensitive, enough to tell two readings apart.
            self.digest = (self.digest ^ w).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The bytes as the readers see them.
fn as_bytes(b: &[u8]) -> &[Byte] {
    // SAFETY: `MaybeUninit<u8>` has the size, alignment and validity of `u8` and more; the
    // slice keeps `b`'s lifetime.
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<Byte>(), b.len()) }
}

/// The batch's records area, `HEADER..end`, as positions in `b`, with the end of the record
/// handed out last: each record must start after it, and end within the area.
struct Bounds {
    base: usize,
    area: Range<usize>,
    last: usize,
}

impl Bounds {
    fn new(b: &[Byte], end: usize) -> Self {
        assert!(
            end <= b.len(),
            "a reader accepted a batch that ends past its slot"
        );
        Bounds {
            base: b.as_ptr() as usize,
            area: HEADER..end,
            last: HEADER,
        }
    }

    /// Checks that `s` lies in the records area, at least `head` bytes after the previous
    /// record, and makes it the previous record. Returns where it starts.
    fn take(&mut self, s: &[Byte], head: usize, what: &str) -> usize {
        let start = (s.as_ptr() as usize).wrapping_sub(self.base);
        let end = start.wrapping_add(s.len());
        assert!(
            start >= self.last + head && start <= end && end <= self.area.end,
            "{what}: a body at {start}..{end}, outside {}..{} or before the record's header \
             (the previous record ended at {})",
            self.area.start,
            self.area.end,
            self.last
        );
        self.last = end;
        start
    }
}

/// The batch header's `end` word (the records end there; the code table of a request batch
/// follows it). Only called once a reader accepted the header.
fn end_of(b: &[u8]) -> usize {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
}

/// Reads a request batch to the end, as a trustee serves one from another process: each record
/// with `next`, then the run behind a plain record with `next_continuation` and `next_plain`
/// (as `serve_run` does). It is also read a second time with `next` alone, and both readings
/// must hand out the same records and agree on the verdict.
///
/// # Errors
/// What was wrong with the batch, in the words the worker reports.
pub fn read_requests(batch: &[u8]) -> Result<Summary, &'static str> {
    let by_runs = walk_requests(batch, true)?;
    let by_records = walk_requests(batch, false)?;
    assert_eq!(
        by_runs, by_records,
        "reading by runs and record by record disagree"
    );
    by_runs
}

/// One reading of a request batch; the outer `Err` is a refused header, the inner result the
/// verdict on the records.
#[allow(clippy::type_complexity)]
fn walk_requests(batch: &[u8], runs: bool) -> Result<Result<Summary, &'static str>, &'static str> {
    let b = as_bytes(batch);
    // SAFETY: every byte of `batch` is initialised, and with `pointers` false no record is
    // taken for a pointer of this process: such records end the reading instead.
    let Some(mut r) = (unsafe { RequestReader::new(b, false) }) else {
        return Err("a request batch whose header is malformed");
    };
    let end = end_of(batch);
    let mut bounds = Bounds::new(b, end);
    let table = (r.table.as_ptr() as usize).wrapping_sub(bounds.base);
    assert!(
        table == end && table + r.table.len() <= b.len(),
        "the code table lies outside the slot"
    );
    let mut s = Summary::default();
    while let Some(rec) = r.next() {
        let code = r.code(rec.fidx).unwrap_or(u64::MAX);
        s.records += 1;
        s.mix(&[
            u64::from(rec.fidx),
            u64::from(rec.flags),
            u64::from(rec.req),
            u64::from(rec.idx),
            u64::from(rec.gn),
            code,
        ]);
        match &rec.body {
            Body::Inline(body) => {
                let at = bounds.take(body, CONT_HEADER, "a request");
                assert!(rec.cap_len <= body.len(), "captured bytes past the body");
                assert_eq!(rec.cap().len() + rec.arg().len(), body.len());
                s.body_bytes += body.len();
                s.mix(&[at as u64, body.len() as u64, rec.cap_len as u64]);
            }
            Body::Far { len, token, .. } => {
                s.parked += 1;
                s.mix(&[*len, *token]);
            }
            Body::Large(_) => panic!("a reader followed a pointer from another process"),
        }
        let Some(head) = rec.plain_head().filter(|_| runs) else {
            continue;
        };
        let (mut idx, mut gn) = (rec.idx, rec.gn);
        loop {
            if r.continues(head, idx, gn) {
                while let Some((req, cap)) = r.next_continuation() {
                    take_run_record(&mut s, &mut bounds, head, code, (req, idx, gn), cap);
                }
            }
            let Some((req, i, g, cap)) = r.next_plain(head) else {
                break;
            };
            take_run_record(&mut s, &mut bounds, head, code, (req, i, g), cap);
            (idx, gn) = (i, g);
        }
    }
    assert_eq!(
        r.taken as usize, s.records,
        "the reader's count of records handed out"
    );
    Ok(match r.malformed() {
        Some(why) => Err(why),
        None => Ok(s),
    })
}

/// Checks and counts a record of a run, handed out by `next_plain` or `next_continuation`, as
/// `next` would have handed it out.
fn take_run_record(
    s: &mut Summary,
    bounds: &mut Bounds,
    head: u32,
    code: u64,
    (req, idx, gn): (u32, u32, u32),
    cap: &[Byte],
) {
    let at = bounds.take(cap, CONT_HEADER, "a request of a run");
    assert_eq!(
        cap.len(),
        (head >> 16) as usize,
        "a run record of another length"
    );
    s.records += 1;
    s.body_bytes += cap.len();
    s.mix(&[
        u64::from(head as u8),
        u64::from((head >> 8) as u8),
        u64::from(req),
        u64::from(idx),
        u64::from(gn),
        code,
    ]);
    s.mix(&[at as u64, cap.len() as u64, cap.len() as u64]);
}

/// Reads a response batch to the end, as a client completes one from another process.
///
/// # Errors
/// What was wrong with the batch, in the words the worker reports.
pub fn read_responses(batch: &[u8]) -> Result<Summary, &'static str> {
    let b = as_bytes(batch);
    // SAFETY: as in `walk_requests`.
    let Some(mut r) = (unsafe { ResponseReader::new(b, false) }) else {
        return Err("a response batch whose header is malformed");
    };
    let mut bounds = Bounds::new(b, end_of(batch));
    let mut s = Summary::default();
    for (req, status, body) in r.by_ref() {
        s.records += 1;
        s.mix(&[u64::from(req), u64::from(status)]);
        match body {
            Body::Inline(body) => {
                let at = bounds.take(body, 4, "a response");
                s.body_bytes += body.len();
                s.mix(&[at as u64, body.len() as u64]);
            }
            Body::Far { len, token, .. } => {
                s.parked += 1;
                s.mix(&[len, token]);
            }
            Body::Large(_) => panic!("a reader followed a pointer from another process"),
        }
    }
    match r.malformed() {
        Some(why) => Err(why),
        None => Ok(s),
    }
}

/// Reads a sequence of slots from one ring of another rank, as a worker does: each slot is
/// sorted by kind, a batch read by [`read_requests`] or [`read_responses`] (`requests` says
/// which lane the ring is), a piece of a large record fed to its reassembly; a reassembled
/// record's parts are checked against its length. The input is a sequence of `[u16 len]` (little
/// endian) and that many bytes of slot ([`frame_slots`] writes it); a last slot shorter than its
/// length is taken as it is.
///
/// # Errors
/// The first slot the worker would refuse, and why (it ends the job there).
pub fn read_slots(slots: &[u8], requests: bool) -> Result<Summary, &'static str> {
    let mut s = Summary::default();
    let mut state: Option<Partial> = None;
    let mut rest = slots;
    while rest.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let slot = &rest[2..(2 + n).min(rest.len())];
        rest = &rest[slot.len() + 2..];
        let b = as_bytes(slot);
        let piece = classify(b);
        let chunk = match &piece {
            Large::Batch => {
                let t = if requests {
                    read_requests(slot)?
                } else {
                    read_responses(slot)?
                };
                s.records += t.records;
                s.body_bytes += t.body_bytes;
                s.parked += t.parked;
                s.mix(&[t.digest]);
                continue;
            }
            Large::ReqStart { chunk, .. } | Large::RespStart { chunk, .. } => Some(*chunk),
            Large::More(chunk) => Some(*chunk),
            Large::Bad(_) => None,
        };
        if let Some(chunk) = chunk {
            let mut bounds = Bounds::new(b, b.len());
            bounds.take(chunk, 0, "a piece");
        }
        let Some(done) = Partial::feed(&mut state, piece, requests)? else {
            continue;
        };
        s.records += 1;
        s.reassembled += 1;
        if requests {
            let code = done.code;
            let rec = done.into_request();
            let body = rec.body.bytes().len();
            assert!(
                rec.cap_len <= body,
                "captured bytes past the reassembled body"
            );
            assert_eq!(rec.cap().len() + rec.arg().len(), body);
            s.body_bytes += body;
            s.mix(&[code, u64::from(rec.req), rec.cap_len as u64, body as u64]);
        } else {
            let (req, status, body) = done.into_response();
            s.body_bytes += body.len();
            s.mix(&[u64::from(req), u64::from(status), body.len() as u64]);
        }
    }
    s.unfinished = state.is_some();
    Ok(s)
}

/// Writes `slots` in the framing [`read_slots`] reads: each as `[u16 len]` and its bytes.
///
/// # Panics
/// If a slot is longer than 65 535 bytes.
pub fn frame_slots<S: AsRef<[u8]>>(slots: &[S]) -> Vec<u8> {
    let mut out = Vec::new();
    for slot in slots {
        let slot = slot.as_ref();
        let n = u16::try_from(slot.len()).expect("a slot of at most 65 535 bytes");
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(slot);
    }
    out
}
