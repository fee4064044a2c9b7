//! What the multi-rank bench tests (`collectives.rs`, `remote.rs`) share: running
//! `gsm-bench <command> --quick --runs 1 --json` under `gsmrun -np 2` and reading its report.

use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::process::run;
use gsm_tests::scratch::{RunId, Scratch};
use std::process::Command;
use std::time::Duration;

/// The time limit of one job.
const LIMIT: Duration = Duration::from_secs(180);

/// Runs `gsmrun -np 2 --oversubscribe {launch} gsm-bench {command} --quick --runs 1 {args}
/// --json FILE`, with `env` applied to the launcher's command (`what` names the job in
/// messages). Returns the JSON rows and the run's report; the job must exit 0 and exactly one
/// rank must print the table.
pub fn bench_job(
    command: &str,
    launch: &[&str],
    args: &[&str],
    env: impl FnOnce(&mut Command),
    what: &str,
) -> (Vec<serde_json::Value>, String) {
    let scratch = Scratch::new(&format!("bench-{command}"), RunId::next());
    let json = scratch.join(&format!("{command}.json"));
    let mut cmd = gsmrun(["-np", "2", "--oversubscribe"]);
    cmd.args(launch).env_remove("GSM_FABRIC");
    env(&mut cmd);
    cmd.arg(env!("CARGO_BIN_EXE_gsm-bench"))
        .args([command, "--quick", "--runs", "1"])
        .args(args)
        .arg("--json")
        .arg(&json);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, what);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "{what}: no JSON report at {}: {e}\n{}",
            json.display(),
            done.report()
        )
    });
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{what}: the report is not JSON: {e}\n{text}"));
    assert_eq!(
        done.stdout
            .matches(&format!("gsm-bench {command}: 2 ranks"))
            .count(),
        1,
        "{what}: exactly one rank (rank 0) prints the report\n{}",
        done.report()
    );
    (rows, done.report())
}

/// Asserts that a report row's Gossamer figure, peer figure and speedup are all positive finite
/// numbers (`report` is shown on failure).
pub fn assert_positive_figures(row: &serde_json::Value, report: &str) {
    for key in ["gsm", "peer_value", "speedup"] {
        let v = row[key].as_f64();
        assert!(
            v.is_some_and(|v| v.is_finite() && v > 0.0),
            "{key} of {row} is not a positive number\n{report}"
        );
    }
}
