//! What the engine tests (`gsm.rs`, `mpi.rs`) share: running the sequential engine as the
//! reference, running a distributed engine through `gsmrun` (or alone), comparing the work done,
//! and running the `corrupt` example.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::process::{Finished, run};
use serde_json::Value;

/// The time limit of one run.
pub const LIMIT: Duration = Duration::from_secs(60);

fn graph500() -> &'static str {
    env!("CARGO_BIN_EXE_graph500")
}

const SCRATCH: &str = "graph500-engine-test-";

/// A path for one run's JSON in this test process's directory. The tests of a process share the
/// directory, so none of them can remove it at the end; instead each JSON file goes once read,
/// and the first call removes the directories of test processes that are gone (every run left
/// one behind before). Every call gets a file of its own: two tests of a process that ran the
/// same reference (`sequential(10)`) at once wrote one file, and the first to read it removed
/// it from under the other ("no JSON at …/seq-10.json", seen once in CI).
fn scratch(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static SWEEP: std::sync::Once = std::sync::Once::new();
    let tmp = std::env::temp_dir();
    SWEEP.call_once(|| {
        for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let pid = e
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(SCRATCH)?.parse().ok());
            if pid.is_some_and(gsm_tests::scratch::owner_gone) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
    let dir = tmp.join(format!("{SCRATCH}{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!("{n}-{name}"))
}

fn read_json(path: &Path, done: &Finished) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no JSON at {}: {e}\n{}", path.display(), done.report()));
    let _ = std::fs::remove_file(path);
    serde_json::from_str(&text).unwrap()
}

/// The sequential engine's JSON results for `scale` (the reference point).
pub fn sequential(scale: u32) -> Value {
    sequential_with(scale, &[])
}

/// [`sequential`] with more arguments (`--roots 8`, say).
pub fn sequential_with(scale: u32, extra: &[&str]) -> Value {
    let json = scratch(&format!("seq-{scale}.json"));
    let done = run(
        Command::new(graph500())
            .args([&scale.to_string(), "--json", json.to_str().unwrap()])
            .args(extra),
        LIMIT,
    );
    assert_exit(&done, 0, "sequential engine");
    read_json(&json, &done)
}

/// Runs `--engine {engine}` on `ranks` ranks through gsmrun, with `workers` workers per rank
/// when given (`-t`, or `GSM_THREADS` alone), or alone without a launcher when `ranks` is `None`.
pub fn distributed(
    engine: &str,
    scale: u32,
    ranks: Option<u32>,
    workers: Option<u32>,
) -> (Finished, Value) {
    distributed_with(engine, scale, ranks, workers, &[])
}

/// [`distributed`] with more arguments for the program (`--roots 8`, say).
pub fn distributed_with(
    engine: &str,
    scale: u32,
    ranks: Option<u32>,
    workers: Option<u32>,
    extra: &[&str],
) -> (Finished, Value) {
    let json = scratch(&format!("{engine}-{scale}-{ranks:?}-{workers:?}.json"));
    let program = [
        graph500(),
        &scale.to_string(),
        "--engine",
        engine,
        "--json",
        json.to_str().unwrap(),
    ];
    let mut cmd = match ranks {
        Some(n) => {
            let mut c = gsmrun(["-np", &n.to_string(), "--oversubscribe"]);
            if let Some(w) = workers {
                c.args(["-t", &w.to_string()]);
            }
            c.args(program).args(extra);
            c
        }
        None => {
            let mut c = Command::new(program[0]);
            c.args(&program[1..])
                .args(extra)
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            if let Some(w) = workers {
                c.env("GSM_THREADS", w.to_string());
            }
            c
        }
    };
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, &format!("--engine {engine}"));
    let value = read_json(&json, &done);
    (done, value)
}

/// The run searched from the sequential run's roots, found the same m for every search,
/// reported its process count (`count`: workers or ranks), and printed exactly one results block.
pub fn assert_same_work(seq: &Value, got: &Value, done: &Finished, count: u32) {
    assert_eq!(got["num_mpi_processes"], count, "{}", done.report());
    assert_eq!(got["roots"], seq["roots"], "roots");
    assert_eq!(got["bfs_nedges"], seq["bfs_nedges"], "BFS edge counts");
    assert_eq!(got["sssp_nedges"], seq["sssp_nedges"], "SSSP edge counts");
    assert_eq!(
        done.stdout.matches("SCALE:").count(),
        1,
        "one results block, from the first process\n{}",
        done.report()
    );
    assert!(
        done.stdout
            .contains(&format!("num_mpi_processes:              {count}\n")),
        "{}",
        done.report()
    );
}

/// The first roots at SCALE 10 are the reference's.
pub fn assert_reference_roots(seq: &Value) {
    let roots: Vec<u64> = seq["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_u64().unwrap())
        .collect();
    assert_eq!(roots[..8], [458, 214, 220, 966, 395, 9, 848, 777]);
}

/// Runs the `corrupt` example with `engine` at SCALE 10 under `gsmrun {launch}`: every process
/// must reach the right verdicts, untouched searches pass and both corrupted ones are rejected
/// by the rule that each breaks. Returns the run for engine-specific checks.
pub fn corrupt(engine: &str, launch: &[&str]) -> Finished {
    // Built by `cargo test` with the package's other examples.
    let program = gsm_tests::bins::profile_dir().join("examples/corrupt");
    assert!(program.is_file(), "missing {}", program.display());
    let mut cmd = gsmrun(launch);
    cmd.arg(&program).args([engine, "10"]);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "every process reaches the right verdicts");
    for needle in [
        "BFS untouched: Ok(16239)",
        "SSSP untouched: Ok(16239)",
        "BFS corrupted: rejected",
        "rule 4: edge",
        "SSSP corrupted: rejected",
        "rule 3: edge",
    ] {
        assert!(
            done.stdout.contains(needle),
            "{needle:?}\n{}",
            done.report()
        );
    }
    done
}

/// Runs `--engine {engine}` on 2 ranks where rank 1 alone is started with edgefactor 8: every
/// rank must refuse the run with exit 2 and rank 0 must say which member differs. (Each rank
/// generated its own edgefactor's share of the edges, and the wrong graph validated.)
pub fn mismatched_arguments_are_refused(engine: &str) {
    let mut cmd = gsmrun(["-np", "2", "--oversubscribe", "--timeout", "50"]);
    cmd.arg(gsm_tests::bins::testbed_script("by-rank"))
        .args(["1", graph500(), "10", "8", "--engine", engine])
        .args(["--", "10", "--engine", engine]);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 2, "ranks started with different edgefactors");
    assert!(
        done.stderr.contains("member ") && done.stderr.contains("every rank must get the same"),
        "the error must name the member whose arguments differ\n{}",
        done.report()
    );
}

/// Runs `--engine {engine}` at SCALE 8 on 2 ranks where rank 0, which writes the JSON, is given
/// a `--json` path in a directory that does not exist and rank 1 none: every rank must refuse the
/// run before it starts (exit 2, no results block), naming the path and the OS error; the path
/// was found unwritable only after the run, which had printed its results and exited 1. Then the
/// other way round, rank 0 given a good path and rank 1 the bad one: the run succeeds, since only
/// rank 0's path is checked (rank 1 does not write, and on another host need not see rank 0's
/// directories).
pub fn a_bad_json_path_is_refused_before_the_run(engine: &str) {
    let missing = scratch("no-such-dir").join("results.json");
    let good = scratch(&format!("{engine}-rank-0-writes.json"));
    let _ = std::fs::remove_file(&good);
    // Rank `rank` gets `--json mine`, the other rank `--json theirs` if given.
    let by_rank = |rank: &str, mine: &Path, theirs: Option<&Path>| {
        let mut cmd = gsmrun(["-np", "2", "--oversubscribe", "--timeout", "50"]);
        cmd.arg(gsm_tests::bins::testbed_script("by-rank"))
            .args([rank, graph500(), "8", "--engine", engine, "--json"])
            .arg(mine)
            .args(["--", "8", "--engine", engine]);
        if let Some(theirs) = theirs {
            cmd.arg("--json").arg(theirs);
        }
        run(&mut cmd, LIMIT)
    };

    let done = by_rank("0", &missing, None);
    assert_exit(&done, 2, "rank 0 given a --json path it cannot write");
    let message = format!(
        "cannot write the JSON results to {} on host",
        missing.display()
    );
    assert!(
        done.stderr.contains(&message) && done.stderr.contains("No such file or directory"),
        "the error must name the path and the OS error\n{}",
        done.report()
    );
    assert!(
        !done.stdout.contains("SCALE:"),
        "refused before the run: no results\n{}",
        done.report()
    );

    let done = by_rank("1", &missing, Some(&good));
    assert_exit(&done, 0, "rank 1 alone given a --json path it cannot write");
    let written = read_json(&good, &done);
    assert_eq!(written["SCALE"], 8, "{}", done.report());
}

/// The start of the warning that the roots are not all distinct vertices with an edge.
pub const ROOT_WARNING: &str = "graph500: warning: ";

/// The run printed no warning about its roots (they were all real).
pub fn assert_no_root_warning(done: &Finished) {
    assert!(
        !done.stderr.contains(ROOT_WARNING),
        "no warning about the roots\n{}",
        done.report()
    );
}

/// Runs `--engine {engine}` at SCALE 5 on 2 ranks (of `workers` workers, when given), where the
/// root draws run out: the searches run from the sequential engine's roots with the same m, the
/// block is the reference's (harmonic means of 0, from the roots without an edge), and the
/// reporting member alone warns, once, that only 30 of the 64 roots are real.
pub fn a_tiny_graph_warns_once_about_its_roots(engine: &str, workers: Option<u32>) {
    let seq = sequential(5);
    let (done, got) = distributed(engine, 5, Some(2), workers);
    assert_same_work(&seq, &got, &done, 2 * workers.unwrap_or(1));
    assert!(
        done.stdout.contains("bfs  harmonic_mean_TEPS:     !  0\n"),
        "the reference's block, unchanged\n{}",
        done.report()
    );
    assert_eq!(
        done.stderr.matches(ROOT_WARNING).count(),
        1,
        "one warning, from the reporting member\n{}",
        done.report()
    );
    for needle in [
        "only 30 of the 64 search roots are distinct vertices with an edge",
        "32 repeat an earlier root and 2 have no edge",
        "TEPS statistics include zeros",
        "--roots 19 or fewer",
    ] {
        assert!(
            done.stderr.contains(needle),
            "{needle:?}\n{}",
            done.report()
        );
    }
}
