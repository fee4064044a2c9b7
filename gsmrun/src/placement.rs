//! Placement: which rank runs on which host.
//!
//! CONTRACT (fixed by the lead; the hosts work fills in the body):
//! [`place`] maps `np` ranks (or one per slot when `np` is `None`) onto hosts, by slot (fill each
//! host's slots in order) or by node (round-robin over hosts), refusing more ranks than slots unless
//! `oversubscribe`, and never exceeding a host's `max_slots`.

use crate::hosts::Host;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapBy {
    #[default]
    Slot,
    Node,
}

/// The result: `rank_host[r]` is the index into `hosts` of rank r.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub hosts: Vec<crate::hosts::Host>,
    pub rank_host: Vec<usize>,
}

impl Placement {
    /// Ranks placed on host `h`, in rank order.
    pub fn ranks_on(&self, h: usize) -> impl Iterator<Item = usize> + '_ {
        self.rank_host.iter().enumerate().filter(move |&(_, &x)| x == h).map(|(r, _)| r)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    #[error(
        "{np} ranks asked for but the hosts have only {slots} slots; \
         add hosts or slots, or pass --oversubscribe"
    )]
    NotEnoughSlots { np: u32, slots: u32 },
    #[error("{np} ranks exceed the hosts' max_slots total of {max}; add hosts or raise max_slots")]
    ExceedsMaxSlots { np: u32, max: u32 },
    #[error("no hosts to place ranks on")]
    NoHosts,
    #[error("-np 0: a job needs at least one rank")]
    ZeroRanks,
}

pub fn place(
    hosts: &[Host],
    np: Option<u32>,
    map_by: MapBy,
    oversubscribe: bool,
) -> Result<Placement, PlacementError> {
    let _ = (hosts, np, map_by, oversubscribe);
    Err(PlacementError::NoHosts)
}
