//! The wire: how request and response batches travel between a client worker and a trustee
//! worker, as bytes. This module owns what every fabric shares: the slot ring a batch is
//! published in (`ring`), the doorbell a sleeping consumer is woken with (`doorbell`), the
//! record format with its staging queue, readers and large-record pieces (`record`), code
//! offsets that can travel (`codeptr`), and single-copy reads of a peer's memory (`far`); and
//! the multi-producer inbox with its summary bitmap (`inbox`, `summary`), not yet used by the
//! workers.
//!
//! It does not know what a record means (the trampolines that encode a closure decode it), choose
//! destinations, or move bytes between hosts (the fabrics do). Its protocols together (the slot
//! ring, records and batches, doorbells and the gate) are written in `wire/README.md`.

pub mod doorbell;
pub mod inbox;
pub mod ring;
pub mod summary;

pub(crate) mod codec;
pub(crate) mod codeptr;
pub(crate) mod far;
pub(crate) mod record;
mod region;

// Entry points for fuzz targets and the mutation test; not part of the runtime's API.
#[doc(hidden)]
pub mod fuzzing;
