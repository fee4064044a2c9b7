//! Measures the generator: `cargo run --release -p graph500 --example generate -- SCALE [REPEATS]`
//! generates the SCALE's 16·2^SCALE edges on one core and prints the best time and edges/s.

use std::time::Instant;

use graph500::kronecker::KroneckerGenerator;

fn main() {
    let mut args = std::env::args().skip(1);
    let scale: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let repeats: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let generator = KroneckerGenerator::new(scale);
    let m = 16u64 << scale;
    let mut best = f64::INFINITY;
    let mut checksum = 0u64;
    for _ in 0..repeats {
        let t = Instant::now();
        let list = generator.range(0, m);
        best = best.min(t.elapsed().as_secs_f64());
        checksum = list.edges.iter().fold(0, |a, e| {
            a.wrapping_mul(31).wrapping_add(u64::from(e.u ^ e.v))
        });
    }
    println!(
        "SCALE {scale}: {m} edges in {best:.3} s ({:.1} M edges/s, checksum {checksum:x})",
        m as f64 / best / 1e6
    );
}
