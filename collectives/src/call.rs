//! One collective call: what it is (its [`Kind`], sequence number and root), the tags of its
//! messages, and a record of the last calls begun on each worker so that the runtime's reports
//! of messages waited for or never received can name them.
//!
//! A call's messages carry the tag `1 << 63 | hash(team id, sequence) << 16 | step` (47 hash
//! bits), so successive collectives of one team, and collectives of different teams in flight at
//! once, never take each other's messages (the runtime matches by sender and tag, FIFO per
//! sender and tag). **Tags with the top bit set are reserved for this crate**: other code
//! sending with `gossamer::send` must keep that bit clear.
//!
//! This module sends nothing (`team` does) and knows no member of a team.

/// The id of every world team.
pub(crate) const WORLD: u64 = 0x9e37_79b9_7f4a_7c15;
/// The id of every team of ranks (`Team::ranks`).
pub(crate) const RANKS: u64 = 0x5241_4e4b_5345_4144;

/// How many collective calls begun on a worker [`describe_tag`] remembers.
const RECENT: usize = 32;

/// A collective call begun on this worker, as [`describe_tag`] names it.
#[derive(Debug, Clone, Copy)]
struct Begun {
    base: u64,
    team: u64,
    seq: u64,
    kind: Kind,
    root: Option<usize>,
    size: usize,
}

thread_local! {
    /// The last [`RECENT`] calls begun on this worker thread, and where the next goes.
    static BEGUN: std::cell::RefCell<([Option<Begun>; RECENT], usize)> =
        const { std::cell::RefCell::new(([None; RECENT], 0)) };
}

/// Names a tag of this crate's messages for the runtime's reports of messages waited for or
/// never received (installed with `gossamer::name_tags`): the operation, its call number and
/// team, and the step, when the call was begun on this worker among its last few; `None` for
/// tags that are not this crate's (top bit clear).
pub(crate) fn describe_tag(tag: u64) -> Option<String> {
    if tag >> 63 == 0 {
        return None;
    }
    let base = tag & !0xffff;
    let step = tag & 0xffff;
    let found = BEGUN
        .try_with(|b| {
            b.try_borrow()
                .ok()
                .and_then(|b| b.0.iter().flatten().find(|c| c.base == base).copied())
        })
        .ok()
        .flatten();
    Some(match found {
        Some(c) => {
            let team = match c.team {
                WORLD => "the world team".to_string(),
                RANKS => "the team of ranks".to_string(),
                id => format!("team {id:#x}"),
            };
            let hint = if c.team == WORLD {
                " (the world team needs every worker: from gossamer::run's main, use Team::ranks)"
            } else {
                ""
            };
            format!(
                "gsm-collectives: {}{} of {team} ({} members), its call {}, step {step}; a member \
                 that has not called it, or called another operation or passed another root, \
                 leaves it waiting{hint}",
                c.kind.name(),
                c.root.map(|r| format!(" to root {r}")).unwrap_or_default(),
                c.size,
                c.seq
            )
        }
        None => "gsm-collectives: a collective operation's message".to_string(),
    })
}

/// Records call `c` of `team` (`size` members) for [`describe_tag`].
fn remember(c: &Call, team: u64, size: usize) {
    let _ = BEGUN.try_with(|b| {
        if let Ok(mut b) = b.try_borrow_mut() {
            let at = b.1;
            b.0[at] = Some(Begun {
                base: c.base,
                team,
                seq: c.seq,
                kind: c.kind,
                root: c.root,
                size,
            });
            b.1 = (at + 1) % RECENT;
        }
    });
}

/// The collective a message belongs to (for the debug check and error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Barrier,
    Broadcast,
    Reduce,
    Allreduce,
    Gather,
    Gatherv,
    Scatter,
    Scatterv,
    Allgather,
    Allgatherv,
    Alltoall,
    Alltoallv,
    Scan,
    Exscan,
    BroadcastValue,
    GatherValue,
    AllgatherValue,
    ScatterValues,
    AlltoallValues,
    AllreduceValue,
    Split,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Barrier => "barrier",
            Kind::Broadcast => "broadcast",
            Kind::Reduce => "reduce",
            Kind::Allreduce => "allreduce",
            Kind::Gather => "gather",
            Kind::Gatherv => "gatherv",
            Kind::Scatter => "scatter",
            Kind::Scatterv => "scatterv",
            Kind::Allgather => "allgather",
            Kind::Allgatherv => "allgatherv",
            Kind::Alltoall => "alltoall",
            Kind::Alltoallv => "alltoallv",
            Kind::Scan => "scan",
            Kind::Exscan => "exscan",
            Kind::BroadcastValue => "broadcast_value",
            Kind::GatherValue => "gather_value",
            Kind::AllgatherValue => "allgather_value",
            Kind::ScatterValues => "scatter_values",
            Kind::AlltoallValues => "alltoall_values",
            Kind::AllreduceValue => "allreduce_value",
            Kind::Split => "split",
        }
    }

    pub(crate) fn from_u8(k: u8) -> &'static str {
        const ALL: [Kind; 21] = [
            Kind::Barrier,
            Kind::Broadcast,
            Kind::Reduce,
            Kind::Allreduce,
            Kind::Gather,
            Kind::Gatherv,
            Kind::Scatter,
            Kind::Scatterv,
            Kind::Allgather,
            Kind::Allgatherv,
            Kind::Alltoall,
            Kind::Alltoallv,
            Kind::Scan,
            Kind::Exscan,
            Kind::BroadcastValue,
            Kind::GatherValue,
            Kind::AllgatherValue,
            Kind::ScatterValues,
            Kind::AlltoallValues,
            Kind::AllreduceValue,
            Kind::Split,
        ];
        ALL.get(k as usize)
            .map_or("an unknown operation", |k| k.name())
    }
}

/// SplitMix64's finaliser: a bijective mix of 64 bits.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hashes `x` into `h` (order-sensitive: `chain(chain(h, a), b)` differs from swapping a, b).
pub(crate) fn chain(h: u64, x: u64) -> u64 {
    mix(mix(h).wrapping_add(x))
}

/// FNV-1a of a string (ids of split teams, type names of the debug check).
pub(crate) fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

const HASH_BITS: u32 = 47;

/// One collective call on one member: its tags and what to check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call {
    base: u64,
    pub(crate) seq: u64,
    pub(crate) kind: Kind,
    /// The root of a rooted operation (team index): checked like the operation, since members
    /// passing different roots run different protocols (two roots of one broadcast write into
    /// each other's buffers on the host board).
    pub(crate) root: Option<usize>,
}

impl Call {
    /// The same call, of an operation with root `root`.
    pub(crate) fn rooted(self, root: usize) -> Call {
        let _ = BEGUN.try_with(|b| {
            if let Ok(mut b) = b.try_borrow_mut() {
                if let Some(c) = b.0.iter_mut().flatten().find(|c| c.base == self.base) {
                    c.root = Some(root);
                }
            }
        });
        Call {
            root: Some(root),
            ..self
        }
    }

    /// The root as the board and the checks carry it: `u64::MAX` for none.
    pub(crate) fn root_word(&self) -> u64 {
        self.root.map_or(u64::MAX, |r| r as u64)
    }

    pub(crate) fn tag(&self, step: u16) -> u64 {
        self.base | u64::from(step)
    }
}

impl Call {
    /// Call `seq` of team `team` (`size` members), remembered for [`describe_tag`].
    pub(crate) fn begin(team: u64, size: usize, seq: u64, kind: Kind) -> Call {
        let h = chain(team, seq) & ((1u64 << HASH_BITS) - 1);
        let c = Call {
            base: (1 << 63) | (h << 16),
            seq,
            kind,
            root: None,
        };
        remember(&c, team, size);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_differ_between_calls_and_teams_and_keep_the_reserved_bit() {
        let mut seen = std::collections::HashSet::new();
        let split = |parent: u64, seq: u64, colour: u64| {
            chain(chain(chain(parent, seq), 0x0063_6f6c), colour)
        };
        let ids = [
            WORLD,
            split(WORLD, 0, 0),
            split(WORLD, 0, 1),
            split(WORLD, 1, 0),
        ];
        for id in ids {
            for seq in 0..1000u64 {
                let tag = Call::begin(id, 2, seq, Kind::Barrier).tag(0);
                assert!(tag >> 63 == 1);
                assert!(seen.insert(tag), "tag collision at team {id:#x} seq {seq}");
            }
        }
    }
}
