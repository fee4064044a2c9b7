//! A quick throughput check of delegation on a contended `u64` (not the benchmark suite; that
//! lives in `benches/`): `cargo run --release -p gossamer --example quickbench`.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use gossamer::{Config, WorkerId, entrust_on, spawn, yield_now};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4_000_000);
    // Optional second argument: run one section only (local, remote, fibers, peers).
    let only = std::env::args().nth(2);
    let want = |s: &str| only.as_deref().is_none_or(|o| o == s);
    let cfg = Config::from_env().unwrap_or_default().workers(2);
    if want("local") {
        local(cfg.clone(), n);
    }
    if want("remote") {
        remote(cfg.clone(), n);
    }
    if want("fibers") {
        fibers(cfg, n / 8);
    }
    if want("peers") {
        peers();
    }
}

fn local(cfg: Config, n: u64) {
    let secs = gossamer::run(cfg.clone(), move || {
        let t = entrust_on(WorkerId::new(0), || 0u64);
        let done = Rc::new(Cell::new(0u64));
        let start = Instant::now();
        let t1 = t.clone();
        let h = {
            let d = done.clone();
            spawn(move || {
                for i in 0..n {
                    let d2 = d.clone();
                    t1.apply_then(|c| *c += 1, move |_| d2.set(d2.get() + 1));
                    if i % 1024 == 0 {
                        yield_now();
                    }
                }
            })
        };
        h.join();
        while done.get() < n {
            yield_now();
        }
        let el = start.elapsed().as_secs_f64();
        assert_eq!(t.apply(|c| *c), n);
        el
    })
    .unwrap();
    println!(
        "apply_then local (worker 0 → own property): {:.1} M ops/s",
        n as f64 / secs / 1e6
    );
}

fn remote(cfg: Config, n: u64) {
    let secs = gossamer::spmd(cfg, move |w| {
        // Worker 1 hammers worker 0's counter with apply_then; worker 0 serves and hammers too.
        let start = Instant::now();
        if w.id() == 1 {
            let t = entrust_on(WorkerId::new(0), || 0u64);
            let done = Rc::new(Cell::new(0u64));
            for i in 0..n {
                let d2 = done.clone();
                t.apply_then(|c| *c += 1, move |_| d2.set(d2.get() + 1));
                if i % 4096 == 0 {
                    yield_now();
                }
            }
            while done.get() < n {
                yield_now();
            }
            assert_eq!(t.apply(|c| *c), n);
        }
        start.elapsed().as_secs_f64()
    })
    .unwrap();
    println!(
        "apply_then remote (worker 1 → worker 0): {:.1} M ops/s",
        n as f64 / secs[1] / 1e6
    );
}

fn fibers(cfg: Config, m: u64) {
    let secs = gossamer::spmd(cfg, move |w| {
        let start = Instant::now();
        if w.id() == 1 {
            let t = entrust_on(WorkerId::new(0), || 0u64);
            let hs: Vec<_> = (0..64)
                .map(|_| {
                    let t = t.clone();
                    spawn(move || {
                        for _ in 0..m / 64 {
                            t.apply(|c| *c += 1);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join();
            }
        }
        start.elapsed().as_secs_f64()
    })
    .unwrap();
    println!(
        "apply blocking, 64 fibers (worker 1 → worker 0): {:.1} M ops/s",
        (m / 64 * 64) as f64 / secs[1] / 1e6
    );
}

fn peers() {
    // Peers measured in the same run (same machine load): both threads start together (barrier)
    // and run for the same wall time, so a short run cannot finish one thread before the other
    // starts (which would measure an uncontended lock).
    let c = std::sync::Arc::new(parking_lot::Mutex::new(0u64));
    let rate = peer(move || *c.lock() += 1);
    println!("peer parking_lot::Mutex, 2 threads: {rate:.1} M ops/s");
    let a = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let rate = peer(move || {
        a.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    println!("peer AtomicU64::fetch_add, 2 threads: {rate:.1} M ops/s");
}

/// Runs `op` on 2 threads for 300 ms after a common start; returns M ops/s.
fn peer(op: impl Fn() + Send + Sync + Clone + 'static) -> f64 {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};
    let stop = Arc::new(AtomicBool::new(false));
    let go = Arc::new(Barrier::new(3));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let (op, stop, go) = (op.clone(), stop.clone(), go.clone());
            std::thread::spawn(move || {
                go.wait();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        op();
                    }
                    n += 256;
                }
                n
            })
        })
        .collect();
    go.wait();
    let start = Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    total as f64 / start.elapsed().as_secs_f64() / 1e6
}
