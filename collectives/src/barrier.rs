//! `barrier`: no member leaves before every member has arrived.
//!
//! Hierarchical: each worker tells its group's leader it arrived (messages within a rank move
//! by pointer), the leaders run a *dissemination barrier* (Hensgen, Finkel & Manber, "Two
//! algorithms for barrier synchronization", 1988: in round k leader i signals leader
//! i + 2^k and waits for leader i − 2^k, ⌈log₂ G⌉ rounds for G leaders, any G), and each leader
//! releases its group. Leaders of ranks on one host meet on the host board instead (see
//! `board`: each takes a step and waits for every other's). This module does not time out: a member that never arrives keeps the
//! others waiting (their fibers only; their workers keep serving).

use crate::Team;
use crate::call::Kind;

impl Team {
    /// Blocks the calling fiber until every member of the team has called `barrier`.
    pub fn barrier(&self) {
        let c = self.begin(Kind::Barrier);
        let shape = &self.shape;
        let g = shape.group_of[self.me] as usize;
        let group = &shape.groups[g];
        let leader = group[0];
        if self.me != leader {
            self.put(&c, leader, 0, ());
            self.get::<()>(&c, leader, 1);
            return;
        }
        for &m in &group[1..] {
            self.get::<()>(&c, m, 0);
        }
        if let Some(hb) = self.board_for::<()>() {
            self.board_barrier(hb, &c);
            for &m in &group[1..] {
                self.put(&c, m, 1, ());
            }
            return;
        }
        let n = shape.groups.len();
        let mut d = 1;
        let mut round = 0u16;
        while d < n {
            let to = shape.groups[(g + d) % n][0];
            let from = shape.groups[(g + n - d) % n][0];
            self.put(&c, to, 2 + round, ());
            self.get::<()>(&c, from, 2 + round);
            d <<= 1;
            round += 1;
        }
        for &m in &group[1..] {
            self.put(&c, m, 1, ());
        }
    }
}
