//! Loom model of the inbox's reserve/publish/consume protocol: every interleaving (and every
//! weak-memory outcome loom models) of two producers racing for the reservation counter of a
//! 2-slot inbox, and a consumer checking each record's bytes and source, so that a later run
//! needs the consumer's release of an earlier slot.
//!
//! Run with (see the parent module docs):
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p gossamer --release --lib wire::inbox::loom_model`

use std::sync::Arc;

use loom::thread;

use super::*;

/// Record `i` of source `s`: two bytes.
fn record(s: u32, i: u8) -> [u8; 2] {
    [0x10 * (s as u8 + 1), i]
}

/// Publishes `count` records from `p`, in runs of `run` slots, waiting for room.
fn send(p: &mut InboxProducer, count: u8, run: u32) {
    let s = p.source();
    let mut i = 0;
    while i < count {
        match p.try_reserve(run.min((count - i) as u32)) {
            Ok(Some(mut r)) => {
                while i < count && r.push(&record(s, i)) {
                    i += 1;
                }
            }
            Ok(None) => thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Consumes `total` records, checking that each source's arrive whole and in its order.
fn receive(c: &mut InboxConsumer, total: usize, sources: usize) {
    let mut next = vec![0u8; sources];
    let mut got = 0;
    while got < total {
        match c.try_poll() {
            Ok(Some(r)) => {
                let s = r.source();
                assert_eq!(r.bytes(), record(s, next[s as usize]), "source {s}");
                next[s as usize] += 1;
                got += 1;
            }
            Ok(None) => thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn loom_model_two_producers_race_for_a_two_slot_inbox() {
    loom::model(|| {
        let mem = Arc::new(InboxMemory::new_heap(InboxLayout::new(2, 64, 2).unwrap()));
        let mut c = mem.consumer().unwrap();
        let producers: Vec<_> = (0..2)
            .map(|s| {
                let mut p = mem.producer(s).unwrap();
                // Source 0 sends two records (the second needs a release), source 1 one.
                let count = 2 - s as u8;
                thread::spawn(move || send(&mut p, count, 1))
            })
            .collect();
        receive(&mut c, 3, 2);
        for p in producers {
            p.join().unwrap();
        }
        assert!(c.try_poll().unwrap().is_none());
    });
}

#[test]
fn loom_model_a_run_of_two_beside_a_single() {
    // A run that takes the whole inbox, and a single that must wait for both its slots to be
    // released; whichever reserves first, the consumer sees every record once.
    loom::model(|| {
        let mem = Arc::new(InboxMemory::new_heap(InboxLayout::new(2, 64, 2).unwrap()));
        let mut c = mem.consumer().unwrap();
        let mut a = mem.producer(0).unwrap();
        let mut b = mem.producer(1).unwrap();
        let ta = thread::spawn(move || send(&mut a, 2, 2));
        let tb = thread::spawn(move || send(&mut b, 1, 1));
        receive(&mut c, 3, 2);
        ta.join().unwrap();
        tb.join().unwrap();
    });
}

#[test]
fn loom_model_a_dropped_run_is_skipped() {
    // A run of two with one record: the consumer must go past the skip to the next run.
    loom::model(|| {
        let mem = Arc::new(InboxMemory::new_heap(InboxLayout::new(2, 64, 1).unwrap()));
        let mut c = mem.consumer().unwrap();
        let mut p = mem.producer(0).unwrap();
        let t = thread::spawn(move || {
            p.try_reserve(2).unwrap().unwrap().push(&record(0, 0));
            send(&mut p, 1, 1);
        });
        let mut seen = Vec::new();
        while seen.len() < 2 {
            match c.try_poll() {
                Ok(Some(r)) => seen.push(r.bytes().to_vec()),
                Ok(None) => thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(seen, [record(0, 0), record(0, 0)]);
        t.join().unwrap();
    });
}
