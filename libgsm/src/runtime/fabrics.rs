//! The fabrics of one run across ranks: which fabric serves which peer rank (and why), and the
//! fabrics themselves through their phases (open, create, exchange, attach, sealed, closing; see
//! [`crate::fabric`]), each phase one loop over the fabrics of the job, opened from the
//! registry [`FABRICS`]. The checked barriers between the phases, and the ring mesh the links
//! join, are the caller's (`start.rs`).

use crate::bootstrap::Job;
use crate::error::Error;
use crate::fabric::{
    FABRICS, Fabric, FabricChoice, FabricKind, Hooks, Links, Peer, Settings, Topology,
    choice_from_env, entry, pick,
};

use super::offer::Offer;

/// The fabric that serves each rank (`None` for this one), from `GSM_FABRIC` and whether the
/// rank shares this rank's host.
pub(crate) fn choose(job: &Job, hosts: &[String]) -> Result<Vec<Option<FabricKind>>, Error> {
    let me = job.rank();
    let choice = choice_from_env()?;
    let mut remote: Option<(FabricKind, String)> = None;
    (0..job.size())
        .map(|r| {
            if r == me {
                return Ok(None);
            }
            let same_host = job.same_host(r);
            let mut k = pick(choice, same_host, r, &hosts[r as usize])?;
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

/// The fabric `auto` uses between hosts, and why: the first fabric of this build whose
/// [`FabricEntry::between_hosts`](crate::fabric::FabricEntry::between_hosts) says it serves
/// better here (`ofi` when libfabric's first RMA provider is a hardware one: verbs, efa, cxi,
/// psm3...), else `tcp`, which serves a plain network better than libfabric's emulation of RMA
/// over sockets (`tcp;ofi_rxm`, `sockets`).
fn auto_between_hosts() -> (FabricKind, String) {
    let mut why_not = Vec::new();
    for e in FABRICS {
        match e.between_hosts.map(|f| f()) {
            Some(Ok(why)) => return (e.kind, why),
            Some(Err(why)) => why_not.push(why),
            None => {}
        }
    }
    if why_not.is_empty() {
        why_not.push("this build has no fabric that serves hosts better than tcp".to_string());
    }
    (FabricKind::Tcp, why_not.join("; "))
}

/// Why `choice` gave a peer (on this host or not) its fabric, for the log.
fn why(choice: FabricChoice, same_host: bool) -> &'static str {
    match (choice, same_host) {
        (FabricChoice::Auto, true) => "same host",
        (FabricChoice::Auto, false) => "another host",
        (FabricChoice::Only(_), _) => "GSM_FABRIC",
    }
}

/// The fabrics this rank needs for one run, each once opened, in [`FABRICS`] order.
pub(crate) struct Fabrics {
    list: Vec<(FabricKind, Box<dyn Fabric>)>,
}

/// The endpoints of the fabrics opened, to publish in this rank's [`Offer`] (only the fabrics
/// some peer needs, in [`FABRICS`] order).
pub(crate) type Endpoints = Vec<(FabricKind, Vec<u8>)>;

/// Whether some peer is served by `k`.
pub(crate) fn needs(kinds: &[Option<FabricKind>], k: FabricKind) -> bool {
    kinds.contains(&Some(k))
}

impl Fabrics {
    /// Opens each fabric some peer needs (`kinds`); returns them and their endpoints.
    pub(crate) fn prepare(kinds: &[Option<FabricKind>]) -> Result<(Fabrics, Endpoints), Error> {
        let settings = Settings::from_env()?;
        let mut list = Vec::new();
        let mut endpoints = Vec::new();
        for e in FABRICS.iter().filter(|e| needs(kinds, e.kind)) {
            let (f, endpoint) = (e.open)(&settings)?;
            list.push((e.kind, f));
            endpoints.push((e.kind, endpoint));
        }
        // `choose` only names fabrics of this build (`parse_choice` refuses the others).
        debug_assert!(kinds.iter().flatten().all(|&k| entry(k).is_some()));
        Ok((Fabrics { list }, endpoints))
    }

    /// Creates each fabric for its peers (`kinds`, with the endpoints of `offers`).
    pub(crate) fn create(
        &mut self,
        topo: &Topology,
        kinds: &[Option<FabricKind>],
        offers: &[Offer],
        hooks: &Hooks,
    ) -> Result<(), Error> {
        for (k, f) in &mut self.list {
            let peers: Vec<Peer> = (0..kinds.len())
                .filter(|&r| kinds[r] == Some(*k))
                .map(|r| Peer {
                    rank: r as u32,
                    endpoint: offers[r].endpoint(*k).to_vec(),
                })
                .collect();
            f.create(topo, &peers, hooks.clone())?;
        }
        Ok(())
    }

    /// The second exchange of the fabrics that have one ([`Fabric::cards`]), between `create`
    /// and `attach`: every rank's cards (for verbs, queue pair numbers, region addresses and
    /// keys) through the bootstrap's all-gather, one per such fabric of this build. Every rank
    /// takes part (with no cards when it has no peer on that fabric), so the collective calls
    /// match whatever fabrics a rank chose.
    pub(crate) fn exchange(&mut self, job: &Job) -> Result<(), Error> {
        for e in FABRICS.iter().filter(|e| e.exchanges) {
            let mut f = self.list.iter_mut().find(|(k, _)| *k == e.kind);
            // One leading byte, so that no rank's part is empty: Open MPI refuses an all-gather
            // of no bytes at all (MPI_ERR_ARG), which is what a job without such peers would
            // send.
            let mut mine = vec![u8::from(f.is_some())];
            mine.extend(f.as_ref().and_then(|(_, f)| f.cards()).unwrap_or_default());
            let all = job
                .all_gather(&mine)
                .map_err(|e| Error::Bootstrap(e.to_string()))?;
            let cards: Vec<Vec<u8>> = all
                .into_iter()
                .map(|b| b.get(1..).unwrap_or_default().to_vec())
                .collect();
            if let Some((_, f)) = &mut f {
                f.accept(&cards)?;
            }
        }
        Ok(())
    }

    /// Connects each fabric; returns their links, in [`FABRICS`] order (each fabric is first
    /// lent the links of those before it: tcp rings shm's doorbells).
    pub(crate) fn attach(&mut self) -> Result<Vec<Links>, Error> {
        let mut v: Vec<(FabricKind, Links)> = Vec::new();
        for (k, f) in &mut self.list {
            let before: Vec<(FabricKind, &Links)> = v.iter().map(|(k, l)| (*k, l)).collect();
            f.lend(&before);
            let links = f.attach()?;
            v.push((*k, links));
        }
        Ok(v.into_iter().map(|(_, l)| l).collect())
    }

    /// Tells each fabric that every rank is connected.
    pub(crate) fn sealed(&mut self) {
        for (_, f) in &mut self.list {
            f.sealed();
        }
    }

    /// Tells each fabric that closing is expected now.
    pub(crate) fn closing(&mut self) {
        for (_, f) in &mut self.list {
            f.closing();
        }
    }

    /// Drops the fabrics, the last set up first.
    pub(crate) fn close(self) {
        drop(self);
    }
}

impl Drop for Fabrics {
    fn drop(&mut self) {
        while let Some(f) = self.list.pop() {
            drop(f);
        }
    }
}
