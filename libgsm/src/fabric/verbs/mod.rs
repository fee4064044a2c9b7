//! The `verbs` fabric (cargo feature `rdma`): slot rings between ranks carried by RDMA WRITE WITH
//! IMMEDIATE on RC queue pairs, through rdma-core's verbs (InfiniBand, RoCE). An adapter of the
//! one RMA ring protocol (`fabric/rdma`), which the `ofi` fabric's tests run here.
//!
//! **This adapter is compile-checked only where it was built**: the development machine has no
//! RDMA device (no InfiniBand in its kernel, no rxe/siw), so only the start-up without a device
//! and its pure logic (the exchanged bytes and their checks, queue-pair attributes and depths)
//! run in its tests; the ring protocol it drives is the one the ofi tests run. Try it with
//! `cluster_check --fabric verbs` on real hardware before relying on it.
//!
//! # What lives where
//!
//! Each rank registers one region (`fabric/rdma`'s plan) holding the rings its workers consume
//! from every peer worker, a shadow ring for every ring they produce into and a credit word per
//! ring. One RC queue pair per peer **rank**: an RC queue pair
//! joins exactly two processes, so a host with several ranks needs one per rank anyway, and all
//! writes are posted by the rank's one progress thread, so one per (worker, rank) would add
//! queue pairs without adding parallelism. (The one per (worker, host) needs one rank
//! per host and workers that post their own writes; not built.)
//!
//! # The ring protocol over RC (`transport.rs`)
//!
//! Each slot is one RDMA WRITE WITH IMMEDIATE of its header word and payload, each credit one
//! of the `released` word, on the peer's queue pair; the immediate is the protocol's (ring and
//! slot, or the credit's ring). An RC queue pair places every byte of a write before its
//! immediate completes at the peer, which is what the protocol asks of a transport. Each
//! arrived immediate consumed a receive, posted again at once. The rank's workers and its
//! thread (`gsm-verbs`) turn as on ofi (`fabric/rdma/drive.rs`); the thread sleeps on the
//! completion channel.
//!
//! # Set-up (the bootstrap carries every byte, through MPI)
//!
//! [`Verbs::prepare`] opens the device (`GSM_VERBS_DEVICE`, else the first with an active
//! port) and publishes the port's address (LID, GID, MTU) in the run's offer. [`Fabric::create`]
//! makes the completion queue with its channel, registers the region, creates one queue pair per
//! peer, moves it to INIT, posts its receives and writes one card per peer (queue pair number,
//! first sequence number, region address, rkey and offsets). The runtime gathers every rank's
//! cards ([`Fabric::cards`]) and hands them back ([`Fabric::accept`]), which checks the card
//! addressed to this rank by each peer and moves each queue pair to RTR and RTS. [`Fabric::attach`]
//! builds the ring ends and starts the thread.
//!
//! # Failure
//!
//! A failed work request (a peer gone: the retries run out within about half a second; or a
//! remote access error) ends the job through `Hooks::fail` with the peer named, as on `tcp`. A
//! peer whose queue pair sees no traffic is not noticed by the fabric; the runtime's watch of
//! the peers' processes covers it. Registered memory is process memory: a crash leaves nothing.

mod setup;
mod transport;
mod wire;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::fabric::rdma::drive;
use crate::fabric::rdma::rings::{self, Parts, Shared};
use crate::sys::verbs::{DEVICE_DIR, OpenError, Stack};
use transport::VerbsTransport;

use super::{Fabric, FabricEntry, FabricError, FabricKind, Hooks, Links, Peer, Settings, Topology};

/// The variable naming the RDMA device to open (e.g. `mlx5_0`).
pub const DEVICE_VAR: &str = gsm_contract::table::VERBS_DEVICE.name;
/// The variable giving the GID index (RoCE v2 is often 1 or 3; default 0).
pub const GID_INDEX_VAR: &str = gsm_contract::table::VERBS_GID_INDEX.name;

/// The `verbs` fabric of one rank. See the module docs.
#[derive(Debug)]
pub struct Verbs {
    stack: Option<Stack>,
    mine: wire::Endpoint,
    created: Option<setup::Created>,
    remotes: Option<Vec<setup::Heard>>,
    shared: Option<Arc<Shared>>,
    thread: Option<JoinHandle<()>>,
}

/// The one-line start-up error for what [`Stack::open`] looked for and did not find.
pub(crate) fn open_error(wanted: Option<&str>, e: OpenError) -> FabricError {
    let asked = match wanted {
        Some(w) => format!("RDMA device {w} ({DEVICE_VAR})"),
        None => "RDMA device with an active port".to_string(),
    };
    let looked_for = match e {
        OpenError::NoDevice => format!(
            "no {asked}: ibv_get_device_list found none ({DEVICE_DIR} is empty or missing: no \
             InfiniBand/RoCE driver, nor rxe/siw)"
        ),
        OpenError::NotFound { wanted, found } => {
            format!("no RDMA device {wanted} ({DEVICE_VAR}); found {found:?}")
        }
        OpenError::NoActivePort { looked_at } => {
            format!("no {asked}: no port of {looked_at:?} is active (cable, subnet manager?)")
        }
        OpenError::Call(e) => format!("opening an {asked}: {e}"),
    };
    FabricError::NoDevice {
        value: "verbs".into(),
        looked_for,
    }
}

fn gid_index_from_env() -> Result<u8, FabricError> {
    Ok(gsm_contract::get(&gsm_contract::table::VERBS_GID_INDEX)?)
}

fn out_of_order(step: &str) -> FabricError {
    FabricError::Choice {
        value: step.into(),
        reason: "the verbs fabric's phases were called out of order",
    }
}

/// The verbs fabric's line of [`super::FABRICS`]: its queue pairs need a second exchange.
pub const ENTRY: FabricEntry = FabricEntry {
    kind: FabricKind::Verbs,
    open: |settings| Verbs::prepare(settings).map(|(f, e)| (Box::new(f) as Box<dyn Fabric>, e)),
    exchanges: true,
    between_hosts: None,
};

impl Verbs {
    /// Opens the fabric (before the bootstrap exchange): opens the device; the endpoint is the
    /// port's address.
    pub fn prepare(_settings: &Settings) -> Result<(Self, Vec<u8>), FabricError> {
        let wanted: Option<String> = gsm_contract::get(&gsm_contract::table::VERBS_DEVICE)?;
        let gid_index = gid_index_from_env()?;
        let stack = Stack::open(wanted.as_deref().map(str::trim), gid_index)
            .map_err(|e| open_error(wanted.as_deref(), e))?;
        let mine = wire::Endpoint::of(&stack.port);
        tracing::info!(
            target: "gossamer::fabric",
            device = %mine.device,
            port = mine.port,
            lid = mine.lid,
            link_layer = mine.link_layer,
            chosen_by = if wanted.is_some() { DEVICE_VAR } else { "the first active port" },
            "verbs device opened"
        );
        let endpoint = mine.encode();
        Ok((
            Verbs {
                stack: Some(stack),
                mine,
                created: None,
                remotes: None,
                shared: None,
                thread: None,
            },
            endpoint,
        ))
    }
}

impl Fabric for Verbs {
    fn kind(&self) -> FabricKind {
        FabricKind::Verbs
    }

    /// This rank's cards (after `create`).
    fn cards(&self) -> Option<Vec<u8>> {
        self.created.as_ref().map(|c| c.cards.clone())
    }

    /// Takes every rank's cards (index = rank), checks those addressed to this rank and readies
    /// the queue pairs.
    fn accept(&mut self, gathered: &[Vec<u8>]) -> Result<(), FabricError> {
        let (Some(stack), Some(c)) = (self.stack.as_mut(), self.created.as_ref()) else {
            return Err(out_of_order("accept"));
        };
        self.remotes = Some(setup::accept(stack, &self.mine, c, gathered)?);
        Ok(())
    }

    fn create(&mut self, topo: &Topology, peers: &[Peer], hooks: Hooks) -> Result<(), FabricError> {
        let stack = self.stack.as_mut().ok_or_else(|| out_of_order("create"))?;
        if self.created.is_some() {
            return Err(out_of_order("create"));
        }
        self.created = Some(setup::create(stack, &self.mine, topo, peers, hooks)?);
        Ok(())
    }

    fn attach(&mut self) -> Result<Links, FabricError> {
        let (Some(stack), Some(created), Some(remotes)) =
            (self.stack.take(), self.created.take(), self.remotes.take())
        else {
            return Err(out_of_order("attach (before accept)"));
        };
        let setup::Created {
            plan,
            region,
            hooks,
            topo,
            depths,
            qpns,
            ..
        } = created;
        let rkeys = remotes.iter().map(|h| h.rkey).collect();
        let sq = depths.iter().map(|d| d.send).collect();
        let transport = VerbsTransport::new(stack, rkeys, &qpns, sq);
        tracing::info!(
            target: "gossamer::fabric",
            device = %transport.device(),
            queue_pairs = plan.peers.len(),
            rings = plan.rings * 2,
            region_bytes = region.len(),
            "verbs fabric attached"
        );
        let local = plan.local;
        let parts = Parts {
            plan,
            region,
            hooks,
            topo,
            remotes: remotes.into_iter().map(|h| h.remote).collect(),
        };
        let (mut links, shared, rings) = rings::build(transport, parts)?;
        let (thread, _engine) = drive::start(rings, shared.clone(), local, &mut links, "gsm-verbs")
            .map_err(|e| rings::os::<VerbsTransport>("starting the progress thread", &e))?;
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

impl Drop for Verbs {
    fn drop(&mut self) {
        if let Some(s) = &self.shared {
            s.closing.store(true, std::sync::atomic::Ordering::Release);
            s.stop();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
