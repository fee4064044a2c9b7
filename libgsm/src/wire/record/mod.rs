//! Batch encoding: how request and response records are laid out in one slot, the
//! per-destination staging queue that fills batches and hands them to a ring, the readers that
//! walk a batch, and the streaming and reassembly of records too large for a slot.
//!
//! A **request batch** is `[u32 table_pos][u16 ntab][u16 0]`, then the records, then the code
//! table (`ntab` little-endian `u64` code offsets, see `codeptr`). A request record is
//! `[u8 fn][u8 flags][u16 cap_len][u32 req][u32 idx][u32 gn]` (16 bytes), then
//! `[u32 arg_len]` if `flags & ARG`, then the captured bytes and the argument bytes. `fn` indexes
//! the batch's table; `fn == CONTROL` marks a trust-id toggle (its 16 captured bytes are the
//! trust id and a second word).
//! A *plain* record (no argument, captured bytes inline) that repeats the function, flags,
//! capture length and property of the plain record right before it is written as a
//! *continuation*, `[u8 CONT][u32 req]` and its captured bytes: a loop of `apply_then`s to one
//! trust sends 5 bytes per request instead of 16 (plus the captures).
//! A **response batch** is `[u32 0][u16 0][u16 0]` then records `[u32 req][u32 len << 8 | status]`
//! followed by `len` body bytes; an inline response of the same status and length as the
//! inline response right before it is a continuation, `[u32 req | RESP_CONT]` and its body (12
//! bytes instead of 16 for a `u64` result).
//!
//! Both kinds of continuation cut the bytes that cross between the two cores (figures in
//! docs/performance-log.md).
//!
//! The batch header's last `u16` is the batch *kind*: 0 for a batch of records, or a piece of a
//! large record (below).
//!
//! **Large records** (bigger than a slot) take one of two paths; nothing is truncated either way:
//! - *Within a process*, with `flags & LARGE` (requests) or `status & LARGE_STATUS` (responses),
//!   the record carries a `u64` pointer and a `u64` length of a heap `Box<[u8]>` holding the body;
//!   its ownership moves with the record and the receiver frees it. Readers accept this form only
//!   from batches of their own process (`pointers = true`).
//! - *To another rank* (an `OutQueue` made with `remote = true`), the record is streamed through
//!   the ring as consecutive slots: a *start* slot (kind [`KIND_REQ_START`] or
//!   [`KIND_RESP_START`]) with the record's header, the body's total length and the first bytes,
//!   then *more* slots (kind [`KIND_MORE`]) with the rest. A ring has one producer and is FIFO, so
//!   the pieces arrive in order and back to back; the receiver reassembles them ([`Partial`]) and
//!   only then runs the record. The slots are ordinary ring slots, so this works unchanged on every
//!   fabric, and a full ring slows the sender down instead of growing memory on the receiver.
//!
//! - *To another rank on this host that can read this process* (`OutQueue::allow_far`; tested at
//!   set-up), the body is *parked* in the sender's memory and the record carries `[u64 addr]
//!   [u64 len][u64 token]` with flag [`FAR`] (requests) or status bit [`FAR_STATUS`]
//!   (responses); the receiver reads it with one `process_vm_readv` (`wire::far`) and sends back
//!   a [`RELEASE`] record with the token, on which the sender frees it.
//!
//! Layouts: request start = `[u32 end][u16 1][u16 KIND_REQ_START]`, the 16-byte record header,
//! `[u32 arg_len]` if `ARG`, `[u64 total]`, body bytes up to `end`, then the one-entry code table.
//! Response start = `[u32 end][u16 0][u16 KIND_RESP_START][u32 req][u8 status][3 × 0][u64 total]`,
//! body bytes up to `end`. More = `[u32 end][u16 0][u16 KIND_MORE]`, body bytes up to `end`.
//!
//! Arguments and results that cross a process are `postcard` encodings (request flag [`SER`],
//! response status bit [`SER_STATUS`]); within a process they are moved by bytes.
//!
//! Values moved by bytes (captures, arguments, results) may contain padding, i.e. uninitialised
//! bytes. So record bytes are only ever copied untyped (`ptr::copy_nonoverlapping` from a
//! [`Src`]) and viewed as `MaybeUninit<u8>` (staging buffers, ring slots, bodies); only the
//! headers and tables, which the encoder writes as whole initialised words, are read as integers,
//! and a moved value is read back with `read_unaligned` as its own type.
//!
//! The rooms: `layout` (header words, flags, constants), `bytes` ([`Src`] and the untyped
//! copies), `stage` ([`OutQueue`]), `read` ([`RequestReader`], [`ResponseReader`]), `large`
//! (streamed and parked records, [`Partial`]); `stage` calls down into `large`, never back.
//!
//! This module does not know what a record means; the trampolines that encode and decode a
//! closure do. It does not touch ring internals either: a sealed batch is copied into a reserved
//! slot and published. The protocols together are in `wire/README.md`.

mod bytes;
mod large;
mod layout;
mod read;
mod stage;

pub(crate) use bytes::Src;
pub(crate) use large::{Large, Partial, classify, parked_by_responses};
pub(crate) use layout::*;
pub(crate) use read::{Body, Request, RequestReader, ResponseReader};
pub(crate) use stage::{OutQueue, SMALL, Sink};

#[cfg(test)]
mod tests;
