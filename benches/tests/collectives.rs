//! `gsm-bench collectives` end to end: a 2-rank job through `gsmrun` in `--quick` mode; the JSON
//! report must hold every case for 1 and 2 workers per rank, each with Gossamer's figure and
//! MPI's, positive and finite, and only rank 0 may print the table. The sweep prints both
//! algorithms of every switch point; the curve (`--curve --plot DIR`) every operation at every
//! size, and its three charts.
//!
//! Needs `gsmrun` built in the same profile and target directory as this test:
//! `cargo build --release -p gsmrun -p gsm-bench && cargo test --release -p gsm-bench`.

mod jobs;

fn job(args: &[&str]) -> (Vec<serde_json::Value>, String) {
    let what = format!("gsmrun -np 2 gsm-bench collectives --quick {args:?}");
    jobs::bench_job(
        "collectives",
        &[],
        args,
        |c| {
            c.env_remove("OMPI_MCA_btl");
        },
        &what,
    )
}

fn positive(rows: &[serde_json::Value], report: &str) {
    for row in rows {
        jobs::assert_positive_figures(row, report);
        assert_eq!(row["higher_is_better"].as_bool(), Some(false), "{row}");
    }
}

#[test]
fn every_case_has_both_figures_for_one_and_two_workers_per_rank() {
    let (rows, report) = job(&[]);
    assert_eq!(rows.len(), 22, "{report}");
    positive(&rows, &report);
    let cases: Vec<&str> = rows.iter().filter_map(|r| r["case"].as_str()).collect();
    for workers in ["2 × 1 workers", "2 × 2 workers"] {
        for wanted in [
            "barrier",
            "allreduce 8 B",
            "allreduce 1 KiB",
            "allreduce 1 MiB",
            "broadcast 1 MiB",
            "allgather 1 KiB",
            "alltoall 1 KiB",
            "allreduce 1 KiB f64 sum, after the 1 MiB cases",
            "overlap: allreduce_async 1 MiB",
        ] {
            assert!(
                cases
                    .iter()
                    .any(|c| c.starts_with(wanted) && c.contains(workers)),
                "no case {wanted:?} with {workers:?} in {cases:?}\n{report}"
            );
        }
    }
}

#[test]
fn the_sweep_times_both_algorithms_of_every_switch() {
    let (rows, report) = job(&["--sweep"]);
    positive(&rows, &report);
    let cases: Vec<&str> = rows.iter().filter_map(|r| r["case"].as_str()).collect();
    assert!(
        cases
            .iter()
            .any(|c| c.contains("ring vs recursive doubling")),
        "{report}"
    );
    assert!(
        cases.iter().any(|c| c.contains("chain vs binomial")),
        "{report}"
    );
}

#[test]
fn the_curve_has_every_operation_at_every_size_and_draws_its_charts() {
    let dir = std::env::temp_dir().join(format!("gsm-bench-curve-{}", std::process::id()));
    let dir_text = dir.to_string_lossy().into_owned();
    let (rows, report) = job(&["--curve", "--plot", &dir_text]);
    for row in &rows {
        jobs::assert_positive_figures(row, &report);
        assert_eq!(row["higher_is_better"].as_bool(), Some(true), "{row}");
    }
    // 8 B, then 16 B × 4^k up to 1 MiB in `--quick`: 10 sizes.
    for op in ["allreduce", "broadcast", "point-to-point"] {
        for size in ["8 B", "16 B", "1 KiB", "256 KiB", "1 MiB"] {
            let case = format!("{op} {size}");
            assert!(
                rows.iter()
                    .any(|r| r["case"].as_str() == Some(case.as_str())),
                "no case {case:?}\n{report}"
            );
        }
        let chart = dir.join(format!("collectives-curve-{op}.svg"));
        let svg = std::fs::read_to_string(&chart)
            .unwrap_or_else(|e| panic!("no chart {}: {e}\n{report}", chart.display()));
        assert!(svg.contains("<svg"), "{} is not an SVG", chart.display());
    }
    assert_eq!(rows.len(), 30, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
