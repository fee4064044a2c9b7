//! Choosing the libfabric provider: `GSM_OFI_PROVIDER`, or the first answer `fi_getinfo` gives
//! for what the fabric needs; and, when a named provider cannot serve, the one capability it
//! lacks, named in the start-up error.
//!
//! What the fabric needs of a provider: reliable datagram endpoints (`FI_EP_RDM`), messages (the
//! set-up hello), RMA writes and reads with their remote side (`FI_RMA`, `FI_REMOTE_WRITE`,
//! `FI_REMOTE_READ`), 8 bytes of remote completion data, and memory registration in modes this
//! fabric handles (`FI_MR_LOCAL`, `FI_MR_VIRT_ADDR`, `FI_MR_ALLOCATED`, `FI_MR_PROV_KEY`,
//! `FI_MR_ENDPOINT`; not `FI_MR_RAW`). A provider is never taken without RMA: the default asks
//! `fi_getinfo` for these capabilities, so every answer has them.

use crate::fabric::FabricError;
use crate::sys::ofi::{self as fi, Hints, Info, Offer, bits};

/// The variable naming the provider (`tcp;ofi_rxm`, `shm`, `verbs;ofi_rxm`, `efa`, `cxi`...).
pub const PROVIDER_VAR: &str = "GSM_OFI_PROVIDER";

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
/// Bytes of remote completion data a slot write carries.
pub(super) const CQ_DATA: usize = 8;

/// `GSM_OFI_PROVIDER`, `None` when unset or empty.
pub(super) fn from_env() -> Option<String> {
    std::env::var(PROVIDER_VAR)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The answers for `provider` (or any), and the index of the one to open.
pub(super) fn choose(provider: Option<&str>) -> Result<(Info, usize), FabricError> {
    let hints = Hints {
        provider: provider.map(str::to_string),
        caps: CAPS,
        rdm: true,
        mr_mode: MR_MODES,
    };
    let info = Info::get(&hints).map_err(|e| lib_error(provider, &e))?;
    let offers = info.offers();
    if let Some(n) = offers.iter().position(|o| o.cq_data_size >= CQ_DATA) {
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
