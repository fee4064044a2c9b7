//! `gsm-bench collectives`: `gsm-collectives` beside Open MPI's collectives, both measured in
//! the same job, the same processes, one after the other.
//!
//! ```text
//! gsmrun -np 2 gsm-bench collectives [--runs N] [--json FILE]
//! gsmrun -np 2 gsm-bench collectives --sweep        # the switch points of gsm_collectives::Tuning
//! gsmrun -np 2 gsm-bench collectives --curve        # bandwidth against size (`coll_curve.rs`)
//! ```
//!
//! **How the job is shared** (as in `remote.rs`): the program initialises MPI itself
//! (`FUNNELED`) before the first `gossamer::spmd`, so Gossamer joins that MPI; every repetition
//! first measures every MPI case with plain MPI calls from the main thread (no Gossamer worker
//! exists then), then one `gossamer::spmd` with 1 worker per rank measures every Gossamer case,
//! then one with 2 workers per rank.
//!
//! **Cases** (each figure: µs per operation, averaged over a loop of operations and one closing
//! barrier, after a barrier and a warm-up of a tenth of the loop, timed on rank 0 (its first
//! worker); medians of `--runs` repetitions, at least 5): barrier; allreduce of 8 B, 1 KiB and
//! 1 MiB of `f64` sums; broadcast of 1 MiB from rank 0; allgather of 1 KiB per rank; alltoall
//! of 1 KiB per pair of ranks; and the 1 KiB allreduce once more after all of them (allgather
//! and alltoall run after the 1 MiB cases, and over tcp the small cases are slower there than
//! before them: the repeated row shows how much in the same run). The peer is the same MPI
//! collective (`MPI_Barrier`, `MPI_Allreduce`, `MPI_Bcast`, `MPI_Allgather`, `MPI_Alltoall`
//! through the `mpi` crate) on the job's ranks.
//! The *2 workers per rank* rows run the same operation on the world team of 2 × 2 workers
//! (oversubscribed on 2 cores), with the same bytes per rank (allgather: 512 B per worker;
//! alltoall: 256 B per pair of workers; reductions and broadcast: the whole vector on every
//! worker), beside the same 2-rank MPI figure: they show what the hierarchy costs over the
//! 1-worker rows, not a like-for-like MPI comparison (that would be 4 MPI ranks).
//!
//! **Overlap** (after the cases, in each `spmd`): a non-blocking 1 MiB allreduce
//! (`Team::allreduce_async`) issued, a fixed computation (sums over 512 KiB of `f64`, eight
//! times, yielding 64 times), then the wait; beside it the computation alone plus the blocking
//! allreduce, and each alone. The first below the sum is what the overlap hides. The
//! non-blocking collective takes the message path (never the host board), the blocking one the
//! board where it qualifies.
//!
//! `--sweep` instead times, for each switch point of `gsm_collectives::Tuning`, both algorithms
//! forced (allreduce: recursive doubling against the ring, 8 B to 4 MiB; broadcast: binomial
//! tree against the pipelined chain, 64 KiB to 4 MiB, which only differ with 3 or more ranks):
//! the default is the smallest size from which the second is not slower. Rows: gsm = the
//! second algorithm, peer = the first.
//!
//! Current figures and how to reproduce them are in docs/performance.md. Run it on a quiet
//! machine: under load the figures of both sides spread widely.

use crate::case::{Case, Figure};
use crate::report::RankReport;
use crate::stats::summarize;
use gossamer::Config;
use gsm_collectives::op::Sum;
use gsm_collectives::{Team, Tuning};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::collections::BTreeMap;
use std::time::Instant;

/// Options of `gsm-bench collectives`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repetitions per figure.
    pub runs: usize,
    /// Divide every loop by 20 (a smoke run for tests).
    pub quick: bool,
    /// Time the algorithms of each switch point instead of the cases.
    pub sweep: bool,
}

/// One case: what, bytes, and how many operations per timed loop.
#[derive(Debug, Clone, Copy)]
struct Spec {
    name: &'static str,
    op: OpKind,
    /// Bytes of the operation, per rank (see the module docs).
    bytes: usize,
    iters: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Barrier,
    Allreduce,
    Broadcast,
    Allgather,
    Alltoall,
}

const SPECS: [Spec; 8] = [
    Spec {
        name: "barrier",
        op: OpKind::Barrier,
        bytes: 0,
        iters: 4000,
    },
    Spec {
        name: "allreduce 8 B f64 sum",
        op: OpKind::Allreduce,
        bytes: 8,
        iters: 4000,
    },
    Spec {
        name: "allreduce 1 KiB f64 sum",
        op: OpKind::Allreduce,
        bytes: 1 << 10,
        iters: 2000,
    },
    Spec {
        name: "allreduce 1 MiB f64 sum",
        op: OpKind::Allreduce,
        bytes: 1 << 20,
        iters: 40,
    },
    Spec {
        name: "broadcast 1 MiB",
        op: OpKind::Broadcast,
        bytes: 1 << 20,
        iters: 40,
    },
    Spec {
        name: "allgather 1 KiB per rank",
        op: OpKind::Allgather,
        bytes: 1 << 10,
        iters: 2000,
    },
    Spec {
        name: "alltoall 1 KiB per pair of ranks",
        op: OpKind::Alltoall,
        bytes: 1 << 10,
        iters: 2000,
    },
    // After the 1 MiB cases, as allgather and alltoall are: the same operation as the 1 KiB
    // allreduce above, so that a run shows by itself what the large cases leave behind in the
    // fabric for the small ones.
    Spec {
        name: "allreduce 1 KiB f64 sum, after the 1 MiB cases",
        op: OpKind::Allreduce,
        bytes: 1 << 10,
        iters: 2000,
    },
];

fn iters(spec: &Spec, quick: bool) -> usize {
    if quick {
        (spec.iters / 20).max(2)
    } else {
        spec.iters
    }
}

/// Times `iters` calls of `op` and one barrier after them, after a warm-up of a tenth; µs per
/// call. The closing barrier makes the figure count until every member has finished the last
/// call: without it, a broadcast root that returns as soon as its data is on its way would be
/// timed alone.
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
    start.elapsed().as_secs_f64() * 1e6 / iters as f64
}

// ---------------------------------------------------------------------------------------------
// MPI.
// ---------------------------------------------------------------------------------------------

fn mpi_case(world: &SimpleCommunicator, spec: &Spec, quick: bool) -> f64 {
    let n = world.size() as usize;
    let it = iters(spec, quick);
    let f = (spec.bytes / 8).max(1);
    let bar = || world.barrier();
    match spec.op {
        OpKind::Barrier => time(it, bar, || world.barrier()),
        OpKind::Allreduce => {
            let send = vec![1.0f64; f];
            let mut recv = vec![0.0f64; f];
            let t = time(it, bar, || {
                world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum())
            });
            assert_eq!(recv[0], n as f64, "MPI allreduce");
            t
        }
        OpKind::Broadcast => {
            let mut buf = vec![world.rank() as u8; spec.bytes];
            let root = world.process_at_rank(0);
            time(it, bar, || root.broadcast_into(&mut buf[..]))
        }
        OpKind::Allgather => {
            let send = vec![1u8; spec.bytes];
            let mut recv = vec![0u8; spec.bytes * n];
            time(it, bar, || world.all_gather_into(&send[..], &mut recv[..]))
        }
        OpKind::Alltoall => {
            let send = vec![1u8; spec.bytes * n];
            let mut recv = vec![0u8; spec.bytes * n];
            time(it, bar, || world.all_to_all_into(&send[..], &mut recv[..]))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Gossamer.
// ---------------------------------------------------------------------------------------------

/// One case on `team` (every member calls it); µs per operation on this member.
fn gsm_case(team: &Team, spec: &Spec, quick: bool) -> f64 {
    let it = iters(spec, quick);
    let members = team.size();
    let per_rank = members / gossamer::rank_count();
    let f = (spec.bytes / 8).max(1);
    let bar = || team.barrier();
    match spec.op {
        OpKind::Barrier => time(it, bar, || team.barrier()),
        OpKind::Allreduce => {
            let send = vec![1.0f64; f];
            let mut recv = vec![0.0f64; f];
            let t = time(it, bar, || team.allreduce(&send, &mut recv, Sum).unwrap());
            assert_eq!(recv[0], members as f64, "gsm allreduce");
            t
        }
        OpKind::Broadcast => {
            let mut buf = vec![team.index() as u8; spec.bytes];
            time(it, bar, || team.broadcast(&mut buf, 0).unwrap())
        }
        OpKind::Allgather => {
            let k = spec.bytes / per_rank;
            let send = vec![1u8; k];
            let mut recv = vec![0u8; k * members];
            time(it, bar, || team.allgather(&send, &mut recv).unwrap())
        }
        OpKind::Alltoall => {
            let k = spec.bytes / (per_rank * per_rank);
            let send = vec![1u8; k * members];
            let mut recv = vec![0u8; k * members];
            time(it, bar, || team.alltoall(&send, &mut recv).unwrap())
        }
    }
}

/// The fixed computation of the overlap case: sums over a buffer, in [`CHUNKS`] pieces with a
/// yield after each, so that the worker serves a collective under way in between (a fiber that
/// computes without yielding keeps its worker from everything else, the runtime's rule).
const CHUNKS: usize = 64;

fn compute(buf: &[f64]) -> f64 {
    let piece = buf.len() / CHUNKS;
    let mut acc = 0.0;
    for c in buf.chunks(piece) {
        for _ in 0..8 {
            acc += std::hint::black_box(c).iter().sum::<f64>();
        }
        gossamer::yield_now();
    }
    acc
}

/// The overlap figures, µs per operation on this member: the computation alone, the blocking
/// 1 MiB allreduce alone, and `allreduce_async` issued, the computation, then the wait.
fn gsm_overlap(team: &Team, quick: bool) -> [f64; 3] {
    let it = if quick { 2 } else { 40 };
    let f = (1 << 20) / 8;
    let work = vec![1.0f64; 1 << 16];
    let bar = || team.barrier();
    let alone = time(it, bar, || {
        std::hint::black_box(compute(&work));
    });
    let send = vec![1.0f64; f];
    let mut recv = vec![0.0f64; f];
    let blocking = time(it, bar, || team.allreduce(&send, &mut recv, Sum).unwrap());
    // The buffer goes round: each result is the next contribution (the values grow, which does
    // not change the work).
    let mut buf = Some(vec![1.0f64; f]);
    let overlapped = time(it, bar, || {
        let p = team.allreduce_async(buf.take().unwrap_or_default(), Sum);
        std::hint::black_box(compute(&work));
        buf = Some(p.wait().unwrap());
    });
    [alone, blocking, overlapped]
}

/// One `gossamer::spmd` with `workers` per rank: every case, on rank 0's first worker, and
/// after them the overlap figures ([`gsm_overlap`]).
fn gsm_once(workers: usize, quick: bool) -> anyhow::Result<Vec<f64>> {
    let config = Config::from_env()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .workers(workers);
    let out = gossamer::spmd(config, move |w| {
        let team = Team::world();
        let mut figures: Vec<f64> = SPECS.iter().map(|s| gsm_case(&team, s, quick)).collect();
        figures.extend(gsm_overlap(&team, quick));
        team.barrier();
        (w.id() == 0).then_some(figures)
    })
    .map_err(|e| anyhow::anyhow!("the gossamer runtime failed: {e}"))?;
    Ok(out.into_iter().flatten().next().unwrap_or_default())
}

/// The sweep: for each size, both algorithms of a switch point forced; µs per operation.
fn sweep_once(quick: bool) -> anyhow::Result<Vec<(String, f64, f64)>> {
    let config = Config::from_env()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .workers(1);
    let out = gossamer::spmd(config, move |w| {
        let world = Team::world();
        let with = |t: Tuning| world.dup().with_tuning(t);
        // The message algorithms' switches are swept with the board off; the board's own
        // switch (steps against single copies) with it on.
        let base = Tuning {
            board: false,
            ..Tuning::default()
        };
        let steps = with(Tuning {
            copy_min: usize::MAX,
            ..Tuning::default()
        });
        let copies = with(Tuning {
            copy_min: 0,
            ..Tuning::default()
        });
        let rd = with(Tuning {
            allreduce_ring_min: usize::MAX,
            ..base
        });
        let ring = with(Tuning {
            allreduce_ring_min: 0,
            ..base
        });
        let tree = with(Tuning {
            bcast_pipeline_min: usize::MAX,
            ..base
        });
        let chain = with(Tuning {
            bcast_pipeline_min: 0,
            ..base
        });
        let mut rows = Vec::new();
        for shift in [3, 6, 10, 12, 14, 16, 17, 18, 19, 20, 22] {
            let bytes = 1usize << shift;
            let it = if quick {
                3
            } else {
                (4_000_000 >> shift).clamp(20, 2000)
            };
            let send = vec![1.0f64; bytes / 8];
            let mut recv = vec![0.0f64; bytes / 8];
            let a = time(
                it,
                || world.barrier(),
                || rd.allreduce(&send, &mut recv, Sum).unwrap(),
            );
            let b = time(
                it,
                || world.barrier(),
                || ring.allreduce(&send, &mut recv, Sum).unwrap(),
            );
            rows.push((
                format!("allreduce {bytes} B: ring vs recursive doubling"),
                b,
                a,
            ));
        }
        for shift in [16, 18, 20, 22] {
            let bytes = 1usize << shift;
            let it = if quick { 3 } else { 40 };
            let mut buf = vec![0u8; bytes];
            let a = time(
                it,
                || world.barrier(),
                || tree.broadcast(&mut buf, 0).unwrap(),
            );
            let b = time(
                it,
                || world.barrier(),
                || chain.broadcast(&mut buf, 0).unwrap(),
            );
            rows.push((format!("broadcast {bytes} B: chain vs binomial"), b, a));
        }
        for shift in [10, 12, 13, 14, 15, 16, 18, 20, 22] {
            let bytes = 1usize << shift;
            let it = if quick { 3 } else { 100 };
            let send = vec![1.0f64; bytes / 8];
            let mut recv = vec![0.0f64; bytes / 8];
            let a = time(
                it,
                || world.barrier(),
                || steps.allreduce(&send, &mut recv, Sum).unwrap(),
            );
            let b = time(
                it,
                || world.barrier(),
                || copies.allreduce(&send, &mut recv, Sum).unwrap(),
            );
            rows.push((format!("board allreduce {bytes} B: copies vs steps"), b, a));
            let a = time(
                it,
                || world.barrier(),
                || steps.broadcast(&mut recv, 0).unwrap(),
            );
            let b = time(
                it,
                || world.barrier(),
                || copies.broadcast(&mut recv, 0).unwrap(),
            );
            rows.push((format!("board broadcast {bytes} B: copies vs steps"), b, a));
        }
        world.barrier();
        (w.id() == 0).then_some(rows)
    })
    .map_err(|e| anyhow::anyhow!("the gossamer runtime failed: {e}"))?;
    Ok(out.into_iter().flatten().next().unwrap_or_default())
}

fn header(world: &SimpleCommunicator) -> String {
    let fabric = gsm_contract::value::<&str>(&gsm_contract::table::FABRIC);
    let btl = std::env::var("OMPI_MCA_btl").unwrap_or_else(|_| "default".into());
    format!(
        "gsm-bench collectives: {} ranks, gsm fabric {fabric}, MPI btl {btl}; µs per operation \
         on rank 0, lower is better; speedup = MPI / gsm\n",
        world.size()
    )
}

fn run_cases(world: &SimpleCommunicator, opts: &Options) -> anyhow::Result<Option<RankReport>> {
    let me = world.rank();
    let mut samples: BTreeMap<(usize, usize), Vec<f64>> = BTreeMap::new();
    for run in 0..opts.runs {
        if me == 0 {
            crate::report::run_progress("collectives", run, opts.runs);
        }
        for (i, spec) in SPECS.iter().enumerate() {
            let t = mpi_case(world, spec, opts.quick);
            samples.entry((0, i)).or_default().push(t);
        }
        for workers in [1, 2] {
            let figures = gsm_once(workers, opts.quick)?;
            if let [.., alone, blocking, _] = figures[..] {
                samples
                    .entry((workers, OVERLAP_SUM))
                    .or_default()
                    .push(alone + blocking);
            }
            for (i, t) in figures.into_iter().enumerate() {
                samples.entry((workers, i)).or_default().push(t);
            }
        }
    }
    if me != 0 {
        return Ok(None);
    }
    crate::report::progress_done();
    let s = |k: (usize, usize)| samples.get(&k).and_then(|v| summarize(v));
    let mut cases = Vec::new();
    for workers in [1, 2] {
        for (i, spec) in SPECS.iter().enumerate() {
            cases.push(Case {
                case: format!("{} [gsm {} × {workers} workers]", spec.name, world.size()),
                unit: "µs".into(),
                higher_is_better: false,
                gsm: s((workers, i)),
                peers: vec![Figure {
                    name: format!("MPI, {} ranks", world.size()),
                    summary: s((0, i)),
                }],
            });
        }
    }
    for workers in [1, 2] {
        let at = |k: usize| s((workers, SPECS.len() + k));
        cases.push(Case {
            case: format!(
                "overlap: allreduce_async 1 MiB, a fixed computation, then the wait [gsm {} × \
                 {workers} workers]",
                world.size()
            ),
            unit: "µs".into(),
            higher_is_better: false,
            gsm: at(2),
            peers: vec![
                Figure {
                    name: "the computation alone + blocking allreduce 1 MiB".into(),
                    summary: s((workers, OVERLAP_SUM)),
                },
                Figure {
                    name: "the computation alone".into(),
                    summary: at(0),
                },
                Figure {
                    name: "blocking allreduce 1 MiB alone".into(),
                    summary: at(1),
                },
            ],
        });
    }
    Ok(Some(RankReport {
        cases,
        header: header(world),
    }))
}

/// The sample key of the overlap case's sum (the computation alone + the blocking allreduce),
/// past every figure `gsm_once` returns.
const OVERLAP_SUM: usize = usize::MAX;

fn run_sweep(world: &SimpleCommunicator, opts: &Options) -> anyhow::Result<Option<RankReport>> {
    let mut samples: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut order = Vec::new();
    for _ in 0..opts.runs {
        for (name, second, first) in sweep_once(opts.quick)? {
            if !samples.contains_key(&name) {
                order.push(name.clone());
            }
            let e = samples.entry(name).or_default();
            e.0.push(second);
            e.1.push(first);
        }
    }
    if world.rank() != 0 {
        return Ok(None);
    }
    let cases = order
        .into_iter()
        .map(|name| {
            let (second, first) = &samples[&name];
            let peer = name.rsplit(" vs ").next().unwrap_or("first").to_string();
            Case {
                case: name,
                unit: "µs".into(),
                higher_is_better: false,
                gsm: summarize(second),
                peers: vec![Figure {
                    name: peer,
                    summary: summarize(first),
                }],
            }
        })
        .collect();
    Ok(Some(RankReport {
        cases,
        header: header(world),
    }))
}

/// The subcommand: checks the options, runs, prints rank 0's table (and JSON to `json`).
/// Returns whether this process printed (only rank 0 does).
pub fn command(
    runs: usize,
    json: Option<&std::path::Path>,
    quick: bool,
    sweep: bool,
    curve: bool,
) -> anyhow::Result<bool> {
    crate::check_runs(runs, quick)?;
    let opts = Options { runs, quick, sweep };
    crate::report::mpi_job(json, |world| {
        if curve {
            crate::coll_curve::run(world, opts.runs, opts.quick)
        } else if opts.sweep {
            run_sweep(world, &opts)
        } else {
            run_cases(world, &opts)
        }
    })
}
