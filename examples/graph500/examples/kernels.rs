//! Times the sequential kernels on the benchmark graph:
//! `cargo run --release -p graph500 --example kernels -- SCALE [ROOTS]` prints the harmonic-mean
//! TEPS of each BFS and SSSP variant over the first ROOTS roots (default 16).

use std::time::Instant;

use graph500::bfs::{self, NO_PARENT};
use graph500::csr::Csr;
use graph500::kronecker::{KroneckerGenerator, Vertex};
use graph500::roots::choose_roots;
use graph500::sssp;

fn harmonic_teps(g: &Csr, roots: &[Vertex], search: impl Fn(Vertex) -> Vec<Vertex>) -> f64 {
    let mut seconds_per_edge = 0.0;
    for &r in roots {
        let t = Instant::now();
        let parent = search(r);
        let s = t.elapsed().as_secs_f64();
        let m = g.component_edges(|v| parent[v as usize] != NO_PARENT);
        seconds_per_edge += s / m as f64;
    }
    roots.len() as f64 / seconds_per_edge
}

fn main() {
    let mut args = std::env::args().skip(1);
    let scale: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(16);
    let nroots: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(16);
    let list = KroneckerGenerator::new(scale).range(0, 16 << scale);
    let g = Csr::build(1 << scale, &[&list], true);
    let roots = choose_roots(scale, nroots, |v| g.degree(v) > 0);
    let report = |name: &str, teps: f64| println!("SCALE {scale} {name:<28} {teps:.3e} TEPS");
    report(
        "bfs top-down",
        harmonic_teps(&g, &roots, |r| bfs::top_down(&g, r)),
    );
    report(
        "bfs direction-optimising",
        harmonic_teps(&g, &roots, |r| bfs::direction_optimizing(&g, r)),
    );
    report(
        "sssp dijkstra",
        harmonic_teps(&g, &roots, |r| sssp::dijkstra(&g, r).parent),
    );
    let d0 = sssp::default_delta(&g);
    for delta in [d0 / 2.0, d0, d0 * 4.0] {
        report(
            &format!("sssp delta-stepping Δ={delta:.4}"),
            harmonic_teps(&g, &roots, |r| sssp::delta_stepping(&g, r, delta).parent),
        );
    }
}
