//! The cost model of `gsm-bench scale`: peak RSS of one rank against its worker count `w`, fitted
//! by least squares to `a + b·w + c·w²`, and what it says of a rank in a job of many hosts.
//!
//! Why that shape: `a` is what a rank costs with no workers (the binary, the runtime's tables),
//! `b·w` what each worker adds of its own (its thread and fiber stacks, its tables), and `c·w²`
//! what each ordered pair of workers adds (today: a request and a response ring). In a job of
//! `W` workers a rank of `L` workers pays the pair term for every (local worker, job worker)
//! pair, `c·L·W`; [`Prediction`] prints that beside what the runtime's ring sizes and tcp
//! connections give by formula (`remote.rs`), so a change of design shows in both. This module
//! fits and predicts; it measures nothing.

use serde::Serialize;

/// A fitted `a + b·w + c·w²` (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fit {
    /// Bytes of a rank with no workers.
    pub a: f64,
    /// Bytes per worker.
    pub b: f64,
    /// Bytes per ordered pair of workers.
    pub c: f64,
    /// The largest residual over the fitted points, relative to the point's value.
    pub max_rel_residual: f64,
}

impl Fit {
    /// The model's bytes at `w` workers.
    pub fn at(&self, w: f64) -> f64 {
        self.a + self.b * w + self.c * w * w
    }
}

/// The least-squares fit of `a + b·w + c·w²` to `points` (`(w, bytes)`), `None` with fewer than
/// three distinct `w` (the system is then singular).
pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let mut ws: Vec<f64> = points.iter().map(|p| p.0).collect();
    ws.sort_by(f64::total_cmp);
    ws.dedup();
    if ws.len() < 3 {
        return None;
    }
    // Scale w to about 1 so that the normal equations (sums up to w⁴) stay well conditioned.
    let s = ws.last().copied().unwrap_or(1.0).max(1.0);
    let mut m = [[0.0f64; 4]; 3];
    for &(w, y) in points {
        let x = [1.0, w / s, (w / s) * (w / s)];
        for (row, xi) in m.iter_mut().zip(x) {
            for (cell, xj) in row.iter_mut().zip(x) {
                *cell += xi * xj;
            }
            row[3] += xi * y;
        }
    }
    let [a, b, c] = solve3(m)?;
    let mut f = Fit {
        a,
        b: b / s,
        c: c / (s * s),
        max_rel_residual: 0.0,
    };
    f.max_rel_residual = points
        .iter()
        .map(|&(w, y)| ((f.at(w) - y) / y.abs().max(1.0)).abs())
        .fold(0.0, f64::max);
    Some(f)
}

/// Gaussian elimination with partial pivoting of an augmented 3×3 system.
fn solve3(mut m: [[f64; 4]; 3]) -> Option<[f64; 3]> {
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col];
        for (i, row) in m.iter_mut().enumerate() {
            if i != col {
                let k = row[col] / pivot_row[col];
                for (cell, p) in row.iter_mut().zip(pivot_row).skip(col) {
                    *cell -= k * p;
                }
            }
        }
    }
    Some([m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]])
}

/// A rank of a job of many hosts, one rank of `workers` workers per host, tcp between hosts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    pub hosts: u64,
    /// Workers of the rank (and of each host).
    pub workers: u64,
    /// The fitted model with its pair term over every (local worker, job worker) pair:
    /// `a + b·L + c·L·W`.
    pub model_bytes: f64,
    /// The rings and connection buffers the runtime's ring geometry and tcp fabric give by
    /// formula at start: an incoming and a shadow ring per (local worker, remote worker) and
    /// lane, a read and a write buffer per connection. Rings between the rank's own workers are
    /// made on first use and not counted: a program that talks over P of those ordered pairs
    /// adds 2·P rings.
    pub computed_bytes: u64,
    /// tcp connections of the rank, as built (one per local worker and remote host).
    pub connections: u64,
}

/// [`Prediction`] for `hosts` hosts of one rank of `workers` workers, rings of `ring_bytes`.
pub fn predict(fit: Option<&Fit>, hosts: u64, workers: u64, ring_bytes: u64) -> Prediction {
    let (l, w) = (workers as f64, (hosts * workers) as f64);
    let conns = crate::remote::connections(hosts, 1, workers, ring_bytes);
    Prediction {
        hosts,
        workers,
        model_bytes: fit.map_or(f64::NAN, |f| f.a + f.b * l + f.c * l * w),
        computed_bytes: conns.bytes_per_host,
        connections: conns.per_host,
    }
}

#[cfg(test)]
mod tests;
