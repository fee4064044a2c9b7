//! Kernel 1, sequentially: the compressed sparse row graph built from the edge list.
//!
//! The benchmark treats the generated edges as undirected, so every edge that is not a self-loop
//! becomes two entries, one in each endpoint's row, with its weight; duplicates stay (they are
//! edges of the multigraph, counted by TEPS and validation). Self-loops are dropped, as the
//! reference drops them.
//!
//! This module abstracts the whole graph on one core: counting, prefix sum, placement. It does not
//! partition vertices among workers; the distributed engines build their own rows.

use crate::kronecker::{EdgeList, Vertex};

/// An undirected weighted graph in CSR form.
#[derive(Clone, Debug, Default)]
pub struct Csr {
    offsets: Vec<usize>,
    targets: Vec<Vertex>,
    weights: Vec<f32>,
}

impl Csr {
    /// Builds the graph on `num_vertices` vertices from edge lists (any number of ranges, in any
    /// order). Without `weighted`, the weights are left out (BFS needs none).
    ///
    /// # Panics
    /// If an endpoint is not below `num_vertices`.
    pub fn build(num_vertices: usize, lists: &[&EdgeList], weighted: bool) -> Self {
        let mut offsets = vec![0usize; num_vertices + 1];
        for list in lists {
            for e in list.edges.iter().filter(|e| !e.is_self_loop()) {
                offsets[e.u as usize + 1] += 1;
                offsets[e.v as usize + 1] += 1;
            }
        }
        for i in 0..num_vertices {
            offsets[i + 1] += offsets[i];
        }
        let total = offsets[num_vertices];
        let mut next = offsets[..num_vertices].to_vec();
        let mut targets = vec![0 as Vertex; total];
        let mut weights = if weighted {
            vec![0f32; total]
        } else {
            Vec::new()
        };
        for list in lists {
            for (e, &w) in list.edges.iter().zip(&list.weights) {
                if e.is_self_loop() {
                    continue;
                }
                for (a, b) in [(e.u, e.v), (e.v, e.u)] {
                    let slot = next[a as usize];
                    next[a as usize] += 1;
                    targets[slot] = b;
                    if weighted {
                        weights[slot] = w;
                    }
                }
            }
        }
        Self {
            offsets,
            targets,
            weights,
        }
    }

    /// Number of vertices.
    pub fn num_vertices(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Number of entries (twice the number of non-self-loop edges).
    pub fn num_entries(&self) -> usize {
        self.targets.len()
    }

    /// Whether the weights were kept.
    pub fn is_weighted(&self) -> bool {
        !self.weights.is_empty() || self.targets.is_empty()
    }

    /// Number of edges of `v` to other vertices.
    #[inline]
    pub fn degree(&self, v: Vertex) -> usize {
        self.offsets[v as usize + 1] - self.offsets[v as usize]
    }

    /// The neighbours of `v`, one per edge.
    #[inline]
    pub fn neighbors(&self, v: Vertex) -> &[Vertex] {
        &self.targets[self.offsets[v as usize]..self.offsets[v as usize + 1]]
    }

    /// The weights of `v`'s edges, parallel to [`Self::neighbors`].
    ///
    /// # Panics
    /// If the graph was built without weights.
    #[inline]
    pub fn weights(&self, v: Vertex) -> &[f32] {
        assert!(self.is_weighted(), "graph built without weights");
        &self.weights[self.offsets[v as usize]..self.offsets[v as usize + 1]]
    }

    /// The edge count a search reports for TEPS, as the reference counts it: the non-self-loop
    /// edges with an endpoint in the searched component (duplicates counted), i.e. half the
    /// degrees of the reached vertices. `reached(v)` says whether the search reached `v`.
    pub fn component_edges(&self, mut reached: impl FnMut(Vertex) -> bool) -> u64 {
        let twice: usize = (0..self.num_vertices() as Vertex)
            .filter(|&v| reached(v))
            .map(|v| self.degree(v))
            .sum();
        (twice / 2) as u64
    }

    /// Bytes held by the graph.
    pub fn bytes(&self) -> usize {
        self.offsets.len() * size_of::<usize>()
            + self.targets.len() * size_of::<Vertex>()
            + self.weights.len() * size_of::<f32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronecker::Edge;

    fn list(edges: &[(u32, u32, f32)]) -> EdgeList {
        EdgeList {
            start: 0,
            edges: edges.iter().map(|&(u, v, _)| Edge { u, v }).collect(),
            weights: edges.iter().map(|&(_, _, w)| w).collect(),
        }
    }

    #[test]
    fn undirected_without_self_loops_with_duplicates() {
        let l = list(&[(0, 1, 0.5), (1, 1, 0.1), (2, 1, 0.25), (0, 1, 0.75)]);
        let g = Csr::build(4, &[&l], true);
        assert_eq!(g.num_entries(), 6);
        assert_eq!(g.neighbors(0), &[1, 1]);
        assert_eq!(g.weights(0), &[0.5, 0.75]);
        let mut n1: Vec<_> = g.neighbors(1).iter().zip(g.weights(1)).collect();
        n1.sort_by(|a, b| a.1.total_cmp(b.1));
        assert_eq!(n1, vec![(&2, &0.25), (&0, &0.5), (&0, &0.75)]);
        assert_eq!(g.degree(3), 0);
        assert_eq!(g.component_edges(|v| v != 3), 3);
    }
}
