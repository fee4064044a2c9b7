//! The runtime's own settings: a run's shape (`Config`), its start and watch threads, its log,
//! and the workers' idle rule.

use crate::contract::MAX_WORKERS;
use crate::setting::{Fallback, Kind, Layer, Setting};

/// Worker threads per rank.
pub const THREADS: Setting = Setting {
    name: "GSM_THREADS",
    kind: Kind::Count {
        min: 1,
        max: MAX_WORKERS,
        unit: "workers",
    },
    default: Fallback::Decided(
        "the CPUs this rank may use, divided among the ranks of its host when the launcher says \
         how many share it and none is bound",
    ),
    doc: "Worker threads per rank, each a fiber scheduler. `gsmrun -t` sets it.",
    layer: Layer::Config,
};

/// Usable stack of one fiber.
pub const STACK_SIZE: Setting = Setting {
    name: "GSM_STACK_SIZE",
    kind: Kind::Size {
        min: 64 << 10,
        max: 1 << 30,
        multiple: 1,
    },
    default: Fallback::Value("256K"),
    doc: "Usable stack of one fiber (a guard page is added below it). A worker thread's own \
          stack, where an idle worker serves delegated closures, is this plus 64 KiB, at least \
          2 MiB (or `RUST_MIN_STACK`).",
    layer: Layer::Config,
};

/// Bytes of one ring slot.
pub const SLOT_SIZE: Setting = Setting {
    name: "GSM_SLOT_SIZE",
    kind: Kind::Size {
        min: 256,
        max: 64 << 20,
        multiple: 64,
    },
    default: Fallback::Value("4K"),
    doc: "Bytes of one request or response slot (one batch). Each ordered pair of workers has \
          two rings of 16 slots, so a worker's rings take 2 × workers of the job × 16 × this. \
          Every rank of a job must agree.",
    layer: Layer::Config,
};

/// Pinning workers to CPUs.
pub const PIN: Setting = Setting {
    name: "GSM_PIN",
    kind: Kind::Switch,
    default: Fallback::Value("off"),
    doc: "Pin worker i to the i-th CPU this rank may use; ignored when there are more workers \
          than such CPUs.",
    layer: Layer::Config,
};

/// Single copies of large records.
pub const SINGLE_COPY: Setting = Setting {
    name: "GSM_SINGLE_COPY",
    kind: Kind::Switch,
    default: Fallback::Value("on"),
    doc: "Read a large record in one copy from the peer's memory (`process_vm_readv`) where the \
          ranks allow it; off streams it through the rings, and makes the collectives' large \
          broadcasts and allreduces go through the host board in steps.",
    layer: Layer::Runtime,
};

/// When a stuck closure is reported.
pub const STALL_REPORT: Setting = Setting {
    name: "GSM_STALL_REPORT",
    kind: Kind::Seconds { max: 999_999_999 },
    default: Fallback::Value("10"),
    doc: "A worker found running one delegated closure this long is reported once on standard \
          error (rank, host, worker, the closure's type); the job goes on.",
    layer: Layer::Runtime,
};

/// The log filter.
pub const LOG: Setting = Setting {
    name: "GSM_LOG",
    kind: Kind::Text,
    default: Fallback::Decided("`RUST_LOG`, else no log"),
    doc: "The `tracing` filter of the log on standard error (`debug`, `gossamer::fabric=info`). \
          `gsmrun` reads it for its own log and passes it to every rank; the targets are in \
          `libgsm/src/runtime/log.rs` (the termination waves need `gossamer::quiesce=trace`).",
    layer: Layer::Runtime,
};

/// The idle rule's look at the host.
pub const SPIN_HOST: Setting = Setting {
    name: "GSM_SPIN_HOST",
    kind: Kind::Switch,
    default: Fallback::Value("on"),
    doc: "Idle workers spin and linger while the host's runnable threads fit its CPUs; off: \
          by this rank's awake workers alone, for a host whose other load should not hold this \
          job's workers back. See `libgsm/src/worker/README.md`, \"The idle protocol\".",
    layer: Layer::Worker,
};
