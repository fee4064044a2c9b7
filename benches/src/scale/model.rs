//! The cost model of `gsm-bench scale`: peak RSS of one rank against its worker count `w`, fitted
//! by least squares to `a + b·w + c·w²`, and what it says of a rank in a job of many hosts.
//!
//! Why that shape: `a` is what a rank costs with no workers (the binary, the runtime's tables),
//! `b·w` what each worker adds of its own (its thread and fiber stacks, its tables), and `c·w²`
//! what each ordered pair of the rank's workers adds (a slot and two ring places each, and the
//! rings of the pairs that talked). In a job of many ranks a rank of `L` workers adds, by
//! formula ([`places`], ARCHITECTURE.md section 9): per local worker a slot per block of 128
//! workers of the job and the queues of the peers it talks to, per rank a bell per worker of the
//! job, and the rings tcp makes at start to every remote worker (`remote.rs`). [`Prediction`]
//! prints these for a worker that talks to `k` peers and for all-to-all, beside main's figures
//! before issue 47 (a place for every worker of the job). This module fits and predicts; it
//! measures nothing.

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

/// What a rank keeps for the workers of the job besides rings (bytes; the sizes of
/// `libgsm/src/worker/places.rs` and `outbox.rs`, which `worker/places_tests.rs` bounds).
pub mod places {
    use gossamer::fabric::Bell;
    use gossamer::wire::ring::{Consumer, Producer};

    /// Main before issue 47: every worker kept queues and ring places for every worker of the
    /// job (the fitted pair term of one rank, 1.3 KiB).
    pub const PER_JOB_WORKER_MAIN: f64 = 1331.0;
    /// A slot of the places table: a pointer.
    pub const SLOT: f64 = 8.0;
    /// Global ids per block of that table.
    pub const BLOCK: f64 = 128.0;
    /// A peer's queues in the outbox, made on first use (two staging queues, their first
    /// buffers and a bell: 752 bytes of queues in this build).
    pub const PER_PEER: f64 = 850.0;
    /// Per worker of the job, once per rank: the rank's bell for it (`Shared::bells`) and
    /// tcp's (a closure).
    pub const PER_JOB_WORKER_RANK: f64 = 112.0;

    /// Per remote worker a fabric made rings to at start, main and now alike: two producer ends
    /// and a bell, two boxed consumer ends and the inbox's entry for them (two ring places and
    /// two large records being reassembled, about 200 bytes).
    pub fn per_remote_ring_pair() -> f64 {
        let ends = 2 * std::mem::size_of::<Producer>()
            + 2 * std::mem::size_of::<Consumer>()
            + std::mem::size_of::<Option<Bell>>();
        ends as f64 + 200.0
    }
}

/// A rank of a job of many hosts, one rank of `workers` workers per host, tcp between hosts,
/// in which each worker talks to `peers` workers of other hosts (`None`: to every worker).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    pub hosts: u64,
    /// Workers of the rank (and of each host).
    pub workers: u64,
    /// Remote workers each worker talks to; `None`: all of them (all-to-all).
    pub peers: Option<u64>,
    /// The fitted one-rank model at `L` workers, `a + b·L + c·L²` (its pair term is now the
    /// rank's own pairs: places and the rings of the pairs that talked).
    pub model_bytes: f64,
    /// Places for the workers of the job on main before issue 47: `1.3 KiB · L · W`, and a bell
    /// per worker of the job per rank (unchanged).
    pub places_main: f64,
    /// Places now: per local worker a slot per block of 128 global ids and the queues of each
    /// peer it talked to (with a block's slots per peer at worst), and the rank's bells.
    pub places_now: f64,
    /// tcp's rings, their ends and connection buffers, made at start (main and now): an
    /// incoming and a shadow ring per (local worker, remote worker) and lane, `4·L·(W − L)·R`,
    /// and the ends and inbox entry of each such pair.
    pub rings_at_start: f64,
    /// The same if tcp made its rings on first use (not done): `4·L·k·R` and `k` pairs of ends
    /// for `k` peers.
    pub rings_on_use: f64,
    /// tcp connections of the rank, as built (one per local worker and remote host).
    pub connections: u64,
}

impl Prediction {
    /// What the rank costs now: the fitted one-rank model, the places for other ranks' workers,
    /// the rings made at start.
    pub fn now(&self) -> f64 {
        self.model_bytes + self.places_now + self.rings_at_start
    }

    /// What it cost on main: the same rings, places for every worker of the job.
    pub fn main(&self) -> f64 {
        self.model_bytes + self.places_main + self.rings_at_start
    }
}

/// [`Prediction`] for `hosts` hosts of one rank of `workers` workers, rings of `ring_bytes`,
/// each worker talking to `peers` remote workers (`None`: all of them).
pub fn predict(
    fit: Option<&Fit>,
    hosts: u64,
    workers: u64,
    ring_bytes: u64,
    peers: Option<u64>,
) -> Prediction {
    use places::*;
    let (l, w) = (workers as f64, (hosts * workers) as f64);
    let remote = (hosts - 1) * workers;
    let k = peers.unwrap_or(remote).min(remote);
    let conns = crate::remote::connections(hosts, 1, workers, ring_bytes);
    let buffers = crate::remote::connections(hosts, 1, workers, 0).bytes_per_host;
    // Per local worker: the block table, the queues of its k peers, and a block's slots for
    // each of them (at worst one block per peer, at most every block).
    let blocks_touched = (k as f64).min((w / BLOCK).ceil());
    let per_worker =
        SLOT * (w / BLOCK).ceil() + PER_PEER * k as f64 + SLOT * BLOCK * blocks_touched;
    let bells = PER_JOB_WORKER_RANK * w;
    let ends = |pairs: u64| per_remote_ring_pair() * (workers * pairs) as f64;
    Prediction {
        hosts,
        workers,
        peers,
        model_bytes: fit.map_or(f64::NAN, |f| f.at(l)),
        places_main: PER_JOB_WORKER_MAIN * l * w + bells,
        places_now: l * per_worker + bells,
        rings_at_start: conns.bytes_per_host as f64 + ends(remote),
        rings_on_use: (4 * workers * k * ring_bytes + buffers) as f64 + ends(k),
        connections: conns.per_host,
    }
}

#[cfg(test)]
mod tests;
