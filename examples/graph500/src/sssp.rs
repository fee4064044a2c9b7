//! Kernel 3 on one core: single-source shortest paths producing parents and distances.
//!
//! Two sequential kernels: Dijkstra's algorithm with a binary heap and lazy deletion (the
//! reference point), and delta-stepping (Meyer and Sanders, "Δ-stepping: a parallelizable shortest
//! path algorithm", J. Algorithms 2003) with buckets of width Δ kept in a ring, which the
//! distributed engines will follow. Distances are `f32`; a vertex's distance is only ever set to
//! `dist[u] + w` (one `f32` addition) for the `u` that becomes its parent, so the result is the
//! unique fixpoint validation checks: every edge satisfies `dist[v] <= dist[u] + w`, every
//! tree edge with equality. Both kernels therefore return identical distances.
//!
//! This module abstracts the sequential searches. It does not distribute anything and it does not
//! handle negative weights (the benchmark has none).

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

/// Delta-stepping from `root` with bucket width `delta` (weights must be below 1, as the
/// benchmark's are).
///
/// # Panics
/// If `g` was built without weights, or `delta` is not in (0, 1].
pub fn delta_stepping(g: &Csr, root: Vertex, delta: f32) -> ShortestPaths {
    assert!(
        delta > 0.0 && delta <= 1.0,
        "bucket width {delta} outside (0, 1]"
    );
    let n = g.num_vertices();
    let mut parent = vec![NO_PARENT; n];
    let mut dist = vec![f32::INFINITY; n];
    // The distance at which a vertex last relaxed its edges: it relaxes again only if lowered.
    let mut relaxed_at = vec![f32::INFINITY; n];
    parent[root as usize] = root;
    dist[root as usize] = 0.0;
    // A new distance is below the current bucket's end plus the largest weight (< 1), so
    // ⌈1/Δ⌉ + 1 buckets ahead of the current one suffice as a ring.
    let ring = (1.0 / delta).ceil() as usize + 2;
    let mut buckets: Vec<Vec<Vertex>> = vec![Vec::new(); ring];
    let bucket_of = |d: f32| (d / delta) as usize;
    buckets[0].push(root);
    let mut pending = 1usize;
    let mut current = 0usize;
    let mut work = Vec::new();
    while pending > 0 {
        let slot = current % ring;
        while !buckets[slot].is_empty() {
            std::mem::swap(&mut work, &mut buckets[slot]);
            pending -= work.len();
            for &u in &work {
                let du = dist[u as usize];
                if bucket_of(du) != current || relaxed_at[u as usize] == du {
                    continue;
                }
                relaxed_at[u as usize] = du;
                for (&v, &w) in g.neighbors(u).iter().zip(g.weights(u)) {
                    let candidate = du + w;
                    if candidate < dist[v as usize] {
                        dist[v as usize] = candidate;
                        parent[v as usize] = u;
                        buckets[bucket_of(candidate) % ring].push(v);
                        pending += 1;
                    }
                }
            }
            work.clear();
        }
        current += 1;
    }
    ShortestPaths { parent, dist }
}

/// The bucket width the sequential engine uses: a quarter of the weight below which a vertex
/// has one edge on average (weights are uniform in [0, 1)), clamped to [0.002, 1]: narrower
/// buckets cost little on one core (few vertices are relaxed twice), wider ones re-relax more
/// (`examples/kernels.rs` compares widths).
pub fn default_delta(g: &Csr) -> f32 {
    delta_for(g.num_entries() as u64, g.num_vertices())
}

/// [`default_delta`] from the graph's entry (twice the non-self-loop edges) and vertex counts,
/// for engines that do not hold the whole graph.
pub fn delta_for(num_entries: u64, num_vertices: usize) -> f32 {
    let average_degree = num_entries as f32 / num_vertices.max(1) as f32;
    (0.25 / average_degree.max(1.0)).clamp(0.002, 1.0)
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
        let ds = delta_stepping(&g, 0, 0.25);
        assert_eq!(ds.parent, sp.parent);
        assert_eq!(ds.dist[..3], sp.dist[..3]);
    }

    #[test]
    fn delta_stepping_finds_dijkstras_distances() {
        let list = crate::kronecker::KroneckerGenerator::new(12).range(0, 16 << 12);
        let g = Csr::build(1 << 12, &[&list], true);
        for root in [0, 17, 4000] {
            let want = dijkstra(&g, root);
            for delta in [0.01, default_delta(&g), 0.3, 1.0] {
                let got = delta_stepping(&g, root, delta);
                assert!(
                    want.dist
                        .iter()
                        .zip(&got.dist)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "root {root}, delta {delta}"
                );
            }
        }
    }
}
