//! The wire: how request and response batches travel between a client worker and a trustee
//! worker (DESIGN §6). This module owns the byte-level transport structures that every fabric
//! shares; it does not encode records, choose destinations or move bytes between hosts.

pub mod doorbell;
pub mod ring;

pub(crate) mod codeptr;
pub(crate) mod far;
pub(crate) mod record;
