use super::bytes::set_bytes;
use super::large::Done;
use super::large::FAR_MIN;
use super::*;
use std::mem::MaybeUninit;

mod mutation;

fn init(b: &[Byte]) -> Vec<u8> {
    // SAFETY: these tests only encode initialised bytes.
    b.iter().map(|x| unsafe { x.assume_init() }).collect()
}

fn sealed(q: &mut OutQueue) -> Vec<Byte> {
    q.seal();
    q.queued.pop_front().expect("a sealed batch")
}

/// Every batch of `q`, sealed, as initialised bytes.
fn all_batches(q: &mut OutQueue) -> Vec<Vec<u8>> {
    q.seal();
    q.queued.drain(..).map(|b| init(&b)).collect()
}

/// The code (`None` for control records) and request id of every record in `batches`.
fn codes_and_ids(batches: &[Vec<u8>]) -> Vec<(Option<u64>, u32)> {
    let mut out = Vec::new();
    for b in batches {
        let b: Vec<Byte> = b.iter().map(|&x| MaybeUninit::new(x)).collect();
        // SAFETY: a batch of our encoder, without large records, read once.
        let r = unsafe { RequestReader::new(&b, false) }.expect("a request batch");
        let codes: Vec<Option<u64>> = (0..=u8::MAX).map(|i| r.code(i)).collect();
        out.extend(r.map(|rec| {
            let code =
                (rec.fidx != CONTROL).then(|| codes[rec.fidx as usize].expect("in the table"));
            (code, rec.req)
        }));
    }
    out
}

#[test]
fn fast_paths_encode_exactly_as_the_general_paths() {
    for remote in [false, true] {
        fast_paths_match_general(remote);
    }
}

/// Captures and bodies around the fast path's limit; repeated codes, two codes in turn (the
/// two cached table entries), a third code and code 0 (no sentinel may pass for it); an
/// argument and a control record in between; and a small slot so that
/// batches fill up and seal mid-sequence; to this process or to another rank (`remote`).
fn fast_paths_match_general(remote: bool) {
    let sizes = [0usize, 1, 8, 63, 64, 65, 8, 0];
    let data = [0x5Au8; 80];
    let (mut fast, mut general) = (
        OutQueue::new(192, Sink::Loopback, remote),
        OutQueue::new(192, Sink::Loopback, remote),
    );
    let mut sent = Vec::new();
    for round in 0..6u32 {
        for (i, &n) in sizes.iter().enumerate() {
            let code = [0x100, 0x100, 0x300, 0x100, 0x300, 0x500, 0, 0x300][i];
            let args = (Some(code), round, i as u32, 7 * round + i as u32);
            sent.push((args.0, args.3));
            let arg = (i == 3).then(|| Src::slice(&data[..5]));
            let cap = Src::slice(&data[..n]);
            fast.push_request(
                args.0,
                args.1,
                args.2,
                args.3,
                cap,
                arg,
                SER * (i as u8 & 1),
            );
            general.push_request_general(
                args.0,
                args.1,
                args.2,
                args.3,
                cap,
                arg,
                SER * (i as u8 & 1),
            );
        }
        let id = 42u64.to_le_bytes();
        fast.push_request(None, 1, 1, 0, Src::slice(&id), None, 0);
        general.push_request_general(None, 1, 1, 0, Src::slice(&id), None, 0);
        sent.push((None, 0));
    }
    let batches = all_batches(&mut fast);
    assert!(
        batches.len() > 3,
        "the sequence should span several batches"
    );
    // Both encoders share the table lookup, so also check each record's code on its own.
    assert_eq!(codes_and_ids(&batches), sent);
    assert_eq!(batches, all_batches(&mut general));

    let (mut fast, mut general) = (
        OutQueue::new(160, Sink::Loopback, remote),
        OutQueue::new(160, Sink::Loopback, remote),
    );
    for round in 0..6u32 {
        for (i, &n) in sizes.iter().enumerate() {
            let body = Src::slice(&data[..n]);
            fast.push_response(round * 10 + i as u32, i as u8, body);
            general.push_response_general(round * 10 + i as u32, i as u8, body);
        }
    }
    let batches = all_batches(&mut fast);
    assert!(
        batches.len() > 3,
        "the sequence should span several batches"
    );
    assert_eq!(batches, all_batches(&mut general));
}

#[test]
fn requests_round_trip_with_table_and_large_records() {
    let mut q = OutQueue::new(256, Sink::Loopback, false);
    q.push_request(Some(0x100), 1, 2, 3, Src::slice(&[9; 8]), None, 0);
    q.push_request(
        Some(0x200),
        4,
        5,
        6,
        Src::slice(&[]),
        Some(Src::slice(&[7; 3])),
        0,
    );
    q.push_request(Some(0x100), 7, 8, 9, Src::slice(&[1]), None, 0);
    q.push_request(None, 1, 1, 0, Src::slice(&42u64.to_le_bytes()), None, 0);
    let big = vec![0xAB; 1000];
    q.push_request(
        Some(0x100),
        1,
        1,
        10,
        Src::slice(&[5; 4]),
        Some(Src::slice(&big)),
        0,
    );
    let b1 = sealed(&mut q);
    // SAFETY: written by our encoder, read once.
    let r = unsafe { RequestReader::new(&b1, true) }.unwrap();
    assert_eq!(r.code(0), Some(0x100));
    assert_eq!(r.code(1), Some(0x200));
    let v: Vec<_> = r
        .map(|r| (r.fidx, r.req, r.idx, r.gn, init(r.cap()), init(r.arg())))
        .collect();
    assert_eq!(v[0], (0, 3, 1, 2, vec![9; 8], vec![]));
    assert_eq!(v[1], (1, 6, 4, 5, vec![], vec![7; 3]));
    assert_eq!(v[2], (0, 9, 7, 8, vec![1], vec![]));
    assert_eq!(v[3].0, CONTROL);
    assert_eq!(v[4].4, vec![5; 4]);
    assert_eq!(v[4].5, big);
    assert_eq!(v.len(), 5);
}

#[test]
fn batches_split_when_full_and_nothing_is_lost() {
    let mut q = OutQueue::new(256, Sink::Loopback, false);
    for i in 0..100u32 {
        q.push_request(
            Some(0x100 + u64::from(i % 3) * 8),
            i,
            0,
            i,
            Src::slice(&i.to_le_bytes()),
            None,
            0,
        );
    }
    q.seal();
    let mut seen = Vec::new();
    while let Some(b) = q.queued.pop_front() {
        assert!(b.len() <= 256);
        // SAFETY: written by our encoder, read once.
        let r = unsafe { RequestReader::new(&b, true) }.unwrap();
        let codes: Vec<u64> = (0..3).filter_map(|i| r.code(i)).collect();
        for rec in r {
            assert_eq!(codes[rec.fidx as usize], 0x100 + u64::from(rec.req % 3) * 8);
            seen.push(u32::from_le_bytes(init(rec.cap()).try_into().unwrap()));
        }
    }
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
}

#[test]
#[cfg(not(loom))]
fn a_ring_whose_consumer_broke_the_protocol_is_reported_not_taken_for_back_pressure() {
    use crate::wire::ring::{RingLayout, RingMemory};
    use std::sync::Arc;
    let layout = RingLayout::new(2, 256).expect("a ring layout");
    let mut region = vec![0u64; layout.bytes().div_ceil(8) + 16];
    // Aligned as the ring asks (`RingLayout::align`, 128 bytes).
    let bytes = region.as_mut_ptr().cast::<u8>();
    let off = bytes.align_offset(RingLayout::align());
    // SAFETY: `off` is less than 128 bytes, within the 16 spare words of the allocation.
    let base = unsafe { bytes.add(off) };
    // SAFETY: `layout.bytes()` zeroed, aligned bytes that outlive the ring (`region` lives
    // to the end of the test, after `q` and `mem`).
    let mem = Arc::new(unsafe { RingMemory::from_raw(base, layout) });
    let (prod, _cons) = mem.split();
    let mut q = OutQueue::new(256, Sink::Ring(Box::new(prod)), true);
    for i in 0..2u32 {
        q.push_request(Some(1), 1, 1, i, Src::slice(&[0; 8]), None, 0);
        assert_eq!(q.flush(), 1);
    }
    assert!(q.broken().is_none());
    // The consumer writes a release counter past what was published.
    // SAFETY: the release counter is the region's first word (the ring's layout).
    unsafe { std::ptr::write_volatile(base.cast::<u64>(), 99) };
    q.push_request(Some(1), 1, 1, 7, Src::slice(&[0; 8]), None, 0);
    assert_eq!(q.flush(), 0);
    assert_eq!(q.backlog(), 1);
    assert!(
        q.broken().is_some(),
        "the corrupt ring looks like back-pressure"
    );
    drop(q);
}

#[test]
fn values_with_padding_move_by_bytes() {
    // (u8, u64, u16) has padding bytes: they are copied untyped and the value is read back
    // as its own type, never viewed as `u8`.
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Padded(u8, u64, u16);
    let v = Padded(7, u64::MAX - 3, 513);
    let big = [Padded(1, 2, 3); 64];
    let mut q = OutQueue::new(256, Sink::Loopback, false);
    q.push_request(Some(0x100), 1, 1, 1, Src::of(&v), Some(Src::of(&big)), 0);
    let b = sealed(&mut q);
    // SAFETY: written by our encoder, read once.
    let rec = unsafe { RequestReader::new(&b, true) }
        .unwrap()
        .next()
        .unwrap();
    // SAFETY: the captured bytes are one `Padded`, the argument bytes one `[Padded; 64]`.
    let (got, got_big) = unsafe {
        (
            std::ptr::read_unaligned(rec.cap().as_ptr().cast::<Padded>()),
            std::ptr::read_unaligned(rec.arg().as_ptr().cast::<[Padded; 64]>()),
        )
    };
    assert_eq!((got, got_big), (v, big));
}

#[test]
fn responses_round_trip_including_large() {
    let mut q = OutQueue::new(256, Sink::Loopback, false);
    q.push_response(1, 0, Src::slice(&[1, 2, 3]));
    q.push_response(2, 3, Src::slice(b"boom"));
    let big = vec![0x5A; 10_000];
    q.push_response(3, 0, Src::slice(&big));
    let b = sealed(&mut q);
    // SAFETY: written by our encoder, read once.
    let v: Vec<_> = unsafe { ResponseReader::new(&b, true) }
        .unwrap()
        .map(|(r, s, b)| (r, s, init(b.bytes())))
        .collect();
    assert_eq!(
        v,
        vec![(1, 0, vec![1, 2, 3]), (2, 3, b"boom".to_vec()), (3, 0, big)]
    );
}

#[test]
fn grouped_responses_encode_exactly_as_single_ones_span_batches_and_continue() {
    // Slots small enough that a group of 16 does not fit in what is left of a batch, so the
    // fallback path runs too; values of 8 and of 3 bytes (`[u8; 3]`: odd lengths).
    fn read(batches: &[Vec<u8>]) -> Vec<(u32, u8, Vec<u8>)> {
        let mut out = Vec::new();
        for b in batches {
            let b: Vec<Byte> = b.iter().map(|&x| MaybeUninit::new(x)).collect();
            // SAFETY: a batch of our encoder, without large records, read once.
            let r = unsafe { ResponseReader::new(&b, false) }.expect("a response batch");
            out.extend(r.map(|(req, st, body)| (req, st, init(body.bytes()))));
        }
        out
    }
    fn check<U: Copy>(values: &[U], cap: usize) {
        let mut grouped = OutQueue::new(cap, Sink::Loopback, false);
        let mut single = OutQueue::new(cap, Sink::Loopback, false);
        grouped.push_response(900, 3, Src::slice(b"first"));
        single.push_response(900, 3, Src::slice(b"first"));
        for (g, chunk) in values.chunks(16).enumerate() {
            let group: Vec<(u32, std::mem::ManuallyDrop<U>)> = chunk
                .iter()
                .enumerate()
                .map(|(i, &v)| ((g * 16 + i) as u32, std::mem::ManuallyDrop::new(v)))
                .collect();
            grouped.push_value_responses(0, &group);
            for (req, v) in &group {
                single.push_response(*req, 0, Src::of(&**v));
            }
        }
        let (a, b) = (all_batches(&mut grouped), all_batches(&mut single));
        assert!(a.len() > 1, "the test should span batches");
        assert_eq!(a, b);
        // Each batch holds one full record of each length and status (its first), the rest
        // are continuations.
        let bytes: usize = a.iter().map(Vec::len).sum();
        let full = values.len() * (RESP_HEADER + std::mem::size_of::<U>());
        assert!(bytes < full, "{bytes} bytes, without continuations {full}");
        let read = read(&a);
        assert_eq!(read.len(), values.len() + 1);
        assert_eq!(read[0], (900, 3, b"first".to_vec()));
        for (i, v) in values.iter().enumerate() {
            // SAFETY: the test's values have no padding: every byte is initialised.
            let bytes =
                unsafe { std::slice::from_raw_parts((v as *const U).cast::<u8>(), size_of::<U>()) };
            assert_eq!(read[i + 1], (i as u32, 0, bytes.to_vec()), "value {i}");
        }
    }
    let words: Vec<u64> = (0..1000u64).map(|i| i * 0x0101_0101 + 7).collect();
    check(&words, 256);
    check(&words, 4096);
    let triples: Vec<[u8; 3]> = (0..100u8).map(|i| [i, i ^ 0x55, 3]).collect();
    check(&triples, 200);
}

#[test]
fn next_plain_takes_only_records_of_the_same_first_word_and_leaves_the_rest() {
    let mut q = OutQueue::new(4096, Sink::Loopback, false);
    let push = |q: &mut OutQueue, code: u64, req: u32, cap: &[u8], arg: Option<&[u8]>| {
        q.push_request(
            Some(code),
            req,
            req + 1000,
            req,
            Src::slice(cap),
            arg.map(Src::slice),
            0,
        );
    };
    push(&mut q, 10, 1, &[1, 2], None);
    push(&mut q, 10, 2, &[3, 4], None);
    push(&mut q, 10, 3, &[5, 6], None);
    push(&mut q, 10, 4, &[7], None); // another capture length
    push(&mut q, 10, 5, &[8, 9], Some(&[1])); // an argument
    push(&mut q, 11, 6, &[8, 9], None); // another function
    push(&mut q, 10, 7, &[10, 11], None);
    push(&mut q, 10, 8, &[12, 13], None);
    let b = sealed(&mut q);
    // SAFETY: written by our encoder, without large records, read once.
    let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
    let mut seen = Vec::new();
    while let Some(first) = r.next() {
        let mut run = vec![(first.req, first.idx, first.gn, init(first.cap()))];
        if let Some(head) = first.plain_head() {
            while let Some((req, idx, gn, cap)) = r.next_plain(head) {
                run.push((req, idx, gn, init(cap)));
            }
        }
        seen.push(run);
    }
    let rec = |req: u32, cap: &[u8]| (req, req, req + 1000, cap.to_vec());
    assert_eq!(
        seen,
        vec![
            vec![rec(1, &[1, 2]), rec(2, &[3, 4]), rec(3, &[5, 6])],
            vec![rec(4, &[7])],
            vec![rec(5, &[8, 9])],
            vec![rec(6, &[8, 9])],
            vec![rec(7, &[10, 11]), rec(8, &[12, 13])],
        ]
    );
    // An empty reader (a record that came out of no batch) has no run to give.
    assert!(RequestReader::empty().next_plain(0x0002_0000).is_none());
}

/// A plain request of the same function, property, flags and capture length as the one
/// written right before it is a continuation (5 bytes and the capture instead of 16), and
/// reads back as the full record would, through `next`, `next_plain` and
/// `next_continuation` alike; any other record in between, or a new batch, starts afresh.
#[test]
fn runs_of_requests_are_written_as_continuations_and_read_back_in_full() {
    // (code, idx, gn, req, capture, argument)
    type Rec = (u64, u32, u32, u32, Vec<u8>, Option<Vec<u8>>);
    let plain = |code: u64, idx: u32, req: u32, cap: &[u8]| -> Rec {
        (code, idx, 7, req, cap.to_vec(), None)
    };
    let recs: Vec<Rec> = vec![
        plain(10, 1, 1, &[1, 2]),
        plain(10, 1, 2, &[3, 4]),              // continuation
        plain(10, 1, 3, &[5, 6]),              // continuation
        plain(10, 2, 4, &[7, 8]),              // another property
        plain(10, 2, 5, &[9, 9]),              // continuation
        plain(10, 2, 6, &[1]),                 // another capture length
        (10, 2, 7, 7, vec![2], Some(vec![5])), // an argument
        plain(10, 2, 8, &[3]),                 // not after a plain record of its kind: in full
        plain(11, 2, 9, &[3]),                 // another function
        plain(11, 2, 10, &[4]),                // continuation
    ];
    let mut q = OutQueue::new(4096, Sink::Loopback, false);
    let mut full = 0;
    for (code, idx, gn, req, cap, arg) in &recs {
        let before = q.buf.len();
        q.push_request(
            Some(*code),
            *idx,
            *gn,
            *req,
            Src::slice(cap),
            arg.as_deref().map(Src::slice),
            0,
        );
        if q.buf.len() - before == CONT_HEADER + cap.len() {
            // SAFETY: the record's first byte was written just now.
            assert_eq!(unsafe { q.buf[before].assume_init() }, CONT);
        } else {
            full += 1;
        }
    }
    assert_eq!(full, 6, "records 2, 3, 5 and 10 should be continuations");
    // A control record breaks a run, and so does the next batch.
    q.push_request(None, 2, 7, 0, Src::slice(&5u64.to_le_bytes()), None, 0);
    let before = q.buf.len();
    q.push_request(Some(11), 2, 7, 11, Src::slice(&[4]), None, 0);
    assert_eq!(q.buf.len() - before, REQ_HEADER + 1);
    q.seal();
    let before = q.buf.len();
    q.push_request(Some(11), 2, 7, 12, Src::slice(&[4]), None, 0);
    assert_eq!(q.buf.len() - before, REQ_HEADER + 1);
    let batches = all_batches(&mut q);
    assert_eq!(batches.len(), 2);
    // `runs`: take runs through `next_plain`; `conts`: and take the continuations behind
    // each record of a run through `next_continuation`, as `serve_run` does.
    let read = |runs: bool, conts: bool| {
        let mut seen = Vec::new();
        for b in &batches {
            let b: Vec<Byte> = b.iter().map(|&x| MaybeUninit::new(x)).collect();
            // SAFETY: a batch of our encoder, without large records, read once.
            let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
            while let Some(rec) = r.next() {
                let code = r.code(rec.fidx);
                let arg = (rec.flags & ARG != 0).then(|| init(rec.arg()));
                seen.push((code, rec.idx, rec.gn, rec.req, init(rec.cap()), arg));
                let Some(head) = rec.plain_head().filter(|_| runs) else {
                    continue;
                };
                let (mut idx, mut gn) = (rec.idx, rec.gn);
                loop {
                    if conts {
                        assert!(r.continues(head, idx, gn));
                        assert!(!r.continues(head, idx + 1, gn) && !r.continues(head + 1, idx, gn));
                        while let Some((req, cap)) = r.next_continuation() {
                            seen.push((code, idx, gn, req, init(cap), None));
                        }
                    }
                    let Some((req, i, g, cap)) = r.next_plain(head) else {
                        break;
                    };
                    seen.push((code, i, g, req, init(cap), None));
                    (idx, gn) = (i, g);
                }
            }
        }
        seen
    };
    let mut expected: Vec<_> = recs
        .into_iter()
        .map(|(c, i, g, r, cap, arg)| (Some(c), i, g, r, cap, arg))
        .collect();
    expected.push((None, 2, 7, 0, 5u64.to_le_bytes().to_vec(), None));
    expected.push((Some(11), 2, 7, 11, vec![4], None));
    expected.push((Some(11), 2, 7, 12, vec![4], None));
    assert_eq!(read(false, false), expected);
    assert_eq!(read(true, false), expected);
    assert_eq!(read(true, true), expected);
}

/// A response continues the one before it only with the same status and body length, right
/// after it in the same batch; whatever the mix, every response reads back as written.
#[test]
fn responses_continue_only_their_own_status_and_length() {
    let mut q = OutQueue::new(4096, Sink::Loopback, false);
    let recs: Vec<(u32, u8, Vec<u8>, bool)> = vec![
        (1, 0, vec![1; 8], false),
        (2, 0, vec![2; 8], true),
        (3, 1, vec![3; 8], false), // another status
        (4, 1, vec![4; 3], false), // another length
        (5, 1, vec![5; 3], true),
        (6, 1, vec![6; 3], true),
        (7, 1, vec![7; 3], true),
        (8, 0, vec![], false),
        (9, 0, vec![], true),
    ];
    for (req, st, body, cont) in &recs {
        let before = q.buf.len();
        q.push_response(*req, *st, Src::slice(body));
        let head = q.buf.len() - before - body.len();
        assert_eq!(head, if *cont { 4 } else { RESP_HEADER }, "response {req}");
    }
    q.seal();
    let before = q.buf.len();
    q.push_response(10, 0, Src::slice(&[]));
    assert_eq!(
        q.buf.len() - before,
        RESP_HEADER,
        "a new batch starts afresh"
    );
    let b = sealed(&mut q);
    // SAFETY: written by our encoder, no large records, read once.
    let read: Vec<_> = unsafe { ResponseReader::new(&b, false) }
        .unwrap()
        .map(|(req, st, body)| (req, st, init(body.bytes())))
        .collect();
    let written: Vec<_> = recs.iter().map(|r| (r.0, r.1, r.2.clone())).collect();
    assert_eq!(read, written);
}

/// A continuation with no plain record right before it (never written by our encoder: a
/// corrupt batch) ends the reading of its batch instead of borrowing some other header.
#[test]
fn a_continuation_that_follows_no_plain_record_ends_the_batch_as_malformed() {
    let mut q = OutQueue::new(4096, Sink::Loopback, false);
    q.push_request(
        Some(10),
        1,
        1,
        1,
        Src::slice(&[1]),
        Some(Src::slice(&[2])),
        0,
    );
    let mut b = sealed(&mut q);
    // Splice a continuation in after the record with an argument, before the table.
    let end = init(&b[..4]);
    let end = u32::from_le_bytes([end[0], end[1], end[2], end[3]]) as usize;
    let cont = [CONT, 2, 0, 0, 0, 9];
    for (i, &x) in cont.iter().enumerate() {
        b.insert(end + i, MaybeUninit::new(x));
    }
    let new_end = ((end + cont.len()) as u32).to_le_bytes();
    for (i, &x) in new_end.iter().enumerate() {
        b[i] = MaybeUninit::new(x);
    }
    // SAFETY: initialised bytes, no large records, read once.
    let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
    let reqs: Vec<u32> = r.by_ref().map(|rec| rec.req).collect();
    assert_eq!(reqs, vec![1]);
    assert_eq!(
        r.malformed(),
        Some("a continuation that follows no plain record")
    );
    // The same for a response continuation at the start of a batch.
    let mut q = OutQueue::new(4096, Sink::Loopback, false);
    q.push_response(3, 0, Src::slice(&[1, 2]));
    let mut b = sealed(&mut q);
    b[HEADER + 3] = MaybeUninit::new(0x80);
    // SAFETY: as above.
    let mut r = unsafe { ResponseReader::new(&b, false) }.unwrap();
    assert_eq!(r.by_ref().count(), 0);
    assert_eq!(
        r.malformed(),
        Some("a continuation that follows no inline response")
    );
}

/// A batch whose last record is cut short is read up to that record and then reported,
/// on both lanes; a whole batch reports nothing.
#[test]
fn a_record_cut_short_is_reported_and_a_whole_batch_is_not() {
    let mut q = OutQueue::new(4096, Sink::Loopback, false);
    for req in 0..3 {
        q.push_request(Some(10), 1, 1, req, Src::slice(&[7; 8]), None, 0);
    }
    let b = sealed(&mut q);
    // SAFETY: initialised bytes, no large records, read once.
    let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
    assert_eq!(r.by_ref().count(), 3);
    assert_eq!(r.malformed(), None);
    // The batch's end moved back by 3 bytes: the last record (a continuation) no longer
    // fits. The code table moves with it, so it is cut out of the copy too.
    let end = u32::from_le_bytes(init(&b[..4]).try_into().unwrap()) as usize;
    let mut cut = b[..end - 3].to_vec();
    cut.extend_from_slice(&b[end..]);
    set_bytes(&mut cut, 0, &((end - 3) as u32).to_le_bytes());
    // SAFETY: as above.
    let mut r = unsafe { RequestReader::new(&cut, false) }.unwrap();
    assert_eq!(
        r.by_ref().map(|rec| rec.req).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(
        r.malformed(),
        Some("a record runs past the end of its batch")
    );

    let mut q = OutQueue::new(4096, Sink::Loopback, false);
    for req in 0..3 {
        q.push_response(req, 0, Src::slice(&[1, 2, 3, 4]));
    }
    let b = sealed(&mut q);
    // SAFETY: as above.
    let mut r = unsafe { ResponseReader::new(&b, false) }.unwrap();
    assert_eq!(r.by_ref().count(), 3);
    assert_eq!(r.malformed(), None);
    let end = u32::from_le_bytes(init(&b[..4]).try_into().unwrap()) as usize;
    let mut cut = b[..end - 1].to_vec();
    set_bytes(&mut cut, 0, &((end - 1) as u32).to_le_bytes());
    // SAFETY: as above.
    let mut r = unsafe { ResponseReader::new(&cut, false) }.unwrap();
    assert_eq!(
        r.by_ref().map(|(req, ..)| req).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(
        r.malformed(),
        Some("a record runs past the end of its batch")
    );
}

fn reassemble(q: &mut OutQueue, request_lane: bool) -> Done {
    q.seal();
    let mut state = None;
    let mut done = None;
    let mut slots = 0;
    while let Some(b) = q.queued.pop_front() {
        assert!(b.len() <= 256, "a piece larger than the slot");
        slots += 1;
        let r = Partial::feed(&mut state, classify(&b), request_lane).unwrap();
        if let Some(d) = r {
            assert!(done.is_none());
            done = Some(d);
        }
    }
    assert!(slots > 2, "a large record must take several slots");
    done.expect("the record was reassembled")
}

#[test]
fn large_records_to_another_rank_stream_through_slots() {
    let mut q = OutQueue::new(256, Sink::Loopback, true);
    let big: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    q.push_request(
        Some(0x4321),
        5,
        6,
        7,
        Src::slice(&[1, 2, 3]),
        Some(Src::slice(&big)),
        SER,
    );
    let d = reassemble(&mut q, true);
    assert_eq!(d.code, 0x4321);
    let rec = d.into_request();
    assert_eq!((rec.req, rec.idx, rec.gn, rec.flags & SER), (7, 5, 6, SER));
    assert_eq!(init(rec.cap()), vec![1, 2, 3]);
    assert_eq!(init(rec.arg()), big);

    let mut q = OutQueue::new(256, Sink::Loopback, true);
    q.push_response(9, SER_STATUS, Src::slice(&big));
    let (req, st, body) = reassemble(&mut q, false).into_response();
    assert_eq!((req, st), (9, SER_STATUS));
    assert_eq!(init(&body), big);
}

#[test]
fn a_release_frees_the_body_it_names_whether_a_request_or_a_response_parked_it() {
    // One worker's two queues to the same peer in another process, each parking a large
    // body; the peer releases both kinds with the same record, by token alone.
    let mut requests = OutQueue::new(4096, Sink::Loopback, true);
    let mut responses = OutQueue::new(4096, Sink::Loopback, true);
    requests.allow_far(false);
    responses.allow_far(true);
    let big = vec![0xA5u8; FAR_MIN];
    requests.push_request(
        Some(0x4321),
        1,
        2,
        3,
        Src::slice(&[9]),
        Some(Src::slice(&big)),
        SER,
    );
    responses.push_response(4, 0, Src::slice(&big));
    let token = |q: &OutQueue| -> u64 {
        assert_eq!(q.parking.parked().len(), 1, "the body was not parked");
        *q.parking.parked().keys().next().unwrap()
    };
    let (req_token, resp_token) = (token(&requests), token(&responses));
    assert_ne!(
        req_token, resp_token,
        "both queues handed out token {req_token}"
    );
    assert!(!parked_by_responses(req_token));
    assert!(parked_by_responses(resp_token));
    // The response's release leaves the request's body, which the peer has yet to read.
    assert!(!requests.release(resp_token));
    assert!(responses.release(resp_token));
    assert_eq!(requests.parking.parked().len(), 1);
    assert!(requests.release(req_token));
}

#[test]
fn broken_streams_are_errors_not_crashes() {
    let mut q = OutQueue::new(256, Sink::Loopback, true);
    q.push_response(1, 0, Src::slice(&[7u8; 1000]));
    q.seal();
    let pieces: Vec<Vec<Byte>> = q.queued.drain(..).collect();
    // A continuation without its start.
    assert!(Partial::feed(&mut None, classify(&pieces[1]), false).is_err());
    // A response piece on a request ring.
    assert!(Partial::feed(&mut None, classify(&pieces[0]), true).is_err());
    // A start piece whose announced length is absurd.
    let mut bad = pieces[0].clone();
    set_bytes(&mut bad, HEADER + 8, &u64::MAX.to_le_bytes());
    assert!(Partial::feed(&mut None, classify(&bad), false).is_err());
    // A piece that claims to end beyond its slot.
    let mut bad = pieces[1].clone();
    set_bytes(&mut bad, 0, &100_000u32.to_le_bytes());
    assert!(matches!(classify(&bad), Large::Bad(_)));
    // Pointer-carrying records are refused from other ranks.
    let mut q = OutQueue::new(256, Sink::Loopback, false);
    q.push_request(Some(1), 1, 1, 1, Src::slice(&[0; 1000]), None, 0);
    let b = sealed(&mut q);
    // SAFETY: written by our encoder; read with `pointers = false`, so the pointer is ignored.
    let mut r = unsafe { RequestReader::new(&b, false) }.unwrap();
    assert_eq!(r.by_ref().count(), 0);
    assert_eq!(
        r.malformed(),
        Some("a record that carries a pointer from another process")
    );
    // SAFETY: written by our encoder in this process, read once: reclaims the box.
    assert_eq!(unsafe { RequestReader::new(&b, true) }.unwrap().count(), 1);
}

/// A large argument offered in its own vector (`OutArg::offer`) is parked as that vector, with
/// the captured bytes written into its room: no copy of the argument. A request that is not the
/// one it was offered for leaves the offer and parks a copy of its own.
#[test]
fn an_offered_argument_vector_is_parked_as_the_body_itself() {
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    q.allow_far(false);
    let arg: Vec<u8> = (0..2usize << 20).map(|i| (i % 253) as u8).collect();
    let want = crate::wire::codec::encode(&arg).unwrap();
    let body = crate::wire::codec::encode_spliced(arg, 3)
        .map_err(|_| ())
        .expect("spliced");
    let (at, len) = (body.as_ptr() as usize, body.len());
    // SAFETY: the bytes behind the room are initialised (the encoding).
    let enc: &[u8] = unsafe { std::slice::from_raw_parts(body[3..].as_ptr().cast(), len - 3) };
    let enc = Src::slice(enc);
    q.offer(body, 3);
    // Another request with a large argument of its own: parked as a copy; the offer stays.
    let other = vec![0x5Au8; FAR_MIN];
    q.push_request(
        Some(1),
        1,
        2,
        3,
        Src::slice(&[4, 5, 6]),
        Some(Src::slice(&other)),
        SER,
    );
    assert_eq!(q.parking.parked().len(), 1);
    assert!(
        q.parking
            .parked()
            .values()
            .all(|p| p.bytes.as_ptr() as usize != at)
    );
    // The request it was offered for: parked as the vector itself.
    q.push_request(Some(1), 1, 2, 4, Src::slice(&[7, 8, 9]), Some(enc), SER);
    assert_eq!(q.parking.parked().len(), 2);
    let mine = q
        .parking
        .parked()
        .values()
        .find(|p| p.bytes.as_ptr() as usize == at)
        .expect("the offered vector was not parked as the body");
    assert_eq!(mine.bytes.len(), len);
    let got = init(&mine.bytes);
    assert_eq!(&got[..3], &[7, 8, 9]);
    assert_eq!(&got[3..], &want[..]);
}

/// A large result encoded in its own vector is parked as that vector; to a destination that
/// does not read parked bodies it is streamed, whole.
#[test]
fn an_owned_response_body_is_parked_as_itself_or_streamed_whole() {
    let result: Vec<u8> = (0..2usize << 20).map(|i| (i % 249) as u8).collect();
    let want = crate::wire::codec::encode(&result).unwrap();
    let body = crate::wire::codec::encode_spliced(result.clone(), 0)
        .map_err(|_| ())
        .expect("spliced");
    let at = body.as_ptr() as usize;
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    q.allow_far(true);
    q.push_response_owned(5, SER_STATUS, body);
    assert_eq!(q.parking.parked().len(), 1);
    let parked = q.parking.parked().values().next().unwrap();
    assert_eq!(parked.bytes.as_ptr() as usize, at, "the body was copied");
    assert_eq!(init(&parked.bytes), want);

    let body = crate::wire::codec::encode_spliced(result, 0)
        .map_err(|_| ())
        .expect("spliced");
    let mut q = OutQueue::new(256, Sink::Loopback, true);
    q.push_response_owned(6, SER_STATUS, body);
    let (req, st, got) = reassemble(&mut q, false).into_response();
    assert_eq!((req, st), (6, SER_STATUS));
    assert_eq!(init(&got), want);
}
