//! `gsm-bench collectives` end to end: a 2-rank job through `gsmrun` in `--quick` mode; the JSON
//! report must hold every case for 1 and 2 workers per rank, each with Gossamer's figure and
//! MPI's, positive and finite, and only rank 0 may print the table. The sweep prints both
//! algorithms of every switch point.
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
    assert_eq!(rows.len(), 16, "{report}");
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
