//! The ring mesh of one run: the ring ends the fabrics return for workers of other ranks handed
//! to the local workers they belong to, and the check that every local worker has all four ends
//! to every worker of another rank (the rings between this rank's own workers are made on first
//! use, `worker/lanes.rs`). It builds no fabric and starts no worker.

use std::sync::Arc;

use crate::error::Error;
use crate::fabric::{Bell, Doorbell, Lane, Links};
use crate::wire::ring::RingLayout;
use crate::worker::{Ends, Place};

/// Empty ring ends for this rank's workers. The rings between them are made on first use
/// (`worker/lanes.rs`): most pairs of a large rank never talk.
pub(crate) fn local_mesh(place: &Place) -> Vec<Ends> {
    (0..place.local).map(|_| Ends::default()).collect()
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
    // A worker of this rank, or none of the job, gets no end (`check_mesh` then names it).
    let fits = |l: usize, g: usize| l < place.local && g < place.total && !place.is_local(g);
    for o in outgoing {
        let (l, g) = (o.local as usize, o.remote as usize);
        if fits(l, g) {
            ends[l].out.push((g, o.lane, o.producer));
        }
    }
    for i in incoming {
        let (l, g) = (i.local as usize, i.remote as usize);
        if fits(l, g) {
            ends[l].inc.push((g, i.lane, i.consumer));
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
        if l < place.local && g < place.total {
            ends[l].bells.push((g, b));
        }
    }
    for (l, p) in progress {
        if let Some(e) = ends.get_mut(l as usize) {
            e.progress.push(p);
        }
    }
}

/// Every local worker has all four ring ends to every worker of another rank, once each (those
/// between this rank's workers come later, on first use).
pub(crate) fn check_mesh(place: &Place, ends: &[Ends]) -> Result<(), Error> {
    for (l, e) in ends.iter().enumerate() {
        let me = place.base + l;
        let out = e.out.iter().map(|o| (o.0, o.1));
        let inc = e.inc.iter().map(|i| (i.0, i.1));
        if let Some(g) = gap(place, out).or_else(|| gap(place, inc)) {
            return Err(Error::Start(format!(
                "no ring, or two, between worker {me} (rank {}) and worker {g} (rank {}): the \
                 fabric set-up is incomplete",
                place.rank,
                place.rank_of(g)
            )));
        }
    }
    Ok(())
}

/// The first worker of another rank that `have` (worker, lane) lacks a ring to, or has two.
fn gap(place: &Place, have: impl Iterator<Item = (usize, Lane)>) -> Option<usize> {
    let mut have: Vec<(usize, bool)> = have.map(|(g, lane)| (g, lane == Lane::Request)).collect();
    have.sort_unstable();
    let mut want = (0..place.total)
        .filter(|&g| !place.is_local(g))
        .flat_map(|g| [(g, false), (g, true)]);
    let mut have = have.into_iter();
    loop {
        match (want.next(), have.next()) {
            (None, None) => return None,
            (Some(w), Some(h)) if w == h => {}
            (Some(w), Some(h)) => return Some(w.0.min(h.0)),
            (Some(w), None) => return Some(w.0),
            (None, Some(h)) => return Some(h.0),
        }
    }
}
