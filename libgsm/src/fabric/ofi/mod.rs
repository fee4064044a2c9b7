//! The `ofi` fabric: slot rings between ranks carried by one-sided RMA writes over libfabric,
//! with any provider that has RMA (`tcp;ofi_rxm` and `shm` here; `verbs;ofi_rxm`, `efa`, `cxi`,
//! `psm3` on clusters). An adapter of the one RMA ring protocol (`fabric/rdma`): it opens the
//! endpoint, exchanges hellos and implements the protocol's transport (`transport.rs`:
//! `fi_writedata` with the immediate as remote completion data); its own are the rendezvous for
//! large records (`rendezvous.rs`, `handle.rs`) and the segments' RMA port (`rma.rs`).
//!
//! # What lives where
//!
//! Each rank registers one region (see `layout.rs`) holding the rings its workers *consume* from
//! every peer worker (the trustee's request rings, the client's response rings), a shadow ring
//! for every ring its workers *produce* into, and one credit word per ring. The runtime gets
//! ordinary ring ends in that region: it publishes into shadow rings and polls incoming rings,
//! exactly as on `shm`.
//!
//! # Publish, credit, wake (the ring protocol of ARCHITECTURE.md, over RMA)
//!
//! The rank's endpoint is driven by whoever takes its turn (`drive.rs`): a worker that polls or
//! has just published, or, while every worker sleeps, the progress thread (`gsm-ofi`). A turn
//! (`progress.rs`) does what follows; "the progress thread" below means whoever turns.
//!
//! 1. **Publish.** It sees a slot published in a shadow ring (its header, Acquire) and writes the
//!    payload with one `fi_writedata` straight into the same slot of the peer's incoming ring,
//!    with 8 bytes of remote completion data: the ring's number, the slot and the length. No
//!    header travels: a single write's bytes may land in any order, so the peer's progress
//!    thread stores the header itself (Release) when the write's completion tells it every byte
//!    is in place, in ring order (a completion that arrives early waits in a per-ring table), and
//!    then wakes the consumer through `Hooks::wake`. A consumer that sleeps is woken by that
//!    completion; the progress thread itself sleeps on the completion queue's wait descriptor.
//! 2. **Credit.** The peer's progress thread watches the `released` word of an incoming ring that
//!    has half a ring or more uncredited, and writes it back (coalesced: when half a ring is
//!    free, never merely because the consumer caught up, so a round trip of one request at a
//!    time costs no credit write) into this rank's credit word for the shadow ring, again by
//!    `fi_writedata` with data naming the ring. The shadow ring's own `released` becomes the
//!    smaller of that credit and the slots whose writes completed locally, so the producer
//!    reuses a slot only when the peer has consumed it and the provider is done with it. A
//!    producer is thus never more than a ring ahead of the consumer, as on `shm`.
//!
//! # Set-up
//!
//! [`Ofi::prepare`] chooses the provider (`provider.rs`: `GSM_OFI_PROVIDER`, else the first
//! answer with everything needed), opens the endpoint and publishes its address, prefixed by the
//! provider's and fabric's names so that every rank can check they agree.
//! [`Fabric::create`] allocates and registers the region, inserts the peers' addresses, posts a
//! receive per peer and sends each peer a 128-byte hello (`layout.rs`): the job key, the
//! geometry, the region's RMA address and key, and where that peer's rings and credit words
//! lie. [`Fabric::attach`] waits (bounded by the connect timeout) for every hello, checks it
//! (the key, the ranks, the geometry, offsets inside the region it describes) and starts the
//! progress thread. Registered memory is released when the fabric and every ring end are
//! dropped; a crash leaves nothing behind (the region is process memory).
//!
//! # Failure
//!
//! A failed operation (a peer gone: the provider reports it on the operation) or a completion
//! that breaks the protocol (a ring that does not exist, a write past the credit) ends the job
//! through `Hooks::fail`, naming the peer. After [`Fabric::closing`] failures are expected and
//! not reported. See ARCHITECTURE.md.

mod endpoint;
mod handle;
mod provider;
mod rendezvous;
mod rma;
mod setup;
mod transport;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::thread::JoinHandle;

pub use endpoint::RmaEndpoint;
pub use provider::PROVIDER_VAR;

use crate::fabric::rdma::drive;
use crate::fabric::rdma::rings::{self, Parts, Shared};
use crate::sys::ofi as fi;
use transport::OfiTransport;

use super::{Fabric, FabricEntry, FabricError, FabricKind, Hooks, Links, Peer, Settings, Topology};

/// The `ofi` fabric of one rank. See the module docs.
#[derive(Debug)]
pub struct Ofi {
    /// The libfabric objects, until the progress thread takes them.
    stack: Option<fi::Stack>,
    /// What `create` made, until `attach` uses it.
    created: Option<setup::Created>,
    /// The provider opened.
    provider: String,
    /// Shared with the progress thread.
    shared: Option<Arc<Shared>>,
    thread: Option<JoinHandle<()>>,
    connect_timeout: std::time::Duration,
}

impl Ofi {
    /// The provider this rank opened (`tcp;ofi_rxm`, `shm`...).
    pub fn provider(&self) -> Option<&str> {
        Some(self.provider.as_str())
    }
}

/// The first RMA provider libfabric offers, if it drives RDMA hardware (not `tcp`, `sockets`,
/// `udp`, `net` or `shm`, which emulate RMA in software); otherwise why not, for the log.
pub fn hardware_provider() -> Result<String, String> {
    let (info, n) = provider::choose(provider::from_env().as_deref()).map_err(|e| e.to_string())?;
    let p = info.offers()[n].provider.clone();
    let core = p.split(';').next().unwrap_or_default();
    if ["tcp", "sockets", "udp", "net", "shm"].contains(&core) {
        Err(format!(
            "libfabric's first RMA provider is {p}, which emulates RMA over sockets or memory"
        ))
    } else {
        Ok(p)
    }
}

/// A libfabric failure during set-up, worded for the user.
pub(super) fn setup_error(provider: &str, e: &fi::FiError) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Ofi,
        what: format!("provider {provider}"),
        detail: e.to_string(),
    }
}

/// The ofi fabric's line of [`super::FABRICS`]: `auto` takes it between hosts when libfabric
/// offers an RDMA provider.
pub const ENTRY: FabricEntry = FabricEntry {
    kind: FabricKind::Ofi,
    open: |settings| Ofi::prepare(settings).map(|(f, e)| (Box::new(f) as Box<dyn Fabric>, e)),
    exchanges: false,
    between_hosts: Some(between_hosts),
};

/// Whether `auto` takes this fabric between hosts: see [`hardware_provider`].
fn between_hosts() -> Result<String, String> {
    hardware_provider().map(|p| format!("libfabric offers RDMA provider {p}"))
}

impl Ofi {
    /// Opens the fabric (before the bootstrap exchange): chooses the provider and opens the
    /// endpoint; the endpoint bytes name the provider, the fabric and the address.
    pub fn prepare(settings: &Settings) -> Result<(Self, Vec<u8>), FabricError> {
        let wanted = provider::from_env();
        let (info, n) = provider::choose(wanted.as_deref())?;
        let name = info.offers()[n].provider.clone();
        let stack =
            fi::Stack::open(info, n, provider::cq_wait()).map_err(|e| setup_error(&name, &e))?;
        let endpoint = setup::endpoint_bytes(&stack)?;
        tracing::info!(
            target: "gossamer::fabric",
            provider = %stack.offer.provider,
            fabric = %stack.offer.fabric,
            domain = %stack.offer.domain,
            mr_mode = format_args!("{:#x}", stack.offer.mr_mode),
            cq_wait = %if stack.can_wait() { "fd" } else { "none" },
            chosen_by = if wanted.is_some() { PROVIDER_VAR } else { "fi_getinfo's first answer with RMA" },
            "ofi endpoint opened"
        );
        Ok((
            Ofi {
                provider: stack.offer.provider.clone(),
                stack: Some(stack),
                created: None,
                shared: None,
                thread: None,
                connect_timeout: settings.connect_timeout,
            },
            endpoint,
        ))
    }
}

impl Fabric for Ofi {
    fn kind(&self) -> FabricKind {
        FabricKind::Ofi
    }

    fn create(&mut self, topo: &Topology, peers: &[Peer], hooks: Hooks) -> Result<(), FabricError> {
        let stack = self.stack.as_mut().ok_or(FabricError::Choice {
            value: "create".into(),
            reason: "the ofi fabric was created twice or not prepared",
        })?;
        self.created = Some(setup::create(stack, topo, peers, hooks)?);
        Ok(())
    }

    fn attach(&mut self) -> Result<Links, FabricError> {
        let (Some(mut stack), Some(created)) = (self.stack.take(), self.created.take()) else {
            return Err(FabricError::Choice {
                value: "attach".into(),
                reason: "the ofi fabric was attached before create",
            });
        };
        let heard = setup::exchange_hellos(&mut stack, &created, self.connect_timeout)?;
        let setup::Created {
            plan,
            region,
            hellos,
            hooks,
            topo,
        } = created;
        let peers = hellos
            .addrs()
            .iter()
            .zip(&heard)
            .map(|(&addr, h)| (addr, h.key))
            .collect();
        tracing::info!(
            target: "gossamer::fabric",
            provider = %stack.offer.provider,
            peers = plan.peers.len(),
            rings = plan.rings * 2,
            region_bytes = region.len(),
            waits_on_cq = stack.can_wait(),
            "ofi fabric attached"
        );
        let transport = OfiTransport::new(stack, peers, hellos);
        let local = plan.local;
        let parts = Parts {
            plan,
            region,
            hooks,
            topo,
            remotes: heard.into_iter().map(|h| h.remote).collect(),
        };
        let (mut links, shared, state) = rings::build(transport, parts)?;
        let ranks = state.peer_ranks();
        let (thread, engine) = drive::start(state, shared.clone(), local, &mut links, "gsm-ofi")
            .map_err(|e| rings::os::<OfiTransport>("starting the progress thread", &e))?;
        rma::install(&engine);
        links.rendezvous = Some(Arc::new(handle::Handle::new(engine, ranks)));
        self.shared = Some(shared);
        self.thread = Some(thread);
        Ok(links)
    }

    fn sealed(&mut self) {}

    fn closing(&mut self) {
        if let Some(s) = &self.shared {
            s.closing.store(true, std::sync::atomic::Ordering::Release);
        }
    }
}

impl Drop for Ofi {
    fn drop(&mut self) {
        if self.shared.is_some() {
            rma::uninstall();
        }
        if let Some(s) = &self.shared {
            s.closing.store(true, std::sync::atomic::Ordering::Release);
            s.stop();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
