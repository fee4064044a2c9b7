//! Validation of one search of the Gossamer engine: the five rules and the edge count, on every
//! worker.
//!
//! As the MPI baseline validates ([`crate::mpi_engine::validate`]), between workers: the parent
//! (and distance) arrays are all-gathered by the team (the block partition makes them a
//! concatenation), so every worker runs [`check_tree`] on the whole tree — the same work on each,
//! 4 to 8 bytes per vertex per worker, fine up to about SCALE 22, beyond which pointer jumping
//! would replace it. The edge rules are distributed: each worker runs [`check_edges`] over the
//! edges it generated, and the tallies are merged with team reductions (edge counts summed,
//! rule-5 confirmation bitmaps OR-ed) and the failures each worker found all-gathered
//! (postcard-encoded), so that every worker runs [`finish`] on the same merged tally and reaches
//! the same verdict.
//!
//! This module abstracts the merging. The rules themselves are [`crate::validate`]'s.

use super::comm::Comm;
use super::graph::LocalGraph;
use crate::kronecker::{EdgeList, Vertex};
use crate::validate::{Claimed, ValidationFailure, check_edges, check_tree, finish};

/// Validates a search (collective): `parent` and `dist` are this worker's parts, `list` the edges
/// this worker generated, `reported` the edge count the search reported. Every worker returns the
/// same result.
pub fn validate(
    comm: &Comm,
    g: &LocalGraph,
    list: &EdgeList,
    root: Vertex,
    parent: &[Vertex],
    dist: Option<&[f32]>,
    reported: u64,
) -> Result<u64, ValidationFailure> {
    let counts = g.partition().counts();
    let parent = comm.all_gather_var(parent, &counts);
    let dist = dist.map(|d| comm.all_gather_var(d, &counts));
    let claimed = Claimed {
        root,
        parent: &parent,
        dist: dist.as_deref(),
    };
    // Every worker sees the same arrays, so every worker reaches the same verdict here.
    let labels = check_tree(&claimed)?;
    let mut tally = check_edges(&claimed, &labels, list);
    tally.component_edges = comm.sum(&[tally.component_edges])[0];
    comm.or_in_place(tally.confirmed_words_mut());
    let mine = tally.take_failure();
    let bytes = postcard::to_allocvec(&mine).expect("a validation failure encodes");
    for encoded in comm.all_gather_bytes(&bytes) {
        let theirs: ValidationFailure =
            postcard::from_bytes(&encoded).expect("a worker's validation failure decodes");
        tally.absorb_failure(theirs);
    }
    finish(&claimed, &labels, tally, reported)
}
