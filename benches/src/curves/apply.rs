//! `gsm-bench curves --what apply`: open-loop blocking `apply` from rank 0 to a `u64` on rank 1,
//! against an MPI request-response server in the same job (see `curves.rs` for the method).
//!
//! Both sides run in the same processes, one after the other at each offered rate (MPI first,
//! from the main thread with no Gossamer worker alive; then one `gossamer::run`), as
//! `remote.rs` shares its job. Rank 0 decides, after each rate, which systems go on and tells
//! rank 1 by an MPI broadcast, so both ranks take the same steps.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use gossamer::{Config, Trust, WorkerId, entrust_on, rank, spawn, workers_of_rank, yield_now};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::{Args, Arrivals, Point, STRIKES, histogram, point, rates, show};
use crate::report::RankReport;

/// Client fibers of the Gossamer side, each with one blocking `apply` in flight at most.
pub const POOL: usize = 256;
/// The MPI server stops at this request.
const STOP: u64 = u64::MAX;
/// Closer than this to its intended time, a fiber spins (yields) instead of sleeping, whose
/// slack would count as latency.
const SPIN_NS: u64 = 200_000;

fn ns(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// One MPI point: rank 0 sends at the intended times and takes answers as they come; rank 1
/// answers each request. Returns rank 0's point.
fn mpi_point(world: &SimpleCommunicator, rate: f64, load: Duration, name: &str) -> Option<Point> {
    let other = world.process_at_rank(1 - world.rank());
    world.barrier();
    if world.rank() != 0 {
        loop {
            let (v, _) = other.receive::<u64>();
            if v == STOP {
                return None;
            }
            other.send(&v);
        }
    }
    let mut arrivals = Arrivals::new(rate, 0x5eed ^ rate as u64);
    let mut hist = histogram();
    let end = load.as_nanos() as u64;
    let mut fifo: VecDeque<u64> = VecDeque::new();
    let mut due = arrivals.next();
    let start = Instant::now();
    let mut seq = 0u64;
    while due < end || !fifo.is_empty() {
        let now = ns(start);
        while due <= now && due < end {
            other.send(&seq);
            seq += 1;
            fifo.push_back(due);
            due = arrivals.next();
        }
        while other.immediate_probe().is_some() {
            let _ = other.receive::<u64>();
            if let Some(t) = fifo.pop_front() {
                let _ = hist.record(ns(start).saturating_sub(t).max(1));
            }
        }
    }
    let elapsed = start.elapsed();
    other.send(&STOP);
    Some(Point::new(name, rate, &hist, elapsed))
}

/// What the client fibers share.
struct Load {
    arrivals: RefCell<Arrivals>,
    hist: RefCell<hdrhistogram::Histogram<u64>>,
    /// Set by the last fiber to finish its warm-up apply: the clock of the intended times.
    start: Cell<Option<Instant>>,
    /// Fibers still in their warm-up.
    warming: Cell<usize>,
    end: u64,
    last: Cell<u64>,
}

/// One client fiber: one warm-up apply (its stack's first pages, the rings' first use), then
/// until the load ends: take the next intended time, wait for it, apply, record.
fn client(load: &Load, target: &Trust<u64>) {
    target.apply(|n: &mut u64| *n += 1);
    load.warming.set(load.warming.get() - 1);
    if load.warming.get() == 0 {
        load.start.set(Some(Instant::now()));
    }
    let start = loop {
        match load.start.get() {
            Some(t) => break t,
            None => yield_now(),
        }
    };
    loop {
        let due = load.arrivals.borrow_mut().next();
        if due >= load.end {
            return;
        }
        loop {
            let now = ns(start);
            if now >= due {
                break;
            }
            if due - now > SPIN_NS {
                gossamer::sleep(Duration::from_nanos(due - now - SPIN_NS / 2));
            } else {
                yield_now();
            }
        }
        target.apply(|n: &mut u64| *n += 1);
        let done = ns(start);
        load.last.set(load.last.get().max(done));
        let _ = load
            .hist
            .borrow_mut()
            .record(done.saturating_sub(due).max(1));
    }
}

/// One Gossamer point, on rank 0's first worker.
fn gsm_point(rate: f64, load: Duration, name: &str) -> Point {
    let target: Trust<u64> = entrust_on(WorkerId::new(workers_of_rank(1).start), || 0u64);
    let shared = Rc::new(Load {
        arrivals: RefCell::new(Arrivals::new(rate, 0x5eed ^ rate as u64)),
        hist: RefCell::new(histogram()),
        start: Cell::new(None),
        warming: Cell::new(POOL),
        end: load.as_nanos() as u64,
        last: Cell::new(0),
    });
    let fibers: Vec<_> = (0..POOL)
        .map(|_| {
            let (s, t) = (shared.clone(), target.clone());
            spawn(move || client(&s, &t))
        })
        .collect();
    for f in fibers {
        f.join();
    }
    let served = target.apply(|n| *n);
    let hist = shared.hist.borrow();
    assert_eq!(
        served,
        POOL as u64 + hist.len(),
        "every apply (and each fiber's warm-up) reached the counter once"
    );
    Point::new(
        name,
        rate,
        &hist,
        Duration::from_nanos(shared.last.get().max(1)),
    )
}

/// `--what apply`, inside the MPI job.
pub fn run(common: &crate::Common, args: &Args) -> anyhow::Result<bool> {
    crate::report::mpi_job(common.json.as_deref(), |world| run_in(world, common, args))
}

fn run_in(
    world: &SimpleCommunicator,
    common: &crate::Common,
    args: &Args,
) -> anyhow::Result<Option<RankReport>> {
    if world.size() != 2 {
        anyhow::bail!(
            "`gsm-bench curves --what apply` needs exactly 2 ranks, this job has {}: run it as \
             `gsmrun -np 2 gsm-bench curves`",
            world.size()
        );
    }
    let t = crate::remote::Transports::from_env();
    let fabric = t
        .fabric
        .split_whitespace()
        .next()
        .unwrap_or("auto")
        .to_string();
    let gsm_name = format!("gsm apply ({fabric})");
    let mpi_name = format!("MPI server (btl {})", t.btl);
    let config = Config::from_env()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .workers(1);
    let load = point(args);
    let (mut gsm, mut mpi) = (Vec::<Point>::new(), Vec::<Point>::new());
    // Saturated points each system may still have before it stops (gsm, MPI).
    let mut going = [STRIKES, STRIKES];
    for rate in rates(args) {
        world.process_at_rank(0).broadcast_into(&mut going[..]);
        if going == [0, 0] {
            break;
        }
        // Alternating runs at this rate; each system's point is the median of its runs.
        let (mut g, mut m) = (Vec::new(), Vec::new());
        for _ in 0..super::runs(args) {
            if going[1] > 0
                && let Some(p) = mpi_point(world, rate, load, &mpi_name)
            {
                show(&p);
                m.push(p);
            }
            if going[0] > 0 {
                let name = gsm_name.clone();
                let p = gossamer::run(config.clone(), move || {
                    (rank() == 0).then(|| gsm_point(rate, load, &name))
                })
                .map_err(|e| anyhow::anyhow!("the gossamer runtime failed: {e}"))?;
                if let Some(p) = p {
                    show(&p);
                    g.push(p);
                }
            }
        }
        let [gsm_going, mpi_going] = &mut going;
        for (p, going, all) in [
            (Point::median(&m), mpi_going, &mut mpi),
            (Point::median(&g), gsm_going, &mut gsm),
        ] {
            if let Some(p) = p {
                *going = if p.saturated() { *going - 1 } else { STRIKES };
                all.push(p);
            }
        }
    }
    if world.rank() != 0 {
        return Ok(None);
    }
    if let Some(dir) = &common.plot {
        let all: Vec<Point> = gsm.iter().chain(&mpi).cloned().collect();
        super::plot(
            dir,
            &format!("apply-{fabric}"),
            &format!("blocking apply vs MPI ({fabric})"),
            &all,
        )?;
    }
    Ok(Some(RankReport {
        cases: super::cases(&format!("apply ({fabric})"), &gsm, &mpi, &mpi_name),
        header: format!(
            "gsm-bench curves: 2 ranks, open-loop blocking apply from rank 0 to rank 1, {POOL} \
             client fibers, {} ms per run, medians of {} alternating runs per point\n",
            load.as_millis(),
            super::runs(args)
        ),
    }))
}
