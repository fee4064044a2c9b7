//! The encoding of arguments and results that cross a process: `postcard`, with one fast path.
//! A `Vec<u8>` (a user's bulk bytes) is written and read with one copy, as its length (a
//! LEB128 varint) and the bytes, which is exactly postcard's encoding of it: serde hands the
//! bytes of a `Vec<u8>` to postcard one `u8` at a time, far slower than a copy, which made a
//! large argument spend most of its time there rather than on the fabric. The
//! bytes on the wire are the same either way, so either side may take either path.
//!
//! It does not choose what is encoded (`trust`'s calls and the worker's responses do).

use std::any::{Any, TypeId};
use std::mem::MaybeUninit;

/// Encodes `v` (postcard's bytes).
pub(crate) fn encode<T: serde::Serialize + 'static>(v: &T) -> Result<Vec<u8>, postcard::Error> {
    if let Some(bytes) = (v as &dyn Any).downcast_ref::<Vec<u8>>() {
        let (head, k) = length_varint(bytes.len());
        let mut out = Vec::with_capacity(bytes.len() + k);
        crate::sys::mem::advise_huge(out.as_ptr(), out.capacity());
        out.extend_from_slice(&head[..k]);
        out.extend_from_slice(bytes);
        return Ok(out);
    }
    postcard::to_allocvec(v)
}

/// A length as postcard writes it (LEB128): the bytes, and how many of them are used.
fn length_varint(n: usize) -> ([u8; 10], usize) {
    let (mut head, mut k, mut n) = ([0u8; 10], 0, n as u64);
    while n >= 0x80 {
        head[k] = (n as u8) | 0x80;
        n >>= 7;
        k += 1;
    }
    head[k] = n as u8;
    (head, k + 1)
}

/// Arguments from this many bytes are encoded in their own allocation ([`encode_spliced`]).
pub(crate) const SPLICE_FROM: usize = 1 << 20;

/// If `v` is a `Vec<u8>` of at least [`SPLICE_FROM`] bytes, its encoding written in its own
/// allocation after `room` bytes left for the record to fill, `[room][length][bytes]`, and
/// `room`; else `Err(v)`. The bytes move up in place (the allocation grows by `mremap` at
/// these sizes), so the encoding costs no new buffer: a fresh one costs its page faults on top
/// of the copy, and the record layer parks this buffer as the body itself, room and all (see
/// `OutQueue::offer`).
pub(crate) fn encode_spliced<T: 'static>(v: T, room: usize) -> Result<Vec<MaybeUninit<u8>>, T> {
    let mut slot = Some(v);
    let big = (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<Vec<u8>>>()
        .and_then(|b| b.take_if(|b| b.len() >= SPLICE_FROM));
    let Some(mut bytes) = big else {
        return Err(slot.take().expect("a value not taken"));
    };
    let n = bytes.len();
    let (head, k) = length_varint(n);
    bytes.reserve_exact(room + k);
    let p = bytes.as_mut_ptr();
    // SAFETY: the allocation holds at least `room + k + n` bytes (reserved); the `n` bytes move
    // up within it (`copy` allows overlap), then the head is written behind the room; the room's
    // bytes stay uninitialised, which `MaybeUninit<u8>` allows, and the Vec is rebuilt over the
    // same allocation with the same element layout (`MaybeUninit<u8>` is `u8`'s).
    unsafe {
        std::ptr::copy(p, p.add(room + k), n);
        std::ptr::copy_nonoverlapping(head.as_ptr(), p.add(room), k);
        let cap = bytes.capacity();
        std::mem::forget(bytes);
        Ok(Vec::from_raw_parts(
            p.cast::<MaybeUninit<u8>>(),
            room + k + n,
            cap,
        ))
    }
}

/// Decodes a `T` from postcard's bytes `b` (trailing bytes are ignored, as `postcard` does).
pub(crate) fn decode<T: serde::de::DeserializeOwned + 'static>(
    b: &[u8],
) -> Result<T, postcard::Error> {
    if TypeId::of::<T>() == TypeId::of::<Vec<u8>>() {
        if let Some(v) = bytes_of(b) {
            let boxed: Box<dyn Any> = Box::new(v);
            if let Ok(t) = boxed.downcast::<T>() {
                return Ok(*t);
            }
        }
    }
    postcard::from_bytes(b)
}

/// The bytes of an encoded `Vec<u8>`, if `b` is a well-formed one (else postcard decides, and
/// names the error).
fn bytes_of(b: &[u8]) -> Option<Vec<u8>> {
    let (mut len, mut shift) = (0u64, 0u32);
    for (i, &byte) in b.iter().enumerate().take(10) {
        len |= u64::from(byte & 0x7F).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            let rest = &b[i + 1..];
            let len = usize::try_from(len).ok()?;
            let bytes = rest.get(..len)?;
            let mut v = Vec::with_capacity(len);
            crate::sys::mem::advise_huge(v.as_ptr(), v.capacity());
            v.extend_from_slice(bytes);
            return Some(v);
        }
        shift += 7;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_vectors_encode_as_postcard_does_and_decode_either_way() {
        for len in [0usize, 1, 127, 128, 300, 70_000] {
            let v: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let fast = encode(&v).unwrap();
            assert_eq!(fast, postcard::to_allocvec(&v).unwrap(), "length {len}");
            assert_eq!(decode::<Vec<u8>>(&fast).unwrap(), v);
        }
        // Other types take postcard's path; a short or malformed byte vector is postcard's error.
        assert_eq!(
            decode::<(u32, bool)>(&encode(&(7u32, true)).unwrap()).unwrap(),
            (7, true)
        );
        assert!(decode::<Vec<u8>>(&[5, 1, 2]).is_err());
        assert!(decode::<Vec<u8>>(&[0xFF; 11]).is_err());
    }

    /// A large byte vector is encoded in its own allocation, behind the room asked for, as
    /// postcard would encode it; small vectors and other types come back untouched.
    #[test]
    fn a_large_byte_vector_is_spliced_in_its_own_allocation() {
        let v: Vec<u8> = (0..SPLICE_FROM + 3).map(|i| (i % 251) as u8).collect();
        let want = postcard::to_allocvec(&v).unwrap();
        let body = encode_spliced(v, 5).map_err(|_| ()).expect("spliced");
        assert_eq!(body.len(), 5 + want.len());
        // SAFETY: the bytes behind the room are the encoding, initialised.
        let enc: Vec<u8> = body[5..]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        assert_eq!(enc, want);
        assert_eq!(decode::<Vec<u8>>(&enc).unwrap().len(), SPLICE_FROM + 3);
        let small = vec![1u8; 100];
        assert_eq!(encode_spliced(small.clone(), 5).err(), Some(small));
        assert_eq!(encode_spliced(7u64, 5).err(), Some(7));
        assert_eq!(
            encode_spliced(vec![1u16; SPLICE_FROM], 5)
                .err()
                .map(|v| v.len()),
            Some(SPLICE_FROM)
        );
    }
}
