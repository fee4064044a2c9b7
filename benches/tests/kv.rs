//! `gsm-bench kv` and `gsm-bench curves` end to end, in `--quick` mode: the kv comparison starts
//! its own `gsm-kv` and `redis-server`s and drives them with `redis-benchmark` (from
//! `scripts/install-deps`); the apply curves run as a 2-rank job. The JSON reports must hold
//! every case with positive figures on both sides, and `--plot` must write the SVG charts.
//!
//! Needs `gsmrun` and `gsm-kv` built in the same profile and target directory as this test
//! (`cargo build --release --workspace`).

mod jobs;

use gsm_tests::bins::bin;
use gsm_tests::job::assert_exit;
use gsm_tests::process::run;
use gsm_tests::scratch::{RunId, Scratch};
use std::process::Command;
use std::time::Duration;

fn svgs(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.retain(|n| n.ends_with(".svg"));
    v.sort();
    v
}

#[test]
fn kv_compares_every_cell_with_redis_and_plots_them() {
    let scratch = Scratch::new("bench-kv", RunId::next());
    let json = scratch.join("kv.json");
    let plots = scratch.join("plots");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gsm-bench"));
    cmd.args(["kv", "--quick", "--runs", "1", "--port", "7470", "--gsm-kv"])
        .arg(bin("gsm-kv"))
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&plots);
    let done = run(&mut cmd, Duration::from_secs(180));
    assert_exit(&done, 0, "gsm-bench kv --quick");
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        rows.len(),
        16,
        "8 cells, throughput and p99 each\n{}",
        done.report()
    );
    for row in &rows {
        jobs::assert_positive_figures(row, &done.report());
        assert_eq!(row["peer"], "redis-server");
    }
    assert_eq!(svgs(&plots).len(), 4, "{:?}", svgs(&plots));
}

#[test]
fn apply_curves_run_both_systems_to_saturation_and_plot_them() {
    let scratch = Scratch::new("bench-curves", RunId::next());
    let plots = scratch.join("plots");
    let plot = plots.to_string_lossy().into_owned();
    let (rows, report) = jobs::bench_job(
        "curves",
        &[],
        &[
            "--what", "apply", "--start", "2000", "--step", "3", "--plot", &plot,
        ],
        |_| {},
        "gsmrun -np 2 gsm-bench curves --what apply --quick",
    );
    assert!(
        rows.iter()
            .any(|r| r["case"].as_str().unwrap_or("").contains("saturation")),
        "{report}"
    );
    for row in &rows {
        jobs::assert_positive_figures(row, &report);
    }
    let points = std::fs::read_to_string(plots.join("curves-apply-shm-points.json")).unwrap();
    assert!(
        points.contains("gsm apply") && points.contains("MPI server"),
        "{points}"
    );
    let files = svgs(&plots);
    assert!(
        files.contains(&"curves-apply-shm-p99.svg".to_string()),
        "{files:?}"
    );
}
