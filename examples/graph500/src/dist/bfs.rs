//! Kernel 2 of the distributed engines: level-synchronous, direction-optimising BFS.
//!
//! A *rank* here is a member of the [`Exchange`]: an MPI rank, or a Gossamer worker.
//!
//! Each level is one bulk-synchronous step, top-down or bottom-up, chosen as the sequential
//! [`direction_optimizing`](crate::bfs::direction_optimizing) chooses (Beamer, Asanović and
//! Patterson, SC 2012, α = 14, β = 24; [`super::levels`]) from global counts: one sum ([`Exchange::sum_u64`]) per
//! level sums the frontier's size and its edges over the ranks.
//!
//! - Top-down: each rank scans its frontier's rows; a neighbour it owns is visited at once, a
//!   remote one becomes a (vertex, parent) pair for its owner, and all pairs go out in one
//!   [`Exchange::exchange`]. The owner keeps the first pair that reaches an unvisited vertex. A
//!   rank remembers (one bit per vertex of the graph) which remote vertices it already sent during
//!   this search: such a vertex is visited by the end of the level it was sent in, so sending it
//!   again is never needed.
//! - Bottom-up: the frontier bitmap is all-gathered ([`Exchange::all_gather_words`], each rank's
//!   block of whole words), then each rank's unvisited vertices look for a parent in it; no other
//!   messages.
//!
//! This module abstracts one search over a [`LocalGraph`]. It returns this rank's part of the
//! parent array; gathering it is validation's business.

use super::Exchange;
use super::graph::LocalGraph;
use super::levels::{Direction, bottom_up, frontier_bits};
use crate::bfs::NO_PARENT;
use crate::kronecker::Vertex;

/// Reusable buffers of the searches (so that the timed searches do not allocate per level).
#[derive(Debug, Default)]
pub struct Scratch {
    sent: Vec<u64>,
    frontier_bits: Vec<u64>,
    all_bits: Vec<u64>,
    outbox: Vec<Vec<u32>>,
    send: Vec<u32>,
    recv: Vec<u32>,
}

/// BFS from `root` (collective). Returns the parents of this rank's vertices, [`NO_PARENT`] for
/// unreached ones, `parent[root] = root`.
pub fn search<C: Exchange>(comm: &C, g: &LocalGraph, root: Vertex, s: &mut Scratch) -> Vec<Vertex> {
    let part = *g.partition();
    let n = part.num_vertices();
    let size = part.size();
    let mut parent = vec![NO_PARENT; g.local_count()];
    let mut frontier: Vec<u32> = Vec::new();
    let mut next: Vec<u32> = Vec::new();
    if part.owner(root) == part.rank() {
        parent[part.local(root)] = root;
        frontier.push(part.local(root) as u32);
    }
    s.sent.clear();
    s.sent.resize(n.div_ceil(64), 0);
    s.outbox.resize_with(size, Vec::new);
    let words_per_rank = part.chunk() / 64;
    s.frontier_bits.resize(words_per_rank, 0);
    s.all_bits.resize(words_per_rank * size, 0);

    let mut direction = Direction::new(g);
    loop {
        let local_edges: u64 = frontier.iter().map(|&i| g.degree(i as usize) as u64).sum();
        let totals = comm.sum_u64(&[frontier.len() as u64, local_edges]);
        let Some(bottom_up) = direction.next(&totals) else {
            break;
        };
        next.clear();
        if bottom_up {
            frontier_bits(&frontier, &mut s.frontier_bits);
            comm.all_gather_words(&s.frontier_bits, &mut s.all_bits);
            self::bottom_up(g, &mut parent, &s.all_bits, &mut next);
        } else {
            for b in &mut s.outbox {
                b.clear();
            }
            for &i in &frontier {
                let u = part.global(i as usize);
                for &v in g.neighbors(i as usize) {
                    let owner = part.owner(v);
                    if owner == part.rank() {
                        let j = part.local(v);
                        if parent[j] == NO_PARENT {
                            parent[j] = u;
                            next.push(j as u32);
                        }
                    } else if s.sent[v as usize / 64] >> (v % 64) & 1 == 0 {
                        s.sent[v as usize / 64] |= 1 << (v % 64);
                        s.outbox[owner].extend_from_slice(&[v, u]);
                    }
                }
            }
            let counts: Vec<usize> = s.outbox.iter().map(Vec::len).collect();
            s.send.clear();
            for b in &s.outbox {
                s.send.extend_from_slice(b);
            }
            comm.exchange(&s.send, &counts, &mut s.recv);
            for pair in s.recv.chunks_exact(2) {
                let j = part.local(pair[0]);
                if parent[j] == NO_PARENT {
                    parent[j] = pair[1];
                    next.push(j as u32);
                }
            }
        }
        std::mem::swap(&mut frontier, &mut next);
    }
    parent
}
