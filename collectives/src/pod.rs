//! Plain-data payloads: [`Plain`] element types, the byte-wise wire form of their vectors, and
//! [`Parts`], the result of the `v` operations.
//!
//! A `Vec<T>` of plain data would serialise element by element through serde; [`PodVec`]
//! serialises it as one byte string (one `memcpy` out, one `memcpy` in, alignment restored by
//! copying into a fresh `Vec<T>`). Between workers of one rank nothing is serialised: the vector
//! (or the `Arc` holding it) moves by pointer. This module does not choose algorithms.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Element types the plain-data collectives accept: any [`bytemuck::Pod`] type that may cross
/// threads (every primitive number, arrays of them, `#[derive(Pod)]` structs).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not plain data (`bytemuck::Pod`): the plain-data collectives send their elements as bytes",
    label = "elements of this collective must be numbers, arrays of them or `#[derive(Pod, Zeroable)]` structs",
    note = "for a `String`, a `Vec` or any serde value use the `_value` forms (`broadcast_value`, `gather_value`, `allreduce_value`, ...), which take `gossamer::Wire` values"
)]
pub trait Plain: bytemuck::Pod + Send + Sync {}
// Report `Plain` itself rather than the `Pod` bound behind this impl (see `gossamer::NoRef`).
#[diagnostic::do_not_recommend]
impl<T: bytemuck::Pod + Send + Sync> Plain for T {}

/// Rejects zero-sized element types at compile time (their vectors have no bytes to count by).
pub(crate) const fn assert_sized<T>() {
    const {
        assert!(
            size_of::<T>() > 0,
            "gsm-collectives: zero-sized element types are not supported"
        )
    };
}

/// A vector of plain data whose wire form is its bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct PodVec<T>(pub(crate) Vec<T>);

impl<T: Plain> Serialize for PodVec<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytemuck::cast_slice(&self.0))
    }
}

struct PodVisitor<T>(PhantomData<T>);

impl<T: Plain> Visitor<'_> for PodVisitor<T> {
    type Value = PodVec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the bytes of a slice of {} (a multiple of {} bytes)",
            std::any::type_name::<T>(),
            size_of::<T>()
        )
    }

    fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<PodVec<T>, E> {
        let size = size_of::<T>();
        if size == 0 || b.len() % size != 0 {
            return Err(E::invalid_length(b.len(), &self));
        }
        let n = b.len() / size;
        let mut v: Vec<T> = Vec::with_capacity(n);
        // SAFETY: `v` has room for `n` elements, that is `b.len()` bytes, and does not overlap
        // `b`; every bit pattern is a valid `T` (`Pod`), so after the copy the first `n`
        // elements are initialised and `set_len(n)` exposes only initialised elements.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr().cast::<u8>(), b.len());
            v.set_len(n);
        }
        Ok(PodVec(v))
    }
}

impl<'de, T: Plain> Deserialize<'de> for PodVec<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_bytes(PodVisitor(PhantomData))
    }
}

/// The contributions of every member, concatenated in member order (the result of `gatherv`,
/// `allgatherv`, `alltoallv`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parts<T> {
    /// Every part, one after the other.
    pub data: Vec<T>,
    /// `offsets[i]..offsets[i + 1]` is member i's part; one more entry than there are parts.
    pub offsets: Vec<usize>,
}

impl<T> Parts<T> {
    /// The number of parts.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are no parts.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Member `i`'s part.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn part(&self, i: usize) -> &[T] {
        &self.data[self.offsets[i]..self.offsets[i + 1]]
    }

    /// The length of every part.
    pub fn counts(&self) -> Vec<usize> {
        self.offsets.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

impl<T: Copy> Parts<T> {
    /// Concatenates `parts` (given in member order).
    pub(crate) fn concat<'a>(parts: impl Iterator<Item = &'a [T]> + Clone) -> Parts<T>
    where
        T: 'a,
    {
        let total = parts.clone().map(<[T]>::len).sum();
        let mut data = Vec::with_capacity(total);
        let mut offsets = vec![0];
        for p in parts {
            data.extend_from_slice(p);
            offsets.push(data.len());
        }
        Parts { data, offsets }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_vec_travels_as_its_bytes_and_comes_back_equal() {
        let v = PodVec(vec![1.5f64, -0.0, f64::MAX, 3.25]);
        let bytes = postcard::to_allocvec(&v).unwrap();
        // One length byte, then the raw bytes: no per-element encoding.
        assert_eq!(bytes.len(), 1 + 32);
        let back: PodVec<f64> = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, v);
        let empty: PodVec<u32> =
            postcard::from_bytes(&postcard::to_allocvec(&PodVec::<u32>(vec![])).unwrap()).unwrap();
        assert!(empty.0.is_empty());
    }

    #[test]
    fn bytes_that_are_not_whole_elements_are_refused() {
        let bytes = postcard::to_allocvec(&PodVec(vec![1u8, 2, 3])).unwrap();
        let e = postcard::from_bytes::<PodVec<u16>>(&bytes).unwrap_err();
        assert!(!e.to_string().is_empty());
    }

    #[test]
    fn parts_index_their_members() {
        let p = Parts::concat([&[1, 2][..], &[], &[3]].into_iter());
        assert_eq!(p.len(), 3);
        assert_eq!(p.part(0), &[1, 2]);
        assert!(p.part(1).is_empty());
        assert_eq!(p.counts(), vec![2, 0, 1]);
    }
}
