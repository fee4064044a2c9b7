//! A program run without a launcher bootstraps as a job of one rank (MPI singleton init).
//!
//! MPI can be initialised once per process, so this file holds a single test.

use gossamer::bootstrap::{BinaryId, BootstrapError, Job};
use std::time::Instant;

#[test]
fn a_program_without_a_launcher_is_a_one_rank_job() {
    let start = Instant::now();
    let job = Job::init(b"my endpoint").expect("singleton bootstrap");
    eprintln!("singleton MPI bootstrap took {:?}", start.elapsed());
    assert_eq!((job.rank(), job.size()), (0, 1));
    assert_eq!(job.local_ranks(), &[0]);
    assert!(job.same_host(0));
    assert!(!job.same_host(1));
    let peers = job.peers();
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].rank, 0);
    assert_eq!(peers[0].pid, std::process::id());
    assert_eq!(peers[0].endpoint, b"my endpoint");
    assert!(!peers[0].hostname.is_empty());
    assert_eq!(peers[0].binary_id, BinaryId::current().unwrap());
    assert_ne!(job.key(), &[0u8; 32], "the key is random, not zeros");
    match std::env::var("GSM_JOB_ID") {
        Ok(id) if !id.is_empty() => assert_eq!(job.job_id(), id),
        _ => assert!(job.job_id().starts_with("gsm-") && job.job_id().len() == 16),
    }
    let debug = format!("{job:?}");
    assert!(debug.contains("<secret>"), "{debug}");
    // A second bootstrap in the same process is refused, not undefined.
    assert!(matches!(
        Job::init(b""),
        Err(BootstrapError::AlreadyInitialised)
    ));
    job.barrier().expect("a one-rank barrier");
    job.finalize();
}
