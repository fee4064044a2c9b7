//! `gsm-bench collectives --curve`: bandwidth against message size, 8 B to 64 MiB, Gossamer
//! beside MPI in the same job, for allreduce, broadcast and a point-to-point message.
//!
//! ```text
//! gsm-bench collectives --two-hosts --curve [--runs N] [--plot DIR]   # as root, two namespace hosts
//! gsmrun -np 2 gsm-bench collectives --curve [--runs N] [--plot DIR]  # one host
//! ```
//!
//! **Cases**, each at 8 B and 16 B × 4^k up to 64 MiB (`--quick`: up to 1 MiB), on the world team of
//! 1 worker per rank against the job's MPI ranks:
//! - *allreduce*: `f64` sums of the size (`Team::allreduce` against `MPI_Allreduce`);
//! - *broadcast*: bytes from rank 0 (`Team::broadcast` against `MPI_Bcast`);
//! - *point-to-point*: a ping-pong of a byte vector between ranks 0 and 1, one-way time as half
//!   the round trip (`gossamer::send`/`recv` of a `Vec<u8>`, one record each way, against
//!   `MPI_Send`/`MPI_Recv`).
//!
//! Each figure is the size over the time per operation (a loop of operations and one closing
//! barrier after a warm-up, as the other cases of `collectives.rs`), in Gbit/s; medians of
//! `--runs`. With `--plot DIR`, one line chart per operation (`collectives-curve-<op>.svg`,
//! both axes logarithmic) besides the usual bars. It does not choose algorithms: each side runs
//! its defaults.

use crate::case::{Case, Figure};
use crate::report::RankReport;
use crate::stats::summarize;
use gossamer::{Config, WorkerId, workers_of_rank};
use gsm_collectives::Team;
use gsm_collectives::op::Sum;
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::collections::BTreeMap;
use std::time::Instant;

/// The operations of the curve, in the order of the table.
const OPS: [&str; 3] = ["allreduce", "broadcast", "point-to-point"];

/// The tag of the ping-pong's messages (below the collectives' reserved top bit).
const PING: u64 = 0x5043_5552_5645;

/// The sizes of the curve: 8 B, then 16 B × 4^k up to 64 MiB (1 MiB when `quick`).
fn sizes(quick: bool) -> Vec<usize> {
    let top = if quick { 1 << 20 } else { 64 << 20 };
    std::iter::once(8)
        .chain(std::iter::successors(Some(16usize), |s| Some(s * 4)))
        .take_while(|&s| s <= top)
        .collect()
}

/// Operations per timed loop: about 64 MiB moved (4 MiB when `quick`), between 3 and 2,000.
fn iters(bytes: usize, quick: bool) -> usize {
    let budget = if quick { 4 << 20 } else { 64 << 20 };
    (budget / bytes).clamp(3, if quick { 50 } else { 2000 })
}

/// Times `iters` calls of `op` and a closing `barrier`, after a warm-up of a tenth; seconds per call.
fn time(iters: usize, mut barrier: impl FnMut(), mut op: impl FnMut()) -> f64 {
    for _ in 0..iters.div_ceil(10) {
        op();
    }
    barrier();
    let start = Instant::now();
    for _ in 0..iters {
        op();
    }
    barrier();
    start.elapsed().as_secs_f64() / iters as f64
}

fn gbits(bytes: usize, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs / 1e9
}

/// MPI's figure for operation `op` at `bytes`, Gbit/s.
fn mpi_point(world: &SimpleCommunicator, op: &str, bytes: usize, quick: bool) -> f64 {
    let it = iters(bytes, quick);
    let bar = || world.barrier();
    let me = world.rank();
    let secs = match op {
        "allreduce" => {
            let send = vec![1.0f64; bytes / 8];
            let mut recv = vec![0.0f64; bytes / 8];
            time(it, bar, || {
                world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum())
            })
        }
        "broadcast" => {
            let mut buf = vec![me as u8; bytes];
            let root = world.process_at_rank(0);
            time(it, bar, || root.broadcast_into(&mut buf[..]))
        }
        _ => {
            let mut buf = vec![0u8; bytes];
            let round = time(it, bar, || match me {
                0 => {
                    world.process_at_rank(1).send(&buf[..]);
                    world.process_at_rank(1).receive_into(&mut buf[..]);
                }
                1 => {
                    world.process_at_rank(0).receive_into(&mut buf[..]);
                    world.process_at_rank(0).send(&buf[..]);
                }
                _ => {}
            });
            round / 2.0
        }
    };
    gbits(bytes, secs)
}

/// Gossamer's figure for operation `op` at `bytes` on `team` (1 worker per rank), Gbit/s.
fn gsm_point(team: &Team, op: &str, bytes: usize, quick: bool) -> f64 {
    let it = iters(bytes, quick);
    let bar = || team.barrier();
    let me = gossamer::rank();
    let first = |r: usize| WorkerId::new(workers_of_rank(r).start);
    let secs = match op {
        "allreduce" => {
            let send = vec![1.0f64; bytes / 8];
            let mut recv = vec![0.0f64; bytes / 8];
            let t = time(it, bar, || team.allreduce(&send, &mut recv, Sum).unwrap());
            assert_eq!(recv[0], team.size() as f64, "gsm allreduce");
            t
        }
        "broadcast" => {
            let mut buf = vec![team.index() as u8; bytes];
            time(it, bar, || team.broadcast(&mut buf, 0).unwrap())
        }
        _ => {
            let mut held = Some(vec![me as u8; bytes]);
            let round = time(it, bar, || match me {
                0 => {
                    gossamer::send(first(1), PING, held.take().expect("the vector is back"));
                    held = Some(gossamer::recv::<Vec<u8>>(first(1), PING));
                }
                1 => {
                    let v: Vec<u8> = gossamer::recv(first(0), PING);
                    gossamer::send(first(0), PING, v);
                }
                _ => {}
            });
            round / 2.0
        }
    };
    gbits(bytes, secs)
}

/// One `gossamer::spmd` of 1 worker per rank: every point, on rank 0.
fn gsm_once(quick: bool) -> anyhow::Result<Vec<f64>> {
    let config = Config::from_env()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .workers(1);
    let out = gossamer::spmd(config, move |w| {
        let team = Team::world();
        let mut figures = Vec::new();
        for op in OPS {
            for bytes in sizes(quick) {
                figures.push(gsm_point(&team, op, bytes, quick));
            }
        }
        team.barrier();
        (w.id() == 0).then_some(figures)
    })
    .map_err(|e| anyhow::anyhow!("the gossamer runtime failed: {e}"))?;
    Ok(out.into_iter().flatten().next().unwrap_or_default())
}

fn size_text(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The curve: every point of every operation, `runs` times (MPI then Gossamer each time);
/// rank 0's report, and with `--plot DIR` one line chart per operation.
pub fn run(
    world: &SimpleCommunicator,
    runs: usize,
    quick: bool,
) -> anyhow::Result<Option<RankReport>> {
    anyhow::ensure!(
        world.size() >= 2,
        "`collectives --curve` needs 2 ranks (its point-to-point case runs between ranks 0 and 1)"
    );
    let points: Vec<(&str, usize)> = OPS
        .iter()
        .flat_map(|&op| sizes(quick).into_iter().map(move |b| (op, b)))
        .collect();
    let mut samples: BTreeMap<(usize, usize), Vec<f64>> = BTreeMap::new();
    for run in 0..runs {
        if world.rank() == 0 {
            crate::report::run_progress("collectives --curve", run, runs);
        }
        for (i, &(op, bytes)) in points.iter().enumerate() {
            let g = mpi_point(world, op, bytes, quick);
            samples.entry((0, i)).or_default().push(g);
        }
        for (i, g) in gsm_once(quick)?.into_iter().enumerate() {
            samples.entry((1, i)).or_default().push(g);
        }
    }
    if world.rank() != 0 {
        return Ok(None);
    }
    crate::report::progress_done();
    let s = |k: (usize, usize)| samples.get(&k).and_then(|v| summarize(v));
    let cases: Vec<Case> = points
        .iter()
        .enumerate()
        .map(|(i, &(op, bytes))| Case {
            case: format!("{op} {}", size_text(bytes)),
            unit: "Gbit/s".into(),
            higher_is_better: true,
            gsm: s((1, i)),
            peers: vec![Figure {
                name: format!("MPI, {} ranks", world.size()),
                summary: s((0, i)),
            }],
        })
        .collect();
    if let Some(dir) = crate::report::plot_dir() {
        plot(dir, &cases, &points)?;
    }
    let fabric = gsm_contract::value::<&str>(&gsm_contract::table::FABRIC);
    let btl = std::env::var("OMPI_MCA_btl").unwrap_or_else(|_| "default".into());
    Ok(Some(RankReport {
        header: format!(
            "gsm-bench collectives: {} ranks x 1 worker, bandwidth against size (--curve), gsm \
             fabric {fabric}, MPI btl {btl}; Gbit/s (bytes of one operation per rank over its \
             time), higher is better\n",
            world.size()
        ),
        cases,
    }))
}

/// One line chart per operation: Gbit/s against bytes, Gossamer and MPI.
fn plot(dir: &std::path::Path, cases: &[Case], points: &[(&str, usize)]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("creating the plot directory {}: {e}", dir.display()))?;
    for op in OPS {
        let series_of = |name: &str, pick: &dyn Fn(&Case) -> Option<f64>| crate::plot::Series {
            name: name.to_string(),
            points: points
                .iter()
                .zip(cases)
                .filter(|((o, _), _)| *o == op)
                .filter_map(|((_, b), c)| pick(c).map(|g| (*b as f64, g)))
                .collect(),
        };
        let series = [
            series_of("Gossamer", &|c| c.gsm.map(|s| s.median)),
            series_of("MPI", &|c| c.peers[0].summary.map(|s| s.median)),
        ];
        let path = dir.join(format!("collectives-curve-{}.svg", crate::plot::slug(op)));
        crate::plot::lines(
            &path,
            &format!("{op}: bandwidth against size (medians)"),
            "bytes per operation (log)",
            "Gbit/s (log)",
            &series,
            true,
        )?;
        println!("(chart: {})", path.display());
    }
    Ok(())
}
