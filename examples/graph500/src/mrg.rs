//! The Graph500 reference generator's random stream, reproduced bit for bit.
//!
//! The stream is a fifth-order multiple recursive generator modulo the Mersenne prime 2^31 − 1
//! (L'Ecuyer, Blouin and Couture 1993, table 3, the entry for m = 2^31 − 1, k = 5; the same
//! generator the GNU Scientific Library calls `mrg`). Its state is five residues; one step is a
//! linear map, so jumping n steps ahead is multiplication by the n-th power of the 5×5 step matrix.
//! The reference gives every edge its own stream by jumping `edge_index · 2^64` steps from the
//! seeded state, which is what makes the generator splittable: any worker can start anywhere.
//!
//! This module abstracts the state, the step, the jump matrices and the reference's conversions to
//! `f64`/`f32`. It does not know about graphs (see [`crate::kronecker`]) and it does not keep the
//! reference's byte-indexed table of precomputed powers: a jump is computed by repeated squaring,
//! which yields the same matrices because powers of one matrix are exact modulo a prime.

/// The modulus, 2^31 − 1.
pub const MODULUS: u32 = 0x7FFF_FFFF;
const P: u64 = MODULUS as u64;
/// (2^31 − 1)^−1 and (2^31 − 1)^−2, written with the reference's digits (more than an `f64`
/// holds; both round to the same `f64` as the reference's literals do in C).
#[allow(clippy::excessive_precision)]
pub(crate) const INV_M: f64 = 4.656_612_875_245_796_92e-10;
#[allow(clippy::excessive_precision)]
const INV_M2: f64 = 2.168_404_346_990_492_787e-19;
/// The recurrence `z_n = X·z_{n−1} + Y·z_{n−5} (mod 2^31 − 1)`.
const X: u64 = 107_374_182;
const Y: u64 = 104_480;

/// Reduces any `u64` to its canonical residue modulo 2^31 − 1.
#[inline(always)]
fn reduce(x: u64) -> u32 {
    // 2^31 ≡ 1, so the high bits fold onto the low ones; two folds leave less than P + 8.
    let x = (x & P) + (x >> 31);
    let x = (x & P) + (x >> 31);
    (if x >= P { x - P } else { x }) as u32
}

/// Reduces a sum known to be below 2^62 (one fold leaves less than 2P).
#[inline(always)]
fn reduce_small(x: u64) -> u32 {
    debug_assert!(x < 1 << 62);
    let x = ((x & P) + (x >> 31)) as u32;
    // Below 2P: subtracting P either lands below x or wraps above it; the minimum is the residue
    // (and compiles to a vector minimum rather than a branch).
    x.min(x.wrapping_sub(MODULUS))
}

/// The generator's state: five residues, `z[0]` the newest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrgState {
    z: [u32; 5],
}

impl MrgState {
    /// Seeds the state from the benchmark's two 64-bit user seeds (the specification uses 2 and
    /// 3), spreading them into five non-zero residues as the reference's `make_mrg_seed` does.
    pub fn from_user_seeds(seed1: u64, seed2: u64) -> Self {
        let low30 = |x: u64| ((x & 0x3FFF_FFFF) + 1) as u32;
        Self {
            z: [
                low30(seed1),
                low30(seed1 >> 30),
                low30(seed2),
                low30(seed2 >> 30),
                (((seed2 >> 60) << 4) + (seed1 >> 60) + 1) as u32,
            ],
        }
    }

    /// A state from five residues in `[0, 2^31 − 1)`, not all zero.
    pub fn from_residues(z: [u32; 5]) -> Self {
        debug_assert!(z.iter().all(|&r| r < MODULUS) && z.iter().any(|&r| r != 0));
        Self { z }
    }

    /// The five residues, newest first.
    pub fn residues(&self) -> [u32; 5] {
        self.z
    }

    /// Advances one step and returns the new value, in `[0, 2^31 − 1)`.
    #[inline(always)]
    pub fn next_u31(&mut self) -> u32 {
        let [z1, z2, z3, z4, z5] = self.z;
        let new = reduce_small(X * u64::from(z1) + Y * u64::from(z5));
        self.z = [new, z1, z2, z3, z4];
        new
    }

    /// A real in `[0, 1)` from two steps, computed exactly as the reference does (in `f64`, the
    /// first value scaled by (2^31 − 1)^−1 plus the second by (2^31 − 1)^−2).
    pub fn next_f64(&mut self) -> f64 {
        let hi = f64::from(self.next_u31());
        let lo = f64::from(self.next_u31());
        hi * INV_M + lo * INV_M2
    }

    /// A real in `[0, 1)` from one step, as the reference computes edge weights: the value
    /// converted to `f32`, scaled in `f64`, rounded back to `f32`.
    #[inline(always)]
    pub fn next_f32(&mut self) -> f32 {
        let v = self.next_u31() as f32;
        (f64::from(v) * INV_M) as f32
    }

    /// Applies a jump: afterwards the state is the one `jump.steps()` steps later.
    #[inline(always)]
    pub fn jump(&mut self, jump: &Jump) {
        self.z = jump.apply(&self.z);
    }
}

/// A transition matrix: `n` steps of the generator at once (the n-th power of the step matrix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jump {
    m: [[u32; 5]; 5],
}

impl Jump {
    /// Zero steps.
    pub fn identity() -> Self {
        let mut m = [[0; 5]; 5];
        for (i, row) in m.iter_mut().enumerate() {
            row[i] = 1;
        }
        Self { m }
    }

    /// One step: the newest value is `X·z1 + Y·z5`, the others shift down by one.
    pub fn one_step() -> Self {
        let mut m = [[0; 5]; 5];
        m[0][0] = X as u32;
        m[0][4] = Y as u32;
        for i in 1..5 {
            m[i][i - 1] = 1;
        }
        Self { m }
    }

    /// `self` after `other`: the jump by the sum of both step counts.
    pub fn then(&self, other: &Jump) -> Self {
        let mut m = [[0; 5]; 5];
        for (i, row) in m.iter_mut().enumerate() {
            for (j, cell) in row.iter_mut().enumerate() {
                let mut acc = 0u64;
                for k in 0..5 {
                    acc += u64::from(reduce(u64::from(other.m[i][k]) * u64::from(self.m[k][j])));
                }
                *cell = reduce(acc);
            }
        }
        Self { m }
    }

    /// This jump repeated `times` times (square and multiply).
    pub fn repeat(&self, mut times: u64) -> Self {
        let mut result = Self::identity();
        let mut power = *self;
        while times > 0 {
            if times & 1 == 1 {
                result = result.then(&power);
            }
            power = power.then(&power);
            times >>= 1;
        }
        result
    }

    /// The jump by 2^k steps.
    pub fn pow2(k: u32) -> Self {
        let mut j = Self::one_step();
        for _ in 0..k {
            j = j.then(&j);
        }
        j
    }

    /// The jump by `high·2^128 + middle·2^64 + low` steps, the reference's 192-bit skip count.
    pub fn by(high: u64, middle: u64, low: u64) -> Self {
        let step = Self::one_step();
        let s64 = Self::pow2(64);
        let s128 = Self::pow2(128);
        s128.repeat(high)
            .then(&s64.repeat(middle))
            .then(&step.repeat(low))
    }

    #[inline(always)]
    fn apply(&self, z: &[u32; 5]) -> [u32; 5] {
        let mut out = [0u32; 5];
        for (o, row) in out.iter_mut().zip(&self.m) {
            // Each folded product is below 2^32, so five of them cannot overflow.
            let mut acc = 0u64;
            for (&a, &b) in row.iter().zip(z) {
                let p = u64::from(a) * u64::from(b);
                acc += (p & P) + (p >> 31);
            }
            *o = reduce(acc);
        }
        out
    }
}

/// The most values [`MrgLanes::peek`] returns per lane.
pub const MAX_PEEK: usize = 40;

/// `L` independent streams side by side (structure of arrays), so that stepping or jumping all
/// of them is the same arithmetic on `L` lanes, which the compiler can vectorise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrgLanes<const L: usize> {
    /// `z[k][lane]`, `k = 0` newest.
    z: [[u32; L]; 5],
}

impl<const L: usize> MrgLanes<L> {
    /// The lanes holding these states.
    #[inline(always)]
    pub fn from_states(states: &[MrgState; L]) -> Self {
        Self {
            z: std::array::from_fn(|k| std::array::from_fn(|l| states[l].z[k])),
        }
    }

    /// The state of one lane.
    #[inline(always)]
    pub fn lane(&self, l: usize) -> MrgState {
        MrgState {
            z: std::array::from_fn(|k| self.z[k][l]),
        }
    }

    /// Applies the same jump to every lane.
    #[inline(always)]
    pub fn jump(&mut self, jump: &Jump) {
        let mut out = [[0u32; L]; 5];
        for (o, row) in out.iter_mut().zip(&jump.m) {
            let mut acc = [0u64; L];
            for (&a, zk) in row.iter().zip(&self.z) {
                for (acc, &b) in acc.iter_mut().zip(zk) {
                    let p = u64::from(a) * u64::from(b);
                    *acc += (p & P) + (p >> 31);
                }
            }
            for (o, &acc) in o.iter_mut().zip(&acc) {
                *o = reduce(acc);
            }
        }
        self.z = out;
    }

    /// The next `out.len()` values of every lane (`out[i][lane]`, as [`MrgState::next_u31`]
    /// would return them), without advancing the lanes.
    ///
    /// # Panics
    /// If more than [`MAX_PEEK`] values are asked for.
    #[inline(always)]
    pub fn peek(&self, out: &mut [[u32; L]]) {
        assert!(out.len() <= MAX_PEEK, "at most {MAX_PEEK} values per lane");
        // seq[0..5] is the history, oldest first; seq[5 + i] is the i-th new value.
        let mut seq = [[0u32; L]; MAX_PEEK + 5];
        for (k, history) in seq[..5].iter_mut().enumerate() {
            *history = self.z[4 - k];
        }
        for i in 0..out.len() {
            let (prev5, prev1) = (seq[i], seq[i + 4]);
            let mut next = [0u32; L];
            for l in 0..L {
                next[l] = reduce_small(X * u64::from(prev1[l]) + Y * u64::from(prev5[l]));
            }
            seq[i + 5] = next;
        }
        out.copy_from_slice(&seq[5..5 + out.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_agree_with_single_steps() {
        let start = MrgState::from_user_seeds(2, 3);
        let mut walked = start;
        for _ in 0..1000 {
            walked.next_u31();
        }
        let mut jumped = start;
        jumped.jump(&Jump::by(0, 0, 1000));
        assert_eq!(walked, jumped);
        let mut split = start;
        split.jump(&Jump::by(0, 0, 999));
        split.jump(&Jump::one_step());
        assert_eq!(walked, split);
    }

    #[test]
    fn the_step_matrix_has_the_full_period() {
        // A maximal-period recurrence of order 5 modulo p repeats after p^5 − 1 steps, so the
        // step matrix to that power is the identity: p^5 − 1 = (p − 1)(p^4 + p^3 + p^2 + p + 1).
        let p = u64::from(MODULUS);
        let a = Jump::one_step().repeat(p - 1);
        let c1 = a.repeat(p);
        let c2 = c1.repeat(p);
        let c3 = c2.repeat(p);
        let c4 = c3.repeat(p);
        assert_eq!(c4.then(&c3).then(&c2).then(&c1).then(&a), Jump::identity());
        assert_ne!(a, Jump::identity());
    }

    #[test]
    fn lanes_agree_with_single_streams() {
        let states: [MrgState; 4] = std::array::from_fn(|i| {
            let mut s = MrgState::from_user_seeds(2, 3);
            s.jump(&Jump::by(0, i as u64, 0));
            s
        });
        let mut lanes = MrgLanes::from_states(&states);
        let mut out = [[0u32; 4]; 12];
        lanes.peek(&mut out);
        for (l, s) in states.iter().enumerate() {
            let mut s = *s;
            for row in &out {
                assert_eq!(row[l], s.next_u31());
            }
        }
        let j = Jump::by(0, 3, 5);
        lanes.jump(&j);
        for (l, s) in states.iter().enumerate() {
            let mut s = *s;
            s.jump(&j);
            assert_eq!(lanes.lane(l), s);
        }
    }

    #[test]
    fn user_seeds_spread_into_nonzero_residues() {
        let s = MrgState::from_user_seeds(2, 3);
        assert_eq!(s.residues(), [3, 1, 4, 1, 1]);
    }
}
