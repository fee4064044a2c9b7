//! The settings table: every `GSM_*` variable of Gossamer, declared once, grouped by the layer
//! that reads it. [`ALL`] lists them in the order of the reference page.
//!
//! Readers name a setting by its constant (`table::SLOT_SIZE`) and read it with
//! [`crate::get`]; the launcher checks values with [`crate::check`]. Test hooks that only the
//! test suite sets (`GSM_FUZZ_SEED`, ...) are not settings and are not listed.

mod collectives;
mod fabric;
mod launch;
mod runtime;

pub use collectives::*;
pub use fabric::*;
pub use launch::*;
pub use runtime::*;

use crate::setting::Setting;

/// Every setting, grouped by layer.
pub const ALL: &[Setting] = &[
    THREADS,
    STACK_SIZE,
    SLOT_SIZE,
    PIN,
    SINGLE_COPY,
    STALL_REPORT,
    LOG,
    SPIN_HOST,
    FABRIC,
    CONNECT_TIMEOUT,
    TCP_BIND,
    TCP_TWO_WAY,
    TCP_PER_HOST,
    OFI_PROVIDER,
    OFI_CQ_WAIT,
    VERBS_DEVICE,
    VERBS_GID_INDEX,
    COLL_HIERARCHICAL,
    COLL_BOARD,
    COLL_COPY,
    COLL_COPY_PIECE,
    COLL_ALLREDUCE_RING,
    COLL_BCAST_PIPELINE,
    COLL_BCAST_CHUNK,
    COLL_PIECE,
    COLL_RENDEZVOUS,
    MPI_FLAVOUR,
    JOB_ID,
    SIZE,
    HOSTS,
    RANK_HOSTS,
    CONTROL,
    CONTROL_KEY,
    RANK,
    HOST_ADDR,
    LOCAL_RANK,
    LOCAL_SIZE,
    STATE_FD,
];

/// The setting named `name` (exactly), if any.
pub fn find(name: &str) -> Option<&'static Setting> {
    ALL.iter().find(|s| s.name == name)
}
