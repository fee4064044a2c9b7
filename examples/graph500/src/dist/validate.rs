//! Validation of one distributed search: the five rules and the edge count, on every rank.
//!
//! A *rank* here is a member of the [`Exchange`]: an MPI rank, or a Gossamer worker.
//!
//! The parent (and distance) arrays are all-gathered ([`Exchange::all_gather_vertices`]; the block
//! partition makes them a concatenation), so every rank runs [`check_tree`] on the whole tree, the
//! same work on each; that costs 4 to 8 bytes per vertex per rank, 32 MiB at SCALE 22, which is why
//! this way is fine up to about SCALE 22 and pointer jumping would replace it beyond. The edge
//! rules are distributed: each rank runs [`check_edges`] over the edges it generated, and the
//! tallies are merged with reductions (edge counts summed, rule-5 confirmation bitmaps OR-ed) and
//! the failures each rank found all-gathered (postcard-encoded), so that every rank runs [`finish`]
//! on the same merged tally and reaches the same verdict.
//!
//! This module abstracts the merging. The rules themselves are [`crate::validate`]'s.

use super::Exchange;
use super::graph::LocalGraph;
use crate::kronecker::{EdgeList, Vertex};
use crate::validate::{Claimed, ValidationFailure, check_edges, check_tree, finish};

/// Validates a search (collective): `parent` and `dist` are this rank's parts, `list` the edges
/// this rank generated, `reported` the edge count the search reported. Every rank returns the
/// same result.
pub fn validate<C: Exchange>(
    comm: &C,
    g: &LocalGraph,
    list: &EdgeList,
    root: Vertex,
    parent: &[Vertex],
    dist: Option<&[f32]>,
    reported: u64,
) -> Result<u64, ValidationFailure> {
    let counts = g.partition().counts();
    let parent = comm.all_gather_vertices(parent, &counts);
    let dist = dist.map(|d| comm.all_gather_dists(d, &counts));
    let claimed = Claimed {
        root,
        parent: &parent,
        dist: dist.as_deref(),
    };
    // Every rank sees the same arrays, so every rank reaches the same verdict here.
    let labels = check_tree(&claimed)?;
    let mut tally = check_edges(&claimed, &labels, list);
    tally.component_edges = comm.sum_u64(&[tally.component_edges])[0];
    comm.or_in_place(tally.confirmed_words_mut());
    let mine = tally.take_failure();
    let bytes = postcard::to_allocvec(&mine).expect("a validation failure encodes");
    for encoded in comm.all_gather_bytes(&bytes) {
        let theirs: ValidationFailure =
            postcard::from_bytes(&encoded).expect("a rank's validation failure decodes");
        tally.absorb_failure(theirs);
    }
    finish(&claimed, &labels, tally, reported)
}
