//! Typed remote atomics on a segment's words: [`AtomicRef`], made by
//! [`SegmentRef::atomic`], does load, store, add, min, max, swap and compare-exchange on an
//! `i32`, `u32`, `i64`, `u64`, `f32` or `f64` at an offset, and bitwise and, or, xor on the
//! integers (UPC++'s atomic domains, MPI's accumulate operations on one element).
//!
//! Each goes the segment's paths (`mod.rs`) as the other operations do and is checked at the
//! target like them: the generation, the caller rank's atomic right, bounds, and alignment to
//! the type's width. This file also holds the operation on memory itself ([`apply`]): hardware
//! atomics for the integers; for floats a compare-exchange loop on the word's bits (add, min,
//! max), as no CPU has a float fetch-add. Float min and max follow `f64::min`/`max` (a NaN
//! operand yields the other), and a float compare-exchange compares bits (`-0.0` is not `0.0`,
//! a NaN equals the same NaN). Atomics of one type on one word are atomic with each other
//! whatever the path; mixing types or widths on the same bytes is not defined, as in MPI.
//!
//! It does not choose paths (`mod.rs`) nor post RMA (`rma.rs`).

use std::marker::PhantomData;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

use super::{Op, SegmentError, SegmentRef};
use crate::fabric::rma::{Atomic, AtomicOp, Datatype};

mod sealed {
    /// The datatype number (`fabric::rma::Datatype::code`) and the bits of a value in a word.
    pub trait Sealed: Copy {
        const CODE: u8;
        fn to_bits(self) -> u64;
        fn from_bits(bits: u64) -> Self;
    }
}

/// A type the segment atomics work on: `i32`, `u32`, `i64`, `u64`, `f32`, `f64`.
pub trait AtomicValue: sealed::Sealed + Send + std::fmt::Debug + 'static {}

/// The integer [`AtomicValue`]s, which also take bitwise and, or and xor.
pub trait AtomicInt: AtomicValue {}

macro_rules! value {
    ($t:ty, $code:expr, $bits:ty, int) => {
        value!($t, $code, $bits);
        impl AtomicInt for $t {}
    };
    ($t:ty, $code:expr, $bits:ty) => {
        impl sealed::Sealed for $t {
            const CODE: u8 = $code as u8;
            fn to_bits(self) -> u64 {
                u64::from(<$bits>::from_ne_bytes(self.to_ne_bytes()))
            }
            fn from_bits(bits: u64) -> Self {
                <$t>::from_ne_bytes((bits as $bits).to_ne_bytes())
            }
        }
        impl AtomicValue for $t {}
    };
}

value!(i32, 0, u32, int);
value!(u32, 1, u32, int);
value!(i64, 2, u64, int);
value!(u64, 3, u64, int);
value!(f32, 4, u32);
value!(f64, 5, u64);

fn datatype<T: AtomicValue>() -> Datatype {
    match T::CODE {
        0 => Datatype::I32,
        1 => Datatype::U32,
        2 => Datatype::I64,
        3 => Datatype::U64,
        4 => Datatype::F32,
        _ => Datatype::F64,
    }
}

/// A `T` at an offset of a segment, for atomics ([`SegmentRef::atomic`]). Plain data, like the
/// handle it is made from. Every operation answers the value the word held before it (right:
/// atomic; the offset must be a multiple of the type's size).
#[derive(Debug, Clone, Copy)]
pub struct AtomicRef<T: AtomicValue> {
    seg: SegmentRef,
    offset: u64,
    _t: PhantomData<fn() -> T>,
}

impl SegmentRef {
    /// The `T` at `offset`, for typed remote atomics:
    /// `seg.atomic::<f64>(8).fetch_add(0.5)`. Nothing is checked until an operation runs.
    ///
    /// ```
    /// use gossamer::segment::{self, Access, Rights};
    /// gossamer::run(gossamer::Config::default().workers(2), || {
    ///     let seg = segment::export(64, Rights::ALL, Access::All).unwrap();
    ///     let h = seg.handle();
    ///     let sum = h.atomic::<f64>(0);
    ///     sum.fetch_add(1.5).unwrap();
    ///     assert_eq!(sum.fetch_max(0.25).unwrap(), 1.5);
    ///     let flags = h.atomic::<u32>(8);
    ///     flags.fetch_or(0b101).unwrap();
    ///     assert_eq!(flags.fetch_and(0b100).unwrap(), 0b101);
    ///     assert_eq!(flags.load().unwrap(), 0b100);
    ///     assert!(h.atomic::<i32>(2).load().is_err()); // misaligned: refused
    /// })
    /// .unwrap();
    /// ```
    pub fn atomic<T: AtomicValue>(&self, offset: u64) -> AtomicRef<T> {
        AtomicRef {
            seg: *self,
            offset,
            _t: PhantomData,
        }
    }
}

impl<T: AtomicValue> AtomicRef<T> {
    fn run(&self, op: AtomicOp, a: T, b: T) -> Result<T, SegmentError> {
        let kind = Atomic {
            ty: datatype::<T>(),
            op,
        };
        let old = self.seg.run(
            self.offset,
            Op::Atomic(kind, a.to_bits(), b.to_bits()),
            None,
        )?;
        Ok(T::from_bits(old))
    }

    /// The segment and offset.
    pub fn place(&self) -> (SegmentRef, u64) {
        (self.seg, self.offset)
    }

    /// Reads the value atomically.
    pub fn load(&self) -> Result<T, SegmentError> {
        self.run(AtomicOp::Load, T::from_bits(0), T::from_bits(0))
    }

    /// Stores `v` atomically.
    pub fn store(&self, v: T) -> Result<(), SegmentError> {
        self.run(AtomicOp::Store, v, v).map(drop)
    }

    /// Adds `v` (wrapping for integers); the old value.
    pub fn fetch_add(&self, v: T) -> Result<T, SegmentError> {
        self.run(AtomicOp::Add, v, v)
    }

    /// Keeps the smaller of the value and `v`; the old value.
    pub fn fetch_min(&self, v: T) -> Result<T, SegmentError> {
        self.run(AtomicOp::Min, v, v)
    }

    /// Keeps the larger of the value and `v`; the old value.
    pub fn fetch_max(&self, v: T) -> Result<T, SegmentError> {
        self.run(AtomicOp::Max, v, v)
    }

    /// Stores `v`; the old value.
    pub fn swap(&self, v: T) -> Result<T, SegmentError> {
        self.run(AtomicOp::Swap, v, v)
    }

    /// Stores `new` if the value is `current` (bit for bit): `Ok(current)` then, `Err(actual)`
    /// otherwise.
    pub fn compare_exchange(&self, current: T, new: T) -> Result<Result<T, T>, SegmentError> {
        let old = self.run(AtomicOp::Cas, current, new)?;
        Ok(if old.to_bits() == current.to_bits() {
            Ok(old)
        } else {
            Err(old)
        })
    }
}

impl<T: AtomicInt> AtomicRef<T> {
    /// Bitwise and with `v`; the old value.
    pub fn fetch_and(&self, v: T) -> Result<T, SegmentError> {
        self.run(AtomicOp::And, v, v)
    }

    /// Bitwise or with `v`; the old value.
    pub fn fetch_or(&self, v: T) -> Result<T, SegmentError> {
        self.run(AtomicOp::Or, v, v)
    }

    /// Bitwise exclusive or with `v`; the old value.
    pub fn fetch_xor(&self, v: T) -> Result<T, SegmentError> {
        self.run(AtomicOp::Xor, v, v)
    }
}

macro_rules! int_op {
    ($atomic:ty, $t:ty, $p:expr, $op:expr, $a:expr, $b:expr) => {{
        // SAFETY: the caller's contract: aligned to the width, in bounds, only touched
        // atomically while shared.
        let w = unsafe { <$atomic>::from_ptr($p.cast()) };
        let (a, b) = ($a as $t, $b as $t);
        let sc = Ordering::SeqCst;
        let old = match $op {
            AtomicOp::Load => w.load(sc),
            AtomicOp::Store | AtomicOp::Swap => w.swap(a, sc),
            AtomicOp::Add => w.fetch_add(a, sc),
            AtomicOp::And => w.fetch_and(a, sc),
            AtomicOp::Or => w.fetch_or(a, sc),
            AtomicOp::Xor => w.fetch_xor(a, sc),
            AtomicOp::Min => w.fetch_min(a, sc),
            AtomicOp::Max => w.fetch_max(a, sc),
            AtomicOp::Cas => match w.compare_exchange(a, b, sc, sc) {
                Ok(v) | Err(v) => v,
            },
        };
        old
    }};
}

macro_rules! float_op {
    ($atomic:ty, $bits:ty, $f:ty, $p:expr, $op:expr, $a:expr, $b:expr) => {{
        // SAFETY: as for `int_op`.
        let w = unsafe { <$atomic>::from_ptr($p.cast()) };
        let (a, b) = ($a as $bits, $b as $bits);
        let sc = Ordering::SeqCst;
        let f = |x: $bits| <$f>::from_bits(x);
        match $op {
            AtomicOp::Load => w.load(sc),
            AtomicOp::Store | AtomicOp::Swap => w.swap(a, sc),
            AtomicOp::Cas => match w.compare_exchange(a, b, sc, sc) {
                Ok(v) | Err(v) => v,
            },
            op => {
                let next = |x: $bits| -> $bits {
                    match op {
                        AtomicOp::Add => (f(x) + f(a)).to_bits(),
                        AtomicOp::Min => f(x).min(f(a)).to_bits(),
                        AtomicOp::Max => f(x).max(f(a)).to_bits(),
                        // Bitwise operations on floats are refused before (`Atomic::exists`).
                        _ => x,
                    }
                };
                match w.fetch_update(sc, sc, |x| Some(next(x))) {
                    Ok(v) | Err(v) => v,
                }
            }
        }
    }};
}

/// Performs `kind` with operands `a`, `b` (bits in the low bytes) on the word at `p`; the old
/// word's bits.
///
/// # Safety
/// `p` is aligned to the type's width, the word lies in memory mapped for the call, and while
/// it is shared it is only touched by atomic operations.
pub(crate) unsafe fn apply(p: *mut u8, kind: Atomic, a: u64, b: u64) -> u64 {
    match kind.ty {
        Datatype::I32 => int_op!(AtomicI32, i32, p, kind.op, a, b) as u32 as u64,
        Datatype::U32 => int_op!(AtomicU32, u32, p, kind.op, a, b) as u64,
        Datatype::I64 => int_op!(AtomicI64, i64, p, kind.op, a, b) as u64,
        Datatype::U64 => int_op!(AtomicU64, u64, p, kind.op, a, b),
        Datatype::F32 => float_op!(AtomicU32, u32, f32, p, kind.op, a, b) as u64,
        Datatype::F64 => float_op!(AtomicU64, u64, f64, p, kind.op, a, b),
    }
}
