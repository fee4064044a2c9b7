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

use crate::mrg::{Jump, MrgLanes, MrgState};

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

/// How many edges [`KroneckerGenerator::fill`] makes at once.
const LANES: usize = 16;

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
    ///
    /// Edges are made sixteen at a time in lockstep: their streams are independent, so the
    /// processor overlaps the latency of one stream's steps with the others'.
    pub fn fill(&self, start: u64, edges: &mut [Edge], weights: &mut [f32]) {
        assert_eq!(edges.len(), weights.len(), "one weight per edge");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: this CPU supports AVX2, checked just above.
            unsafe { self.fill_avx2(start, edges, weights) };
            return;
        }
        self.fill_lanes(start, edges, weights);
    }

    /// [`Self::fill_lanes`] compiled for AVX2, where the lanes' 64-bit products vectorise four
    /// at a time (faster than the baseline x86-64 build).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn fill_avx2(&self, start: u64, edges: &mut [Edge], weights: &mut [f32]) {
        self.fill_lanes(start, edges, weights);
    }

    /// The body of [`Self::fill`], inlined into each instruction-set variant.
    #[inline(always)]
    fn fill_lanes(&self, start: u64, edges: &mut [Edge], weights: &mut [f32]) {
        let states: [MrgState; LANES] = std::array::from_fn(|l| self.stream_of(start + l as u64));
        let mut lanes = MrgLanes::from_states(&states);
        let stride = self.per_edge.repeat(LANES as u64);
        let scale = self.scale as usize;
        // One value per level, then the weight.
        let mut draws = [[0u32; LANES]; MAX_SCALE as usize + 1];
        let draws = &mut draws[..scale + 1];
        let mut e_chunks = edges.chunks_exact_mut(LANES);
        let mut w_chunks = weights.chunks_exact_mut(LANES);
        for (es, ws) in (&mut e_chunks).zip(&mut w_chunks) {
            lanes.peek(draws);
            let mut src = [0u64; LANES];
            let mut tgt = [0u64; LANES];
            let mut redraw = [false; LANES];
            for (level, row) in draws[..scale].iter().enumerate() {
                let shift = scale - 1 - level;
                for l in 0..LANES {
                    redraw[l] |= row[l] < REJECT_BELOW;
                    let (sbit, tbit) = quadrant_of(row[l]);
                    src[l] |= sbit << shift;
                    tgt[l] |= tbit << shift;
                }
            }
            for l in 0..LANES {
                if redraw[l] {
                    // A rejected draw shifts this edge's later draws: redo it one value at a time.
                    let mut s = lanes.lane(l);
                    es[l] = self.descend(&mut s);
                    ws[l] = s.next_f32();
                } else {
                    let (s, t) = clip_and_flip_all(src[l], tgt[l]);
                    es[l] = Edge {
                        u: self.scramble(s),
                        v: self.scramble(t),
                    };
                    ws[l] = weight_of(draws[scale][l]);
                }
            }
            lanes.jump(&stride);
        }
        // The tail, one edge at a time from lane 0's stream (the first edge left).
        let mut stream = lanes.lane(0);
        for (e, w) in e_chunks
            .into_remainder()
            .iter_mut()
            .zip(w_chunks.into_remainder())
        {
            let mut s = stream;
            *e = self.descend(&mut s);
            *w = s.next_f32();
            stream.jump(&self.per_edge);
        }
    }

    /// Generates edges `start .. end`.
    pub fn range(&self, start: u64, end: u64) -> EdgeList {
        assert!(start <= end, "reversed edge range {start}..{end}");
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
            let (sbit, tbit) = quadrant(s);
            let (sbit, tbit) = clip_and_flip(src, tgt, sbit, tbit);
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

/// Draws one initiator quadrant as (row bit, column bit), redrawing values the reference rejects.
#[inline(always)]
fn quadrant(s: &mut MrgState) -> (u64, u64) {
    let mut r = s.next_u31();
    while r < REJECT_BELOW {
        r = s.next_u31();
    }
    quadrant_of(r)
}

/// The quadrant of an accepted draw: A = (0,0), B = (0,1), C = (1,0), D = (1,1), laid out as the
/// reference lays out the draw modulo 10000 (B below 1900, then C, then A, then D). Branch-free:
/// the quadrant is random, so a branch on it would mispredict half the time.
#[inline(always)]
fn quadrant_of(r: u32) -> (u64, u64) {
    let r = r % DENOM;
    let is_b = u64::from(r < BC_NUM);
    let is_c = u64::from((BC_NUM..2 * BC_NUM).contains(&r));
    let is_d = u64::from(r >= 2 * BC_NUM + A_NUM);
    (is_c | is_d, is_b | is_d)
}

/// The reference's weight conversion applied to an already drawn value.
#[inline(always)]
fn weight_of(r: u32) -> f32 {
    (f64::from(r as f32) * crate::mrg::INV_M) as f32
}

/// Folds a quadrant choice on a diagonal block into the upper triangle ("clip and flip"): while
/// the source and target prefixes are equal, (1,0) becomes (0,1).
#[inline(always)]
fn clip_and_flip(src: u64, tgt: u64, sbit: u64, tbit: u64) -> (u64, u64) {
    let flip = u64::from(src == tgt) & sbit & !tbit;
    (sbit & !flip, tbit | flip)
}

/// [`clip_and_flip`] applied to all levels at once: the prefixes are equal down to the first
/// level where the raw bits differ, so only that level can flip, and it does if the source has
/// the 1 there.
#[inline(always)]
fn clip_and_flip_all(src: u64, tgt: u64) -> (u64, u64) {
    let diff = src ^ tgt;
    let first = if diff == 0 {
        0
    } else {
        1 << (63 - diff.leading_zeros())
    };
    let flip = src & first;
    (src ^ flip, tgt ^ flip)
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
    fn clipping_all_levels_at_once_matches_level_by_level() {
        let mut s = MrgState::from_user_seeds(5, 7);
        for _ in 0..10_000 {
            let (raw_s, raw_t) = (u64::from(s.next_u31() % 64), u64::from(s.next_u31() % 64));
            let (mut src, mut tgt) = (0, 0);
            for level in (0..6).rev() {
                let (sb, tb) = clip_and_flip(src, tgt, raw_s >> level & 1, raw_t >> level & 1);
                src |= sb << level;
                tgt |= tb << level;
            }
            assert_eq!(
                clip_and_flip_all(raw_s, raw_t),
                (src, tgt),
                "{raw_s:b} {raw_t:b}"
            );
        }
    }

    #[test]
    fn edges_with_rejected_draws_match_in_bulk() {
        // Find edges whose stream has a rejected draw among its first SCALE values.
        let g = KroneckerGenerator::new(12);
        let mut stream = g.stream_of(0);
        let mut found = Vec::new();
        for i in 0..400_000u64 {
            let mut s = stream;
            if (0..12).any(|_| s.next_u31() < REJECT_BELOW) {
                found.push(i);
            }
            stream.jump(&g.per_edge);
        }
        assert!(!found.is_empty(), "no rejected draw in 400000 edges");
        for &i in &found {
            let list = g.range(i.saturating_sub(5), i + 11);
            let j = (i - list.start) as usize;
            assert_eq!((list.edges[j], list.weights[j]), g.edge(i), "edge {i}");
        }
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
