//! Loom model of the ring's publish/consume protocol: every interleaving (and every weak-memory
//! outcome loom models) of a producer sending three payloads through a 2-slot ring and a consumer
//! checking them, so the third payload needs the consumer's release of the first.
//!
//! Run with (see the parent module docs):
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p gossamer --release --lib wire::ring::loom_model`

use std::sync::Arc;

use loom::thread;

use super::*;

/// Payload `i`: `i + 1` bytes, each `0x10 * (i + 1) + index`.
fn payload(i: u8) -> Vec<u8> {
    (0..=i).map(|k| 0x10 * (i + 1) + k).collect()
}

#[test]
fn loom_model_two_slots_three_payloads() {
    loom::model(|| {
        let mem = Arc::new(RingMemory::new_heap(RingLayout::new(2, 64).unwrap()));
        let (mut p, mut c) = mem.split();
        let producer = thread::spawn(move || {
            for i in 0..3u8 {
                loop {
                    if let Some(mut w) = p.try_reserve() {
                        let want = payload(i);
                        w.buf()[..want.len()].copy_from_slice(&want);
                        w.publish(want.len() as u32);
                        break;
                    }
                    thread::yield_now();
                }
            }
        });
        let mut got = 0u8;
        while got < 3 {
            match c.try_poll() {
                Ok(Some(r)) => {
                    assert_eq!(r.position(), got as u64);
                    assert_eq!(r.bytes(), payload(got), "payload {got}");
                    r.release();
                    got += 1;
                }
                Ok(None) => thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        producer.join().unwrap();
        assert!(c.poll().is_none());
    });
}

#[test]
fn loom_model_has_data_then_poll() {
    // The cheap check must never promise data that `poll` then cannot deliver.
    loom::model(|| {
        let mem = Arc::new(RingMemory::new_heap(RingLayout::new(2, 64).unwrap()));
        let (mut p, mut c) = mem.split();
        let producer = thread::spawn(move || {
            let mut w = p.try_reserve().unwrap();
            w.buf()[0] = 42;
            w.publish(1);
        });
        if c.has_data() {
            assert_eq!(c.poll().unwrap().bytes(), [42]);
        }
        producer.join().unwrap();
    });
}
