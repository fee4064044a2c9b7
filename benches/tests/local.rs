//! `gsm-bench local` end to end, as a user runs it: one process, `--quick` (10 ms per figure,
//! one repetition) with `--json`. The report must hold every case the subcommand runs, with every peer,
//! Gossamer's figure and each peer's positive and finite, and each speedup the ratio of the two
//! in the direction the unit says. The Gossamer side checks its own results as it goes (each
//! counter ends at the number of operations the clients report, every callback ran), so a lost,
//! doubled or never answered request fails the run, and a hang hits the time limit.

use gsm_tests::job::assert_exit;
use gsm_tests::process::{Finished, run};
use gsm_tests::scratch::{RunId, Scratch};
use std::process::Command;
use std::time::Duration;

/// The time limit of one run (a quick run takes well under a second here).
const LIMIT: Duration = Duration::from_secs(120);

fn local(args: &[&str]) -> Finished {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gsm-bench"));
    cmd.arg("local").args(args).env_remove("GSM_THREADS");
    run(&mut cmd, LIMIT)
}

const COUNTER_PEERS: [&str; 4] = [
    "std::sync::Mutex",
    "parking_lot::Mutex",
    "AtomicU64::fetch_add",
    "crossbeam-channel server (32 in flight)",
];

/// The counter cases, each with the row of worker 1's part of it.
const COUNTER_CASES: [(&str, &str); 3] = [
    (
        "counter: apply_then (async)",
        "counter: apply_then (async): worker 1's share (all remote)",
    ),
    (
        "counter: apply, 1 fiber/worker",
        "counter: apply, 1 fiber/worker: worker 1's share (all remote)",
    ),
    (
        "counter: apply, 64 fibers/worker",
        "counter: apply, 64 fibers/worker: worker 1's share (all remote)",
    ),
];

/// Every (case, peer) row the report must have, in its order; `None`: a Gossamer figure without
/// a peer (worker 1's part of a counter case, right below it).
fn expected_rows() -> Vec<(&'static str, Option<&'static str>)> {
    let mut rows = Vec::new();
    for (i, (case, part)) in COUNTER_CASES.into_iter().enumerate() {
        rows.extend(COUNTER_PEERS.map(|p| (case, Some(p))));
        rows.push((part, None));
        if i == 0 {
            // The promises beside apply_then, from the same run.
            rows.extend([
                (
                    "counter: apply_async (promises), beside apply_then",
                    Some("gsm counter apply_then"),
                ),
                (
                    "counter: apply_async (promises): worker 1's share, beside apply_then's",
                    Some("gsm counter apply_then, worker 1 only"),
                ),
            ]);
        }
    }
    rows.extend([
        ("map 50/50: one trust (on worker 0)", Some("Mutex<HashMap>")),
        (
            "map 50/50: one trust (on worker 0)",
            Some("dashmap::DashMap"),
        ),
        (
            "map 50/50: one trust (on worker 0)",
            Some("one thread, unshared HashMap (bound of one owner)"),
        ),
        (
            "map 50/50: sharded by key over 2 workers",
            Some("dashmap::DashMap"),
        ),
        (
            "map 50/50: sharded by key over 2 workers",
            Some("Mutex<HashMap>"),
        ),
        (
            "latency: blocking apply to the other worker",
            Some("cache-line round trip (AtomicU64 ping-pong)"),
        ),
    ]);
    rows
}

fn positive(row: &serde_json::Value, key: &str, report: &str) -> f64 {
    let v = row[key].as_f64();
    assert!(
        v.is_some_and(|v| v.is_finite() && v > 0.0),
        "{key} of {row} is not a positive number\n{report}"
    );
    v.unwrap_or_default()
}

/// A `--json` path that cannot be written is refused before anything is measured (it was found
/// out after the whole run), and an existing file's content is left as it is.
#[test]
fn an_unwritable_json_path_is_refused_before_the_run() {
    let scratch = Scratch::new("bench-local-json", RunId::next());
    let missing = scratch.join("no-such-dir").join("local.json");
    let done = local(&[
        "--quick",
        "--runs",
        "1",
        "--json",
        missing.to_str().unwrap(),
    ]);
    let report = done.report();
    assert_exit(&done, 1, "gsm-bench local --json into a missing directory");
    assert!(
        done.stderr.contains("cannot write the JSON report to ")
            && done.stderr.contains("nothing was run"),
        "{report}"
    );
    assert!(
        !done.stdout.contains("counter:"),
        "a table was printed\n{report}"
    );
}

#[test]
fn a_quick_run_reports_every_case_beside_every_peer() {
    let scratch = Scratch::new("bench-local", RunId::next());
    let json = scratch.join("local.json");
    let json_arg = json.to_str().expect("scratch paths are UTF-8");
    let done = local(&["--quick", "--runs", "1", "--json", json_arg]);
    assert_exit(&done, 0, "gsm-bench local --quick");
    let report = done.report();
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no JSON report at {}: {e}\n{report}", json.display()));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the report is not JSON: {e}\n{text}"));

    let found: Vec<(&str, Option<&str>)> = rows
        .iter()
        .map(|r| (r["case"].as_str().unwrap_or("?"), r["peer"].as_str()))
        .collect();
    assert_eq!(found, expected_rows(), "rows of the report\n{report}");

    for row in &rows {
        let gsm = positive(row, "gsm", &report);
        let latency = row["unit"] == "ns";
        assert_eq!(
            row["higher_is_better"].as_bool(),
            Some(!latency),
            "{row}\n{report}"
        );
        if row["peer"].is_null() {
            assert!(row["speedup"].is_null(), "{row}\n{report}");
            continue;
        }
        let peer = positive(row, "peer_value", &report);
        let speedup = positive(row, "speedup", &report);
        let want = if latency { peer / gsm } else { gsm / peer };
        assert!(
            (speedup - want).abs() <= 1e-9 * want,
            "speedup of {row} should be {want}\n{report}"
        );
    }
    // Worker 1's part of a counter case is part of its total.
    for (total, part) in COUNTER_CASES {
        let figure = |case: &str| {
            rows.iter()
                .find(|r| r["case"] == case)
                .and_then(|r| r["gsm"].as_f64())
                .unwrap_or_default()
        };
        assert!(
            figure(part) < figure(total),
            "{part} is not below {total}\n{report}"
        );
    }
    // The table goes to stdout too, one line per row.
    for (case, _) in expected_rows() {
        assert!(
            done.stdout.contains(case),
            "no {case:?} in the table\n{report}"
        );
    }
}

#[test]
fn too_few_runs_or_operations_are_refused_with_the_reason() {
    for (args, says) in [
        (
            &["--runs", "3"][..],
            "--runs 3 is too few: every figure is a median of at least 5 runs",
        ),
        (&["--ops", "10"][..], "--ops 10 is too few to time"),
        (
            &["--quick", "--runs", "0"][..],
            "--runs 0 is too few: every figure is a median of at least 5 runs (--quick allows \
             fewer, but at least 1)",
        ),
    ] {
        let done = local(args);
        assert_exit(&done, 1, &format!("gsm-bench local {args:?}"));
        assert!(
            done.stderr.contains(says),
            "gsm-bench local {args:?} should say {says:?}\n{}",
            done.report()
        );
    }
}
