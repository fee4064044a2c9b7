//! The record format's words: the batch and record headers, the request flags and response
//! status bits, the batch kinds, and the functions that write a header and read a word back.
//! The format itself is described in the parent module ([`super`]).
//!
//! It does not stage, read or reassemble records; `stage`, `read` and `large` do, with these.

use std::mem::MaybeUninit;

/// A byte that may be uninitialised (padding of a value moved by bytes).
pub(crate) type Byte = MaybeUninit<u8>;

pub(crate) const HEADER: usize = 8;
pub(crate) const REQ_HEADER: usize = 16;
pub(crate) const RESP_HEADER: usize = 8;
pub(crate) const ARG: u8 = 1;
pub(crate) const LARGE: u8 = 2;
/// Request flag: the argument bytes are a `postcard` encoding.
pub(crate) const SER: u8 = 4;
/// Response status bit: the body is a `postcard` encoding.
pub(crate) const SER_STATUS: u8 = 0x40;
/// Request flag / response status bit: the body stays in the sender's memory, to be read with
/// one `process_vm_readv` (same host, see `Far`) or one RMA read (a one-sided fabric's
/// rendezvous). The record then carries [`FAR_WORDS`] bytes: `[addr][len][token][key]`.
pub(crate) const FAR: u8 = 8;
pub(crate) const FAR_STATUS: u8 = 0x20;
/// The bytes of a parked body's reference: address, length, token and RMA key (0 for
/// `process_vm_readv`), four little-endian `u64`s.
pub(crate) const FAR_WORDS: usize = 32;
/// Function index of a record that tells a sender it may free a body it parked for `FAR`.
pub(crate) const RELEASE: u8 = 0xFE;
/// Batch kinds (the header's last `u16`).
pub(crate) const KIND_BATCH: u16 = 0;
pub(crate) const KIND_REQ_START: u16 = 1;
pub(crate) const KIND_MORE: u16 = 2;
pub(crate) const KIND_RESP_START: u16 = 3;
pub(crate) const CONTROL: u8 = 0xFF;
/// Function index of a *continuation*: a plain request of the same kind, property and flags as
/// the record before it, written as `[u8 CONT][u32 req]` and the captured bytes.
pub(crate) const CONT: u8 = 0xFD;
/// Bytes of a continuation before its captured bytes.
pub(crate) const CONT_HEADER: usize = 5;
/// The bit of a response record's first word that makes it a continuation: `[u32 req |
/// RESP_CONT]` and a body of the status and length of the record before it. Request ids are
/// pending-table indexes, kept below this bit (`Pending::add`), so a response's id
/// never has it.
pub(crate) const RESP_CONT: u32 = 1 << 31;
/// Bytes of a response continuation before its body.
pub(super) const RESP_CONT_HEADER: usize = 4;
/// Code table entries per batch: indexes 0 to 252, below `CONT`, `RELEASE` and `CONTROL`.
pub(crate) const MAX_TABLE: usize = CONT as usize;
pub(crate) const LARGE_STATUS: u8 = 0x80;

/// A request record's header: `[u8 fn][u8 flags][u16 cap_len][u32 req][u32 idx][u32 gn]`.
#[inline(always)]
pub(super) fn request_header(
    fidx: u8,
    flags: u8,
    cap_len: u16,
    req: u32,
    idx: u32,
    gn: u32,
) -> [u8; REQ_HEADER] {
    let mut h = [0u8; REQ_HEADER];
    h[0] = fidx;
    h[1] = flags;
    h[2..4].copy_from_slice(&cap_len.to_le_bytes());
    h[4..8].copy_from_slice(&req.to_le_bytes());
    h[8..12].copy_from_slice(&idx.to_le_bytes());
    h[12..16].copy_from_slice(&gn.to_le_bytes());
    h
}

/// A response record's header: `[u32 req][u32 len << 8 | status]`.
#[inline(always)]
pub(super) fn response_header(req: u32, status: u8, len: u32) -> [u8; RESP_HEADER] {
    let mut h = [0u8; RESP_HEADER];
    h[0..4].copy_from_slice(&req.to_le_bytes());
    h[4..8].copy_from_slice(&((len << 8) | u32::from(status)).to_le_bytes());
    h
}

/// Reads `N` initialised bytes at `at`.
///
/// # Safety
/// The bytes `at..at + N` of `b`, if in range, must be initialised (header bytes written by our
/// encoder always are).
#[inline]
pub(super) unsafe fn bytes_at<const N: usize>(b: &[Byte], at: usize) -> Option<[u8; N]> {
    let s = b.get(at..at + N)?;
    // SAFETY: `s` has exactly `N` elements, initialised per the contract; `[u8; N]` has
    // alignment 1, so the unaligned read of `N` bytes is a plain copy.
    Some(unsafe { std::ptr::read_unaligned(s.as_ptr().cast::<[u8; N]>()) })
}

/// # Safety
/// As for [`bytes_at`].
#[inline]
pub(super) unsafe fn u32_at(b: &[Byte], at: usize) -> Option<u32> {
    // SAFETY: forwarded contract.
    unsafe { bytes_at::<4>(b, at) }.map(u32::from_le_bytes)
}

/// # Safety
/// As for [`bytes_at`].
#[inline]
pub(super) unsafe fn u64_at(b: &[Byte], at: usize) -> Option<u64> {
    // SAFETY: forwarded contract.
    unsafe { bytes_at::<8>(b, at) }.map(u64::from_le_bytes)
}
