//! The `ofi` fabric's side of segment RMA (`segment/rma.rs` decides what to post and when it is
//! allowed): a [`Port`] that registers segment regions on the rank's domain and posts reads,
//! writes and fetching atomics (those the provider says it does: `fi_fetch_atomicvalid`) on its endpoint under the turn's lock, into the table of
//! operations in flight that the turn completes (`transport.rs`'s `RmaTable`). Keys are random
//! 64-bit numbers unless
//! the provider picks them (`FI_MR_PROV_KEY`). Not installed when the provider wants local
//! buffers registered (`FI_MR_LOCAL`): segments then delegate every operation.
//!
//! It does not check rights, bounds or generations (the segment's side does, and the owner
//! hands out keys). See `segment/README.md`.

use std::collections::HashMap;
use std::sync::Arc;

use super::transport::OfiTransport;
use crate::fabric::rdma::drive::Engine;
use crate::fabric::rma::{self as seg, Done, NotPosted, Port, Posted, Region};
use crate::sys::ofi as fi;

/// The port segments use (see the module docs).
struct OfiPort {
    engine: Arc<Engine<OfiTransport>>,
    /// Peer rank → its address in the AV.
    peers: HashMap<usize, u64>,
    atomics: bool,
    /// The atomics the provider does itself, by `Atomic::code` (the others are delegated).
    native: u64,
    prov_key: bool,
}

impl Port for OfiPort {
    fn serves(&self, rank: usize) -> bool {
        self.peers.contains_key(&rank)
    }

    fn word_atomics(&self) -> bool {
        self.atomics
    }

    fn native(&self, kind: seg::Atomic) -> bool {
        self.native >> kind.code() & 1 != 0
    }

    unsafe fn expose(
        &self,
        ptr: *mut u8,
        len: usize,
        read: bool,
        write: bool,
    ) -> Result<Region, String> {
        // A key is a capability: random, so that a rank cannot name a region it was not given.
        let key = if self.prov_key { 0 } else { unguessable() };
        let mut st = self.engine.lock();
        let (stack, _) = st.transport().rma_parts();
        // SAFETY: the caller keeps the bytes mapped until `unexpose` (this trait's contract).
        let (handle, reg) =
            unsafe { stack.expose(ptr, len, read, write, key) }.map_err(|e| e.to_string())?;
        Ok(Region {
            handle,
            base: reg.base,
            key: reg.key,
        })
    }

    fn unexpose(&self, handle: usize) {
        self.engine
            .lock()
            .transport()
            .rma_parts()
            .0
            .unexpose(handle);
    }

    fn post(&self, rank: usize, addr: u64, key: u64, op: Posted) -> Result<Arc<Done>, NotPosted> {
        let dest = *self
            .peers
            .get(&rank)
            .ok_or_else(|| NotPosted::Failed(format!("rank {rank} is not an ofi peer")))?;
        let mut st = self.engine.lock();
        let (stack, table) = st.transport().rma_parts();
        table.post(stack, dest, addr, key, op)
    }
}

/// A 64-bit number no other process can predict: SipHash, under the keys std draws from the OS
/// for each process, of a counter and the clock.
fn unguessable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u64(N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Installs the port for this process's segments, unless the provider needs local buffers
/// registered.
pub(super) fn install(engine: &Arc<Engine<OfiTransport>>) {
    let (peers, local_mr, atomics, native, prov_key) = {
        let mut st = engine.lock();
        let ranks = st.peer_ranks();
        let (addrs, local_mr) = st.transport().peer_addresses();
        let peers: Vec<(usize, u64)> = ranks.iter().map(|&r| r as usize).zip(addrs).collect();
        let (stack, _) = st.transport().rma_parts();
        let prov_key = stack.offer.mr_mode & fi::bits::MR_PROV_KEY != 0;
        let native = seg::Atomic::all()
            .filter(|&k| stack.atomic_valid(super::transport::word_atomic(k)))
            .fold(0u64, |m, k| m | 1 << k.code());
        (peers, local_mr, stack.has_word_atomics(), native, prov_key)
    };
    tracing::debug!(
        target: "gossamer::fabric",
        native = format_args!("{native:#x}"),
        "the ofi provider's own atomics, by kind (the others are delegated)"
    );
    if local_mr {
        tracing::info!(
            target: "gossamer::fabric",
            "the ofi provider wants local buffers registered (FI_MR_LOCAL): segment operations are delegated, not RMA"
        );
        return;
    }
    seg::install(Some(Arc::new(OfiPort {
        engine: engine.clone(),
        peers: peers.into_iter().collect(),
        atomics,
        native,
        prov_key,
    })));
}

/// Removes the port (the fabric ends).
pub(super) fn uninstall() {
    seg::install(None);
}
