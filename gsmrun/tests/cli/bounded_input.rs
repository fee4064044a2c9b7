//! Input that could make gsmrun read without end or print what a terminal acts on: a hostfile
//! that is not a regular file (`/dev/zero`, a FIFO, a directory) or is larger than the limit is
//! refused before it is read whole, with one line and exit 2 within a second; control bytes in
//! a hostfile, a path or an argument are printed escaped.

use crate::common::{BIN, TempDir};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs gsmrun with `args` for at most 5 s (killed then); its status code, stderr and time.
fn bounded(args: &[&str]) -> (Option<i32>, String, Duration) {
    // A directory per call: the tests run at once in one process.
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = TempDir::new(&format!("bounded-stderr-{n}"));
    let err_path = dir.0.join("stderr");
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .args(args)
        .env("GSM_MPI_FLAVOUR", "openmpi")
        .env_remove("SLURM_JOB_ID")
        .env_remove("PBS_NODEFILE")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).expect("creating stderr file"))
        .spawn()
        .expect("run gsmrun");
    let code = loop {
        if let Some(status) = child.try_wait().expect("waiting for gsmrun") {
            break status.code();
        }
        if start.elapsed() >= Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    (
        code,
        std::fs::read_to_string(err_path).unwrap_or_default(),
        elapsed,
    )
}

#[track_caller]
fn refused_in_one_line(args: &[&str], says: &str) {
    let (code, err, took) = bounded(args);
    assert_eq!(code, Some(2), "{args:?} (after {took:?}): {err}");
    assert!(
        took < Duration::from_secs(1),
        "{args:?} took {took:?}: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    assert!(err.contains(says), "{args:?}: lacks {says:?}: {err}");
}

#[test]
fn a_hostfile_that_is_not_a_regular_file_is_refused_unread() {
    refused_in_one_line(
        &["-hostfile", "/dev/zero", "-np", "1", "/bin/true"],
        "gsmrun: hostfile /dev/zero is a character device, not a regular file",
    );
    let dir = TempDir::new("not-regular");
    refused_in_one_line(
        &["-hostfile", &dir.0.display().to_string(), "/bin/true"],
        "is a directory, not a regular file",
    );
    // A FIFO nobody writes to: opening it would block for ever.
    let fifo = dir.0.join("fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("running mkfifo");
    assert!(made.success(), "mkfifo {}", fifo.display());
    refused_in_one_line(
        &["-hostfile", &fifo.display().to_string(), "/bin/true"],
        "is a FIFO, not a regular file",
    );
}

#[test]
fn a_hostfile_over_the_limit_is_refused_unread() {
    let dir = TempDir::new("huge-hostfile");
    let path = dir.0.join("hosts");
    // Sparse: 17 MiB long, no block written.
    let file = std::fs::File::create(&path).expect("creating the hostfile");
    file.set_len(17 << 20).expect("growing the hostfile");
    refused_in_one_line(
        &["-hostfile", &path.display().to_string(), "/bin/true"],
        "has 17825792 bytes or more, over the 16 MiB a hostfile may have",
    );
    // At the limit it is read (and refused for what it holds: NUL bytes).
    file.set_len(16 << 20).expect("shrinking the hostfile");
    let (code, err, _) = bounded(&["-hostfile", &path.display().to_string(), "/bin/true"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains("over the 16 MiB"), "{err}");
}

#[test]
fn control_bytes_in_errors_are_escaped() {
    let dir = TempDir::new("control-bytes");
    let hosts = dir.write("hosts", b"node1 slots=2\nno\0de\x1b[2J slots=1\n");
    let (code, err, _) = bounded(&["-hostfile", &hosts, "/bin/true"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("\\0"), "the NUL is not shown escaped: {err:?}");
    for raw in ['\0', '\x1b'] {
        assert!(!err.contains(raw), "{raw:?} printed raw: {err:?}");
    }
    // In a path and in an argument too.
    let (code, err, _) = bounded(&["-hostfile", "/nonexistent/\x1b[2Jhosts", "/bin/true"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        !err.contains('\x1b') && err.contains("\\u{1b}[2Jhosts"),
        "{err:?}"
    );
    let (code, err, _) = bounded(&["--map-by", "no\x1bde", "/bin/true"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains('\x1b'), "{err:?}");
}

#[test]
fn the_unmodified_probe_lines_exit_2_within_a_second() {
    for args in [
        &["-hostfile", "/dev/zero", "-np", "1", "/bin/true"][..],
        &["-hostfile", "/dev/null", "-np", "1", "/bin/true"],
        &["-hostfile", "/proc/self/status", "-np", "1", "/bin/true"],
    ] {
        let (code, err, took) = bounded(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
    }
}
