//! Kernel 2 of `--engine gsm`: direction-optimising BFS with delegated top-down visits.
//!
//! Levels as the bulk-synchronous kernel chooses them ([`crate::dist::bfs`]: one sum of the
//! frontier's size and edges per level, α = 14, β = 24). A top-down level is one job-wide completion
//! scope ([`gossamer::finish_all`]): each worker expands its frontier, visits the neighbours it owns at once and delegates
//! each other one, once per search, to its owner as `visit(v, u)` (the visits for one owner go
//! as one closure with a `Vec` argument, [`gossamer::Batches`]); the owner keeps the first parent
//! and puts the vertex in its next frontier. A bottom-up level all-gathers the frontier
//! bitmap and each worker looks for parents of its own unvisited vertices, with no messages; the
//! levels' directions and the bottom-up step are shared with the bulk-synchronous kernel ([`crate::dist::levels`]).

use gossamer::{Trust, finish_all};

use super::comm::Comm;
use super::kernels::Owned;
use crate::bfs::NO_PARENT;
use crate::dist::Exchange;
use crate::dist::graph::LocalGraph;
use crate::dist::levels::{Direction, bottom_up, frontier_bits};
use crate::kronecker::Vertex;

/// Direction-optimising BFS from `root` (collective): the parents of this worker's vertices.
pub(super) fn search(me: &Trust<Owned>, comm: &Comm, g: &LocalGraph, root: Vertex) -> Vec<Vertex> {
    me.apply(move |o| o.start_bfs(root));
    let mut direction = Direction::new(g);
    while let Some(up) = direction.next(&comm.sum_u64(&me.apply(|o| o.advance()))) {
        if up {
            let mut all = vec![0; g.partition().chunk() / 64 * comm.size()];
            comm.all_gather_words(&me.apply(|o| o.bits()), &mut all);
            me.apply_with(all, |o, all| {
                bottom_up(&o.g, &mut o.parent, &all, &mut o.next)
            });
        } else {
            finish_all(|| me.apply(|o| o.top_down()));
        }
    }
    me.apply(|o| std::mem::take(&mut o.parent))
}

impl Owned {
    fn start_bfs(&mut self, root: Vertex) {
        self.parent = vec![NO_PARENT; self.part.local_count()];
        self.sent_bits = vec![0; self.part.num_vertices().div_ceil(64)];
        if self.part.owner(root) == self.part.rank() {
            self.visit(root, root);
        }
    }

    /// The next frontier becomes the frontier: its size and edges.
    fn advance(&mut self) -> [u64; 2] {
        self.frontier = std::mem::take(&mut self.next);
        let edges = self
            .frontier
            .iter()
            .map(|&i| self.g.degree(i as usize) as u64);
        [self.frontier.len() as u64, edges.sum()]
    }

    fn bits(&self) -> Vec<u64> {
        let mut bits = vec![0; self.part.chunk() / 64];
        frontier_bits(&self.frontier, &mut bits);
        bits
    }

    /// Visits vertex `v` (owned here) from `u`: the first parent stays.
    fn visit(&mut self, v: Vertex, u: Vertex) {
        let j = self.part.local(v);
        if self.parent[j] == NO_PARENT {
            self.parent[j] = u;
            self.next.push(j as u32);
        }
    }

    /// Expands the frontier: visits the neighbours owned here and delegates each other one to
    /// its owner, once per search (a remote vertex sent is visited by the end of the level).
    fn top_down(&mut self) {
        let (g, part) = (self.g.clone(), self.part);
        for &i in &std::mem::take(&mut self.frontier) {
            let u = part.global(i as usize);
            for &v in g.neighbors(i as usize) {
                let (owner, bit) = (part.owner(v), 1 << (v % 64));
                if owner == part.rank() {
                    self.visit(v, u);
                } else if self.sent_bits[v as usize / 64] & bit == 0 {
                    self.sent_bits[v as usize / 64] |= bit;
                    self.out.extend(owner, [v, u]);
                }
            }
        }
        self.out
            .send(|o, pairs| pairs.chunks(2).for_each(|p| o.visit(p[0], p[1])));
    }
}
