//! The bytes a record copies: [`Src`], a value's object representation (padding included) or a
//! byte slice, and the untyped appends that put it, a header or a word into a batch buffer, with
//! the checked lengths of a capture and an argument. Every copy of record bytes in `stage` and
//! `large` goes through these, so that uninitialised padding is only ever copied, never read.
//!
//! It does not know the record format (`layout`) nor stage or stream records (`stage`, `large`).

use std::marker::PhantomData;
use std::mem::MaybeUninit;

use super::layout::Byte;

/// Bytes to copy into a record: the object representation of a value (padding included, which
/// is why this is a pointer and a length and never a `&[u8]`), or a plain byte slice.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Src<'a> {
    ptr: *const u8,
    len: usize,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> Src<'a> {
    /// The `size_of::<V>()` bytes of `v`, padding included.
    #[inline]
    pub(crate) fn of<V>(v: &'a V) -> Self {
        Src {
            ptr: (v as *const V).cast::<u8>(),
            len: std::mem::size_of::<V>(),
            _borrow: PhantomData,
        }
    }

    /// The bytes of a closure `f` as a request record's captured bytes, whose length field is
    /// 16 bits: a closure that captures more than 65 535 bytes is refused when the program is
    /// built (the capture of a delegated closure is `Copy` data; a large value travels as an
    /// `apply_with` argument instead, which has no such limit).
    #[inline]
    pub(crate) fn closure<F>(f: &'a F) -> Self {
        const {
            assert!(
                std::mem::size_of::<F>() <= u16::MAX as usize,
                "gossamer: a delegated closure captures more than 65 535 bytes; pass large data \
                 as the argument of apply_with (or spawn_on_with) instead"
            )
        };
        Src::of(f)
    }

    /// The bytes of a slice.
    #[inline]
    pub(crate) fn slice(b: &'a [u8]) -> Self {
        Src {
            ptr: b.as_ptr(),
            len: b.len(),
            _borrow: PhantomData,
        }
    }

    /// The bytes of a body that may hold uninitialised bytes (an encoding in its own vector).
    #[inline]
    pub(crate) fn uninit(b: &'a [Byte]) -> Self {
        Src {
            ptr: b.as_ptr().cast::<u8>(),
            len: b.len(),
            _borrow: PhantomData,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Where the bytes start (to recognise a source that lies in a given buffer).
    #[inline]
    pub(super) fn as_ptr(&self) -> *const u8 {
        self.ptr
    }
}

/// Appends `s` to `b` with an untyped copy (uninitialised source bytes stay uninitialised).
#[inline]
pub(super) fn put(b: &mut Vec<Byte>, s: Src<'_>) {
    b.reserve(s.len);
    // SAFETY: `s.ptr` is valid for `s.len` reads for `'a` (it came from a live reference or
    // slice); the destination is the reserved spare capacity, which cannot overlap it (`b` is
    // uniquely borrowed). `copy_nonoverlapping` is an untyped copy, so padding may be copied;
    // `MaybeUninit<u8>` elements may hold any byte, so `set_len` exposes no invalid value.
    unsafe {
        std::ptr::copy_nonoverlapping(s.ptr, b.as_mut_ptr().add(b.len()).cast::<u8>(), s.len);
        b.set_len(b.len() + s.len);
    }
}

/// Appends a record header and a small body. Inlined with constant sizes, the copies become a few
/// moves instead of `memcpy` calls.
#[inline(always)]
pub(super) fn put_small<const N: usize>(b: &mut Vec<Byte>, head: &[u8; N], body: Src<'_>) {
    b.reserve(N + body.len);
    // SAFETY: `reserve` left at least `N + body.len` bytes of spare capacity after `len`;
    // `body.ptr` is valid for `body.len` reads and cannot overlap the spare capacity of the
    // uniquely borrowed `b`. Untyped copies, as in `put`.
    unsafe {
        let at = b.as_mut_ptr().add(b.len()).cast::<u8>();
        std::ptr::copy_nonoverlapping(head.as_ptr(), at, N);
        std::ptr::copy_nonoverlapping(body.ptr, at.add(N), body.len);
        b.set_len(b.len() + N + body.len);
    }
}

#[inline]
pub(super) fn put_bytes(b: &mut Vec<Byte>, v: &[u8]) {
    put(b, Src::slice(v));
}

#[inline]
pub(super) fn set_bytes(b: &mut [Byte], at: usize, v: &[u8]) {
    for (d, s) in b[at..at + v.len()].iter_mut().zip(v) {
        *d = MaybeUninit::new(*s);
    }
}

/// A capture's length for its 16-bit header field. `Src::closure` refuses closures of more than
/// 65 535 bytes when the program is built, so a longer capture here is a bug, not data to cut.
pub(super) fn cap_len16(n: usize) -> u16 {
    u16::try_from(n).expect("gossamer: a capture of more than 65 535 bytes reached the encoder")
}

/// An argument's length for its 32-bit field: an argument of 4 GiB or more cannot be moved in
/// one record, and is refused with that reason rather than cut.
pub(super) fn arg_len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| {
        panic!("gossamer: an argument of {n} bytes (4 GiB or more) cannot be sent in one request")
    })
}
