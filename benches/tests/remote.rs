//! `gsm-bench remote` end to end: a 2-rank job through `gsmrun`, over the shm fabric and over tcp
//! (with MPI restricted to TCP), in `--quick` mode; the JSON report must hold every case with
//! both Gossamer's figure and MPI's, positive and finite, and only rank 0 may print the table.
//!
//! Needs `gsmrun` built in the same profile and target directory as this test:
//! `cargo build --release -p gsmrun -p gsm-bench && cargo test --release -p gsm-bench`.

mod jobs;

fn remote_job(fabric: Option<&str>, btl: Option<&str>) -> (Vec<serde_json::Value>, String) {
    let launch: Vec<&str> = fabric.map(|f| vec!["--fabric", f]).unwrap_or_default();
    let what = format!("gsmrun -np 2 (fabric {fabric:?}, btl {btl:?}) gsm-bench remote --quick");
    jobs::bench_job(
        "remote",
        &launch,
        &[],
        |c| {
            match btl {
                Some(b) => c.env("OMPI_MCA_btl", b),
                None => c.env_remove("OMPI_MCA_btl"),
            };
        },
        &what,
    )
}

fn check_rows(rows: &[serde_json::Value], fabric: &str, btl: &str, report: &str) {
    let cases: Vec<&str> = rows.iter().filter_map(|r| r["case"].as_str()).collect();
    for wanted in [
        "round trip",
        "throughput: apply_then, 8-byte",
        "throughput: apply_async (promises)",
        "both ways",
        "bandwidth: apply_with of a 1 MiB record",
    ] {
        assert!(
            cases.iter().any(|c| c.contains(wanted)),
            "no case about {wanted:?} in {cases:?}\n{report}"
        );
    }
    for row in rows {
        jobs::assert_positive_figures(row, report);
        let case = row["case"].as_str().unwrap_or_default();
        let peer = row["peer"].as_str().unwrap_or_default();
        assert!(case.contains(&format!("[gsm {fabric}]")), "{case}");
        if case.starts_with("bandwidth") {
            // The large record's peer is iperf3 between the same two ranks.
            assert!(peer.starts_with("iperf3 -c "), "{peer}");
        } else if case.contains("apply_async") {
            // The promises' peer is apply_then in the same run, over the same fabric.
            assert!(peer.contains(&format!("[gsm {fabric}]")), "{peer}");
        } else {
            assert!(peer.contains(&format!("[MPI btl {btl}]")), "{peer}");
        }
        assert_eq!(
            row["higher_is_better"].as_bool(),
            Some(row["unit"] != "ns"),
            "{row}"
        );
    }
}

#[test]
fn remote_over_shm_reports_both_figures_of_every_case() {
    let (rows, report) = remote_job(None, None);
    assert_eq!(rows.len(), 5, "{report}");
    check_rows(&rows, "shm", "default", &report);
}

#[test]
fn remote_over_tcp_reports_both_figures_of_every_case() {
    let (rows, report) = remote_job(Some("tcp"), Some("self,tcp"));
    assert_eq!(rows.len(), 5, "{report}");
    check_rows(&rows, "tcp", "self,tcp", &report);
}
