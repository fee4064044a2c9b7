//! The peer's kernels against the example's plain sequential ones on small graphs: the same BFS
//! levels as a top-down queue BFS, bit-identical distances to Dijkstra's, and trees that pass the
//! example's validation, on 1 to 3 threads.

use ::graph500::bfs::{NO_PARENT, levels_from_top_down};
use ::graph500::csr::Csr;
use ::graph500::kronecker::{Edge, EdgeList, KroneckerGenerator, Vertex};
use ::graph500::sssp::dijkstra;
use ::graph500::validate::{Claimed, validate};

use super::{bfs, sssp};

fn kronecker(scale: u32) -> (EdgeList, Csr) {
    let list = KroneckerGenerator::new(scale).range(0, 16 << scale);
    let g = Csr::build(1 << scale, &[&list], true);
    (list, g)
}

/// A path 0-1-...-9 with a shortcut 0-9, a star around 20, and vertex 30 alone.
fn small() -> (EdgeList, Csr) {
    let mut edges: Vec<(u32, u32, f32)> = (0..9).map(|i| (i, i + 1, 0.125)).collect();
    edges.push((0, 9, 0.9));
    edges.extend((21..30).map(|i| (20, i, 0.5)));
    edges.push((9, 20, 0.25));
    let list = EdgeList {
        start: 0,
        edges: edges.iter().map(|&(u, v, _)| Edge { u, v }).collect(),
        weights: edges.iter().map(|&(_, _, w)| w).collect(),
    };
    let g = Csr::build(32, &[&list], true);
    (list, g)
}

fn depth(parent: &[Vertex], root: Vertex) -> Vec<u32> {
    (0..parent.len())
        .map(|v| {
            if parent[v] == NO_PARENT {
                return u32::MAX;
            }
            let (mut x, mut d) = (v as Vertex, 0u32);
            while x != root {
                x = parent[x as usize];
                d += 1;
                assert!(d as usize <= parent.len(), "cycle through {v}");
            }
            d
        })
        .collect()
}

fn edges_of(g: &Csr, parent: &[Vertex]) -> u64 {
    g.component_edges(|v| parent[v as usize] != NO_PARENT)
}

#[test]
fn bfs_levels_match_a_sequential_bfs() {
    for (list, g) in [small(), kronecker(10)] {
        let space = bfs::Space::new(&g);
        for root in [0, 5, 20, 30, 700 % g.num_vertices() as Vertex] {
            let want = levels_from_top_down(&g, root);
            for threads in [1, 2, 3] {
                let parent = bfs::search(&g, root, threads, &space);
                assert_eq!(depth(&parent, root), want, "root {root}, {threads} threads");
                let claimed = Claimed {
                    root,
                    parent: &parent,
                    dist: None,
                };
                validate(&claimed, &[&list], edges_of(&g, &parent)).expect("valid BFS tree");
            }
        }
    }
}

#[test]
fn sssp_distances_match_dijkstra() {
    for (list, g) in [small(), kronecker(10)] {
        let space = sssp::Space::new(&g);
        for root in [0, 5, 20, 30, 700 % g.num_vertices() as Vertex] {
            let want = dijkstra(&g, root);
            for (threads, delta) in [(1, 0.1), (2, sssp::delta_for(&g)), (3, 1.0), (2, 0.01)] {
                let (parent, dist) = sssp::search(&g, root, delta, threads, &space);
                let same = want
                    .dist
                    .iter()
                    .zip(&dist)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "root {root}, {threads} threads, delta {delta}");
                let claimed = Claimed {
                    root,
                    parent: &parent,
                    dist: Some(&dist),
                };
                validate(&claimed, &[&list], edges_of(&g, &parent)).expect("valid SSSP tree");
            }
        }
    }
}
