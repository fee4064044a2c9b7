//! The search roots, chosen as the Graph500 reference code chooses them.
//!
//! The reference draws candidates from the seeded stream at position 2·2^128 (two `f64` reals per
//! candidate, root = ⌊(r₀ + r₁)·N⌋ mod N), skips candidates already chosen and vertices without an
//! edge to another vertex (self-loops do not count), and gives up on a root after 2N draws in all.
//! Since the candidates are consecutive in the stream, this module walks it instead of jumping to
//! each candidate as the reference does; the values are the same.
//!
//! On tiny graphs (SCALE 6 or less with the default 64 roots; at any SCALE, `--roots` near the
//! number of vertices) the draws run out, and the reference then takes candidates as drawn: roots
//! repeat, or have no edge (a search of no edges, whose TEPS are 0, so the harmonic mean of the
//! run is 0). The roots stay the reference's; [`choose_roots_counted`] also counts how many are
//! real (distinct, with an edge), and [`RootCensus::warning`] says so.
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
pub fn choose_roots(scale: u32, count: usize, has_edge: impl FnMut(Vertex) -> bool) -> Vec<Vertex> {
    choose_roots_counted(scale, count, has_edge).0
}

/// How many of the chosen roots are real roots (see [`choose_roots_counted`]). Every root is
/// exactly one of real, repeated or edgeless.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootCensus {
    /// Vertices of the graph.
    pub vertices: u64,
    /// Roots asked for.
    pub requested: usize,
    /// Roots that are vertices with an edge, each counted at its first occurrence.
    pub real: usize,
    /// Roots equal to an earlier root.
    pub repeated: usize,
    /// First occurrences of vertices without an edge to another vertex.
    pub edgeless: usize,
    /// How many roots come before the first that is not real: `--roots` up to this many gives
    /// only real roots (the roots for fewer are a prefix of those for more).
    pub leading_real: usize,
}

impl RootCensus {
    /// The warning for roots that are not all real, as one line; `None` when they all are.
    /// Only the reporting member prints it; the results block stays the reference's.
    pub fn warning(&self) -> Option<String> {
        if self.real == self.requested {
            return None;
        }
        let (real, requested) = (self.real, self.requested);
        let head = if real == 0 {
            format!("none of the {requested} search roots is a vertex with an edge")
        } else {
            format!(
                "only {real} of the {requested} search roots are distinct vertices with an edge"
            )
        };
        let mut others = Vec::new();
        if self.repeated > 0 {
            others.push(format!("{} repeat an earlier root", self.repeated));
        }
        if self.edgeless > 0 {
            others.push(format!("{} have no edge", self.edgeless));
        }
        let effect = if self.edgeless > 0 {
            "the TEPS statistics include zeros and the harmonic means are 0"
        } else {
            "the statistics count some searches more than once"
        };
        let remedy = match self.leading_real {
            0 => "a larger SCALE or edgefactor".to_string(),
            leading => format!("a larger SCALE, or --roots {leading} or fewer"),
        };
        Some(format!(
            "graph500: warning: {head} (the root draws ran out on this graph of {} vertices; as \
             in the reference, the rest are taken as drawn): {}, so {effect}; choose {remedy}",
            self.vertices,
            others.join(" and "),
        ))
    }
}

/// [`choose_roots`], with the [`RootCensus`] of the roots chosen. A root accepted by the rule is
/// real; a root taken after the draws ran out is counted as repeated if it is, and otherwise asked
/// about with `has_edge` (which the reference does not do; it changes no root, and happens only
/// on graphs where the draws run out, identically on every member of a distributed run).
pub fn choose_roots_counted(
    scale: u32,
    count: usize,
    mut has_edge: impl FnMut(Vertex) -> bool,
) -> (Vec<Vertex>, RootCensus) {
    let n = 1u64 << scale;
    let mut stream = MrgState::from_user_seeds(SEED1, SEED2);
    stream.jump(&Jump::by(2, 0, 0));
    let mut roots: Vec<Vertex> = Vec::with_capacity(count);
    let mut census = RootCensus {
        vertices: n,
        requested: count,
        real: 0,
        repeated: 0,
        edgeless: 0,
        leading_real: 0,
    };
    let mut counter = 0u64;
    while roots.len() < count {
        let root = loop {
            let r0 = stream.next_f64();
            let r1 = stream.next_f64();
            let candidate = (((r0 + r1) * n as f64) as u64 % n) as Vertex;
            counter += 2;
            if counter > 2 * n {
                if roots.contains(&candidate) {
                    census.repeated += 1;
                } else if has_edge(candidate) {
                    census.real += 1;
                } else {
                    census.edgeless += 1;
                }
                break candidate;
            }
            if roots.contains(&candidate) {
                continue;
            }
            if has_edge(candidate) {
                census.real += 1;
                break candidate;
            }
        };
        roots.push(root);
        if census.real == roots.len() {
            census.leading_real = roots.len();
        }
    }
    (roots, census)
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

    /// Counts real roots by the definition, from the roots alone.
    fn census_of(roots: &[Vertex], has_edge: impl Fn(Vertex) -> bool) -> (usize, usize, usize) {
        let (mut real, mut repeated, mut edgeless) = (0, 0, 0);
        for (i, r) in roots.iter().enumerate() {
            if roots[..i].contains(r) {
                repeated += 1;
            } else if has_edge(*r) {
                real += 1;
            } else {
                edgeless += 1;
            }
        }
        (real, repeated, edgeless)
    }

    #[test]
    fn the_census_counts_real_repeated_and_edgeless_roots() {
        // A graph with enough candidates: every root is real, and nothing to warn about.
        let (_, census) = choose_roots_counted(10, 64, |v| v % 3 != 0);
        assert_eq!((census.real, census.leading_real), (64, 64));
        assert_eq!((census.repeated, census.edgeless), (0, 0));
        assert_eq!(census.warning(), None);

        // 32 vertices, 64 roots, half the vertices without an edge: the draws run out.
        let has_edge = |v: Vertex| v % 2 == 0;
        let (roots_5, census) = choose_roots_counted(5, 64, has_edge);
        assert_eq!(roots_5, choose_roots(5, 64, has_edge), "the same roots");
        assert_eq!(
            (census.real, census.repeated, census.edgeless),
            census_of(&roots_5, has_edge)
        );
        assert_eq!(census.real + census.repeated + census.edgeless, 64);
        assert!(census.edgeless > 0 && census.repeated > 0, "{census:?}");
        let leading = census.leading_real;
        assert!(leading < census.real, "{census:?}");
        let prefix = &roots_5[..leading];
        assert_eq!(census_of(prefix, has_edge), (leading, 0, 0));
        assert_ne!(census_of(&roots_5[..=leading], has_edge).0, leading + 1);
        // Fewer roots are a prefix of more, so `--roots leading` gives only real ones.
        let (fewer, census) = choose_roots_counted(5, leading, has_edge);
        assert_eq!((fewer.as_slice(), census.real), (prefix, leading));
        assert_eq!(census.warning(), None);
    }

    #[test]
    fn the_census_of_the_reference_graph_at_scale_5_and_6() {
        // The benchmark's own graphs: at SCALE 5, 30 real roots, 32 repeats and 2 vertices
        // without an edge (so TEPS of 0), the first 19 roots real; at SCALE 6, repeats only.
        for (scale, real, repeated, edgeless, leading) in [(5, 30, 32, 2, 19), (6, 48, 16, 0, 42)] {
            let list = crate::kronecker::KroneckerGenerator::new(scale).range(0, 16 << scale);
            let g = crate::csr::Csr::build(1 << scale, &[&list], false);
            let (roots, census) = choose_roots_counted(scale, 64, |v| g.degree(v) > 0);
            assert_eq!(
                (census.real, census.repeated, census.edgeless),
                (real, repeated, edgeless),
                "SCALE {scale}: {roots:?}"
            );
            assert_eq!(census.leading_real, leading, "SCALE {scale}: {roots:?}");
            let warning = census.warning().expect("a warning");
            for needle in [
                format!("only {real} of the 64 search roots"),
                format!("graph of {} vertices", 1 << scale),
                format!("--roots {leading} or fewer"),
            ] {
                assert!(warning.contains(&needle), "{needle:?} in {warning}");
            }
            assert_eq!(warning.contains("include zeros"), edgeless > 0, "{warning}");
        }
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
