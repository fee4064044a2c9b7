//! Tests of the summary bitmap, alone and in front of inboxes on real threads.

use std::sync::Arc;

use super::*;
use crate::wire::inbox::{InboxLayout, InboxMemory};

#[test]
fn bytes_are_whole_cache_lines() {
    assert_eq!(Summary::bytes(1), 64);
    assert_eq!(Summary::bytes(512), 64);
    assert_eq!(Summary::bytes(513), 128);
    assert_eq!(Summary::bytes(0), 64);
}

#[test]
fn mark_and_take_in_order_once() {
    let s = Summary::new_heap(130);
    assert!(!s.any());
    assert!(s.mark(129));
    assert!(s.mark(3));
    assert!(!s.mark(3), "already set");
    assert!(s.mark(64));
    assert!(s.any());
    let mut seen = Vec::new();
    assert_eq!(s.take(|i| seen.push(i)), 0);
    assert_eq!(seen, [3, 64, 129]);
    assert!(!s.any());
    assert_eq!(s.take(|i| panic!("bit {i} taken twice")), 0);
}

#[test]
#[should_panic(expected = "bit 10 of 10")]
fn mark_refuses_a_bit_past_the_end() {
    Summary::new_heap(10).mark(10);
}

#[test]
fn stray_bits_from_a_peer_are_counted_not_visited() {
    let s = Summary::new_heap(10);
    s.word(0)
        .store(1 << 2 | 1 << 10 | 1 << 63, Ordering::Relaxed);
    s.word(7).store(1, Ordering::Relaxed);
    let mut seen = Vec::new();
    assert_eq!(s.take(|i| seen.push(i)), 3);
    assert_eq!(seen, [2]);
}

#[test]
fn a_summary_in_borrowed_memory() {
    #[repr(align(64))]
    struct Line([u64; 8]);
    let mut line = Line([0; 8]);
    // SAFETY: `line` is 64 bytes, 64-aligned, zeroed, outlives `s` and is used only through it.
    let s = unsafe { Summary::from_raw(line.0.as_mut_ptr().cast::<u8>(), 100, None) };
    s.mark(99);
    let mut seen = Vec::new();
    s.take(|i| seen.push(i));
    assert_eq!(seen, [99]);
    drop(s);
    assert_eq!(line.0, [0; 8]);
}

/// Producers publish into their own inbox and mark its bit; the consumer sleeps on nothing but
/// the summary, visits only the inboxes it took, and must still see every record.
#[test]
fn stress_producers_mark_after_publish_and_nothing_is_lost() {
    const INBOXES: u32 = 6;
    const RECORDS: u64 = 20_000;
    let summary = Arc::new(Summary::new_heap(INBOXES));
    let mems: Vec<_> = (0..INBOXES)
        .map(|_| Arc::new(InboxMemory::new_heap(InboxLayout::new(8, 64, 1).unwrap())))
        .collect();
    let mut consumers: Vec<_> = mems.iter().map(|m| m.consumer().unwrap()).collect();
    let handles: Vec<_> = mems
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut p = m.producer(0).unwrap();
            let summary = Arc::clone(&summary);
            std::thread::spawn(move || {
                let mut next = 0u64;
                while next < RECORDS {
                    match p.try_reserve(1).unwrap() {
                        Some(mut run) => {
                            run.push(&next.to_le_bytes());
                            drop(run);
                            next += 1;
                            summary.mark(i as u32);
                        }
                        None => std::thread::yield_now(),
                    }
                }
            })
        })
        .collect();
    let mut expected = vec![0u64; INBOXES as usize];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while expected.iter().any(|&e| e < RECORDS) {
        assert!(
            std::time::Instant::now() < deadline,
            "stalled at {expected:?}"
        );
        let mut taken = Vec::new();
        assert_eq!(summary.take(|i| taken.push(i)), 0);
        if taken.is_empty() {
            std::thread::yield_now();
        }
        for i in taken {
            let c = &mut consumers[i as usize];
            while let Some(r) = c.try_poll().unwrap() {
                let seq = u64::from_le_bytes(r.bytes().try_into().unwrap());
                assert_eq!(seq, expected[i as usize], "inbox {i}");
                expected[i as usize] += 1;
            }
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    for c in &mut consumers {
        assert!(c.try_poll().unwrap().is_none());
    }
}
