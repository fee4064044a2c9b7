//! The bytes of a serialised trust read as two handles while the trust they came from still
//! lives: the two releases of the bytes' id leave that id in the property's set for good, so
//! the property outlives every handle. Nothing can see that during the run (a release may
//! overtake its registration), but at the end of a run that went well every message has been
//! applied, and the run says so on standard error instead of keeping it silently. Read once,
//! the bytes leave nothing to say. (`refcount.rs` has the case that ends the job: the second
//! release reaching a property already freed.) Runs itself as a child process to read its
//! standard error.

use gossamer::{Config, Trust, WorkerId, entrust_on};
use std::process::Command;

const CHILD: &str = "GSM_TRUST_BYTES_CHILD";

/// Makes a trust on worker 1, serialises it, reads the bytes `reads` times, and drops every
/// handle, the original last.
fn child(reads: usize) {
    let r = gossamer::run(Config::default().workers(2), move || {
        let t = entrust_on(WorkerId::new(1), || 5u64);
        let bytes = postcard::to_allocvec(&t).expect("a trust serialises");
        let copies: Vec<Trust<u64>> = (0..reads)
            .map(|_| postcard::from_bytes(&bytes).expect("the bytes read"))
            .collect();
        let sum: u64 = copies.iter().map(|c| c.apply(|v| *v)).sum();
        drop(copies);
        drop(t);
        sum
    });
    println!("run: {r:?}");
}

fn run_child(reads: usize) -> (String, String) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "bytes_of_a_trust_read_twice_are_reported_at_the_end",
            "--nocapture",
        ])
        .env(CHILD, reads.to_string())
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bytes_of_a_trust_read_twice_are_reported_at_the_end() {
    if let Ok(reads) = std::env::var(CHILD) {
        child(reads.parse().unwrap());
        return;
    }
    let (stdout, stderr) = run_child(2);
    assert!(stdout.contains("run: Ok(10)"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "gossamer: warning: 1 property on worker 1 outlived every trust: a trust id was \
             released twice, as when the bytes of a serialised Trust are deserialised more than \
             once"
        ),
        "{stderr}"
    );
    let (stdout, stderr) = run_child(1);
    assert!(stdout.contains("run: Ok(5)"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}
