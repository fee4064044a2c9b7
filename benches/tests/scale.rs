//! `gsm-bench scale` end to end, as a user runs it: the quick mode's smallest point alone, with
//! `--json` and `--plot`. A test of the tool, not of the figures: the table, the JSON object and
//! the chart must have their shape, and every measured figure must be positive and finite. One
//! point cannot be fitted, so the fit must say so rather than invent a curve.

use gsm_tests::job::assert_exit;
use gsm_tests::process::run;
use gsm_tests::scratch::{RunId, Scratch};
use std::process::Command;
use std::time::Duration;

/// The time limit of the run (the point takes about a second here).
const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn quick_smallest_point_reports_its_shape() {
    let scratch = Scratch::new("bench-scale", RunId::next());
    let json = scratch.path().join("scale.json");
    let plot = scratch.path().join("plots");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gsm-bench"));
    cmd.args([
        "scale",
        "--quick",
        "--workers",
        "8",
        "--idle-ms",
        "100",
        "--yield-ms",
        "20",
    ])
    .arg("--json")
    .arg(&json)
    .arg("--plot")
    .arg(&plot)
    .env_remove("GSM_THREADS");
    let out = run(&mut cmd, LIMIT);
    assert_exit(&out, 0, "gsm-bench scale --quick --workers 8");
    let stdout = &out.stdout;
    assert!(stdout.contains("peak RSS"), "{stdout}");
    assert!(
        stdout.contains("fit of peak RSS: needs at least 3 worker counts"),
        "{stdout}"
    );
    for hosts in ["64", "1024"] {
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(hosts)),
            "no prediction row for {hosts} hosts:\n{stdout}"
        );
    }

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON report"))
            .expect("the JSON report parses");
    let points = report["points"].as_array().expect("points");
    assert_eq!(points.len(), 1, "{report}");
    let p = &points[0];
    assert_eq!(p["workers"], 8, "{p}");
    assert_eq!(p["total"], 8000, "{p}");
    for key in [
        "peak_rss",
        "counter_ms",
        "idle_ms",
        "idle_cpu_ms",
        "yield_cpu_ns",
        "wall_ms",
    ] {
        let v = p[key].as_f64().unwrap_or(f64::NAN);
        assert!(v.is_finite() && v >= 0.0, "{key} = {v} in {p}");
    }
    assert!(p["peak_rss"].as_f64().unwrap() > 1e6, "{p}");
    assert!(p["yield_cpu_ns"].as_f64().unwrap() > 0.0, "{p}");
    assert!(report["fit"].is_null(), "{report}");
    assert!(report["ring_bytes"].as_u64().unwrap() > 0, "{report}");
    let predictions = report["predictions"].as_array().expect("predictions");
    let hosts: Vec<_> = predictions.iter().map(|p| p["hosts"].as_u64()).collect();
    assert_eq!(
        hosts,
        [Some(64), Some(64), Some(1024), Some(1024)],
        "{report}"
    );
    // Each host count is asked for a worker talking to 8 remote peers, then to all of them.
    let peers: Vec<_> = predictions.iter().map(|p| p["peers"].as_u64()).collect();
    assert_eq!(peers, [Some(8), None, Some(8), None], "{report}");
    for p in predictions {
        assert_eq!(p["workers"], 128, "{p}");
        for key in [
            "places_main",
            "places_now",
            "rings_at_start",
            "rings_on_use",
        ] {
            assert!(p[key].as_f64().unwrap_or(0.0) > 0.0, "{key} in {p}");
        }
        assert!(
            p["places_now"].as_f64() < p["places_main"].as_f64(),
            "places made on first use cost no less than main's: {p}"
        );
        assert!(p["connections"].as_u64().unwrap() > 0, "{p}");
    }
    let svg = std::fs::read_to_string(plot.join("scale-rss.svg")).expect("the chart");
    assert!(
        svg.starts_with("<svg") || svg.contains("<svg"),
        "not an SVG"
    );
}
