//! `--engine mpi` end to end through `gsmrun`: on 1 and 2 ranks (and as a singleton) the MPI
//! baseline validates every search, chooses the sequential engine's roots, and reports the same
//! edge count m for every search; SCALE 10 also matches the reference's published values; and the
//! distributed validation rejects corrupted searches (the `corrupt` example with `mpi`, on 2 ranks).
//! Ranks started with different arguments, or with a `--json` path rank 0 cannot write, refuse
//! the run before it starts. At SCALE 5, where the root draws run out, the reporting member alone
//! warns that the roots repeat or have no edge; at SCALE 10 nobody does.
//!
//! Needs `gsmrun` built in the same target directory and profile as the test
//! (`cargo build --release -p gsmrun -p graph500`); the runs are bounded by time limits.

mod engines;

use engines::{
    a_bad_json_path_is_refused_before_the_run, a_tiny_graph_warns_once_about_its_roots,
    assert_no_root_warning, assert_reference_roots, assert_same_work, corrupt, distributed,
    distributed_with, mismatched_arguments_are_refused, sequential, sequential_with,
};
use gsm_tests::process::Finished;
use serde_json::Value;

/// Runs the MPI engine on `ranks` ranks through gsmrun (or alone when `ranks` is `None`).
fn mpi(scale: u32, ranks: Option<u32>) -> (Finished, Value) {
    distributed("mpi", scale, ranks, None)
}

#[test]
fn scale_10_matches_the_reference_and_the_sequential_engine() {
    let seq = sequential(10);
    assert_reference_roots(&seq);
    for ranks in [1, 2] {
        let (done, got) = mpi(10, Some(ranks));
        assert_same_work(&seq, &got, &done, ranks);
        assert_no_root_warning(&done);
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
fn scale_16_on_two_ranks_matches_the_sequential_engine_on_eight_roots() {
    let seq = sequential_with(16, &["--roots", "8"]);
    let (done, got) = distributed_with("mpi", 16, Some(2), None, &["--roots", "8"]);
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
    let done = corrupt("mpi", &["-np", "2", "--oversubscribe"]);
    let out = &done.stdout;
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

#[test]
fn scale_5_on_two_ranks_warns_once_that_its_roots_repeat_or_have_no_edge() {
    a_tiny_graph_warns_once_about_its_roots("mpi", None);
}

#[test]
fn a_json_path_rank_0_cannot_write_is_refused_by_every_rank_before_the_run() {
    a_bad_json_path_is_refused_before_the_run("mpi");
}

#[test]
fn ranks_started_with_different_arguments_refuse_the_run() {
    mismatched_arguments_are_refused("mpi");
}

#[test]
fn a_rank_panicking_while_others_wait_in_a_collective_ends_the_job_with_101() {
    let program = gsm_tests::bins::profile_dir().join("examples/mpi_panic");
    assert!(program.is_file(), "missing {}", program.display());
    let mut cmd = gsm_tests::job::gsmrun(["-np", "2", "--oversubscribe", "--timeout", "50"]);
    cmd.arg(&program);
    let done = gsm_tests::process::run(&mut cmd, engines::LIMIT);
    gsm_tests::job::assert_exit(&done, 101, "rank 1 panics while rank 0 waits in a barrier");
}
