//! `gsm-bench inbox` end to end, as a user runs it: `--quick --runs 1 --json`. One row per
//! producer count, each with the inbox's figure beside the slot rings', both positive. The
//! consumer checks every record's source and sequence as it goes, so a lost, doubled or torn
//! record fails the run.

use gsm_tests::job::assert_exit;
use gsm_tests::process::run;
use gsm_tests::scratch::{RunId, Scratch};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn a_quick_run_reports_each_producer_count_beside_the_rings() {
    let scratch = Scratch::new("bench-inbox", RunId::next());
    let json = scratch.join("inbox.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gsm-bench"));
    cmd.args([
        "inbox",
        "--quick",
        "--runs",
        "1",
        "--producers",
        "1,3",
        "--json",
    ])
    .arg(&json);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "gsm-bench inbox --quick");
    let text = std::fs::read_to_string(&json).expect("the JSON report");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).expect("JSON rows");
    let cases: Vec<_> = rows
        .iter()
        .map(|r| r["case"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        cases,
        [
            "1 producer -> 1 consumer, batches of 8",
            "3 producers -> 1 consumer, batches of 8"
        ],
        "{text}"
    );
    for row in &rows {
        assert_eq!(row["unit"], "Mrecords/s", "{row}");
        assert!(
            row["peer"].as_str().unwrap_or("").contains("slot ring"),
            "{row}"
        );
        for key in ["gsm", "peer_value"] {
            let v = row[key].as_f64().unwrap_or(f64::NAN);
            assert!(v.is_finite() && v > 0.0, "{key} of {row}");
        }
    }
}

#[test]
fn a_batch_larger_than_a_ring_is_refused() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gsm-bench"));
    cmd.args(["inbox", "--quick", "--runs", "1", "--batch", "17"]);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 1, "gsm-bench inbox --batch 17");
    assert!(
        done.stderr.contains("--batch must be 1..=16"),
        "{}",
        done.stderr
    );
}
