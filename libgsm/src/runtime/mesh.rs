//! The ring mesh of one run: heap rings between this rank's own workers, the ring ends the
//! fabrics return for workers of other ranks put in their places, and the check that every
//! local worker has all four ends to every other worker of the job. It builds no fabric and
//! starts no worker.

use std::sync::Arc;

use crate::error::Error;
use crate::fabric::{Bell, Doorbell, Lane, Links};
use crate::wire::ring::RingLayout;
use crate::worker::{Ends, Place};

/// Empty ring ends for this rank's workers. The rings between them are made on first use
/// (`worker/lanes.rs`): most pairs of a large rank never talk.
pub(crate) fn local_mesh(place: &Place) -> Vec<Ends> {
    let w = place.total;
    (0..place.local)
        .map(|_| Ends {
            req_out: (0..w).map(|_| None).collect(),
            req_in: (0..w).map(|_| None).collect(),
            resp_out: (0..w).map(|_| None).collect(),
            resp_in: (0..w).map(|_| None).collect(),
            bells: Vec::new(),
            progress: Vec::new(),
        })
        .collect()
}

/// The mesh of a run across ranks: ring ends, each remote worker's doorbell, this rank's own
/// doorbells (from a fabric that shares them, if any).
pub(crate) struct Mesh {
    pub(crate) ends: Vec<Ends>,
    pub(crate) bells: Vec<Option<Bell>>,
    pub(crate) doors: Option<Vec<Doorbell>>,
    /// The geometry of every ring, the ones made later between this rank's workers included.
    pub(crate) layout: RingLayout,
}

/// One mesh: heap rings within the rank, the fabrics' rings (`links`) to the others. The host
/// board, when a fabric brings one, goes to `place`, readable as `readers` says (rank r's
/// bytes: which ranks r can read in one copy).
pub(crate) fn join_links(
    place: &mut Place,
    layout: RingLayout,
    links: Vec<Links>,
    readers: &[Vec<u8>],
) -> Mesh {
    let mut ends = local_mesh(place);
    let mut bells: Vec<Option<Bell>> = (0..place.total).map(|_| None).collect();
    let mut doors: Option<Vec<Doorbell>> = None;
    let mut boards = Vec::new();
    for mut l in links {
        boards.append(&mut l.boards);
        place_links(place, &mut ends, l.outgoing, l.incoming);
        place_hooks(place, &mut ends, l.worker_bells, l.progress);
        for (g, b) in l.bells {
            if let Some(slot) = bells.get_mut(g as usize) {
                *slot = Some(b);
            }
        }
        if let Some(d) = l.local_bells {
            doors = Some(d);
        }
        if l.rendezvous.is_some() {
            place.rma = l.rendezvous;
        }
    }
    if !boards.is_empty() {
        let readable = readers
            .iter()
            .map(|bits| bits.iter().map(|&b| b == 1).collect())
            .collect();
        place.board = Some(Arc::new(crate::board::Board::new(
            place.rank as usize,
            place.pids.clone(),
            boards,
            readable,
        )));
    }
    Mesh {
        ends,
        bells,
        doors,
        layout,
    }
}

/// Puts a fabric's ring ends into the workers' vectors.
fn place_links(
    place: &Place,
    ends: &mut [Ends],
    outgoing: Vec<crate::fabric::OutLink>,
    incoming: Vec<crate::fabric::InLink>,
) {
    for o in outgoing {
        let (l, g) = (o.local as usize, o.remote as usize);
        if l >= place.local || g >= place.total {
            continue;
        }
        match o.lane {
            Lane::Request => ends[l].req_out[g] = Some(o.producer),
            Lane::Response => ends[l].resp_out[g] = Some(o.producer),
        }
    }
    for i in incoming {
        let (l, g) = (i.local as usize, i.remote as usize);
        if l >= place.local || g >= place.total {
            continue;
        }
        match i.lane {
            Lane::Request => ends[l].req_in[g] = Some(i.consumer),
            Lane::Response => ends[l].resp_in[g] = Some(i.consumer),
        }
    }
}

/// Puts a fabric's bells for one publisher and its hooks with the workers they belong to.
fn place_hooks(
    place: &Place,
    ends: &mut [Ends],
    bells: Vec<(u32, u32, Bell)>,
    progress: Vec<(u32, crate::fabric::Progress)>,
) {
    for (l, g, b) in bells {
        let (l, g) = (l as usize, g as usize);
        if l >= place.local || g >= place.total {
            continue;
        }
        let own = &mut ends[l].bells;
        if own.is_empty() {
            own.resize(place.total, None);
        }
        own[g] = Some(b);
    }
    for (l, p) in progress {
        if let Some(e) = ends.get_mut(l as usize) {
            e.progress.push(p);
        }
    }
}

/// Every local worker has all four ring ends to every worker of another rank (those between
/// this rank's workers come later, on first use).
pub(crate) fn check_mesh(place: &Place, ends: &[Ends]) -> Result<(), Error> {
    for (l, e) in ends.iter().enumerate() {
        let me = place.base + l;
        for g in (0..place.total).filter(|&g| !place.is_local(g)) {
            let have = [
                e.req_out[g].is_some(),
                e.req_in[g].is_some(),
                e.resp_out[g].is_some(),
                e.resp_in[g].is_some(),
            ];
            if have.contains(&false) {
                return Err(Error::Start(format!(
                    "no ring between worker {me} (rank {}) and worker {g} (rank {}): the fabric \
                     set-up is incomplete",
                    place.rank,
                    place.rank_of(g)
                )));
            }
        }
    }
    Ok(())
}
