//! `gsm-bench segments` and `gsm-bench streams` end to end: a 2-rank job through `gsmrun` in
//! `--quick` mode, over shm and over tcp; every row of the JSON report holds Gossamer's figure
//! and its peer's, positive and finite (for streams, iperf3 must be installed:
//! `scripts/install-deps`).

mod jobs;

fn check(command: &str, fabric: Option<&str>, wanted: &[&str]) {
    let launch: Vec<&str> = fabric.map(|f| vec!["--fabric", f]).unwrap_or_default();
    let what = format!("gsmrun -np 2 (fabric {fabric:?}) gsm-bench {command} --quick");
    let (rows, report) = jobs::bench_job(
        command,
        &launch,
        &[],
        |c| {
            if fabric == Some("tcp") {
                c.env("OMPI_MCA_btl", "self,tcp")
                    .env("OMPI_MCA_osc", "pt2pt");
            }
        },
        &what,
    );
    let cases: Vec<&str> = rows.iter().filter_map(|r| r["case"].as_str()).collect();
    for w in wanted {
        assert!(
            cases.iter().any(|c| c.contains(w)),
            "no case about {w:?} in {cases:?}\n{report}"
        );
    }
    for row in &rows {
        jobs::assert_positive_figures(row, &report);
    }
}

#[test]
fn segments_report_every_case_with_its_peers() {
    let wanted = ["get 8 bytes", "fetch_add", "put 1 MiB"];
    check("segments", None, &wanted);
    check("segments", Some("tcp"), &wanted);
}

#[test]
fn streams_report_every_case_with_its_peers() {
    let wanted = ["write_all/read", "lend/fill_buf"];
    check("streams", None, &wanted);
}
