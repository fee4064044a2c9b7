//! The `verbs` fabric (cargo feature `rdma`): slot rings between ranks carried by RDMA WRITEs on
//! RC queue pairs, through rdma-core's verbs (InfiniBand, RoCE). The same ring layout and ring
//! code as `shm` and `ofi`; the protocol mirrors `ofi`'s one-sided one.
//!
//! **Compile-checked only where it was built**: the development machine has no RDMA device (no
//! InfiniBand in its kernel, no rxe/siw), so only the start-up without a device and the pure
//! logic (the exchanged bytes and their checks, queue-pair attributes, ring offsets and
//! immediates) run in its tests. The data path below has never moved a byte; try it with
//! `cluster_check --fabric verbs` on real hardware before relying on it.
//!
//! # What lives where
//!
//! Each rank registers one region (`layout.rs`) holding the rings its workers consume from every
//! peer worker, a shadow ring for every ring they produce into, a credit word per ring and a
//! staged-header word per incoming slot. One RC queue pair per peer **rank**: an RC queue pair
//! joins exactly two processes, so a host with several ranks needs one per rank anyway, and all
//! writes are posted by the rank's one progress thread, so one per (worker, rank) would add
//! queue pairs without adding parallelism. (The one per (worker, host) needs one rank
//! per host and workers that post their own writes; not built.)
//!
//! # Publish, credit, wake (the ring protocol of ARCHITECTURE.md, over RC)
//!
//! 1. **Publish.** The progress thread (`progress.rs`) sees a slot published in a shadow ring and
//!    posts, as one chain on the peer's queue pair, an RDMA WRITE of the payload into the same
//!    slot of the peer's ring, then an RDMA WRITE WITH IMMEDIATE of the slot's 8-byte header into
//!    the peer's staged word for that slot; the immediate names the ring and slot. An RC queue
//!    pair executes a chain in order and completes the immediate at the peer only after every
//!    earlier write of it is placed, so when the peer's thread sees that receive completion the
//!    payload and header are in its memory. It checks the header (tag of the position expected,
//!    length within the slot, position within the credit) and stores it into the ring (Release),
//!    in ring order, then wakes the consumer through `Hooks::wake`: a sleeping consumer is woken
//!    by the completion (the thread sleeps on the completion channel).
//! 2. **Credit.** The consumer's `released` goes back by an RDMA WRITE WITH IMMEDIATE into the
//!    producer's credit word (coalesced: half a ring, or caught up). The shadow ring's
//!    `released` is the smaller of that credit and the locally completed slots, so a slot is
//!    reused only once the peer consumed it and the adapter is done reading it.
//!
//! # Set-up (the bootstrap carries every byte, through MPI)
//!
//! [`Fabric::prepare`] opens the device (`GSM_VERBS_DEVICE`, else the first with an active
//! port) and publishes the port's address (LID, GID, MTU) in the run's offer. [`Fabric::create`]
//! makes the completion queue with its channel, registers the region, creates one queue pair per
//! peer, moves it to INIT, posts its receives and writes one card per peer (queue pair number,
//! first sequence number, region address, rkey and offsets). The runtime gathers every rank's
//! cards ([`Verbs::cards`]) and hands them back ([`Verbs::accept`]), which checks the card
//! addressed to this rank by each peer and moves each queue pair to RTR and RTS. [`Fabric::attach`]
//! builds the ring ends and starts the thread.
//!
//! # Failure
//!
//! A failed work request (a peer gone: the retries run out within about half a second; or a
//! remote access error) ends the job through `Hooks::fail` with the peer named, as on `tcp`. A
//! peer whose queue pair sees no traffic is not noticed by the fabric; the runtime's watch of
//! the peers' processes covers it. Registered memory is process memory: a crash leaves nothing.

mod layout;
mod progress;
mod setup;
mod wire;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::sys::verbs::{DEVICE_DIR, OpenError, Stack};

use super::{Fabric, FabricError, FabricKind, Hooks, Links, Peer, Settings, Topology};

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
    remotes: Option<Vec<setup::Remote>>,
    shared: Option<Arc<progress::Shared>>,
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

impl Verbs {
    /// This rank's cards for the second exchange (empty before `create`).
    pub fn cards(&self) -> Vec<u8> {
        self.created
            .as_ref()
            .map(|c| c.cards.clone())
            .unwrap_or_default()
    }

    /// Takes every rank's cards (index = rank), checks those addressed to this rank and readies
    /// the queue pairs.
    pub fn accept(&mut self, gathered: &[Vec<u8>]) -> Result<(), FabricError> {
        let (Some(stack), Some(c)) = (self.stack.as_mut(), self.created.as_ref()) else {
            return Err(out_of_order("accept"));
        };
        self.remotes = Some(setup::accept(stack, &self.mine, c, gathered)?);
        Ok(())
    }
}

impl Fabric for Verbs {
    const KIND: FabricKind = FabricKind::Verbs;

    fn prepare(_settings: &Settings) -> Result<(Self, Vec<u8>), FabricError> {
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
        let (links, shared, state) = progress::build(stack, created, remotes)?;
        let thread = std::thread::Builder::new()
            .name("gsm-verbs".into())
            .spawn(move || progress::run(state))
            .map_err(|e| progress::os("starting the progress thread", &e))?;
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
