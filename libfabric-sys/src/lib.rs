//! Raw bindings to the system's libfabric (1.17, Debian 12's `libfabric-dev`, and later), made at
//! build time by bindgen from `rdma/fabric.h`, `fi_domain.h`, `fi_endpoint.h`, `fi_rma.h`,
//! `fi_cm.h`, `fi_atomic.h` and `fi_errno.h`.
//!
//! Most of libfabric's API is `static inline` functions that dispatch through a provider's
//! operation tables, which Rust cannot link to. `src/shim.c` turns each one used here into a real
//! function with the prefix `gsm_fi_` and the same arguments (minus the trailing context or
//! flags the callers here never use: see `src/shim.h`). The real exported functions
//! (`fi_getinfo`, `fi_freeinfo`, `fi_dupinfo`, `fi_fabric`, `fi_strerror`, `fi_version`) are bound
//! as they are. `GSM_FI_VERSION` is the API version to pass to `fi_getinfo` (1.17).
//!
//! This crate is unsafe FFI only; the safe layer is the `ofi` fabric of the `gossamer` crate.
//! Of atomics it binds the fetching ones (`fi_fetch_atomic`, `fi_compare_atomic`) that segments use.
//! It does not bind collectives, tagged messages or connection management.

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    unsafe_op_in_unsafe_fn
)]
#![allow(missing_debug_implementations, missing_docs)]
#![allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// `FI_ADDR_UNSPEC`, a macro bindgen cannot evaluate (`((uint64_t) -1)`).
pub const FI_ADDR_UNSPEC_VALUE: fi_addr_t = u64::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_reports_a_version_of_at_least_1_17() {
        // SAFETY: fi_version takes no arguments and only returns a number.
        let v = unsafe { fi_version() };
        assert!(
            v >= GSM_FI_VERSION,
            "libfabric {}.{} is older than 1.17",
            v >> 16,
            v & 0xffff
        );
    }
}
