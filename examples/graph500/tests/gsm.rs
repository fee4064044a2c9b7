//! `--engine gsm` end to end through `gsmrun`: on 1 rank of 2 workers, 2 ranks of 1 worker and
//! 2 ranks of 2 workers (and alone, without a launcher) the Gossamer engine validates every
//! search, chooses the sequential engine's roots, and reports the same edge count m for every
//! search; SCALE 10 also matches the reference's published values; and the engine's distributed
//! validation rejects corrupted searches (the `corrupt` example with `gsm`, on 2 ranks of 2 workers).
//!
//! Needs `gsmrun` built in the same target directory and profile as the test
//! (`cargo build --release -p gsmrun -p graph500`); the runs are bounded by time limits.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::process::{Finished, run};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

fn graph500() -> &'static str {
    env!("CARGO_BIN_EXE_graph500")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("graph500-gsm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn read_json(path: &Path, done: &Finished) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no JSON at {}: {e}\n{}", path.display(), done.report()));
    serde_json::from_str(&text).unwrap()
}

/// The sequential engine's JSON results for `scale` (the reference point).
fn sequential(scale: u32) -> Value {
    let json = scratch(&format!("seq-{scale}.json"));
    let done = run(
        Command::new(graph500()).args([&scale.to_string(), "--json", json.to_str().unwrap()]),
        LIMIT,
    );
    assert_exit(&done, 0, "sequential engine");
    read_json(&json, &done)
}

/// Runs the Gossamer engine on `ranks` ranks of `workers` workers through gsmrun (or alone, with
/// `GSM_THREADS`, when `ranks` is `None`).
fn gsm(scale: u32, ranks: Option<u32>, workers: u32) -> (Finished, Value) {
    let json = scratch(&format!("gsm-{scale}-{ranks:?}-{workers}.json"));
    let program = [
        graph500(),
        &scale.to_string(),
        "--engine",
        "gsm",
        "--json",
        json.to_str().unwrap(),
    ];
    let mut cmd = match ranks {
        Some(n) => {
            let mut c = gsmrun([
                "-np",
                &n.to_string(),
                "-t",
                &workers.to_string(),
                "--oversubscribe",
            ]);
            c.args(program);
            c
        }
        None => {
            let mut c = Command::new(program[0]);
            c.args(&program[1..])
                .env("GSM_THREADS", workers.to_string());
            c
        }
    };
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "Gossamer engine");
    let value = read_json(&json, &done);
    (done, value)
}

/// The run searched from the sequential run's roots, found the same m for every search,
/// reported its worker count, and printed exactly one results block.
fn assert_same_work(seq: &Value, got: &Value, done: &Finished, workers: u32) {
    assert_eq!(got["num_mpi_processes"], workers, "{}", done.report());
    assert_eq!(got["roots"], seq["roots"], "roots");
    assert_eq!(got["bfs_nedges"], seq["bfs_nedges"], "BFS edge counts");
    assert_eq!(got["sssp_nedges"], seq["sssp_nedges"], "SSSP edge counts");
    assert_eq!(
        done.stdout.matches("SCALE:").count(),
        1,
        "one results block, from worker 0\n{}",
        done.report()
    );
    assert!(
        done.stdout
            .contains(&format!("num_mpi_processes:              {workers}\n")),
        "{}",
        done.report()
    );
}

#[test]
fn scale_10_matches_the_reference_and_the_sequential_engine() {
    let seq = sequential(10);
    let roots: Vec<u64> = seq["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_u64().unwrap())
        .collect();
    assert_eq!(roots[..8], [458, 214, 220, 966, 395, 9, 848, 777]);
    for (ranks, workers) in [(1, 2), (2, 1)] {
        let (done, got) = gsm(10, Some(ranks), workers);
        assert_same_work(&seq, &got, &done, ranks * workers);
        // Every search reaches the first root's component: 16239 non-self-loop edges.
        assert_eq!(got["bfs_nedges"][0], 16239.0);
        assert_eq!(got["sssp_nedges"][0], 16239.0);
    }
}

#[test]
fn scale_12_on_two_ranks_of_two_workers_matches_the_sequential_engine() {
    let seq = sequential(12);
    let (done, got) = gsm(12, Some(2), 2);
    assert_same_work(&seq, &got, &done, 4);
}

#[test]
fn scale_11_runs_alone_on_two_workers_without_a_launcher() {
    let seq = sequential(11);
    let (done, got) = gsm(11, None, 2);
    assert_same_work(&seq, &got, &done, 2);
}

#[test]
fn distributed_validation_rejects_a_corrupted_parent_and_distance_on_four_workers() {
    // Built by `cargo test` with the package's other examples.
    let program = gsm_tests::bins::profile_dir().join("examples/corrupt");
    assert!(program.is_file(), "missing {}", program.display());
    let mut cmd = gsmrun(["-np", "2", "-t", "2", "--oversubscribe"]);
    cmd.arg(&program).args(["gsm", "10"]);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "every worker reaches the right verdicts");
    let out = &done.stdout;
    for needle in [
        "BFS untouched: Ok(16239)",
        "SSSP untouched: Ok(16239)",
        "BFS corrupted: rejected",
        "rule 4: edge",
        "SSSP corrupted: rejected",
        "rule 3: edge",
    ] {
        assert!(out.contains(needle), "{needle:?}\n{}", done.report());
    }
    assert_eq!(
        out.matches("untouched").count(),
        2,
        "worker 0 alone prints\n{}",
        done.report()
    );
}
