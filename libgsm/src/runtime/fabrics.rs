//! The fabrics of one run across ranks: which fabric serves which peer rank (and why), and the
//! fabrics themselves through their phases (prepare, create, attach, sealed, closing; see
//! [`crate::fabric`]). The checked barriers between the phases, and the ring mesh the links
//! join, are the caller's (`start.rs`).

use crate::bootstrap::Job;
use crate::error::Error;
#[cfg(feature = "ofi")]
use crate::fabric::ofi::Ofi;
use crate::fabric::shm::Shm;
use crate::fabric::tcp::Tcp;
#[cfg(feature = "rdma")]
use crate::fabric::verbs::Verbs;
use crate::fabric::{Fabric, FabricChoice, FabricKind, Hooks, Links, Peer, Settings, Topology};

use super::offer::Offer;

/// The fabric that serves each rank (`None` for this one), from `GSM_FABRIC` and whether the
/// rank shares this rank's host.
pub(crate) fn choose(job: &Job, hosts: &[String]) -> Result<Vec<Option<FabricKind>>, Error> {
    let me = job.rank();
    let choice = FabricChoice::from_env()?;
    let mut remote: Option<(FabricKind, String)> = None;
    (0..job.size())
        .map(|r| {
            if r == me {
                return Ok(None);
            }
            let same_host = job.same_host(r);
            let mut k = choice.pick(same_host, r, &hosts[r as usize])?;
            if choice == FabricChoice::Auto && !same_host {
                let (kind, _) = remote.get_or_insert_with(|| {
                    let (kind, why) = auto_between_hosts();
                    tracing::info!(
                        target: "gossamer::fabric",
                        rank = me,
                        fabric = %kind,
                        why = %why,
                        "GSM_FABRIC=auto: the fabric between hosts"
                    );
                    (kind, why)
                });
                k = *kind;
            }
            tracing::debug!(
                target: "gossamer::fabric",
                rank = me,
                peer = r,
                peer_host = %hosts[r as usize],
                fabric = %k,
                why = why(choice, same_host),
                "fabric chosen"
            );
            Ok(Some(k))
        })
        .collect()
}

/// The fabric `auto` uses between hosts, and why: `ofi` when libfabric's first RMA provider is
/// a hardware one (verbs, efa, cxi, psm3...), else `tcp`, which serves a plain network better
/// than libfabric's emulation of RMA over sockets (`tcp;ofi_rxm`, `sockets`).
fn auto_between_hosts() -> (FabricKind, String) {
    #[cfg(feature = "ofi")]
    {
        match crate::fabric::ofi::hardware_provider() {
            Ok(p) => (
                FabricKind::Ofi,
                format!("libfabric offers RDMA provider {p}"),
            ),
            Err(why) => (FabricKind::Tcp, why),
        }
    }
    #[cfg(not(feature = "ofi"))]
    {
        (FabricKind::Tcp, "this build has no ofi fabric".to_string())
    }
}

/// Why `choice` gave a peer (on this host or not) its fabric, for the log.
fn why(choice: FabricChoice, same_host: bool) -> &'static str {
    match (choice, same_host) {
        (FabricChoice::Auto, true) => "same host",
        (FabricChoice::Auto, false) => "another host",
        (FabricChoice::Shm | FabricChoice::Tcp | FabricChoice::Ofi | FabricChoice::Verbs, _) => {
            "GSM_FABRIC"
        }
    }
}

/// The fabrics this rank needs for one run, each once prepared.
///
/// Fields in this order so that an early return drops tcp before shm, as the run's locals did.
pub(crate) struct Fabrics {
    #[cfg(feature = "rdma")]
    pub(crate) verbs: Option<Verbs>,
    #[cfg(feature = "ofi")]
    pub(crate) ofi: Option<Ofi>,
    pub(crate) tcp: Option<Tcp>,
    pub(crate) shm: Option<Shm>,
}

/// The endpoints of the fabrics prepared, to publish in this rank's [`Offer`] (empty for a
/// fabric not needed).
pub(crate) struct Endpoints {
    pub(crate) tcp: Vec<u8>,
    pub(crate) shm: Vec<u8>,
    pub(crate) ofi: Vec<u8>,
    pub(crate) verbs: Vec<u8>,
}

/// Whether some peer is served by `k`.
pub(crate) fn needs(kinds: &[Option<FabricKind>], k: FabricKind) -> bool {
    kinds.contains(&Some(k))
}

impl Fabrics {
    /// Prepares each fabric some peer needs (`kinds`); returns them and their endpoints.
    pub(crate) fn prepare(kinds: &[Option<FabricKind>]) -> Result<(Fabrics, Endpoints), Error> {
        let settings = Settings::from_env()?;
        let shm = if needs(kinds, FabricKind::Shm) {
            Some(Shm::prepare(&settings)?)
        } else {
            None
        };
        let tcp = if needs(kinds, FabricKind::Tcp) {
            Some(Tcp::prepare(&settings)?)
        } else {
            None
        };
        #[cfg(feature = "ofi")]
        let ofi = if needs(kinds, FabricKind::Ofi) {
            Some(Ofi::prepare(&settings)?)
        } else {
            None
        };
        #[cfg(not(feature = "ofi"))]
        let ofi: Option<((), Vec<u8>)> = None;
        #[cfg(feature = "rdma")]
        let verbs = if needs(kinds, FabricKind::Verbs) {
            Some(Verbs::prepare(&settings)?)
        } else {
            None
        };
        #[cfg(not(feature = "rdma"))]
        let verbs: Option<((), Vec<u8>)> = None;
        let endpoints = Endpoints {
            tcp: tcp.as_ref().map(|t| t.1.clone()).unwrap_or_default(),
            shm: shm.as_ref().map(|s| s.1.clone()).unwrap_or_default(),
            ofi: ofi.as_ref().map(|s| s.1.clone()).unwrap_or_default(),
            verbs: verbs.as_ref().map(|s| s.1.clone()).unwrap_or_default(),
        };
        let fabrics = Fabrics {
            #[cfg(feature = "rdma")]
            verbs: verbs.map(|v| v.0),
            #[cfg(feature = "ofi")]
            ofi: ofi.map(|o| o.0),
            tcp: tcp.map(|t| t.0),
            shm: shm.map(|s| s.0),
        };
        Ok((fabrics, endpoints))
    }

    /// Creates each fabric for its peers (`kinds`, with the endpoints of `offers`).
    pub(crate) fn create(
        &mut self,
        topo: &Topology,
        kinds: &[Option<FabricKind>],
        offers: &[Offer],
        hooks: &Hooks,
    ) -> Result<(), Error> {
        let peers_of = |k: FabricKind, pick: fn(&Offer) -> &Vec<u8>| -> Vec<Peer> {
            (0..kinds.len())
                .filter(|&r| kinds[r] == Some(k))
                .map(|r| Peer {
                    rank: r as u32,
                    endpoint: pick(&offers[r]).clone(),
                })
                .collect()
        };
        if let Some(f) = &mut self.shm {
            f.create(topo, &peers_of(FabricKind::Shm, |o| &o.shm), hooks.clone())?;
        }
        if let Some(f) = &mut self.tcp {
            f.create(topo, &peers_of(FabricKind::Tcp, |o| &o.tcp), hooks.clone())?;
        }
        #[cfg(feature = "ofi")]
        if let Some(f) = &mut self.ofi {
            f.create(topo, &peers_of(FabricKind::Ofi, |o| &o.ofi), hooks.clone())?;
        }
        #[cfg(feature = "rdma")]
        if let Some(f) = &mut self.verbs {
            f.create(
                topo,
                &peers_of(FabricKind::Verbs, |o| &o.verbs),
                hooks.clone(),
            )?;
        }
        Ok(())
    }

    /// The verbs fabric's second exchange, between `create` and `attach`: every rank's cards
    /// (queue pair numbers, region addresses and keys) through the bootstrap's all-gather. Every
    /// rank of an `rdma` build takes part (with no cards when it has no verbs peer), so the
    /// collective calls match whatever fabrics a rank chose.
    #[cfg(feature = "rdma")]
    pub(crate) fn exchange_verbs(&mut self, job: &Job) -> Result<(), Error> {
        // One leading byte, so that no rank's part is empty: Open MPI refuses an all-gather
        // of no bytes at all (MPI_ERR_ARG), which is what a job without verbs peers would send.
        let mut mine = vec![u8::from(self.verbs.is_some())];
        mine.extend(self.verbs.as_ref().map(Verbs::cards).unwrap_or_default());
        let all = job
            .all_gather(&mine)
            .map_err(|e| Error::Bootstrap(e.to_string()))?;
        let cards: Vec<Vec<u8>> = all
            .into_iter()
            .map(|b| b.get(1..).unwrap_or_default().to_vec())
            .collect();
        if let Some(f) = &mut self.verbs {
            f.accept(&cards)?;
        }
        Ok(())
    }

    /// Connects each fabric; returns their links (shm's first, whose bells tcp borrows).
    pub(crate) fn attach(&mut self) -> Result<Vec<Links>, Error> {
        let mut v = Vec::new();
        if let Some(f) = &mut self.shm {
            v.push(f.attach()?);
        }
        if let Some(f) = &mut self.tcp {
            // Per-host tcp connections: the rank that reads a remote worker's connection wakes
            // the workers of this host's other ranks through their shm doorbells.
            if let Some(shm) = v.first() {
                f.lend_bells(&shm.bells);
            }
            v.push(f.attach()?);
        }
        #[cfg(feature = "ofi")]
        if let Some(f) = &mut self.ofi {
            v.push(f.attach()?);
        }
        #[cfg(feature = "rdma")]
        if let Some(f) = &mut self.verbs {
            v.push(f.attach()?);
        }
        Ok(v)
    }

    /// Tells each fabric that every rank is connected.
    pub(crate) fn sealed(&mut self) {
        if let Some(f) = &mut self.shm {
            f.sealed();
        }
        if let Some(f) = &mut self.tcp {
            f.sealed();
        }
        #[cfg(feature = "ofi")]
        if let Some(f) = &mut self.ofi {
            f.sealed();
        }
        #[cfg(feature = "rdma")]
        if let Some(f) = &mut self.verbs {
            f.sealed();
        }
    }

    /// Tells each fabric that closing is expected now.
    pub(crate) fn closing(&mut self) {
        if let Some(f) = &mut self.shm {
            f.closing();
        }
        if let Some(f) = &mut self.tcp {
            f.closing();
        }
        #[cfg(feature = "ofi")]
        if let Some(f) = &mut self.ofi {
            f.closing();
        }
        #[cfg(feature = "rdma")]
        if let Some(f) = &mut self.verbs {
            f.closing();
        }
    }

    /// Drops verbs, ofi, shm, then tcp.
    pub(crate) fn close(mut self) {
        #[cfg(feature = "rdma")]
        drop(self.verbs.take());
        #[cfg(feature = "ofi")]
        drop(self.ofi.take());
        drop(self.shm.take());
        drop(self.tcp.take());
    }
}
