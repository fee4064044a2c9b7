//! Unit and stress tests of the inbox on real threads (the loom model is in `loom_model`).

use std::sync::Arc;
use std::sync::atomic::Ordering as O;

use super::*;

fn inbox(slots: u32, slot_size: u32, sources: u32) -> Arc<InboxMemory> {
    Arc::new(InboxMemory::new_heap(
        InboxLayout::new(slots, slot_size, sources).unwrap(),
    ))
}

/// Reads the next record as (source, bytes), releasing it.
fn take(c: &mut InboxConsumer) -> Option<(u32, Vec<u8>)> {
    let r = c.try_poll().unwrap()?;
    Some((r.source(), r.bytes().to_vec()))
}

#[test]
fn layout_rejects_bad_geometry_and_counts_bytes() {
    for (slots, size, sources) in [(0, 64, 1), (3, 64, 1), (2, 0, 1), (2, 100, 1), (2, 64, 0)] {
        let err = InboxLayout::new(slots, size, sources).unwrap_err();
        assert!(matches!(err, InboxError::Layout { .. }), "{err}");
        assert!(err.to_string().contains("power-of-two"), "{err}");
    }
    let l = InboxLayout::new(8, 4096, 4).unwrap();
    assert_eq!(l.bytes(), 256 + 8 * (4096 + 64));
    assert_eq!(l.header_offset(0) % 64, 0);
    assert_eq!(l.header_offset(3) % 64, 0);
    assert!(l.payload_offset(7) + 4096 <= l.bytes());
}

#[test]
fn one_producer_in_order_with_its_source() {
    let mem = inbox(4, 64, 3);
    let mut p = mem.producer(2).unwrap();
    let mut c = mem.consumer().unwrap();
    assert!(c.try_poll().unwrap().is_none());
    assert!(!c.has_data());
    let mut run = p.try_reserve(3).unwrap().unwrap();
    assert_eq!(run.remaining(), 3);
    for i in 0..3u8 {
        assert!(run.push(&[i; 5]));
    }
    assert!(!run.push(b"x"), "a run holds exactly what it reserved");
    drop(run);
    assert!(c.has_data());
    for i in 0..3u8 {
        assert_eq!(take(&mut c), Some((2, vec![i; 5])));
    }
    assert_eq!(take(&mut c), None);
    assert_eq!(c.consumed(), 3);
}

#[test]
fn back_pressure_until_the_consumer_releases() {
    let mem = inbox(4, 64, 1);
    let mut p = mem.producer(0).unwrap();
    let mut c = mem.consumer().unwrap();
    p.try_reserve(3).unwrap().unwrap();
    assert!(p.try_reserve(2).unwrap().is_none(), "only one slot is free");
    assert!(p.try_reserve(1).unwrap().is_some());
    assert!(p.try_reserve(1).unwrap().is_none(), "full");
    // The dropped runs were skips; consuming them frees the inbox.
    assert_eq!(take(&mut c), None);
    assert_eq!(c.consumed(), 4);
    let mut run = p.try_reserve(4).unwrap().unwrap();
    assert!(run.push(b"after the wrap"));
    drop(run);
    assert_eq!(take(&mut c), Some((0, b"after the wrap".to_vec())));
    assert_eq!(take(&mut c), None);
    assert_eq!(c.consumed(), 8);
}

#[test]
fn a_held_record_keeps_its_slot() {
    let mem = inbox(2, 64, 1);
    let mut p = mem.producer(0).unwrap();
    let mut c = mem.consumer().unwrap();
    p.try_reserve(2).unwrap().unwrap().push(b"a");
    let r = c.try_poll().unwrap().unwrap();
    assert_eq!(r.bytes(), b"a");
    assert_eq!(r.position(), 0);
    // Position 1 was skipped but not yet consumed, position 0 is held: nothing is free.
    assert!(p.try_reserve(1).unwrap().is_none());
    r.release();
    assert!(p.try_reserve(1).unwrap().is_some());
}

#[test]
fn runs_of_two_producers_are_read_in_reservation_order() {
    let mem = inbox(8, 64, 2);
    let (mut a, mut b) = (mem.producer(0).unwrap(), mem.producer(1).unwrap());
    let mut c = mem.consumer().unwrap();
    let mut ra = a.try_reserve(2).unwrap().unwrap();
    let mut rb = b.try_reserve(2).unwrap().unwrap();
    assert_eq!((ra.start(), rb.start()), (0, 2));
    rb.push(b"b0");
    rb.push(b"b1");
    drop(rb);
    // b's records are published, but a's come first and are not.
    assert!(!c.has_data());
    assert_eq!(take(&mut c), None);
    ra.push(b"a0");
    assert_eq!(take(&mut c), Some((0, b"a0".to_vec())));
    assert_eq!(take(&mut c), None, "a1 is reserved, not published");
    drop(ra);
    assert_eq!(take(&mut c), Some((1, b"b0".to_vec())));
    assert_eq!(take(&mut c), Some((1, b"b1".to_vec())));
}

#[test]
fn an_unpublished_slot_is_offered_again() {
    let mem = inbox(2, 64, 1);
    let mut p = mem.producer(0).unwrap();
    let mut c = mem.consumer().unwrap();
    let mut run = p.try_reserve(1).unwrap().unwrap();
    {
        let mut s = run.next_slot().unwrap();
        s.buf()[0] = 9;
    }
    assert_eq!(run.remaining(), 1);
    let mut s = run.next_slot().unwrap();
    s.buf()[0] = 7;
    s.publish(1);
    assert!(run.next_slot().is_none());
    drop(run);
    assert_eq!(take(&mut c), Some((0, vec![7])));
}

#[test]
fn roles_and_bounds_are_refused_with_errors() {
    let mem = inbox(4, 64, 2);
    let _c = mem.consumer().unwrap();
    assert_eq!(mem.consumer().unwrap_err(), InboxError::ConsumerTaken);
    let err = mem.producer(2).unwrap_err();
    assert_eq!(
        err,
        InboxError::Source {
            asked: 2,
            sources: 2
        }
    );
    assert!(err.to_string().contains("0..2"), "{err}");
    let mut p = mem.producer(1).unwrap();
    for n in [0, 5] {
        let err = p.try_reserve(n).unwrap_err();
        assert_eq!(err, InboxError::RunLength { n, slots: 4 });
    }
    assert!(p.poisoned().is_none(), "a bad argument does not poison");
}

#[test]
#[should_panic(expected = "exceeds the slot size")]
fn publish_refuses_a_length_past_the_slot() {
    let mem = inbox(2, 64, 1);
    let mut p = mem.producer(0).unwrap();
    let mut run = p.try_reserve(1).unwrap().unwrap();
    run.next_slot().unwrap().publish(65);
}

/// Writes a raw header (and source word) at `slot`, as a broken peer would.
fn forge(mem: &InboxMemory, slot: usize, header: u64, source: u64) {
    mem.region.source(slot).store(source, O::Relaxed);
    mem.region.header(slot).store(header, O::Release);
}

#[test]
fn the_consumer_refuses_corrupt_slots_and_stays_poisoned() {
    let cases = [
        (header_word(1, 65), 0, "larger than the slot size"),
        (header_word(3, 4), 0, "neither this lap"),
        (header_word(1, 4), 2, "source number"),
        (header_word(1, 4), u64::MAX, "source number"),
        (header_word(1, SKIP | 1), 0, "larger than the slot size"),
    ];
    for (header, source, what) in cases {
        let mem = inbox(2, 64, 2);
        let mut c = mem.consumer().unwrap();
        forge(&mem, 0, header, source);
        assert!(c.has_data());
        let err = c.try_poll().unwrap_err();
        assert!(
            matches!(
                &err,
                InboxError::Corrupt {
                    position: 0,
                    slot: 0,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(what), "{what}: {err}");
        assert_eq!(c.try_poll().unwrap_err(), err, "poison is sticky");
        assert!(c.poll().is_none());
        assert!(!c.has_data());
        assert_eq!(c.poisoned(), Some(&err));
    }
}

#[test]
fn the_producer_refuses_corrupt_counters() {
    // A release counter past every reservation.
    let mem = inbox(2, 64, 1);
    let mut p = mem.producer(0).unwrap();
    p.try_reserve(2).unwrap().unwrap();
    mem.region.released().store(5, O::Release);
    let err = p.try_reserve(1).unwrap_err();
    assert!(
        matches!(err, InboxError::CorruptCounter { value: 5, .. }),
        "{err}"
    );
    assert_eq!(p.try_reserve(1).unwrap_err(), err, "poison is sticky");
    assert_eq!(p.poisoned(), Some(&err));

    // A release counter that goes backwards.
    let mem = inbox(2, 64, 1);
    let mut p = mem.producer(0).unwrap();
    p.try_reserve(2).unwrap().unwrap();
    mem.region.released().store(2, O::Release);
    p.try_reserve(2).unwrap().unwrap();
    mem.region.released().store(1, O::Release);
    let err = p.try_reserve(1).unwrap_err();
    assert!(err.to_string().contains("backwards"), "{err}");

    // A reservation counter that goes backwards.
    let mem = inbox(4, 64, 1);
    let mut p = mem.producer(0).unwrap();
    p.try_reserve(2).unwrap().unwrap();
    mem.region.tail().store(1, O::Relaxed);
    let err = p.try_reserve(1).unwrap_err();
    assert!(err.to_string().contains("reservation counter"), "{err}");
}

#[test]
fn stress_many_producers_every_record_once_in_each_producers_order() {
    const PRODUCERS: u32 = 4;
    const RECORDS: u64 = 20_000;
    let mem = inbox(16, 64, PRODUCERS);
    let mut c = mem.consumer().unwrap();
    let handles: Vec<_> = (0..PRODUCERS)
        .map(|s| {
            let mut p = mem.producer(s).unwrap();
            std::thread::spawn(move || {
                let mut next = 0u64;
                let mut batch = 1 + s;
                while next < RECORDS {
                    let n = batch.min((RECORDS - next) as u32);
                    let Some(mut run) = p.try_reserve(n).unwrap() else {
                        std::thread::yield_now();
                        continue;
                    };
                    // Sometimes leave the end of a run to be skipped.
                    let fill = if next % 7 == 0 { n - n / 2 } else { n };
                    for _ in 0..fill {
                        let len = 8 + (next % 50) as usize;
                        let mut bytes = vec![s as u8; len];
                        bytes[..8].copy_from_slice(&next.to_le_bytes());
                        assert!(run.push(&bytes));
                        next += 1;
                    }
                    drop(run);
                    batch = batch % 5 + 1;
                }
            })
        })
        .collect();
    let mut expected = [0u64; PRODUCERS as usize];
    let mut got = 0u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while got < RECORDS * PRODUCERS as u64 {
        assert!(
            std::time::Instant::now() < deadline,
            "stalled at {got} records"
        );
        let Some(r) = c.try_poll().unwrap() else {
            std::thread::yield_now();
            continue;
        };
        let s = r.source() as usize;
        let b = r.bytes();
        let seq = u64::from_le_bytes(b[..8].try_into().unwrap());
        assert_eq!(seq, expected[s], "source {s} out of order");
        assert_eq!(b.len(), 8 + (seq % 50) as usize);
        assert!(
            b[8..].iter().all(|&x| x == s as u8),
            "torn record of source {s}"
        );
        expected[s] += 1;
        got += 1;
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(take(&mut c), None);
    assert!(expected.iter().all(|&e| e == RECORDS));
}
