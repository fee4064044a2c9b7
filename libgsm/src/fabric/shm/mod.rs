//! The `shm` fabric: slot rings between ranks on one host, in POSIX shared memory.
//!
//! **What it abstracts.** Each rank creates exactly one segment, `/dev/shm/{job_id}-r{rank}`
//! ([`segment_name`]), mode 0600, created with `O_EXCL` (a leftover of an earlier job with the
//! same id is an error, never reused). The segment holds the rings this rank's workers *consume*
//! from the workers of its shm peers, and this rank's workers' doorbells. A peer maps the segment
//! and produces into those rings directly and rings those doorbells: after set-up there is no
//! thread, no system call on the data path (except a futex wake for a sleeping consumer) and no
//! copy beyond the slot itself. The mapping is held by an `Arc` that every ring end and doorbell
//! keeps, so it stays mapped as long as anything made from it lives.
//!
//! **Layout.** The segment's format (header, doorbells, ring table, rings, host board) and
//! its size are documented in `layout`.
//!
//! **Life cycle** (the phases of [`super::Fabric`]): [`Shm::create`](super::Fabric::create)
//! creates, sizes, maps and initialises the segment and sets the ready word last;
//! [`attach`](super::Fabric::attach) opens every peer's segment, checks its owner, permissions
//! and size, and validates everything it will use before touching a ring (magic, version, ready
//! word, rank, worker count, ring geometry, that the table has exactly the expected layout, and
//! that every ring lies inside the mapping, aligned, with one ring per (peer worker, our worker,
//! lane)); [`sealed`](super::Fabric::sealed) unlinks this rank's segment name (every peer has
//! mapped it by then, so a crash later leaves nothing in `/dev/shm`); dropping a fabric that
//! never reached `sealed` unlinks it too. Only this rank's own segment is ever unlinked; `gsmrun`
//! removes the segments of a rank that died between `create` and `sealed`.
//!
//! **What it does not do.** It does not notice a peer dying (the runtime watches the peers'
//! processes); a dead peer's rings simply stop moving. It never trusts a peer's bytes with memory
//! safety: header and table are read once, validated and then only the validated copy is used;
//! ring headers and release counters are checked by the ring itself. A peer process of the same
//! user that shrinks its segment after we mapped it can still make this process fault (`SIGBUS`);
//! the segment's 0600 mode keeps other users out.
//!
//! **Where things are.** `layout` (the format and its arithmetic), `mapping` (a mapped segment and
//! the rings, doorbells and board made from it), `segment` (creating this rank's segment, opening
//! a peer's), `validate` (checking a peer's before use). The ring protocol itself is
//! `crate::wire::ring`'s (see `wire/README.md`).

mod layout;
pub(in crate::fabric) mod mapping;
mod segment;
#[cfg(test)]
mod tests;
mod validate;

use std::ffi::CString;
use std::sync::Arc;

use super::{
    Bell, Fabric, FabricEntry, FabricError, FabricKind, Hooks, InLink, Lane, Links, OutLink, Peer,
    Settings, Topology,
};
use crate::sys;
pub use layout::segment_name;
use layout::{Entry, Geometry, MAX_JOB_ID, segment_path};
use mapping::{Mapping, bell_at, board_at, ring_at};

fn os(what: String, e: std::io::Error) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Shm,
        what,
        detail: e.to_string(),
    }
}

/// This rank's segment, once created.
#[derive(Debug)]
struct Own {
    topo: Topology,
    /// Peer ranks, ascending.
    peers: Vec<u32>,
    map: Arc<Mapping>,
    geometry: Geometry,
    entries: Vec<Entry>,
}

/// The `shm` fabric of one rank (see the module docs).
#[derive(Debug, Default)]
pub struct Shm {
    /// The segment's name while it exists in `/dev/shm` and is ours to unlink.
    linked: Option<String>,
    own: Option<Own>,
    attached: bool,
    closing: bool,
}

impl Shm {
    /// Removes this rank's segment name, if it still exists.
    fn unlink(&mut self) {
        let Some(name) = self.linked.take() else {
            return;
        };
        let Ok(c) = CString::new(format!("/{name}")) else {
            return;
        };
        if let Err(e) = sys::shm::unlink(&c) {
            if e.kind() != std::io::ErrorKind::NotFound {
                // Try again on drop.
                self.linked = Some(name);
            }
        }
    }

    /// Whether [`Fabric::closing`] was called.
    pub fn is_closing(&self) -> bool {
        self.closing
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // Set-up failed before `sealed`: do not leave our segment behind. Never a peer's.
        self.unlink();
    }
}

fn check_job_id(job_id: &str) -> Result<(), FabricError> {
    if job_id.is_empty()
        || job_id.len() > MAX_JOB_ID
        || job_id.contains('/')
        || job_id.contains('\0')
    {
        return Err(FabricError::Choice {
            value: job_id.to_string(),
            reason: "the job id names shared-memory segments, so it must be 1 to 240 bytes \
                     without '/' or NUL (gsmrun sets GSM_JOB_ID to gsm-<pid>-<hex>)",
        });
    }
    Ok(())
}

/// The rings of `rank`'s segment, in table order, given its shm peers (ascending).
fn ring_plan(topo: &Topology, rank: u32, peers: &[u32]) -> Vec<(u32, u32, Lane)> {
    let mut v = Vec::new();
    for l in 0..topo.workers[rank as usize] {
        for &p in peers {
            for g in topo.workers_of(p) {
                v.push((l, g, Lane::Request));
                v.push((l, g, Lane::Response));
            }
        }
    }
    v
}

/// The shm fabric's line of [`super::FABRICS`].
pub const ENTRY: FabricEntry = FabricEntry {
    kind: FabricKind::Shm,
    open: |settings| Shm::prepare(settings).map(|(f, e)| (Box::new(f) as Box<dyn Fabric>, e)),
    exchanges: false,
    between_hosts: None,
};

impl Shm {
    /// Opens the fabric (before the bootstrap exchange); peers find the segment by name, so it
    /// publishes nothing.
    pub fn prepare(_settings: &Settings) -> Result<(Self, Vec<u8>), FabricError> {
        Ok((Shm::default(), Vec::new()))
    }
}

impl Fabric for Shm {
    fn kind(&self) -> FabricKind {
        FabricKind::Shm
    }

    fn create(
        &mut self,
        topo: &Topology,
        peers: &[Peer],
        _hooks: Hooks,
    ) -> Result<(), FabricError> {
        if self.own.is_some() || self.linked.is_some() {
            return Err(FabricError::Os {
                fabric: FabricKind::Shm,
                what: format!("creating rank {}'s segment", topo.rank),
                detail: "create was called twice on one fabric".into(),
            });
        }
        check_job_id(&topo.job_id)?;
        let ranks = peer_ranks(topo, peers)?;
        let plan = ring_plan(topo, topo.rank, &ranks);
        let name = segment_name(&topo.job_id, topo.rank);
        let path = segment_path(&name);
        let too_big = || segment::too_big(&path, plan.len(), topo.layout);
        let rings = u32::try_from(plan.len()).map_err(|_| too_big())?;
        let g = Geometry::new(topo.layout, topo.local_workers(), rings).ok_or_else(too_big)?;
        let map = Arc::new(self.create_segment(topo, name, &path, &g, rings)?);
        // The file is fresh (O_EXCL) and ftruncate/fallocate zero-fill it: every ring and
        // doorbell starts at zero.
        let entries = segment::write_segment(&map, topo, &g, &plan);
        tracing::info!(
            target: "gossamer::fabric",
            fabric = "shm",
            rank = topo.rank,
            segment = %path,
            bytes = g.total,
            rings,
            slots = topo.layout.slots,
            slot_size = topo.layout.slot_size,
            ring_bytes = topo.layout.bytes(),
            peers = ranks.len(),
            "segment created"
        );
        self.own = Some(Own {
            topo: topo.clone(),
            peers: ranks,
            map,
            geometry: g,
            entries,
        });
        Ok(())
    }

    fn attach(&mut self) -> Result<Links, FabricError> {
        let Some(own) = &self.own else {
            return Err(FabricError::Os {
                fabric: FabricKind::Shm,
                what: "attaching to peers' segments".into(),
                detail: "attach was called before a successful create".into(),
            });
        };
        if self.attached {
            return Err(FabricError::Os {
                fabric: FabricKind::Shm,
                what: "attaching to peers' segments".into(),
                detail: "attach was called twice (each ring has exactly one end per side)".into(),
            });
        }
        let topo = &own.topo;
        let layout = topo.layout;
        let first = topo.first_worker(topo.rank);
        let mut links = Links::default();
        // Validate every peer before taking any ring end, so a failure leaves nothing taken.
        let mut opened = Vec::with_capacity(own.peers.len());
        for &p in &own.peers {
            let peer = Shm::open_peer(topo, p).inspect_err(|e| {
                tracing::info!(
                    target: "gossamer::fabric",
                    fabric = "shm",
                    peer = p,
                    "cannot attach to the peer's segment: {e}"
                );
            })?;
            opened.push((p, peer));
        }
        tracing::info!(
            target: "gossamer::fabric",
            fabric = "shm",
            rank = topo.rank,
            peers = opened.len(),
            mapped_bytes = opened.iter().map(|(_, (m, _))| m.len).sum::<usize>(),
            "mapped every peer's segment"
        );
        self.attached = true;
        let ring_err = |p: u32, e: crate::wire::ring::RingError| FabricError::Protocol {
            fabric: FabricKind::Shm,
            peer: p,
            host: topo.hosts.get(p as usize).cloned().unwrap_or_default(),
            detail: e.to_string(),
        };
        let mut boards = vec![(topo.rank as usize, board_at(&own.map, own.geometry.board))];
        for (p, (map, seg)) in opened {
            boards.push((p as usize, board_at(&map, seg.geometry.board)));
            let base = topo.first_worker(p);
            for e in &seg.ours {
                // SAFETY: `validate` checked that the ring lies inside the mapping, aligned, at
                // the offset the format gives (so rings do not overlap); the segment's creator
                // zeroed it; we take only the producer, of exactly one ring per (our worker,
                // their worker, lane), once (`attached`), and only its rank takes consumers.
                let ring = unsafe { ring_at(&map, e.offset, layout) };
                links.outgoing.push(OutLink {
                    local: e.producer - first,
                    remote: base + e.consumer,
                    lane: e.lane,
                    producer: ring.producer().map_err(|err| ring_err(p, err))?,
                });
            }
            for l in 0..seg.workers {
                let bell =
                    bell_at(&map, seg.geometry.bell(l)).ok_or_else(|| FabricError::Protocol {
                        fabric: FabricKind::Shm,
                        peer: p,
                        host: topo.hosts.get(p as usize).cloned().unwrap_or_default(),
                        detail: format!("doorbell {l} lies outside its segment"),
                    })?;
                links.bells.push((base + l, Bell::Door(bell)));
            }
        }
        for e in &own.entries {
            // SAFETY: our own table, computed by `Geometry` (aligned, in bounds, disjoint) and
            // zeroed by ftruncate; we take only the consumer, once (`attached`).
            let ring = unsafe { ring_at(&own.map, e.offset, layout) };
            let p = topo.rank_of(e.producer);
            links.incoming.push(InLink {
                local: e.consumer,
                remote: e.producer,
                lane: e.lane,
                consumer: ring.consumer().map_err(|err| ring_err(p, err))?,
            });
        }
        let mut bells = Vec::with_capacity(topo.local_workers() as usize);
        for l in 0..topo.local_workers() {
            bells.push(
                bell_at(&own.map, own.geometry.bell(l))
                    .expect("our own doorbells lie inside our segment"),
            );
        }
        links.local_bells = Some(bells);
        links.boards = boards;
        Ok(links)
    }

    fn sealed(&mut self) {
        // Every peer has mapped our segment: the name is no longer needed.
        self.unlink();
    }

    fn closing(&mut self) {
        // Nothing to stop: there is no thread, and a peer that ends only stops writing.
        self.closing = true;
    }
}

/// The peer ranks, ascending; refuses a list that repeats a rank, names this rank or a rank
/// beyond the job.
fn peer_ranks(topo: &Topology, peers: &[Peer]) -> Result<Vec<u32>, FabricError> {
    let mut ranks: Vec<u32> = peers.iter().map(|p| p.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    if ranks.len() != peers.len() || ranks.iter().any(|&p| p == topo.rank || p >= topo.ranks()) {
        return Err(FabricError::Os {
            fabric: FabricKind::Shm,
            what: format!("creating rank {}'s segment", topo.rank),
            detail: format!(
                "peer list {:?} repeats a rank, names this rank or a rank beyond {}",
                peers.iter().map(|p| p.rank).collect::<Vec<_>>(),
                topo.ranks()
            ),
        });
    }
    Ok(ranks)
}
