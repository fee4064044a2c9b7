//! Kernel 2 on one core: breadth-first search producing the parent array.
//!
//! Two sequential kernels: a plain top-down queue BFS (the obviously correct one, used to check the
//! other), and a direction-optimising BFS (Beamer, Asanović and Patterson, "Direction-optimizing
//! breadth-first search", SC 2012): top-down while the frontier's edges are few, bottom-up (each
//! unvisited vertex looks for a parent in the frontier bitmap) while they are many, with the
//! paper's switching thresholds α = 14 and β = 24.
//!
//! This module abstracts the sequential searches. It does not distribute anything; the parent
//! array is the whole graph's.

use crate::csr::Csr;
use crate::kronecker::Vertex;

/// The parent of an unreached vertex.
pub const NO_PARENT: Vertex = Vertex::MAX;

/// Top-down BFS from `root`: `parent[root] = root`, [`NO_PARENT`] for unreached vertices.
pub fn top_down(g: &Csr, root: Vertex) -> Vec<Vertex> {
    let mut parent = vec![NO_PARENT; g.num_vertices()];
    parent[root as usize] = root;
    let mut queue = Vec::with_capacity(g.num_vertices());
    queue.push(root);
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        for &v in g.neighbors(u) {
            if parent[v as usize] == NO_PARENT {
                parent[v as usize] = u;
                queue.push(v);
            }
        }
    }
    parent
}

const ALPHA: usize = 14;
const BETA: usize = 24;

/// Direction-optimising BFS from `root`; same output contract as [`top_down`] (the parents may
/// differ, the levels do not).
pub fn direction_optimizing(g: &Csr, root: Vertex) -> Vec<Vertex> {
    let n = g.num_vertices();
    let mut parent = vec![NO_PARENT; n];
    parent[root as usize] = root;
    let mut frontier = vec![root];
    let mut next = Vec::new();
    let mut in_frontier = vec![0u64; n.div_ceil(64)];
    // Edges still to be examined from unvisited vertices (each entry counted from its source).
    let mut unexplored = g.num_entries();
    let mut bottom_up = false;
    while !frontier.is_empty() {
        let frontier_edges: usize = frontier.iter().map(|&v| g.degree(v)).sum();
        unexplored = unexplored.saturating_sub(frontier_edges);
        if !bottom_up && frontier_edges > unexplored / ALPHA {
            bottom_up = true;
        } else if bottom_up && frontier.len() < n / BETA {
            bottom_up = false;
        }
        next.clear();
        if bottom_up {
            in_frontier.fill(0);
            for &v in &frontier {
                in_frontier[v as usize / 64] |= 1 << (v % 64);
            }
            for (v, pv) in parent.iter_mut().enumerate() {
                if *pv != NO_PARENT {
                    continue;
                }
                for &u in g.neighbors(v as Vertex) {
                    if in_frontier[u as usize / 64] >> (u % 64) & 1 == 1 {
                        *pv = u;
                        next.push(v as Vertex);
                        break;
                    }
                }
            }
        } else {
            for &u in &frontier {
                for &v in g.neighbors(u) {
                    if parent[v as usize] == NO_PARENT {
                        parent[v as usize] = u;
                        next.push(v);
                    }
                }
            }
        }
        std::mem::swap(&mut frontier, &mut next);
    }
    parent
}

/// BFS levels from a parent array (for tests): `u32::MAX` for unreached vertices.
pub fn levels_from_top_down(g: &Csr, root: Vertex) -> Vec<u32> {
    let parent = top_down(g, root);
    let mut level = vec![u32::MAX; g.num_vertices()];
    level[root as usize] = 0;
    // Top-down discovers vertices in level order, so one pass in queue order fills every level.
    let mut order: Vec<Vertex> = vec![root];
    let mut head = 0;
    while head < order.len() {
        let u = order[head];
        head += 1;
        for &v in g.neighbors(u) {
            if parent[v as usize] == u && level[v as usize] == u32::MAX {
                level[v as usize] = level[u as usize] + 1;
                order.push(v);
            }
        }
    }
    level
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronecker::KroneckerGenerator;

    #[test]
    fn both_kernels_reach_the_same_levels() {
        let generator = KroneckerGenerator::new(12);
        let list = generator.range(0, 16 << 12);
        let g = Csr::build(1 << 12, &[&list], false);
        for root in [0, 7, 1000] {
            let want = levels_from_top_down(&g, root);
            let got = direction_optimizing(&g, root);
            let mut level = vec![u32::MAX; g.num_vertices()];
            for v in 0..g.num_vertices() {
                // Walk up to the root; the parent chain must be as long as the BFS level.
                if got[v] == NO_PARENT {
                    continue;
                }
                let mut depth = 0;
                let mut x = v as Vertex;
                while x != root {
                    x = got[x as usize];
                    depth += 1;
                    assert!(depth <= g.num_vertices());
                }
                level[v] = depth as u32;
            }
            assert_eq!(level, want, "root {root}");
        }
    }
}
