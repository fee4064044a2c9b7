//! Placement: which rank runs on which host.
//!
//! CONTRACT (fixed by the lead; the hosts work fills in the body):
//! [`place`] maps `np` ranks (or one per slot when `np` is `None`) onto hosts, by slot (fill each
//! host's slots in order) or by node (round-robin over hosts), refusing more ranks than slots unless
//! `oversubscribe`, and never exceeding a host's `max_slots`.

use crate::hosts::Host;

/// Most ranks a job may have. Every rank's environment carries `GSM_RANK_HOSTS`, at least two
/// bytes per rank, and Linux refuses an environment string over 128 KiB (`MAX_ARG_STRLEN`), so no
/// larger job could start; refusing it here also keeps a typo such as `-np 4294967295` from
/// allocating the placement (34 GB) before that is found out.
pub const MAX_RANKS: u32 = 65536;

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
        self.rank_host
            .iter()
            .enumerate()
            .filter(move |&(_, &x)| x == h)
            .map(|(r, _)| r)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    #[error(
        "{np} ranks asked for but the hosts have only {}; \
         add hosts or slots, or pass --oversubscribe",
        crate::plural(*slots, "slot")
    )]
    NotEnoughSlots { np: u32, slots: u32 },
    #[error("{np} ranks exceed the hosts' max_slots total of {max}; add hosts or raise max_slots")]
    ExceedsMaxSlots { np: u32, max: u32 },
    #[error("no hosts to place ranks on")]
    NoHosts,
    #[error("-np 0: a job needs at least one rank")]
    ZeroRanks,
    #[error(
        "{np} ranks asked for but a job has at most {max} (every rank's environment lists every \
         rank's host, and Linux limits its size); use fewer ranks"
    )]
    TooManyRanks { np: u32, max: u32 },
    #[error(
        "without -np a job starts one rank per slot, and the hosts have {slots} slots, but a job \
         has at most {max} ranks; give -np, or fewer slots"
    )]
    TooManySlots { slots: u64, max: u32 },
}

/// Place the ranks (see the module doc). How many ranks each host gets:
///
/// - By slot: host 0 gets its `slots` ranks, then host 1, …; when oversubscribing, further passes
///   give each host up to `slots` more ranks, in host order, until all ranks are placed.
/// - By node: one rank per host in turn, skipping hosts whose slots are full; when
///   oversubscribing, the turns continue over every host.
///
/// Which ranks those are follows from the counts alone, as the launcher numbers them (see
/// `in_launcher_order`): by slot, each host's ranks form one block.
/// - Without `--oversubscribe` no host gets more than `slots`; with it, no host gets more than
///   `max_slots` (unlimited when absent), so [`PlacementError::ExceedsMaxSlots`] when all hosts
///   have a `max_slots` and their total is too small.
pub fn place(
    hosts: &[Host],
    np: Option<u32>,
    map_by: MapBy,
    oversubscribe: bool,
) -> Result<Placement, PlacementError> {
    if hosts.is_empty() {
        return Err(PlacementError::NoHosts);
    }
    let slots_total: u64 = hosts.iter().map(|h| u64::from(h.slots)).sum();
    let requested = np;
    let np = match np {
        Some(0) => return Err(PlacementError::ZeroRanks),
        Some(n) => n,
        None => u32::try_from(slots_total).unwrap_or(u32::MAX),
    };
    if np == 0 {
        return Err(PlacementError::ZeroRanks);
    }
    if np > MAX_RANKS {
        return Err(match requested {
            Some(_) => PlacementError::TooManyRanks { np, max: MAX_RANKS },
            None => PlacementError::TooManySlots {
                slots: slots_total,
                max: MAX_RANKS,
            },
        });
    }
    let clamp = |x: u64| u32::try_from(x).unwrap_or(u32::MAX);
    if u64::from(np) > slots_total && !oversubscribe {
        return Err(PlacementError::NotEnoughSlots {
            np,
            slots: clamp(slots_total),
        });
    }
    // Hard cap per host: max_slots (the parser refuses max_slots < slots; a host built by hand
    // that way is capped at max_slots).
    let hard: Vec<u64> = hosts
        .iter()
        .map(|h| h.max_slots.map_or(u64::MAX, u64::from))
        .collect();
    let max_total = hard.iter().fold(0u64, |a, &b| a.saturating_add(b));
    let soft: Vec<u64> = hosts
        .iter()
        .zip(&hard)
        .map(|(h, &cap)| u64::from(h.slots).min(cap))
        .collect();
    if u64::from(np) > max_total {
        return Err(PlacementError::ExceedsMaxSlots {
            np,
            max: clamp(max_total),
        });
    }
    if !oversubscribe && u64::from(np) > soft.iter().sum::<u64>() {
        return Err(PlacementError::ExceedsMaxSlots {
            np,
            max: clamp(soft.iter().sum()),
        });
    }
    let mut count = vec![0u64; hosts.len()];
    let mut rank_host = Vec::with_capacity(np as usize);
    let want = np as usize;
    match map_by {
        MapBy::Slot => {
            // Pass p gives each host up to soft[h] more ranks, capped by hard[h].
            while rank_host.len() < want {
                let before = rank_host.len();
                for h in 0..hosts.len() {
                    let mut give = u64::from(hosts[h].slots).max(1);
                    while give > 0 && count[h] < hard[h] && rank_host.len() < want {
                        rank_host.push(h);
                        count[h] += 1;
                        give -= 1;
                    }
                }
                if rank_host.len() == before {
                    break;
                }
            }
        }
        MapBy::Node => {
            let mut limit = soft.clone();
            while rank_host.len() < want {
                let before = rank_host.len();
                for h in 0..hosts.len() {
                    if rank_host.len() < want && count[h] < limit[h] {
                        rank_host.push(h);
                        count[h] += 1;
                    }
                }
                if rank_host.len() == before {
                    if limit == hard {
                        break;
                    }
                    limit.clone_from(&hard);
                }
            }
        }
    }
    if rank_host.len() < want {
        // Unreachable given the totals checked above; reported rather than panicking.
        return Err(PlacementError::ExceedsMaxSlots {
            np,
            max: clamp(max_total),
        });
    }
    Ok(Placement {
        hosts: hosts.to_vec(),
        rank_host: in_launcher_order(&count, map_by),
    })
}

/// The ranks of `count[h]` ranks per host in the order the launchers give them when each host is
/// listed with exactly that many slots, as [`crate::launch`] writes the hostfile: by slot, each
/// host's ranks in one block, in host order; by node, one rank per host in turn, skipping hosts
/// whose ranks are all placed (Open MPI's `--map-by node`; Hydra is given the order itself, in its hostfile).
///
/// Without oversubscription this is the order the passes of [`place`] make anyway. With it, the
/// passes interleave (`a,b` with one slot each and 4 ranks gave `a,b,a,b`) while `mpirun`, which
/// sees `a slots=2` and `b slots=2`, starts `a,a,b,b`: the ranks then ran elsewhere than the
/// `GSM_RANK_HOSTS`, `GSM_LOCAL_RANK` and `GSM_HOST_ADDR` they were given said, and the tcp fabric
/// bound to another host's address. So the passes only decide how many ranks each host gets.
fn in_launcher_order(count: &[u64], map_by: MapBy) -> Vec<usize> {
    let mut left = count.to_vec();
    let mut order = Vec::with_capacity(count.iter().sum::<u64>() as usize);
    match map_by {
        MapBy::Slot => {
            for (h, &n) in count.iter().enumerate() {
                order.extend(std::iter::repeat_n(h, n as usize));
            }
        }
        MapBy::Node => {
            while left.iter().any(|&n| n > 0) {
                for (h, n) in left.iter_mut().enumerate() {
                    if *n > 0 {
                        order.push(h);
                        *n -= 1;
                    }
                }
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, slots: u32, max: Option<u32>) -> Host {
        Host {
            name: name.into(),
            user: None,
            slots,
            max_slots: max,
        }
    }

    #[test]
    fn by_slot_fills_each_host_in_order() {
        let hosts = [h("a", 2, None), h("b", 2, None)];
        let p = place(&hosts, Some(3), MapBy::Slot, false).unwrap();
        assert_eq!(p.rank_host, vec![0, 0, 1]);
        assert_eq!(p.ranks_on(0).collect::<Vec<_>>(), vec![0, 1]);
    }

    #[test]
    fn by_node_round_robins() {
        let hosts = [h("a", 2, None), h("b", 1, None), h("c", 2, None)];
        let p = place(&hosts, None, MapBy::Node, false).unwrap();
        assert_eq!(p.rank_host, vec![0, 1, 2, 0, 2]);
    }

    #[test]
    fn np_none_is_one_rank_per_slot() {
        let hosts = [h("a", 3, None), h("b", 1, None)];
        let p = place(&hosts, None, MapBy::Slot, false).unwrap();
        assert_eq!(p.rank_host, vec![0, 0, 0, 1]);
    }

    #[test]
    fn too_many_ranks_without_oversubscribe() {
        let hosts = [h("a", 2, None), h("b", 1, None)];
        assert_eq!(
            place(&hosts, Some(4), MapBy::Slot, false),
            Err(PlacementError::NotEnoughSlots { np: 4, slots: 3 })
        );
        assert_eq!(
            place(&hosts, Some(0), MapBy::Slot, false),
            Err(PlacementError::ZeroRanks)
        );
        assert_eq!(
            place(&[], Some(1), MapBy::Slot, true),
            Err(PlacementError::NoHosts)
        );
    }

    #[test]
    fn oversubscribe_by_slot_wraps_around() {
        let hosts = [h("a", 2, None), h("b", 1, None)];
        let p = place(&hosts, Some(7), MapBy::Slot, true).unwrap();
        // Passes of 2 and 1: a gets 5, b 2; each host's ranks in one block, as mpirun starts
        // them from `a slots=5`, `b slots=2`.
        assert_eq!(p.rank_host, vec![0, 0, 0, 0, 0, 1, 1]);
        // One slot each, 4 ranks: `a,a,b,b`, not `a,b,a,b` (what mpirun did not do).
        let hosts = [h("a", 1, None), h("b", 1, None)];
        let p = place(&hosts, Some(4), MapBy::Slot, true).unwrap();
        assert_eq!(p.rank_host, vec![0, 0, 1, 1]);
    }

    #[test]
    fn oversubscribe_by_node_continues_round_robin() {
        let hosts = [h("a", 1, None), h("b", 2, None)];
        let p = place(&hosts, Some(5), MapBy::Node, true).unwrap();
        assert_eq!(p.rank_host, vec![0, 1, 0, 1, 1]);
        // a gets 3, b 2 (the soft pass gives a,b,a, the hard one a,b); in turn: a,b,a,b,a.
        let hosts = [h("a", 2, None), h("b", 1, None)];
        let p = place(&hosts, Some(5), MapBy::Node, true).unwrap();
        assert_eq!(p.rank_host, vec![0, 1, 0, 1, 0]);
    }

    #[test]
    fn max_slots_is_never_exceeded() {
        let hosts = [h("a", 1, Some(2)), h("b", 1, Some(1))];
        let p = place(&hosts, Some(3), MapBy::Slot, true).unwrap();
        assert_eq!(p.rank_host, vec![0, 0, 1]);
        let p = place(&hosts, Some(3), MapBy::Node, true).unwrap();
        assert_eq!(p.rank_host, vec![0, 1, 0]);
        assert_eq!(
            place(&hosts, Some(4), MapBy::Slot, true),
            Err(PlacementError::ExceedsMaxSlots { np: 4, max: 3 })
        );
        // One unlimited host takes the rest.
        let hosts = [h("a", 1, Some(1)), h("b", 1, None)];
        let p = place(&hosts, Some(4), MapBy::Node, true).unwrap();
        assert_eq!(p.rank_host, vec![0, 1, 1, 1]);
    }

    #[test]
    fn rank_count_is_capped() {
        let hosts = [h("a", 1, None)];
        assert_eq!(
            place(&hosts, Some(u32::MAX), MapBy::Slot, true),
            Err(PlacementError::TooManyRanks {
                np: u32::MAX,
                max: MAX_RANKS
            })
        );
        // Without -np, the slots decide, and the error says so (it spoke of ranks asked for).
        let hosts = [h("a", u32::MAX, None), h("b", 2, None)];
        let e = place(&hosts, None, MapBy::Slot, false).unwrap_err();
        assert_eq!(
            e,
            PlacementError::TooManySlots {
                slots: u64::from(u32::MAX) + 2,
                max: MAX_RANKS
            }
        );
        assert!(
            e.to_string().starts_with(
                "without -np a job starts one rank per slot, and the hosts have \
                              4294967297 slots"
            ),
            "{e}"
        );
    }

    #[test]
    fn huge_slot_counts_do_not_overflow() {
        let hosts = [h("a", u32::MAX, None), h("b", u32::MAX, None)];
        let p = place(&hosts, Some(3), MapBy::Node, false).unwrap();
        assert_eq!(p.rank_host, vec![0, 1, 0]);
    }
}
