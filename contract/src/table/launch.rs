//! The variables of the launch contract, which `gsmrun` sets for every rank (and its rank wrapper
//! for its own rank), and the one `gsmrun` reads for itself. A user does not set these: `gsmrun`
//! refuses them in `-x`. The runtime reads the ones it needs; a program started without `gsmrun`
//! runs without them.

use crate::setting::{Fallback, Kind, Layer, Setting};

/// A rank or a count of ranks.
const RANKS: Kind = Kind::Count {
    min: 0,
    max: u32::MAX as u64,
    unit: "ranks",
};

/// Which MPI `gsmrun` launches with.
pub const MPI_FLAVOUR: Setting = Setting {
    name: "GSM_MPI_FLAVOUR",
    kind: Kind::Choice(&["openmpi", "hydra"]),
    default: Fallback::Decided("asked of `mpirun --version`"),
    doc: "Which MPI's launcher is installed, so that `gsmrun` does not ask it (`--dry-run` on a \
          machine without it, tests). Not passed to the ranks.",
    layer: Layer::Gsmrun,
};

/// The job's name.
pub const JOB_ID: Setting = Setting {
    name: "GSM_JOB_ID",
    kind: Kind::Text,
    default: Fallback::Decided("`gsm-` and the first 6 bytes of the job key, in hex"),
    doc: "A name unique to the job (`gsm-<pid of gsmrun>-<hex>`); the job's shared-memory \
          segments are named after it (`{GSM_JOB_ID}-r{rank}`), so that `gsmrun` can remove \
          them after a crash.",
    layer: Layer::Launcher,
};

/// The number of ranks.
pub const SIZE: Setting = Setting {
    name: "GSM_SIZE",
    kind: RANKS,
    default: Fallback::Decided("MPI's"),
    doc: "The number of ranks `gsmrun` started; the bootstrap checks MPI's world against it.",
    layer: Layer::Launcher,
};

/// The hosts that got ranks.
pub const HOSTS: Setting = Setting {
    name: "GSM_HOSTS",
    kind: Kind::Text,
    default: Fallback::Decided("unset under `srun`"),
    doc: "The hosts that got ranks, comma-separated, as the hostfile names them, in its order.",
    layer: Layer::Launcher,
};

/// Each rank's host.
pub const RANK_HOSTS: Setting = Setting {
    name: "GSM_RANK_HOSTS",
    kind: Kind::Text,
    default: Fallback::Decided("unset under `srun`"),
    doc: "For each rank in order, the index into `GSM_HOSTS` of its host (`0,0,1,1`).",
    layer: Layer::Launcher,
};

/// Where `gsmrun` listens for the wrappers.
pub const CONTROL: Setting = Setting {
    name: "GSM_CONTROL",
    kind: Kind::Text,
    default: Fallback::Decided("no control connection"),
    doc: "`address:port` of `gsmrun`'s control listener, for the rank wrapper only (removed \
          before the program starts).",
    layer: Layer::Launcher,
};

/// The control connection's key.
pub const CONTROL_KEY: Setting = Setting {
    name: "GSM_CONTROL_KEY",
    kind: Kind::Text,
    default: Fallback::Decided("no control connection"),
    doc: "The secret a wrapper presents on the control connection; never on a command line, \
          removed before the program starts.",
    layer: Layer::Launcher,
};

/// This rank's number.
pub const RANK: Setting = Setting {
    name: "GSM_RANK",
    kind: RANKS,
    default: Fallback::Decided("MPI's"),
    doc: "This rank's number, set by its wrapper from the launcher's variables.",
    layer: Layer::Launcher,
};

/// This rank's host.
pub const HOST_ADDR: Setting = Setting {
    name: "GSM_HOST_ADDR",
    kind: Kind::Text,
    default: Fallback::Decided("this machine's hostname under `srun`"),
    doc: "This rank's host as the placement names it (a hostfile name or address); the tcp \
          fabric listens on its address.",
    layer: Layer::Launcher,
};

/// This rank's index on its host.
pub const LOCAL_RANK: Setting = Setting {
    name: "GSM_LOCAL_RANK",
    kind: RANKS,
    default: Fallback::Decided("unknown"),
    doc: "This rank's index among the ranks of its host, from 0.",
    layer: Layer::Launcher,
};

/// The ranks on this rank's host.
pub const LOCAL_SIZE: Setting = Setting {
    name: "GSM_LOCAL_SIZE",
    kind: RANKS,
    default: Fallback::Decided("unknown"),
    doc: "The number of ranks on this rank's host; the default worker count divides the CPUs \
          by it.",
    layer: Layer::Launcher,
};

/// The stage channel.
pub const STATE_FD: Setting = Setting {
    name: "GSM_STATE_FD",
    kind: Kind::Text,
    default: Fallback::Decided("no stage channel"),
    doc: "`FD:INODE` of the program's end of a Unix socket on which the runtime tells its \
          wrapper each stage it enters, one byte each (`Stage` of the contract). Set only when \
          the wrapper reports to `gsmrun`.",
    layer: Layer::Launcher,
};
