//! A root fiber whose stack cannot be had ends the job with the reason. (The worker thread
//! panicked instead, unseen: one rank ended with "a worker thread died during teardown", and
//! with several ranks the others waited for that root for ever.)
//!
//! Its own test binary: it caps the address space of the whole process.

use std::time::Duration;

#[test]
fn a_root_fiber_whose_stack_cannot_be_mapped_ends_the_job_naming_the_stack() {
    let vm_kib: u64 = std::fs::read_to_string("/proc/self/status")
        .expect("reading /proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize in /proc/self/status");
    // Room for the runtime's threads and rings, not for a 1 GiB fiber stack.
    let cap = (vm_kib << 10) + (256 << 20);
    let limit = libc::rlimit {
        rlim_cur: cap,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a plain setrlimit call with a valid struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let config = gossamer::Config::default().workers(2).stack_size(1 << 30);
        let _ = tx.send(gossamer::run(config, || ()));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the job did not end within 60 s");
    match r {
        Err(gossamer::Error::Start(m)) => {
            assert!(
                m.contains("fiber stack") && m.contains("GSM_STACK_SIZE"),
                "{m}"
            )
        }
        other => panic!("expected the job to end with the stack's failure, got {other:?}"),
    }
}
