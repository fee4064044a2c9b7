//! Kernel 3 of the distributed engines: bulk-synchronous delta-stepping.
//!
//! A *rank* here is a member of the [`Exchange`]: an MPI rank, or a Gossamer worker.
//!
//! Delta-stepping (Meyer and Sanders, J. Algorithms 2003) as the sequential
//! [`delta_stepping`](crate::sssp::delta_stepping) runs it (buckets of width Δ in a ring, every
//! edge relaxed in the bucket's phases, no light/heavy split), distributed over the owners: each
//! phase, every rank relaxes the edges of its vertices in the current bucket; a relaxation of a
//! vertex it owns applies at once, one of a remote vertex becomes a request (vertex, candidate
//! distance, parent) to its owner, and the requests go out in one [`Exchange::exchange_min`] per
//! phase, which also carries each rank's lowest bucket index that may have work next (its own
//! non-empty buckets after its local relaxations, and the buckets of the requests it sends), so
//! that its minimum over the ranks decides without another collective: the current bucket again
//! (another phase), a later one (skipping empty buckets), or none (done). The bound is conservative
//! (a request may not lower the owner's distance), which costs at most an empty phase.
//!
//! Two limits on the messages: a rank remembers the lowest candidate it has sent for each remote
//! vertex during the search (4 bytes per vertex of the graph) and does not send a candidate that
//! is not lower, since the owner's distance is already at most the one sent before (this removes
//! about 14 of every 15 requests at SCALE 18 and 20 on 2 ranks); and a phase stops relaxing once
//! a rank has queued [`PHASE_WORDS`] words of requests, the rest of the bucket waiting for the
//! next phase, which bounds the message buffers whatever the bucket.
//!
//! A distance is only ever set to `dist[u] + w` (one `f32` addition, done by the rank that owns
//! `u`), and only when it lowers the distance, so the result is the same fixpoint the sequential
//! kernels reach, bit for bit; only the choice among equal-distance parents may differ.
//!
//! This module abstracts one search over a [`LocalGraph`] and returns this rank's parents and
//! distances.

use super::Exchange;
use super::graph::LocalGraph;
use crate::bfs::NO_PARENT;
use crate::kronecker::Vertex;

/// Words of requests a rank queues in one phase before it stops and exchanges them (the rest of
/// the bucket waits for the next phase): 16 MiB, so that a heavy bucket's messages do not set the
/// peak memory.
pub const PHASE_WORDS: usize = 1 << 22;

/// Reusable buffers of the searches.
#[derive(Debug, Default)]
pub struct Scratch {
    /// The lowest candidate distance this rank has sent for each vertex in this search.
    sent: Vec<f32>,
    outbox: Vec<Vec<u32>>,
    send: Vec<u32>,
    recv: Vec<u32>,
    work: Vec<u32>,
}

/// This rank's part of a search's result.
#[derive(Clone, Debug)]
pub struct LocalPaths {
    /// Parents of this rank's vertices.
    pub parent: Vec<Vertex>,
    /// Distances of this rank's vertices (`f32::INFINITY` when unreached).
    pub dist: Vec<f32>,
}

/// Delta-stepping from `root` with bucket width `delta` in (0, 1] (collective).
pub fn search<C: Exchange>(
    comm: &C,
    g: &LocalGraph,
    root: Vertex,
    delta: f32,
    s: &mut Scratch,
) -> LocalPaths {
    assert!(
        delta > 0.0 && delta <= 1.0,
        "bucket width {delta} outside (0, 1]"
    );
    let part = *g.partition();
    let me = part.rank();
    let local = g.local_count();
    let mut parent = vec![NO_PARENT; local];
    let mut dist = vec![f32::INFINITY; local];
    let mut relaxed_at = vec![f32::INFINITY; local];
    // Same ring as the sequential kernel: a new distance is below the current bucket's end plus
    // the largest weight (< 1).
    let ring = (1.0 / delta).ceil() as usize + 2;
    let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); ring];
    let bucket_of = |d: f32| (d / delta) as usize;
    if part.owner(root) == me {
        let r = part.local(root);
        parent[r] = root;
        dist[r] = 0.0;
        buckets[0].push(r as u32);
    }
    s.outbox.resize_with(part.size(), Vec::new);
    s.sent.clear();
    s.sent.resize(part.num_vertices(), f32::INFINITY);
    let mut current = 0usize;
    loop {
        // One phase of bucket `current`.
        let slot = current % ring;
        std::mem::swap(&mut s.work, &mut buckets[slot]);
        for b in &mut s.outbox {
            b.clear();
        }
        // The lowest bucket a request sent this phase may fill.
        let mut lowest_sent = usize::MAX;
        let mut queued = 0usize;
        let mut done = 0usize;
        for &i in &s.work {
            if queued >= PHASE_WORDS {
                break;
            }
            done += 1;
            let i = i as usize;
            let du = dist[i];
            if bucket_of(du) != current || relaxed_at[i] == du {
                continue;
            }
            relaxed_at[i] = du;
            let u = part.global(i);
            for (&v, &w) in g.neighbors(i).iter().zip(g.weights(i)) {
                let candidate = du + w;
                let owner = part.owner(v);
                if owner == me {
                    let j = part.local(v);
                    if candidate < dist[j] {
                        dist[j] = candidate;
                        parent[j] = u;
                        buckets[bucket_of(candidate) % ring].push(j as u32);
                    }
                } else if candidate < s.sent[v as usize] {
                    s.sent[v as usize] = candidate;
                    lowest_sent = lowest_sent.min(bucket_of(candidate));
                    s.outbox[owner].extend_from_slice(&[v, candidate.to_bits(), u]);
                    queued += 3;
                }
            }
        }
        // What the message cap left over stays in the bucket, for the next phase.
        buckets[slot].extend_from_slice(&s.work[done..]);
        s.work.clear();
        let counts: Vec<usize> = s.outbox.iter().map(Vec::len).collect();
        s.send.clear();
        for b in &s.outbox {
            s.send.extend_from_slice(b);
        }
        // New distances are never below the current bucket, and every queued one is less than a
        // ring ahead, so the first non-empty slot from `current` is the lowest bucket here.
        let here = (0..ring)
            .find(|k| !buckets[(current + k) % ring].is_empty())
            .map_or(usize::MAX, |k| current + k)
            .min(lowest_sent);
        let lowest = comm.exchange_min(&s.send, &counts, here as u64, &mut s.recv);
        for request in s.recv.chunks_exact(3) {
            let j = part.local(request[0]);
            let candidate = f32::from_bits(request[1]);
            if candidate < dist[j] {
                dist[j] = candidate;
                parent[j] = request[2];
                buckets[bucket_of(candidate) % ring].push(j as u32);
            }
        }
        if lowest == usize::MAX as u64 {
            break;
        }
        current = lowest as usize;
    }
    LocalPaths { parent, dist }
}
