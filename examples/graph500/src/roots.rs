//! The search roots, chosen as the Graph500 reference code chooses them.
//!
//! The reference draws candidates from the seeded stream at position 2·2^128 (two `f64` reals per
//! candidate, root = ⌊(r₀ + r₁)·N⌋ mod N), skips candidates already chosen and vertices without an
//! edge to another vertex (self-loops do not count), and gives up on a root after 2N draws in all.
//! Since the candidates are consecutive in the stream, this module walks it instead of jumping to
//! each candidate as the reference does; the values are the same.
//!
//! This module abstracts the candidate sequence and the acceptance rule. It does not know how a
//! vertex's degree is found: the caller passes a predicate, which a distributed engine answers
//! with a collective (every worker sees the same candidates in the same order).

use crate::kronecker::{SEED1, SEED2, Vertex};
use crate::mrg::{Jump, MrgState};

/// The first `count` search roots of the graph with 2^`scale` vertices. `has_edge(v)` says
/// whether `v` has at least one edge to another vertex.
///
/// Like the reference, a root for which the draws run out (more than 2^(SCALE+1) candidates in
/// all) is the last candidate drawn, whatever it was; that only happens on tiny graphs.
pub fn choose_roots(
    scale: u32,
    count: usize,
    mut has_edge: impl FnMut(Vertex) -> bool,
) -> Vec<Vertex> {
    let n = 1u64 << scale;
    let mut stream = MrgState::from_user_seeds(SEED1, SEED2);
    stream.jump(&Jump::by(2, 0, 0));
    let mut roots: Vec<Vertex> = Vec::with_capacity(count);
    let mut counter = 0u64;
    while roots.len() < count {
        let root = loop {
            let r0 = stream.next_f64();
            let r1 = stream.next_f64();
            let candidate = (((r0 + r1) * n as f64) as u64 % n) as Vertex;
            counter += 2;
            if counter > 2 * n {
                break candidate;
            }
            if roots.contains(&candidate) {
                continue;
            }
            if has_edge(candidate) {
                break candidate;
            }
        };
        roots.push(root);
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_follow_the_reference_positions() {
        // The reference jumps to 2·2^128 + 4·k for candidate k; walking must land on the same.
        let mut walked = MrgState::from_user_seeds(SEED1, SEED2);
        walked.jump(&Jump::by(2, 0, 0));
        for _ in 0..3 {
            walked.next_f64();
            walked.next_f64();
        }
        let mut jumped = MrgState::from_user_seeds(SEED1, SEED2);
        jumped.jump(&Jump::by(2, 0, 12));
        assert_eq!(walked, jumped);
    }

    #[test]
    fn roots_are_distinct_and_accepted() {
        let roots = choose_roots(10, 64, |v| v % 3 != 0);
        assert_eq!(roots.len(), 64);
        for (i, r) in roots.iter().enumerate() {
            assert!(r % 3 != 0);
            assert!(!roots[..i].contains(r));
        }
    }
}
