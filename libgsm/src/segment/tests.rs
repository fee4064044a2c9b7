//! Tests of segments within one process (one rank, several workers). Operations between ranks
//! and hosts are tested through `gsmrun` in `examples/filecopy/tests/`.

use super::*;
use crate::{Config, run, spmd};

#[test]
fn each_operation_within_a_rank() {
    run(Config::default().workers(2), || {
        let seg = export(4096, Rights::ALL, Access::All).unwrap();
        let h = seg.handle();
        h.put(100, b"abcdef").unwrap();
        let mut b = [0u8; 6];
        h.get(100, &mut b).unwrap();
        assert_eq!(&b, b"abcdef");
        h.put_slice(1024, &[1u32, 2, 3, 4]).unwrap();
        let mut v = [0u32; 4];
        h.get_slice(1024, &mut v).unwrap();
        assert_eq!(v, [1, 2, 3, 4]);
        assert_eq!(h.fetch_add(8, 5).unwrap(), 0);
        assert_eq!(h.fetch_add(8, 2).unwrap(), 5);
        assert_eq!(h.compare_exchange(8, 7, 70).unwrap(), Ok(7));
        assert_eq!(h.compare_exchange(8, 7, 71).unwrap(), Err(70));
        assert_eq!(h.swap(8, 1).unwrap(), 70);
        assert_eq!(h.get_nb(8, 8).wait().unwrap(), 1u64.to_le_bytes());
        h.put_nb(16, vec![9; 8]).wait().unwrap();
        wait_all();
        assert_eq!(
            h.fetch_add_nb(16, 1).wait().unwrap(),
            u64::from_le_bytes([9; 8])
        );
        // From another worker, through a handle that travelled in a closure.
        let got = crate::spawn_on(crate::WorkerId::new(1), move || {
            let mut b = [0u8; 6];
            h.get(100, &mut b).unwrap();
            h.fetch_add(8, 10).unwrap();
            b
        })
        .join();
        assert_eq!(&got, b"abcdef");
        assert_eq!(h.swap(8, 0).unwrap(), 11);
    })
    .unwrap();
}

#[test]
fn violations_name_segment_offset_and_right_and_leave_data_untouched() {
    run(Config::default().workers(1), || {
        let seg = export(64, Rights::ALL, Access::All).unwrap();
        let h = seg.handle();
        h.put(0, &[7u8; 64]).unwrap();
        let e = h.put(60, &[0u8; 8]).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::OutOfBounds {
                    offset: 60,
                    len: 8,
                    size: 64,
                    right: Right::Write,
                    ..
                }
            ),
            "{e}"
        );
        let text = e.to_string();
        assert!(
            text.contains("offset 60") && text.contains("write") && text.contains("segment"),
            "{text}"
        );
        let e = h.fetch_add(4, 1).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::Misaligned {
                    offset: 4,
                    right: Right::Atomic,
                    ..
                }
            ),
            "{e}"
        );
        assert!(matches!(
            h.get(u64::MAX - 2, &mut [0u8; 8]).unwrap_err(),
            SegmentError::OutOfBounds { .. }
        ));
        let mut b = [0u8; 64];
        h.get(0, &mut b).unwrap();
        assert_eq!(b, [7u8; 64], "refused operations left the data as it was");
        // Revocation: the old handle is stale, the new one works.
        let h2 = seg.revoke();
        let e = h.put(0, &[1]).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::Stale {
                    current: 2,
                    right: Right::Write,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("revoked"), "{e}");
        h2.put(0, &[1]).unwrap();
        drop(seg);
        let e = h2.get(0, &mut [0u8; 1]).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::Stale {
                    current: 0,
                    right: Right::Read,
                    ..
                }
            ),
            "{e}"
        );
    })
    .unwrap();
}

#[test]
fn concurrent_fetch_add_from_every_worker_sums_exactly() {
    const PER: u64 = 20_000;
    let owner = std::sync::Arc::new(std::sync::Mutex::new(None::<SegmentRef>));
    let workers = 4;
    let o = owner.clone();
    let r = spmd(Config::default().workers(workers), move |w| {
        // Worker 0 exports; the others wait for its handle (published through the mutex, then
        // a message so that they do not spin).
        if w.id() == 0 {
            let seg = export(64, Rights::ALL, Access::All).unwrap();
            *o.lock().unwrap() = Some(seg.handle());
            for i in 1..w.count() {
                crate::send(crate::WorkerId::new(i), 1, 0u8);
            }
            let h = seg.handle();
            for _ in 0..PER {
                h.fetch_add(8, 1).unwrap();
            }
            for i in 1..w.count() {
                let _: u8 = crate::recv(crate::WorkerId::new(i), 2);
            }
            let mut b = [0u8; 8];
            h.get(8, &mut b).unwrap();
            u64::from_le_bytes(b)
        } else {
            let _: u8 = crate::recv(crate::WorkerId::new(0), 1);
            let h = o.lock().unwrap().unwrap();
            for i in 0..PER {
                h.fetch_add(8, 1).unwrap();
                if i % 1000 == 0 {
                    crate::yield_now();
                }
            }
            crate::send(crate::WorkerId::new(0), 2, 0u8);
            0
        }
    })
    .unwrap();
    assert_eq!(r[0], PER * workers as u64);
}

#[test]
fn a_notification_arrives_after_its_data() {
    run(Config::default().workers(2), || {
        let seg = export(1 << 16, Rights::ALL, Access::All).unwrap();
        let h = seg.handle();
        let writer = crate::spawn_on(crate::WorkerId::new(1), move || {
            for i in 0..64u64 {
                let data = vec![i as u8 + 1; 1000];
                h.put_notify(i * 1000, &data, i).unwrap();
            }
        });
        for i in 0..64u64 {
            let n = seg.next_notification();
            assert_eq!((n.word, n.offset, n.len, n.source), (i, i * 1000, 1000, 0));
            let mut b = vec![0u8; 1000];
            seg.read(n.offset, &mut b).unwrap();
            assert!(
                b.iter().all(|&x| x == i as u8 + 1),
                "notification {i} came before its data"
            );
        }
        writer.join();
        assert!(seg.try_notification().is_none());
    })
    .unwrap();
}

#[test]
fn a_handler_fiber_runs_on_each_notification_and_ends_with_the_segment() {
    use std::cell::RefCell;
    use std::rc::Rc;
    run(Config::default().workers(2), || {
        let seg = export(4096, Rights::ALL, Access::All).unwrap();
        let h = seg.handle();
        let seen = Rc::new(RefCell::new(Vec::new()));
        let s2 = seen.clone();
        let handler = seg.on_notification(move |n| {
            let mut b = [0u8; 8];
            h.get(n.offset, &mut b).unwrap();
            s2.borrow_mut().push((n.word, u64::from_le_bytes(b)));
        });
        crate::spawn_on(crate::WorkerId::new(1), move || {
            for i in 0..10u64 {
                h.put_notify(i * 8, &(i * 100).to_le_bytes(), i).unwrap();
            }
        })
        .join();
        crate::wait_for(|| seen.borrow().len() == 10);
        drop(seg);
        handler.join();
        let want: Vec<(u64, u64)> = (0..10).map(|i| (i, i * 100)).collect();
        assert_eq!(
            *seen.borrow(),
            want,
            "each notification once, in order, after its data"
        );
    })
    .unwrap();
}

#[test]
fn block_copies_move_every_byte_at_every_length_around_a_block() {
    use copy::BLOCK;
    let src: Vec<u8> = (0..3 * BLOCK + 7)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    for len in [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 3 * BLOCK + 7] {
        let mut dst = vec![0xEEu8; len + 1];
        // SAFETY: both hold `len` bytes; distinct vectors.
        unsafe { copy::copy(src.as_ptr(), dst.as_mut_ptr(), len) };
        assert!(dst[..len] == src[..len], "a copy of {len} bytes differs");
        assert_eq!(dst[len], 0xEE, "a copy of {len} bytes wrote past its end");
    }
}

/// Typed atomics on this rank's segment (between ranks and over each fabric:
/// `gsm-segcheck`, `examples/filecopy/src/bin/segcheck/typed.rs`): signed and unsigned
/// semantics, float adds from several workers at once, widths that leave their neighbours alone,
/// and the alignment each width needs.
#[test]
fn typed_atomics_within_a_rank() {
    run(Config::default().workers(3), || {
        let seg = export(4096, Rights::ALL, Access::All).unwrap();
        let h = seg.handle();
        let a = h.atomic::<i32>(0);
        a.store(-2).unwrap();
        assert_eq!(a.fetch_max(-7).unwrap(), -2);
        assert_eq!(a.fetch_min(1).unwrap(), -2);
        assert_eq!(
            h.atomic::<i32>(4).load().unwrap(),
            0,
            "a 4-byte store stays 4 bytes"
        );
        let u = h.atomic::<u32>(4);
        u.store(u32::MAX).unwrap();
        assert_eq!(u.fetch_min(3).unwrap(), u32::MAX);
        assert_eq!(a.load().unwrap(), -2, "the neighbour is untouched");
        let fibers: Vec<_> = (0..3)
            .map(|w| {
                crate::spawn_on(crate::WorkerId::new(w), move || {
                    for _ in 0..500 {
                        h.atomic::<f64>(8).fetch_add(0.5).unwrap();
                        h.atomic::<f32>(16).fetch_add(-0.25).unwrap();
                    }
                })
            })
            .collect();
        for f in fibers {
            f.join();
        }
        assert_eq!(h.atomic::<f64>(8).load().unwrap(), 750.0);
        assert_eq!(h.atomic::<f32>(16).load().unwrap(), -375.0);
        let e = h.atomic::<u64>(4).swap(1).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::Misaligned {
                    offset: 4,
                    align: 8,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(u.load().unwrap(), 3, "a refused operation changes nothing");
    })
    .unwrap();
}

/// Every kind of atomic has a number a request carries and gets it back; numbers of no kind
/// (a float's bitwise operations, numbers beyond the table) are refused by the target.
#[test]
fn atomic_kinds_round_trip_their_numbers_and_others_are_refused() {
    use crate::fabric::rma::{Atomic, AtomicOp, Datatype};
    let kinds: Vec<Atomic> = Atomic::all().collect();
    assert_eq!(kinds.len(), 4 * 10 + 2 * 7);
    for k in &kinds {
        assert_eq!(Atomic::decode(k.code().into()), Some(*k));
        assert!(k.code() < 64, "the ofi port keeps them in a u64");
    }
    let float_xor = Atomic {
        ty: Datatype::F64,
        op: AtomicOp::Xor,
    };
    assert_eq!(Atomic::decode(float_xor.code().into()), None);
    assert_eq!(Atomic::decode(60), None);
    assert_eq!(Atomic::decode(u64::MAX), None);
}
