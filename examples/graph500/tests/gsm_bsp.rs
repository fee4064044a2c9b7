//! `--engine gsm-bsp` (the bulk-synchronous kernels on Gossamer) end to end through `gsmrun`:
//! on 1 rank of 2 workers, 2 ranks of 1 worker and 2 ranks of 2 workers it validates every
//! search, chooses the sequential engine's roots and reports the same edge count m for every
//! search; SCALE 10 also matches the reference's published values. (SCALE 16 is in `gsm.rs`,
//! beside the delegation engine.)

#[allow(dead_code)] // the helpers of the other engines' tests
mod engines;

use engines::{
    assert_no_root_warning, assert_reference_roots, assert_same_work, distributed, sequential,
};

#[test]
fn scale_10_matches_the_reference_and_the_sequential_engine() {
    let seq = sequential(10);
    assert_reference_roots(&seq);
    for (ranks, workers) in [(1, 2), (2, 1)] {
        let (done, got) = distributed("gsm-bsp", 10, Some(ranks), Some(workers));
        assert_same_work(&seq, &got, &done, ranks * workers);
        assert_no_root_warning(&done);
        assert_eq!(got["bfs_nedges"][0], 16239.0);
        assert_eq!(got["sssp_nedges"][0], 16239.0);
    }
}

#[test]
fn scale_12_on_two_ranks_of_two_workers_matches_the_sequential_engine() {
    let seq = sequential(12);
    let (done, got) = distributed("gsm-bsp", 12, Some(2), Some(2));
    assert_same_work(&seq, &got, &done, 4);
}
