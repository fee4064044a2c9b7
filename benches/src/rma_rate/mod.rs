//! `gsm-bench rma-rate`: the Gossamer thesis's figures 12 and 13, RMA write rate of 32-byte and
//! 256-byte writes for a quadratic number of endpoints (one per pair of workers, as one RC queue
//! pair per worker pair) against a reduced one (one endpoint per (worker, remote host), which
//! reaches every worker of that host), over libfabric (`GSM_OFI_PROVIDER`, e.g. `tcp;ofi_rxm`).
//!
//! ```text
//! gsm-bench rma-rate --two-hosts [--workers W] [--runs N] [--budget-ms B]   # as root
//! GSM_OFI_PROVIDER='tcp;ofi_rxm' gsmrun -np 2 --oversubscribe gsm-bench rma-rate
//! ```
//!
//! Two ranks, one per host, each with `--workers` threads (default 2). Every thread writes to
//! every worker of the other rank in turn, both ranks at once, up to 64 writes in flight per
//! thread (shared by its endpoints), for `--budget-ms` after a warm-up of a fifth of it (which makes the provider's
//! connections); the figure is the writes both ranks completed per second (Mops), median of
//! `--runs`. In the quadratic set-up a thread drives `W` endpoints (one per remote worker), each
//! with its own completion queue; in the reduced one, a single endpoint. The two set-ups
//! alternate within each run. The header prints endpoints (and the provider's connections) per
//! rank for 2, 64 and 1,024 hosts × 16 workers, against the `ofi` fabric's one endpoint per
//! rank. The endpoints are `gossamer::fabric::ofi::RmaEndpoint`s; `writers.rs` drives them.

use crate::case::{Case, Figure};
use crate::report::RankReport;
use crate::stats::summarize;
use gossamer::fabric::ofi::RmaEndpoint;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::time::{Duration, Instant};
use writers::{Writer, write_for};

mod writers;

/// Options of `gsm-bench rma-rate`.
#[derive(Debug, Clone)]
pub struct Options {
    pub runs: usize,
    pub budget: Duration,
    pub workers: usize,
}

/// Write sizes of figures 12 and 13.
const SIZES: [usize; 2] = [32, 256];
/// Bytes each endpoint registers for peers to write into.
const REGION: usize = 4096;
/// Bytes per exchanged address (padded).
const ADDR: usize = 512;

/// Endpoints per thread: one per remote worker, or one for them all.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Setup {
    PerPair,
    PerHost,
}

/// Opens, exchanges and connects one set-up's endpoints: `eps[i]` are thread `i`'s.
fn connect(world: &SimpleCommunicator, w: usize, setup: Setup) -> anyhow::Result<Vec<Vec<Writer>>> {
    let per = if setup == Setup::PerPair { w } else { 1 };
    let mut eps: Vec<Vec<Writer>> = (0..w)
        .map(|_| {
            (0..per)
                .map(|_| RmaEndpoint::open(REGION).map(Writer::new))
                .collect()
        })
        .collect::<Result<_, _>>()?;
    let mut mine = vec![0u8; w * per * ADDR];
    for (i, row) in eps.iter().enumerate() {
        for (k, e) in row.iter().enumerate() {
            let a = e.endpoint().address()?;
            anyhow::ensure!(
                a.len() + 4 <= ADDR,
                "an endpoint address of {} bytes",
                a.len()
            );
            let at = (i * per + k) * ADDR;
            mine[at..at + 4].copy_from_slice(&(a.len() as u32).to_le_bytes());
            mine[at + 4..at + 4 + a.len()].copy_from_slice(&a);
        }
    }
    let mut all = vec![0u8; mine.len() * world.size() as usize];
    world.all_gather_into(&mine[..], &mut all[..]);
    let peer = 1 - world.rank() as usize;
    let theirs = &all[peer * mine.len()..(peer + 1) * mine.len()];
    let addr = |i: usize, k: usize| -> &[u8] {
        let at = (i * per + k) * ADDR;
        let n = u32::from_le_bytes(theirs[at..at + 4].try_into().unwrap_or([0; 4])) as usize;
        &theirs[at + 4..at + 4 + n.min(ADDR - 4)]
    };
    for (i, row) in eps.iter_mut().enumerate() {
        for j in 0..w {
            let (k, theirs) = match setup {
                // Local thread i's endpoint j talks to remote thread j's endpoint i only.
                Setup::PerPair => (j, addr(j, i)),
                Setup::PerHost => (0, addr(j, 0)),
            };
            row[k].endpoint_mut().connect(theirs)?;
        }
    }
    Ok(eps)
}

/// One timed phase on every thread at once (after a barrier); writes completed on this rank.
fn phase(
    world: &SimpleCommunicator,
    eps: &mut [Vec<Writer>],
    size: usize,
    d: Duration,
) -> anyhow::Result<u64> {
    world.barrier();
    let until = Instant::now() + d;
    let done: Vec<anyhow::Result<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = eps
            .iter_mut()
            .map(|row| s.spawn(move || write_for(row, size, until).map_err(anyhow::Error::from)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a writer panicked")))
            })
            .collect()
    });
    done.into_iter().sum()
}

/// Writes per second of both ranks (Mops) for one set-up and size.
fn rate(
    world: &SimpleCommunicator,
    eps: &mut [Vec<Writer>],
    size: usize,
    budget: Duration,
) -> anyhow::Result<f64> {
    phase(world, eps, size, budget / 5)?;
    let start = Instant::now();
    let n = phase(world, eps, size, budget)?;
    let secs = start.elapsed().as_secs_f64();
    let mut both = vec![0u64; world.size() as usize];
    world.all_gather_into(&n, &mut both[..]);
    Ok(both.iter().sum::<u64>() as f64 / secs / 1e6)
}

/// The endpoints-per-rank table for 16 workers per host, one rank per host.
fn endpoint_table(w: usize) -> String {
    let mut out = format!(
        "endpoints per rank (computed, 16 workers per host, one rank per host; this run: {w} \
         workers per host, 2 hosts):\n"
    );
    for hosts in [2u64, 64, 1024] {
        let (w, peers) = (16u64, hosts - 1);
        out += &format!(
            "  {hosts:>5} hosts: per worker pair {:>7} endpoints ({:>7} connections); per \
             (worker, host) {:>3} endpoints ({:>6} connections); ofi fabric 1 endpoint ({:>5} \
             connections)\n",
            w * w * peers,
            w * w * peers,
            w,
            w * peers,
            peers
        );
    }
    out
}

pub fn run(opts: &Options, json: Option<&std::path::Path>) -> anyhow::Result<bool> {
    crate::report::mpi_job(json, |world| run_in(world, opts))
}

fn run_in(world: &SimpleCommunicator, opts: &Options) -> anyhow::Result<Option<RankReport>> {
    anyhow::ensure!(
        world.size() == 2,
        "`gsm-bench rma-rate` needs exactly 2 ranks (one per host), this job has {}",
        world.size()
    );
    let w = opts.workers;
    let mut pair = connect(world, w, Setup::PerPair)?;
    let mut host = connect(world, w, Setup::PerHost)?;
    let provider = pair[0][0].endpoint().provider().to_string();
    let mut samples: Vec<[Vec<f64>; 2]> = SIZES.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    for run in 0..opts.runs {
        if world.rank() == 0 {
            crate::report::run_progress("rma-rate", run, opts.runs);
        }
        for (s, &size) in SIZES.iter().enumerate() {
            samples[s][0].push(rate(world, &mut pair, size, opts.budget)?);
            samples[s][1].push(rate(world, &mut host, size, opts.budget)?);
        }
    }
    if world.rank() != 0 {
        return Ok(None);
    }
    crate::report::progress_done();
    let cases = SIZES
        .iter()
        .enumerate()
        .map(|(s, size)| Case {
            case: format!("RMA write rate, {size} B, one endpoint per (worker, host)"),
            unit: "Mops".into(),
            higher_is_better: true,
            gsm: summarize(&samples[s][1]),
            peers: vec![Figure {
                name: "one endpoint per worker pair (quadratic)".into(),
                summary: summarize(&samples[s][0]),
            }],
        })
        .collect();
    let header = format!(
        "gsm-bench rma-rate: 2 ranks × {w} writer threads, provider {provider}, {} runs of {} ms \
         per figure, up to 64 writes in flight per thread\n{}",
        opts.runs,
        opts.budget.as_millis(),
        endpoint_table(w)
    );
    Ok(Some(RankReport { cases, header }))
}
