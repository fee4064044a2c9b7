//! What every distributed BFS kernel shares, the bulk-synchronous one ([`super::bfs`]) and the
//! delegation one (`gsm_engine`): the choice of each level's direction (Beamer, Asanović and
//! Patterson, SC 2012, α = 14, β = 24) from the frontier's global size and edges, and the
//! bottom-up step over an all-gathered frontier bitmap, which needs no messages. How a top-down
//! level reaches other ranks' vertices is each kernel's own.

use super::graph::LocalGraph;
use crate::bfs::NO_PARENT;
use crate::kronecker::Vertex;

/// Top-down to bottom-up when the frontier's edges exceed the unexplored edges / `ALPHA`.
pub const ALPHA: u64 = 14;
/// Bottom-up back to top-down when the frontier is below N / `BETA` vertices.
pub const BETA: u64 = 24;

/// The direction of each level, from global counts (shared by every distributed BFS kernel).
#[derive(Debug)]
pub struct Direction {
    n: u64,
    unexplored: u64,
    bottom_up: bool,
}

impl Direction {
    /// At the start of a search over `g`.
    pub fn new(g: &LocalGraph) -> Self {
        let n = g.partition().num_vertices() as u64;
        let (unexplored, bottom_up) = (g.total_entries(), false);
        Self {
            n,
            unexplored,
            bottom_up,
        }
    }

    /// The next level from the frontier's size and edges summed over the ranks: `None` when the
    /// frontier is empty (the search is over), else whether the level goes bottom-up.
    pub fn next(&mut self, totals: &[u64]) -> Option<bool> {
        let (len, edges) = (totals[0], totals[1]);
        self.unexplored = self.unexplored.saturating_sub(edges);
        self.bottom_up = if self.bottom_up {
            len >= self.n / BETA
        } else {
            edges > self.unexplored / ALPHA
        };
        (len > 0).then_some(self.bottom_up)
    }
}

/// Sets `bits` (this rank's block of whole words) to the frontier's bitmap.
pub fn frontier_bits(frontier: &[u32], bits: &mut [u64]) {
    bits.fill(0);
    for &i in frontier {
        bits[i as usize / 64] |= 1 << (i % 64);
    }
}

/// A bottom-up level: each unvisited vertex of this rank takes its first neighbour in the
/// frontier bitmap `all` as its parent and joins `next`.
pub fn bottom_up(g: &LocalGraph, parent: &mut [Vertex], all: &[u64], next: &mut Vec<u32>) {
    for (i, pv) in parent.iter_mut().enumerate() {
        if *pv == NO_PARENT {
            let hit = g
                .neighbors(i)
                .iter()
                .find(|&&u| all[u as usize / 64] >> (u % 64) & 1 == 1);
            if let Some(&u) = hit {
                *pv = u;
                next.push(i as u32);
            }
        }
    }
}
