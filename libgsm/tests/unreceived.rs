//! Messages that arrive and are never received are dropped when the run ends; a run that ended
//! well says so on standard error, once per worker that held them, naming senders and tags. A
//! run whose messages were all received says nothing, and neither does a run that failed.
//! Runs itself as a child process to read its standard error.

use gossamer::{Config, WorkerId, recv, send, spawn_on};
use std::process::Command;

const CHILD: &str = "GSM_UNRECEIVED_CHILD";

/// Worker 0 sends worker 1 three messages under tag 7 and one under tag 9; worker 1 receives
/// `received` of the tag-7 ones, and the tag-9 one too when that is all three. With `fail`, the
/// run then panics.
fn child(received: usize, fail: bool) {
    let r = gossamer::run(Config::default().workers(2), move || {
        for i in 0..3u64 {
            send(WorkerId::new(1), 7, i);
        }
        send(WorkerId::new(1), 9, 9u64);
        let got = spawn_on(WorkerId::new(1), move || {
            let mut got: u64 = (0..received)
                .map(|_| recv::<u64>(WorkerId::new(0), 7))
                .sum();
            if received == 3 {
                got += recv::<u64>(WorkerId::new(0), 9);
            }
            got
        })
        .join();
        assert!(!fail, "deliberate failure, got {got}");
        got
    });
    println!("run: {}", if r.is_ok() { "ok" } else { "failed" });
}

fn run_child(mode: &str) -> (String, String) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "unreceived_messages_are_reported", "--nocapture"])
        .env(CHILD, mode)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unreceived_messages_are_reported() {
    if let Ok(mode) = std::env::var(CHILD) {
        match mode.as_str() {
            "one" => child(1, false),
            "fail" => child(1, true),
            _ => child(3, false),
        }
        return;
    }
    let (out, err) = run_child("one");
    assert!(out.contains("run: ok"), "stdout: {out}\nstderr: {err}");
    let warning = "gossamer: warning: worker 1 ended its run with 3 messages it never received, \
                   now dropped: 2 from worker 0 under tag 0x7, 1 from worker 0 under tag 0x9 \
                   (a send without its recv?)";
    assert_eq!(
        err.matches("gossamer: warning:").count(),
        1,
        "one warning, from worker 1; stderr: {err}"
    );
    assert!(err.contains(warning), "stderr: {err}");

    let (out, err) = run_child("all");
    assert!(out.contains("run: ok"), "stdout: {out}\nstderr: {err}");
    assert!(!err.contains("gossamer: warning"), "stderr: {err}");

    let (out, err) = run_child("fail");
    assert!(out.contains("run: failed"), "stdout: {out}\nstderr: {err}");
    assert!(!err.contains("never received"), "stderr: {err}");
}
