//! Unit tests of the fit and the predictions of `gsm-bench scale`.

use super::*;

#[test]
fn fit_recovers_an_exact_quadratic() {
    let truth = |w: f64| 4e6 + 3e5 * w + 133_376.0 * w * w;
    let pts: Vec<_> = [8.0, 16.0, 32.0, 64.0, 128.0, 256.0]
        .iter()
        .map(|&w| (w, truth(w)))
        .collect();
    let f = fit(&pts).unwrap();
    assert!((f.a - 4e6).abs() < 1.0, "{f:?}");
    assert!((f.b - 3e5).abs() < 1e-3, "{f:?}");
    assert!((f.c - 133_376.0).abs() < 1e-6, "{f:?}");
    assert!(f.max_rel_residual < 1e-9, "{f:?}");
}

#[test]
fn fit_of_noisy_points_reports_its_residual() {
    let pts = [(8.0, 10.0), (16.0, 30.0), (32.0, 20.0), (64.0, 90.0)];
    let f = fit(&pts).unwrap();
    assert!(f.max_rel_residual > 0.05, "{f:?}");
}

#[test]
fn fit_needs_three_distinct_worker_counts() {
    assert!(fit(&[(8.0, 1.0), (8.0, 2.0), (16.0, 3.0)]).is_none());
    assert!(fit(&[(8.0, 1.0)]).is_none());
}

#[test]
fn prediction_follows_the_peers_a_worker_talks_to() {
    let f = Fit {
        a: 1.0,
        b: 10.0,
        c: 100.0,
        max_rel_residual: 0.0,
    };
    let idle = predict(Some(&f), 1024, 128, 1000, Some(0));
    let some = predict(Some(&f), 1024, 128, 1000, Some(8));
    let all = predict(Some(&f), 1024, 128, 1000, None);
    assert_eq!(idle.model_bytes, 1.0 + 10.0 * 128.0 + 100.0 * 128.0 * 128.0);
    assert_eq!(idle.connections, 128 * 1023);
    // Main kept 1.3 KiB per (local worker, job worker) whatever the traffic.
    assert_eq!(idle.places_main, all.places_main);
    assert!(idle.places_main > 20.0 * (1u64 << 30) as f64);
    // Now idle places are a slot per block and the rank's bells: a few MiB where main had
    // gigabytes; they grow with the peers a worker talks to.
    assert!(idle.places_now < some.places_now && some.places_now < all.places_now);
    assert!(idle.places_now < 64.0 * (1u64 << 20) as f64, "{idle:?}");
    assert!(all.places_now < all.places_main, "{all:?}");
    // Rings to every remote worker are made at start either way; on first use they would
    // follow k.
    assert_eq!(idle.rings_at_start, all.rings_at_start);
    assert!(all.rings_at_start >= 4.0 * 128.0 * 1023.0 * 128.0 * 1000.0);
    assert_eq!(all.rings_on_use, all.rings_at_start);
    let per_peer = (some.rings_on_use - idle.rings_on_use) / (128.0 * 8.0);
    assert!(
        per_peer > 4000.0 && per_peer < 6000.0,
        "four rings and their ends per (local worker, peer): {per_peer}"
    );
    assert!(all.now() < all.main());
    assert!(predict(None, 64, 128, 1000, None).model_bytes.is_nan());
}
