//! `--engine mpi` end to end through `gsmrun`: on 1 and 2 ranks (and as a singleton) the MPI
//! baseline validates every search, chooses the sequential engine's roots, and reports the same
//! edge count m for every search; SCALE 10 also matches the reference's published values; and the
//! distributed validation rejects corrupted searches (the `corrupt` example with `mpi`, on 2 ranks).
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
    let dir = std::env::temp_dir().join(format!("graph500-mpi-test-{}", std::process::id()));
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

/// Runs the MPI engine on `ranks` ranks through gsmrun (or alone when `ranks` is `None`).
fn mpi(scale: u32, ranks: Option<u32>) -> (Finished, Value) {
    let json = scratch(&format!("mpi-{scale}-{ranks:?}.json"));
    let program = [
        graph500(),
        &scale.to_string(),
        "--engine",
        "mpi",
        "--json",
        json.to_str().unwrap(),
    ];
    let mut cmd = match ranks {
        Some(n) => {
            let mut c = gsmrun(["-np", &n.to_string(), "--oversubscribe"]);
            c.args(program);
            c
        }
        None => {
            let mut c = Command::new(program[0]);
            c.args(&program[1..])
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            c
        }
    };
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "MPI engine");
    let value = read_json(&json, &done);
    (done, value)
}

/// The MPI run searched from the sequential run's roots, found the same m for every search,
/// reported its rank count, and printed exactly one results block.
fn assert_same_work(seq: &Value, got: &Value, done: &Finished, ranks: u32) {
    assert_eq!(got["num_mpi_processes"], ranks, "{}", done.report());
    assert_eq!(got["roots"], seq["roots"], "roots");
    assert_eq!(got["bfs_nedges"], seq["bfs_nedges"], "BFS edge counts");
    assert_eq!(got["sssp_nedges"], seq["sssp_nedges"], "SSSP edge counts");
    assert_eq!(
        done.stdout.matches("SCALE:").count(),
        1,
        "one results block, from rank 0\n{}",
        done.report()
    );
    assert!(
        done.stdout
            .contains(&format!("num_mpi_processes:              {ranks}\n")),
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
    for ranks in [1, 2] {
        let (done, got) = mpi(10, Some(ranks));
        assert_same_work(&seq, &got, &done, ranks);
        // Every search reaches the first root's component: 16239 non-self-loop edges.
        assert_eq!(got["bfs_nedges"][0], 16239.0);
    }
}

#[test]
fn scale_12_on_two_ranks_matches_the_sequential_engine() {
    let seq = sequential(12);
    let (done, got) = mpi(12, Some(2));
    assert_same_work(&seq, &got, &done, 2);
}

#[test]
fn scale_11_runs_as_a_singleton_without_a_launcher() {
    let seq = sequential(11);
    let (done, got) = mpi(11, None);
    assert_same_work(&seq, &got, &done, 1);
}

#[test]
fn distributed_validation_rejects_a_corrupted_parent_and_distance_on_two_ranks() {
    // Built by `cargo test` with the package's other examples.
    let program = gsm_tests::bins::profile_dir().join("examples/corrupt");
    assert!(program.is_file(), "missing {}", program.display());
    let mut cmd = gsmrun(["-np", "2", "--oversubscribe"]);
    cmd.arg(&program).args(["mpi", "10"]);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "every rank reaches the right verdicts");
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
    // The unhooked leaf's edges are spread over both ranks' edges: the merged failure counts
    // more rule-4 errors than one rank keeps verbatim.
    let bfs_line = out
        .lines()
        .find(|l| l.starts_with("BFS corrupted"))
        .unwrap();
    let total: u64 = bfs_line
        .split("failed with ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("an error count in {bfs_line:?}"));
    assert!(total > 8, "{bfs_line}");
}
