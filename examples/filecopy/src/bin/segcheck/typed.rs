//! The typed atomics of `gossamer::segment` between two ranks: concurrent adds of every type
//! from both ranks into rank 0's segment, then (from rank 1, so over the fabric under test)
//! each operation's answer and effect, with the signed and unsigned and float semantics that
//! tell the types apart, and the target's refusals (alignment to the width, bounds, rights).

use gossamer::segment::{self, Access, AtomicValue, Right, Rights, SegmentError, SegmentRef};
use gossamer::{WorkerId, rank, spawn_on, workers_of_rank};

/// Adds 1 + rank, `per` times from every worker of this rank, to the `T` at `offset`.
fn add_from_every_worker<T: AtomicValue + Copy>(w: SegmentRef, offset: u64, one: T, per: usize) {
    let fibers: Vec<_> = workers_of_rank(rank())
        .map(|x| {
            spawn_on(WorkerId::new(x), move || {
                for _ in 0..per {
                    w.atomic::<T>(offset).fetch_add(one).unwrap();
                }
            })
        })
        .collect();
    for f in fibers {
        f.join();
    }
}

fn semantics(w: SegmentRef) {
    // i32: signed min and max, wrapping add, bitwise operations, compare-exchange.
    let a = w.atomic::<i32>(64);
    a.store(-5).unwrap();
    assert_eq!(a.fetch_min(3).unwrap(), -5);
    assert_eq!(a.fetch_max(-10).unwrap(), -5);
    assert_eq!(a.fetch_max(7).unwrap(), -5);
    assert_eq!(a.swap(i32::MAX).unwrap(), 7);
    assert_eq!(a.fetch_add(1).unwrap(), i32::MAX);
    assert_eq!(a.load().unwrap(), i32::MIN, "i32 add wraps");
    a.store(0b1100).unwrap();
    assert_eq!(a.fetch_and(0b1010).unwrap(), 0b1100);
    assert_eq!(a.fetch_or(0b0001).unwrap(), 0b1000);
    assert_eq!(a.fetch_xor(0b1111).unwrap(), 0b1001);
    assert_eq!(a.compare_exchange(0b0110, -1).unwrap(), Ok(0b0110));
    assert_eq!(a.compare_exchange(0, 1).unwrap(), Err(-1));
    // The neighbouring i32 is untouched by all of that (4-byte operations stay 4 bytes).
    assert_eq!(w.atomic::<i32>(68).load().unwrap(), 0);
    // u32: unsigned max, at a 4-aligned offset that is not 8-aligned.
    let b = w.atomic::<u32>(68);
    b.store(u32::MAX - 1).unwrap();
    assert_eq!(b.fetch_max(5).unwrap(), u32::MAX - 1);
    assert_eq!(b.fetch_min(5).unwrap(), u32::MAX - 1);
    assert_eq!(b.load().unwrap(), 5);
    // i64 and u64.
    let c = w.atomic::<i64>(72);
    c.store(-(1 << 40)).unwrap();
    assert_eq!(c.fetch_min(1).unwrap(), -(1 << 40));
    assert_eq!(c.fetch_add(-(1 << 40)).unwrap(), -(1 << 40));
    assert_eq!(c.load().unwrap(), -(2 << 40));
    let d = w.atomic::<u64>(80);
    assert_eq!(d.fetch_or(1 << 63).unwrap(), 0);
    assert_eq!(d.fetch_max(1).unwrap(), 1 << 63);
    assert_eq!(d.fetch_xor(u64::MAX).unwrap(), 1 << 63);
    assert_eq!(d.load().unwrap(), (1 << 63) - 1);
    // f32 and f64: add, min, max, swap, compare-exchange by bits.
    let e = w.atomic::<f32>(88);
    assert_eq!(e.fetch_add(1.5).unwrap(), 0.0);
    assert_eq!(e.fetch_add(-4.0).unwrap(), 1.5);
    assert_eq!(e.fetch_min(-3.0).unwrap(), -2.5);
    assert_eq!(e.fetch_max(0.25).unwrap(), -3.0);
    assert_eq!(e.compare_exchange(0.25, 8.0).unwrap(), Ok(0.25));
    assert_eq!(e.swap(1.0).unwrap(), 8.0);
    let f = w.atomic::<f64>(96);
    f.store(1e300).unwrap();
    assert_eq!(f.fetch_max(2e300).unwrap(), 1e300);
    assert_eq!(f.fetch_min(-0.5).unwrap(), 2e300);
    assert_eq!(f.compare_exchange(0.0, 1.0).unwrap(), Err(-0.5));
    assert_eq!(f.fetch_add(0.75).unwrap(), -0.5);
    assert_eq!(f.load().unwrap(), 0.25);
}

fn refusals(w: SegmentRef, read_only: SegmentRef) {
    let e = w.atomic::<i32>(66).fetch_add(1).unwrap_err();
    assert!(
        matches!(
            e,
            SegmentError::Misaligned {
                offset: 66,
                align: 4,
                ..
            }
        ),
        "{e}"
    );
    let e = w.atomic::<f64>(68).load().unwrap_err();
    assert!(
        matches!(
            e,
            SegmentError::Misaligned {
                offset: 68,
                align: 8,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("not aligned to 8 bytes"), "{e}");
    let e = w.atomic::<u32>(4096).load().unwrap_err();
    assert!(matches!(e, SegmentError::OutOfBounds { len: 4, .. }), "{e}");
    let e = read_only.atomic::<f32>(0).fetch_max(1.0).unwrap_err();
    assert!(
        matches!(
            e,
            SegmentError::Denied {
                right: Right::Atomic,
                rank: 1,
                ..
            }
        ),
        "{e}"
    );
}

/// The check; `share` hands rank 0's handle to rank 1 under a tag, `barrier` waits for the
/// other rank.
pub fn typed_atomics(share: fn(u64, Option<SegmentRef>) -> SegmentRef, barrier: fn(u64)) {
    const PER: usize = 200;
    let sym = segment::alloc_symmetric(&[0, 1], 4096, Rights::ALL).unwrap();
    let w = sym.on(0);
    add_from_every_worker(w, 0, 1i32, PER);
    add_from_every_worker(w, 4, 1u32, PER);
    add_from_every_worker(w, 8, -1i64, PER);
    add_from_every_worker(w, 16, 1u64, PER);
    add_from_every_worker(w, 24, 0.5f32, PER);
    add_from_every_worker(w, 32, 0.25f64, PER);
    barrier(60);
    let n = PER * workers_of_rank(0).len() * 2;
    assert_eq!(w.atomic::<i32>(0).load().unwrap(), n as i32);
    assert_eq!(w.atomic::<u32>(4).load().unwrap(), n as u32);
    assert_eq!(w.atomic::<i64>(8).load().unwrap(), -(n as i64));
    assert_eq!(w.atomic::<u64>(16).load().unwrap(), n as u64);
    assert_eq!(w.atomic::<f32>(24).load().unwrap(), n as f32 * 0.5);
    assert_eq!(w.atomic::<f64>(32).load().unwrap(), n as f64 * 0.25);
    barrier(61);
    let read_only = (rank() == 0).then(|| segment::export(64, Rights::READ, Access::All).unwrap());
    let ro = share(62, read_only.as_ref().map(|s| s.handle()));
    if rank() == 1 {
        semantics(w);
        refusals(w, ro);
    }
    barrier(63);
}
