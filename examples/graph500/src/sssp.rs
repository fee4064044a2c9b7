//! Kernel 3 on one core: single-source shortest paths producing parents and distances.
//!
//! Dijkstra's algorithm with a binary heap and lazy deletion. Distances are `f32` and every one is
//! the `f32` sum of its parent's distance and the edge weight, exactly as validation recomputes it:
//! a vertex's distance is only ever set to `dist[u] + w` for the settled `u` that becomes its
//! parent. Non-negative `f32` values order like their bit patterns, so the heap keys are `u32`.
//!
//! This module abstracts the sequential search. It does not distribute anything (the distributed
//! engines use delta-stepping) and it does not handle negative weights (the benchmark has none).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::bfs::NO_PARENT;
use crate::csr::Csr;
use crate::kronecker::Vertex;

/// Parents and distances of one search.
#[derive(Clone, Debug)]
pub struct ShortestPaths {
    /// `parent[root] = root`; [`NO_PARENT`] for unreached vertices.
    pub parent: Vec<Vertex>,
    /// Distance from the root; `f32::INFINITY` for unreached vertices.
    pub dist: Vec<f32>,
}

/// Dijkstra from `root` over the weighted graph `g`.
///
/// # Panics
/// If `g` was built without weights.
pub fn dijkstra(g: &Csr, root: Vertex) -> ShortestPaths {
    let n = g.num_vertices();
    let mut parent = vec![NO_PARENT; n];
    let mut dist = vec![f32::INFINITY; n];
    let mut settled = vec![false; n];
    parent[root as usize] = root;
    dist[root as usize] = 0.0;
    let mut heap = BinaryHeap::new();
    heap.push(Reverse((0f32.to_bits(), root)));
    while let Some(Reverse((key, u))) = heap.pop() {
        let du = f32::from_bits(key);
        if settled[u as usize] || du > dist[u as usize] {
            continue;
        }
        settled[u as usize] = true;
        for (&v, &w) in g.neighbors(u).iter().zip(g.weights(u)) {
            let candidate = du + w;
            if candidate < dist[v as usize] {
                dist[v as usize] = candidate;
                parent[v as usize] = u;
                heap.push(Reverse((candidate.to_bits(), v)));
            }
        }
    }
    ShortestPaths { parent, dist }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronecker::{Edge, EdgeList};

    #[test]
    fn takes_the_lighter_of_two_paths_and_the_lighter_duplicate() {
        let edges = [(0, 1, 0.5), (1, 2, 0.25), (0, 2, 0.875), (1, 2, 0.125)];
        let list = EdgeList {
            start: 0,
            edges: edges.iter().map(|&(u, v, _)| Edge { u, v }).collect(),
            weights: edges.iter().map(|&(_, _, w)| w).collect(),
        };
        let g = Csr::build(4, &[&list], true);
        let sp = dijkstra(&g, 0);
        assert_eq!(sp.parent, vec![0, 0, 1, NO_PARENT]);
        assert_eq!(sp.dist[..3], [0.0, 0.5, 0.625]);
        assert!(sp.dist[3].is_infinite());
    }
}
