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
fn prediction_counts_every_pair_of_the_job() {
    let f = Fit {
        a: 1.0,
        b: 10.0,
        c: 100.0,
        max_rel_residual: 0.0,
    };
    let p = predict(Some(&f), 64, 128, 1000);
    assert_eq!(
        p.model_bytes,
        1.0 + 10.0 * 128.0 + 100.0 * 128.0 * 64.0 * 128.0
    );
    assert_eq!(p.connections, 128 * 63);
    // Rings alone: 4·L·(W−L) remote (the local ones are made on first use), before any
    // connection buffer.
    assert!(p.computed_bytes > 4 * 128 * 63 * 128 * 1000);
    assert!(predict(None, 64, 128, 1000).model_bytes.is_nan());
}
