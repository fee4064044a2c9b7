//! A root fiber whose stack cannot be had ends the job with the reason. (The worker thread
//! panicked instead, unseen: one rank ended with "a worker thread died during teardown", and
//! with several ranks the others waited for that root for ever.)
//!
//! A worker thread whose stack (which follows the fiber stack size) cannot be had ends the job
//! the same way, naming its stack and the setting.
//!
//! Its own test binary: it caps the address space of the whole process.

use std::time::Duration;

/// Caps this process's address space at what it uses now plus `room` bytes.
fn cap_address_space(room: u64) {
    let vm_kib: u64 = std::fs::read_to_string("/proc/self/status")
        .expect("reading /proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize in /proc/self/status");
    let limit = libc::rlimit {
        rlim_cur: (vm_kib << 10) + room,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a plain setrlimit call with a valid struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
}

/// Runs an empty job with fiber stacks of 1 GiB and returns how it ended.
fn run_with_1_gib_stacks() -> Result<(), gossamer::Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let config = gossamer::Config::default().workers(2).stack_size(1 << 30);
        let _ = tx.send(gossamer::run(config, || ()));
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the job did not end within 60 s")
}

#[test]
fn a_root_fiber_whose_stack_cannot_be_mapped_ends_the_job_naming_the_stack() {
    const GIB: u64 = 1 << 30;
    // Room for the rings, not for the worker threads' stacks (1 GiB and 64 KiB each).
    cap_address_space(256 << 20);
    match run_with_1_gib_stacks() {
        Err(gossamer::Error::Start(m)) => assert!(
            m.contains("worker thread")
                && m.contains("1073807360 bytes")
                && m.contains("GSM_STACK_SIZE"),
            "{m}"
        ),
        other => panic!("expected the job to end with the thread's failure, got {other:?}"),
    }
    // Room for the runtime's threads and rings, not for a 1 GiB fiber stack.
    cap_address_space(2 * (GIB + (64 << 10)) + (256 << 20));
    match run_with_1_gib_stacks() {
        Err(gossamer::Error::Start(m)) => {
            assert!(
                m.contains("fiber stack") && m.contains("GSM_STACK_SIZE"),
                "{m}"
            )
        }
        other => panic!("expected the job to end with the stack's failure, got {other:?}"),
    }
}
