//! `--engine gsm` end to end through `gsmrun`: on 1 rank of 2 workers, 2 ranks of 1 worker and
//! 2 ranks of 2 workers (and alone, without a launcher) the Gossamer engine (the delegation
//! kernels; `gsm_bsp.rs` has the bulk-synchronous ones) validates every
//! search, chooses the sequential engine's roots, and reports the same edge count m for every
//! search; SCALE 10 also matches the reference's published values; and the engine's distributed
//! validation rejects corrupted searches (the `corrupt` example with `gsm`, on 2 ranks of 2 workers).
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

/// Runs the Gossamer engine on `ranks` ranks of `workers` workers through gsmrun (or alone, with
/// `GSM_THREADS`, when `ranks` is `None`).
fn gsm(scale: u32, ranks: Option<u32>, workers: u32) -> (Finished, Value) {
    distributed("gsm", scale, ranks, Some(workers))
}

#[test]
fn scale_10_matches_the_reference_and_the_sequential_engine() {
    let seq = sequential(10);
    assert_reference_roots(&seq);
    for (ranks, workers) in [(1, 2), (2, 1)] {
        let (done, got) = gsm(10, Some(ranks), workers);
        assert_same_work(&seq, &got, &done, ranks * workers);
        assert_no_root_warning(&done);
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

/// 32 roots: enough for a vertex settled again after its leaving edges were relaxed (a bug the
/// SSSP kernel's split edges can have) to fail validation on 2 x 1.
#[test]
fn scale_16_on_both_gossamer_engines_matches_the_sequential_engine_on_32_roots() {
    let seq = sequential_with(16, &["--roots", "32"]);
    for engine in ["gsm", "gsm-bsp"] {
        let (done, got) = distributed_with(engine, 16, Some(2), Some(1), &["--roots", "32"]);
        assert_same_work(&seq, &got, &done, 2);
    }
}

/// Without `-t`, the ranks of one host share its CPUs: 2 ranks on this machine's CPUs run one
/// worker per CPU in all, not one per CPU each (they oversubscribed the cores twice over).
#[test]
fn ranks_without_a_worker_count_share_the_host_s_cpus() {
    let seq = sequential(10);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let (done, got) = distributed("gsm", 10, Some(2), None);
    assert_same_work(&seq, &got, &done, 2 * (cpus / 2).max(1));
}

#[test]
fn scale_11_runs_alone_on_two_workers_without_a_launcher() {
    let seq = sequential(11);
    let (done, got) = gsm(11, None, 2);
    assert_same_work(&seq, &got, &done, 2);
}

#[test]
fn distributed_validation_rejects_a_corrupted_parent_and_distance_on_four_workers() {
    let done = corrupt("gsm", &["-np", "2", "-t", "2", "--oversubscribe"]);
    let out = &done.stdout;
    assert_eq!(
        out.matches("untouched").count(),
        2,
        "worker 0 alone prints\n{}",
        done.report()
    );
}

#[test]
fn scale_5_on_two_ranks_of_two_workers_warns_once_that_its_roots_repeat_or_have_no_edge() {
    a_tiny_graph_warns_once_about_its_roots("gsm", Some(2));
}

#[test]
fn a_json_path_rank_0_cannot_write_is_refused_by_every_rank_before_the_run() {
    a_bad_json_path_is_refused_before_the_run("gsm");
}

#[test]
fn ranks_started_with_different_arguments_refuse_the_run() {
    mismatched_arguments_are_refused("gsm");
}
