//! Kernel 2 of `--engine gsm`: direction-optimising BFS with delegated top-down visits.
//!
//! Levels as the bulk-synchronous kernel chooses them ([`crate::dist::bfs`]: one sum of the
//! frontier's size and edges per level, α = 14, β = 24). A top-down level is one completion
//! scope per worker, then a barrier: each worker expands its frontier, visits the neighbours it owns at once and delegates
//! each other one, once per search, to its owner as `visit(v, u)` (the visits for one owner go
//! as one closure with a `Vec` argument, `apply_with_then`); the owner keeps the first parent
//! and puts the vertex in its next frontier. A bottom-up level all-gathers the frontier
//! bitmap and each worker looks for parents of its own unvisited vertices, with no messages.

use std::sync::Arc;

use gossamer::finish;

use super::comm::Comm;
use super::kernels::Owned;
use crate::bfs::NO_PARENT;
use crate::dist::bfs::{ALPHA, BETA};
use crate::dist::graph::LocalGraph;
use crate::dist::{Exchange, Kernels, sssp::LocalPaths};
use crate::kronecker::Vertex;

impl Kernels<Comm> for super::kernels::Delegation {
    fn bfs(&mut self, comm: &Comm, g: &Arc<LocalGraph>, root: Vertex) -> Vec<Vertex> {
        let me = self.owned(comm, g);
        me.apply(move |o| o.start_bfs(root));
        let (n, mut unexplored, mut bottom_up) = (
            g.partition().num_vertices() as u64,
            g.total_entries(),
            false,
        );
        loop {
            let totals = comm.sum_u64(&me.apply(|o| o.advance()));
            if totals[0] == 0 {
                return me.apply(|o| std::mem::take(&mut o.parent));
            }
            unexplored = unexplored.saturating_sub(totals[1]);
            bottom_up = if bottom_up {
                totals[0] >= n / BETA
            } else {
                totals[1] > unexplored / ALPHA
            };
            if bottom_up {
                let mine = me.apply(|o| o.frontier_bits());
                let mut all = vec![0; mine.len() * comm.size()];
                comm.all_gather_words(&mine, &mut all);
                me.apply_with(all, |o, all| o.bottom_up(&all));
            } else {
                finish(|| me.apply(|o| o.top_down()));
                // Every worker's scope, not only this one's, must be done before `advance`.
                comm.barrier();
            }
        }
    }

    fn sssp(&mut self, comm: &Comm, g: &Arc<LocalGraph>, root: Vertex, delta: f32) -> LocalPaths {
        super::sssp::search(self.owned(comm, g), comm, root, delta)
    }
}

impl Owned {
    fn start_bfs(&mut self, root: Vertex) {
        self.parent = vec![NO_PARENT; self.part.local_count()];
        self.sent_bits = vec![0; self.part.num_vertices().div_ceil(64)];
        self.next.clear();
        if self.part.owner(root) == self.part.rank() {
            self.visit(root, root);
        }
    }

    /// The next frontier becomes the frontier: its size and edges.
    fn advance(&mut self) -> [u64; 2] {
        std::mem::swap(&mut self.frontier, &mut self.next);
        self.next.clear();
        let edges = self
            .frontier
            .iter()
            .map(|&i| self.g.degree(i as usize) as u64)
            .sum();
        [self.frontier.len() as u64, edges]
    }

    fn visit(&mut self, v: Vertex, u: Vertex) {
        let j = self.part.local(v);
        if self.parent[j] == NO_PARENT {
            self.parent[j] = u;
            self.next.push(j as u32);
        }
    }

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
                    self.outbox[owner].extend([v, u]);
                }
            }
        }
        for (out, t) in self.outbox.iter_mut().zip(&self.trusts) {
            if !out.is_empty() {
                let visits = std::mem::take(out);
                t.apply_with_then(
                    visits,
                    |o, b| b.chunks(2).for_each(|p| o.visit(p[0], p[1])),
                    |()| (),
                );
            }
        }
    }

    fn frontier_bits(&self) -> Vec<u64> {
        let mut bits = vec![0u64; self.part.chunk() / 64];
        for &i in &self.frontier {
            bits[i as usize / 64] |= 1 << (i % 64);
        }
        bits
    }

    fn bottom_up(&mut self, all: &[u64]) {
        for (i, pv) in self.parent.iter_mut().enumerate() {
            if *pv == NO_PARENT {
                if let Some(&u) = self
                    .g
                    .neighbors(i)
                    .iter()
                    .find(|&&u| all[u as usize / 64] >> (u % 64) & 1 == 1)
                {
                    *pv = u;
                    self.next.push(i as u32);
                }
            }
        }
    }
}
