//! A panic on a worker is one line on standard error, and a delegated closure's panic is not
//! printed on its trustee as well as by its caller: the trustee stays quiet and the caller's
//! failed `apply` prints the one line, with the closure's message in it.
//!
//! The job runs in a child process (this test binary again, told so by an environment
//! variable), whose standard error the parent reads: the panic hook is process-wide.

use std::process::Command;

const CHILD: &str = "GSM_TEST_PANIC_LINES_CHILD";

/// The job: worker 0 applies a closure that panics on worker 1.
#[test]
fn child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let r = gossamer::run(gossamer::Config::default().workers(2), || {
        let t = gossamer::entrust_on(gossamer::WorkerId::new(1), || 0u32);
        t.apply(|_| -> u32 { panic!("the closure's own panic") })
    });
    let e = r.expect_err("the apply failed");
    gossamer::eprint_line(format_args!("child's error: {e}"));
}

#[test]
fn a_delegated_closures_panic_is_one_line_from_its_caller() {
    let out = Command::new(std::env::current_exe().expect("the test knows its executable"))
        .args(["--exact", "child", "--test-threads", "1"])
        .env(CHILD, "1")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("the child runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("the closure's own panic"))
        .collect();
    assert_eq!(lines.len(), 2, "a hook line and the error line:\n{stderr}");
    assert!(
        lines[0].starts_with("gossamer: panic on rank 0, worker 0 at ")
            && lines[0].contains("tests/panic_lines.rs:")
            && lines[0].contains("the delegated closure panicked on its trustee"),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with("child's error: panic on rank 0, worker 0"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("panicked at"),
        "the default hook's form:\n{stderr}"
    );
}
