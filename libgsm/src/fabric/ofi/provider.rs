//! Choosing the libfabric provider: `GSM_OFI_PROVIDER`, or the first answer `fi_getinfo` gives
//! for what the fabric needs; and, when a named provider cannot serve, the one capability it
//! lacks, named in the start-up error.
//!
//! What the fabric needs of a provider: reliable datagram endpoints (`FI_EP_RDM`), messages (the
//! set-up hello), RMA writes and reads with their remote side (`FI_RMA`, `FI_REMOTE_WRITE`,
//! `FI_REMOTE_READ`), 8 bytes of remote completion data, and memory registration in modes this
//! fabric handles (`FI_MR_LOCAL`, `FI_MR_VIRT_ADDR`, `FI_MR_ALLOCATED`, `FI_MR_PROV_KEY`,
//! `FI_MR_ENDPOINT`; not `FI_MR_RAW`); `FI_ATOMIC` is asked for too, and dropped from the
//! hints when no answer has it (segments then delegate their atomics). A provider is never taken without RMA: the default asks
//! `fi_getinfo` for these capabilities, so every answer has them.
//!
//! **Which interface.** A socket provider answers once per network interface, in an order that
//! puts an interface made a moment ago (a container's bridge) before the host's own; a rank that
//! opened such an interface is unreachable once it goes. So among the usable answers the one
//! whose fabric (a subnet, `192.0.2.0/24`) holds this host's address is taken ([`host_address`]:
//! `GSM_TCP_BIND`, else the address the host name resolves to, else the first non-loopback
//! address), else the first that is not IPv6 link-local (`fe80::/64` needs a scope no peer
//! knows), else the first. libfabric's own `FI_TCP_IFACE` narrows the answers before this.

use std::net::IpAddr;

use crate::fabric::FabricError;
use crate::sys::ofi::{self as fi, Hints, Info, Offer, bits};

/// The variable naming the provider (`tcp;ofi_rxm`, `shm`, `verbs;ofi_rxm`, `efa`, `cxi`...).
pub const PROVIDER_VAR: &str = gsm_contract::table::OFI_PROVIDER.name;

/// Capabilities asked for.
pub(super) const CAPS: u64 = bits::MSG
    | bits::RMA
    | bits::READ
    | bits::WRITE
    | bits::REMOTE_READ
    | bits::REMOTE_WRITE
    | bits::SEND
    | bits::RECV;
/// Memory-registration modes handled.
pub(super) const MR_MODES: u32 = bits::MR_LOCAL
    | bits::MR_VIRT_ADDR
    | bits::MR_ALLOCATED
    | bits::MR_PROV_KEY
    | bits::MR_ENDPOINT;
/// Bytes of remote completion data a write carries: the ring protocol's 32-bit immediate.
pub(super) const CQ_DATA: usize = 4;

/// Whether the completion queue gets a wait descriptor: not by default. libfabric signals a
/// queue's descriptor on each completion, which cost a polling worker's round trip more than
/// the progress thread's 1 ms naps cost a parked rank (docs/performance-log.md has the
/// measurement); `GSM_OFI_CQ_WAIT=fd` trades back, for a rank that should sleep until woken.
pub(super) fn cq_wait() -> bool {
    gsm_contract::value::<&str>(&gsm_contract::table::OFI_CQ_WAIT) == "fd"
}

/// `GSM_OFI_PROVIDER`, `None` when unset or empty.
pub(super) fn from_env() -> Option<String> {
    gsm_contract::value(&gsm_contract::table::OFI_PROVIDER)
}

/// The answers for `provider` (or any), and the index of the one to open.
pub(super) fn choose(provider: Option<&str>) -> Result<(Info, usize), FabricError> {
    // Atomics are asked for first (segments use them when granted), then the same without.
    let with_atomics = Hints {
        provider: provider.map(str::to_string),
        caps: CAPS | bits::ATOMIC,
        rdm: true,
        mr_mode: MR_MODES,
    };
    if let Ok(info) = Info::get(&with_atomics) {
        if let Some(n) = preferred(&info.offers(), host_address()) {
            return Ok((info, n));
        }
    }
    let hints = Hints {
        caps: CAPS,
        ..with_atomics
    };
    let info = Info::get(&hints).map_err(|e| lib_error(provider, &e))?;
    let offers = info.offers();
    if let Some(n) = preferred(&offers, host_address()) {
        return Ok((info, n));
    }
    Err(match provider {
        Some(p) => lacks(p, &offers, || bare(p)),
        None => FabricError::Provider {
            provider: "(any)".into(),
            capability: if offers.is_empty() {
                "FI_RMA on reliable datagram endpoints: no provider of this libfabric offers it \
                 (fi_info -c FI_RMA lists them)"
                    .into()
            } else {
                format!("{CQ_DATA} bytes of remote completion data (FI_REMOTE_CQ_DATA)")
            },
        },
    })
}

/// The usable answer to open (see the module docs), if any is usable.
pub(super) fn preferred(offers: &[Offer], host: Option<IpAddr>) -> Option<usize> {
    let usable = |o: &&Offer| o.cq_data_size >= CQ_DATA;
    let first = |f: &dyn Fn(&Offer) -> bool| {
        offers
            .iter()
            .enumerate()
            .filter(|(_, o)| usable(o))
            .find(|(_, o)| f(o))
            .map(|(n, _)| n)
    };
    host.and_then(|ip| first(&|o| subnet_holds(&o.fabric, ip)))
        .or_else(|| first(&|o| !o.fabric.starts_with("fe80:")))
        .or_else(|| first(&|_| true))
}

/// Whether `fabric`, when it is a subnet (`a.b.c.d/n`, `x::/n`), holds `ip`.
pub(super) fn subnet_holds(fabric: &str, ip: IpAddr) -> bool {
    let Some((net, bits)) = fabric.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return false;
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// This host's address, as the `tcp` fabric would advertise it: `GSM_TCP_BIND`, else what the
/// host name resolves to (unless loopback), else the first non-loopback IPv4 address.
fn host_address() -> Option<IpAddr> {
    let bind: Option<IpAddr> = gsm_contract::value(&gsm_contract::table::TCP_BIND);
    bind.or_else(|| {
        crate::fabric::resolve(&crate::sys::net::hostname())
            .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
    })
    .or_else(crate::sys::net::first_outside_ipv4)
}

/// Every answer of provider `p` with no requirements, to see what it does have.
fn bare(p: &str) -> Vec<Offer> {
    let hints = Hints {
        provider: Some(p.to_string()),
        caps: 0,
        rdm: false,
        mr_mode: MR_MODES,
    };
    Info::get(&hints).map(|i| i.offers()).unwrap_or_default()
}

/// The error for provider `p` that gave no usable answer (`offers`, with everything asked): the
/// first need it does not meet, judged from `all` of its answers.
pub(super) fn lacks(p: &str, offers: &[Offer], all: impl FnOnce() -> Vec<Offer>) -> FabricError {
    let err = |capability: String| FabricError::Provider {
        provider: p.to_string(),
        capability,
    };
    if !offers.is_empty() {
        return err(format!(
            "{CQ_DATA} bytes of remote completion data (FI_REMOTE_CQ_DATA; it offers {})",
            offers[0].cq_data_size
        ));
    }
    let all = all();
    if all.is_empty() {
        return err(
            "any answer at all: libfabric has no such provider here, or it found no device for \
             it (fi_info -l lists the providers)"
                .into(),
        );
    }
    let rdm: Vec<&Offer> = all.iter().filter(|o| o.rdm).collect();
    if rdm.is_empty() {
        return err("reliable datagram endpoints (FI_EP_RDM)".into());
    }
    for (bit, name) in [
        (bits::RMA, "FI_RMA"),
        (bits::REMOTE_WRITE, "FI_REMOTE_WRITE"),
        (bits::REMOTE_READ, "FI_REMOTE_READ"),
        (bits::MSG, "FI_MSG"),
    ] {
        if !rdm.iter().any(|o| o.caps & bit != 0) {
            return err(name.into());
        }
    }
    err(format!(
        "a memory-registration mode this fabric handles (it asks for {:#x}; handled: FI_MR_LOCAL, \
         FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY, FI_MR_ENDPOINT)",
        rdm[0].mr_mode
    ))
}

fn lib_error(provider: Option<&str>, e: &fi::FiError) -> FabricError {
    FabricError::Provider {
        provider: provider.unwrap_or("(any)").to_string(),
        capability: format!("a working fi_getinfo ({e})"),
    }
}
