//! The specification's Kronecker graph generator, as the Graph500 reference code implements it.
//!
//! Each edge `i` of the `edgefactor · 2^SCALE` edges has its own random stream (the seeded
//! [`MrgState`] jumped `i · 2^64` steps). From it the edge descends SCALE levels of the 2×2
//! initiator A, B, C, D = 0.57, 0.19, 0.19, 0.05 (drawn as integers out of 10000, rejecting the
//! few values that would bias the remainder), folding the upper-triangle choice for the diagonal
//! blocks ("clip and flip"); both endpoints are then relabelled by the reference's scrambling
//! permutation (add, multiply by an odd constant, reverse the bits, twice), and the next value of
//! the same stream is the edge's weight in `[0, 1)`. Values are bit-identical to the reference's
//! (version 3.0, without its optional parameter noise).
//!
//! This module abstracts generating any contiguous range of edges independently, so each worker
//! generates its own share. It does not distribute anything, and it does not remove self-loops or
//! duplicates: the benchmark's graph is this multigraph, loops included.

use crate::mrg::{Jump, MrgState};

/// A vertex label, `0 .. 2^SCALE`. SCALE is at most [`MAX_SCALE`], so `u32::MAX` never labels a
/// vertex and kernels may use it as "none".
pub type Vertex = u32;

/// The largest SCALE this implementation accepts (vertex labels are 32-bit, one value reserved).
pub const MAX_SCALE: u32 = 31;

/// The user seeds the specification fixes.
pub const SEED1: u64 = 2;
/// The second user seed the specification fixes.
pub const SEED2: u64 = 3;

/// Initiator probabilities in units of 1/10000 (B = C; D is the rest).
const A_NUM: u32 = 5700;
const BC_NUM: u32 = 1900;
const DENOM: u32 = 10_000;
/// Values below this are redrawn so that `value % DENOM` is uniform (the reference's bound).
const REJECT_BELOW: u32 = 0x7FFF_FFFF % DENOM;

/// One generated edge, endpoints in the order the generator wrote them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Edge {
    /// First endpoint.
    pub u: Vertex,
    /// Second endpoint.
    pub v: Vertex,
}

impl Edge {
    /// Whether both endpoints are the same vertex.
    pub fn is_self_loop(&self) -> bool {
        self.u == self.v
    }
}

/// The generator for one graph: a SCALE and the seeded stream. Cheap to build and `Sync`, so
/// workers can share one and generate disjoint ranges.
#[derive(Clone, Debug)]
pub struct KroneckerGenerator {
    scale: u32,
    base: MrgState,
    scramble0: u64,
    scramble1: u64,
    /// 2^64 steps: the distance between two consecutive edges' streams.
    per_edge: Jump,
}

/// A contiguous range of generated edges with their weights.
#[derive(Clone, Debug, Default)]
pub struct EdgeList {
    /// Global index of `edges[0]`.
    pub start: u64,
    /// The edges.
    pub edges: Vec<Edge>,
    /// `weights[i]` belongs to `edges[i]`.
    pub weights: Vec<f32>,
}

impl EdgeList {
    /// Number of edges.
    pub fn len(&self) -> usize {
        self.edges.len()
    }

    /// Whether there are no edges.
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }
}

impl KroneckerGenerator {
    /// The generator of the benchmark graph with 2^`scale` vertices, seeded by the
    /// specification's user seeds (2, 3).
    ///
    /// # Panics
    /// If `scale` is 0 or above [`MAX_SCALE`].
    pub fn new(scale: u32) -> Self {
        Self::with_seeds(scale, SEED1, SEED2)
    }

    /// The generator with other user seeds.
    ///
    /// # Panics
    /// If `scale` is 0 or above [`MAX_SCALE`].
    pub fn with_seeds(scale: u32, seed1: u64, seed2: u64) -> Self {
        assert!(
            (1..=MAX_SCALE).contains(&scale),
            "SCALE {scale} is outside 1..={MAX_SCALE}"
        );
        let base = MrgState::from_user_seeds(seed1, seed2);
        // The scrambling constants come from a stream position far from every edge's stream.
        let mut s = base;
        s.jump(&Jump::by(50, 7, 0));
        let mut wide = || {
            let hi = u64::from(s.next_u31());
            hi * 0xFFFF_FFFF + u64::from(s.next_u31())
        };
        let scramble0 = wide();
        let scramble1 = wide();
        Self {
            scale,
            base,
            scramble0,
            scramble1,
            per_edge: Jump::pow2(64),
        }
    }

    /// SCALE: the graph has 2^SCALE vertices.
    pub fn scale(&self) -> u32 {
        self.scale
    }

    /// Number of vertices, 2^SCALE.
    pub fn num_vertices(&self) -> u64 {
        1 << self.scale
    }

    /// The stream of edge `index`.
    fn stream_of(&self, index: u64) -> MrgState {
        let mut s = self.base;
        s.jump(&self.per_edge.repeat(index));
        s
    }

    /// Edge `index` and its weight, computed on its own (random access; slower per edge than
    /// [`Self::fill`]).
    pub fn edge(&self, index: u64) -> (Edge, f32) {
        let mut s = self.stream_of(index);
        let e = self.descend(&mut s);
        (e, s.next_f32())
    }

    /// Generates edges `start .. start + edges.len()` into `edges` and `weights` (equal lengths).
    pub fn fill(&self, start: u64, edges: &mut [Edge], weights: &mut [f32]) {
        assert_eq!(edges.len(), weights.len(), "one weight per edge");
        let mut stream = self.stream_of(start);
        for (e, w) in edges.iter_mut().zip(weights.iter_mut()) {
            let mut s = stream;
            *e = self.descend(&mut s);
            *w = s.next_f32();
            stream.jump(&self.per_edge);
        }
    }

    /// Generates edges `start .. end`.
    pub fn range(&self, start: u64, end: u64) -> EdgeList {
        assert!(start <= end, "empty or reversed edge range {start}..{end}");
        let n = usize::try_from(end - start).expect("edge range fits in memory");
        let mut edges = vec![Edge::default(); n];
        let mut weights = vec![0.0; n];
        self.fill(start, &mut edges, &mut weights);
        EdgeList {
            start,
            edges,
            weights,
        }
    }

    /// One edge's descent through the SCALE levels, then the relabelling.
    #[inline(always)]
    fn descend(&self, s: &mut MrgState) -> Edge {
        let mut src = 0u64;
        let mut tgt = 0u64;
        for level in (0..self.scale).rev() {
            let (mut sbit, mut tbit) = quadrant(s);
            if src == tgt && sbit > tbit {
                std::mem::swap(&mut sbit, &mut tbit);
            }
            src |= sbit << level;
            tgt |= tbit << level;
        }
        Edge {
            u: self.scramble(src),
            v: self.scramble(tgt),
        }
    }

    /// The reference's vertex permutation: cheap, bijective on `0 .. 2^SCALE`.
    #[inline(always)]
    fn scramble(&self, v: u64) -> Vertex {
        let drop = 64 - self.scale;
        let mut x = v.wrapping_add(self.scramble0.wrapping_add(self.scramble1));
        x = x.wrapping_mul(self.scramble0 | 0x4519_8402_1149_3211);
        x = x.reverse_bits() >> drop;
        x = x.wrapping_mul(self.scramble1 | 0x3050_8521_02C8_43A5);
        x = x.reverse_bits() >> drop;
        x as Vertex
    }
}

/// Draws one initiator quadrant as (row bit, column bit): A = (0,0), B = (0,1), C = (1,0),
/// D = (1,1), tested in the reference's order B, C, A.
#[inline(always)]
fn quadrant(s: &mut MrgState) -> (u64, u64) {
    let mut r = s.next_u31();
    while r < REJECT_BELOW {
        r = s.next_u31();
    }
    let r = r % DENOM;
    if r < BC_NUM {
        (0, 1)
    } else if r < 2 * BC_NUM {
        (1, 0)
    } else if r < 2 * BC_NUM + A_NUM {
        (0, 0)
    } else {
        (1, 1)
    }
}

/// The half-open range of edges worker `rank` of `size` generates out of `total`, as the
/// reference splits them (the first `total % size` workers get one more).
pub fn share(total: u64, rank: u64, size: u64) -> (u64, u64) {
    assert!(rank < size, "worker {rank} of {size}");
    let base = total / size;
    let extra = total % size;
    let start = rank * base + rank.min(extra);
    let end = (rank + 1) * base + (rank + 1).min(extra);
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f32, b: f64) -> bool {
        (f64::from(a) - b).abs() < 5e-10
    }

    #[test]
    fn scale_10_golden_edges() {
        let g = KroneckerGenerator::new(10);
        let m = 16u64 << 10;
        let (e0, w0) = g.edge(0);
        assert_eq!((e0.u, e0.v), (299, 797));
        assert!(close(w0, 0.490170419), "{w0}");
        let (el, wl) = g.edge(m - 1);
        assert_eq!((el.u, el.v), (206, 55));
        assert!(close(wl, 0.848867834), "{wl}");
    }

    #[test]
    fn scale_16_golden_edges() {
        let g = KroneckerGenerator::new(16);
        let m = 16u64 << 16;
        let list = g.range(0, 2);
        assert_eq!((list.edges[0].u, list.edges[0].v), (53430, 37000));
        assert!(close(list.weights[0], 0.454299152));
        assert_eq!((list.edges[1].u, list.edges[1].v), (16463, 33235));
        assert!(close(list.weights[1], 0.915168881));
        let (el, wl) = g.edge(m - 1);
        assert_eq!((el.u, el.v), (47449, 59083));
        assert!(close(wl, 0.492671192));
    }

    #[test]
    fn ranges_agree_with_random_access_and_with_each_other() {
        let g = KroneckerGenerator::new(12);
        let whole = g.range(0, 3000);
        for (i, (&e, &w)) in whole
            .edges
            .iter()
            .zip(&whole.weights)
            .enumerate()
            .step_by(97)
        {
            assert_eq!(g.edge(i as u64), (e, w));
        }
        let (s, t) = share(3000, 2, 7);
        let part = g.range(s, t);
        assert_eq!(part.edges[..], whole.edges[s as usize..t as usize]);
        assert_eq!(part.weights[..], whole.weights[s as usize..t as usize]);
    }

    #[test]
    fn shares_cover_the_edges_once() {
        let mut next = 0;
        for r in 0..7 {
            let (s, e) = share(100, r, 7);
            assert_eq!(s, next);
            next = e;
        }
        assert_eq!(next, 100);
    }

    #[test]
    fn scramble_is_a_permutation() {
        let g = KroneckerGenerator::new(10);
        let mut seen = vec![false; 1024];
        for v in 0..1024 {
            let s = g.scramble(v) as usize;
            assert!(!seen[s]);
            seen[s] = true;
        }
    }
}
