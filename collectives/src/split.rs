//! New teams from a team: [`Team::dup`] (the same members, an id of its own),
//! [`Team::split_by_rank`] and [`Team::split_by_host`] (without communication), and
//! [`Team::split`] by colour and key as `MPI_Comm_split` does (one allgather of the colours and
//! keys, `value`'s).
//!
//! Each new team's id chains the parent's id, the call's sequence number and what chose the
//! members, so that every member of a new team derives the same id without a message, and two
//! teams made by different calls never share one. This module does not run collectives on the
//! teams it makes (the other modules do) nor group their members by rank (`team`'s `Team::build`).

use std::sync::Arc;

use gossamer::WorkerId;

use crate::Team;
use crate::call::{Call, Kind, chain, hash_str};

impl Team {
    /// A new team with the same members and an id of its own, so that another fiber can run
    /// collectives on it while this one is in use. Collective without communication: every
    /// member must call it at the same point of its sequence.
    pub fn dup(&self) -> Team {
        let c = self.begin(Kind::Split);
        let id = chain(chain(self.id, c.seq), 0xd0d0);
        Team::build(id, self.members.clone(), self.me, self.tuning())
    }

    /// The members of this member's rank, in team order. Collective without communication.
    pub fn split_by_rank(&self) -> Team {
        let c = self.begin(Kind::Split);
        let mine = gossamer::rank_of(self.members[self.me]);
        self.subteam(&c, mine as u64 ^ 0x5241_4e4b, |w| {
            gossamer::rank_of(w) == mine
        })
    }

    /// The members on this member's host (ranks whose hostnames are equal), in team order.
    /// Collective without communication.
    pub fn split_by_host(&self) -> Team {
        let c = self.begin(Kind::Split);
        let host_of = |w: WorkerId| gossamer::host_of_rank(gossamer::rank_of(w));
        let mine = host_of(self.members[self.me]);
        self.subteam(&c, hash_str(&mine), |w| host_of(w) == mine)
    }

    fn subteam(&self, c: &Call, salt: u64, keep: impl Fn(WorkerId) -> bool) -> Team {
        let members: Vec<WorkerId> = self.members.iter().copied().filter(|&w| keep(w)).collect();
        let me_w = self.members[self.me];
        let me = members
            .iter()
            .position(|&w| w == me_w)
            .expect("a member belongs to its own part");
        let id = chain(chain(chain(self.id, c.seq), 0x5b), salt);
        Team::build(id, members.into(), me, self.tuning())
    }

    /// Splits the team as `MPI_Comm_split` does: members passing the same `colour` form a new
    /// team, ordered by `key` (ties by their index here); a member passing `None` joins no team
    /// and gets `None`. Collective: every member must call it (one allgather of
    /// `(colour, key)`).
    pub fn split(&self, colour: Option<u64>, key: i64) -> Option<Team> {
        let c = self.begin(Kind::Split);
        let all: Vec<(Option<u64>, i64)> = self.allgather_value_in(&c, (colour, key));
        let colour = colour?;
        let mut chosen: Vec<(i64, usize)> = all
            .iter()
            .enumerate()
            .filter(|(_, (col, _))| *col == Some(colour))
            .map(|(i, &(_, k))| (k, i))
            .collect();
        chosen.sort_unstable();
        let me = chosen
            .iter()
            .position(|&(_, i)| i == self.me)
            .expect("a member belongs to its own colour");
        let members: Arc<[WorkerId]> = chosen.iter().map(|&(_, i)| self.members[i]).collect();
        let id = chain(chain(chain(self.id, c.seq), 0x0063_6f6c), colour);
        Some(Team::build(id, members, me, self.tuning()))
    }
}
