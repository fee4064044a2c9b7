//! The fabrics' settings: which fabric, how long peers have to connect, and each fabric's knobs.

use crate::contract::FABRIC_WORDS;
use crate::setting::{Fallback, Kind, Layer, Setting};

/// The fabric between ranks.
pub const FABRIC: Setting = Setting {
    name: "GSM_FABRIC",
    kind: Kind::Choice(FABRIC_WORDS),
    default: Fallback::Value("auto"),
    doc: "The fabric between ranks: `auto` (shm within a host, tcp between hosts) or one of the \
          fabrics listed under **Fabrics** below. A fabric other than `auto` and `shm` carries \
          every peer, even within a host, segment operations and streams included. `gsmrun \
          --fabric` sets it.",
    layer: Layer::Fabric,
};

/// How long peers have to connect.
pub const CONNECT_TIMEOUT: Setting = Setting {
    name: "GSM_CONNECT_TIMEOUT",
    kind: Kind::Count {
        min: 1,
        max: 86_400,
        unit: "seconds",
    },
    default: Fallback::Value("30"),
    doc: "How long a rank waits at start-up for its peers to connect and attach.",
    layer: Layer::Fabric,
};

/// The address the tcp fabric listens on.
pub const TCP_BIND: Setting = Setting {
    name: "GSM_TCP_BIND",
    kind: Kind::Address,
    default: Fallback::Decided(
        "the address of `GSM_HOST_ADDR` (one other hosts reach), else every interface",
    ),
    doc: "The address the tcp fabric listens on (`0.0.0.0`: every interface); its subnet also \
          picks the ofi provider's interface.",
    layer: Layer::Fabric,
};

/// Two-way tcp connections.
pub const TCP_TWO_WAY: Setting = Setting {
    name: "GSM_TCP_TWO_WAY",
    kind: Kind::Switch,
    default: Fallback::Value("on"),
    doc: "Worker l of two ranks share one two-way tcp connection, so an answer carries the \
          request's ACK; off: one-way connections only. Every rank must agree (the hello \
          refuses a mismatch by name). See `libgsm/src/fabric/tcp/README.md`.",
    layer: Layer::Fabric,
};

/// Per-host tcp connections.
pub const TCP_PER_HOST: Setting = Setting {
    name: "GSM_TCP_PER_HOST",
    kind: Kind::Switch,
    default: Fallback::Value("on"),
    doc: "One tcp connection per (worker, remote host); off: one per (worker, remote rank). \
          Every rank must agree (the hello refuses a mismatch by name).",
    layer: Layer::Fabric,
};

/// The ofi fabric's provider.
pub const OFI_PROVIDER: Setting = Setting {
    name: "GSM_OFI_PROVIDER",
    kind: Kind::Text,
    default: Fallback::Decided("the first provider with what the fabric needs"),
    doc: "The libfabric provider of the ofi fabric: `tcp;ofi_rxm`, `shm`, `verbs;ofi_rxm`, \
          `efa`, `cxi`, ...",
    layer: Layer::Fabric,
};

/// How the ofi completion queue waits.
pub const OFI_CQ_WAIT: Setting = Setting {
    name: "GSM_OFI_CQ_WAIT",
    kind: Kind::Choice(&["none", "fd"]),
    default: Fallback::Value("none"),
    doc: "`fd` gives the ofi completion queue a wait descriptor, so the progress thread of a \
          rank whose workers all sleep sleeps until a completion instead of napping; each \
          completion then costs a signal.",
    layer: Layer::Fabric,
};

/// The verbs fabric's device.
pub const VERBS_DEVICE: Setting = Setting {
    name: "GSM_VERBS_DEVICE",
    kind: Kind::Text,
    default: Fallback::Decided("the first device with an active port"),
    doc: "The RDMA device of the verbs fabric (`mlx5_0`, ...).",
    layer: Layer::Fabric,
};

/// The verbs fabric's GID index.
pub const VERBS_GID_INDEX: Setting = Setting {
    name: "GSM_VERBS_GID_INDEX",
    kind: Kind::Count {
        min: 0,
        max: 255,
        unit: "GID table entries",
    },
    default: Fallback::Value("0"),
    doc: "The GID index of the verbs fabric's port, for RoCE (see `show_gids`).",
    layer: Layer::Fabric,
};
