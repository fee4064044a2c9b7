//! The non-blocking forms (`Promise`, `apply_async`, `post`, `recv_async`, `join_async`, the
//! segment's `_async` operations) across ranks, end to end: `futures_check` (an example of the
//! `gossamer` crate) launched through `gsmrun` on one rank, on two ranks over `shm` and over
//! `tcp`. Each rank must print an `ok` line for every check and its final line, within a time
//! limit.
//!
//! `cargo test -p gsm-tests` does not build other packages' examples: run
//! `cargo build --release --workspace --all-targets` (`make test` does) first.

use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::process::run;
use std::path::PathBuf;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);
const CHECKS: [&str; 6] = ["apply", "failure", "post", "recv", "join", "segment"];

fn futures_check() -> PathBuf {
    let path = gsm_tests::bins::profile_dir()
        .join("examples")
        .join("futures_check");
    assert!(
        path.is_file(),
        "the example `futures_check` is missing at {}: build it with \
         `cargo build --release --workspace --all-targets`",
        path.display()
    );
    path
}

fn job(np: u32, fabric: &str) {
    let np_text = np.to_string();
    let mut cmd = gsmrun([
        "-np",
        np_text.as_str(),
        "--oversubscribe",
        "--fabric",
        fabric,
    ]);
    cmd.arg(futures_check()).env("RUST_BACKTRACE", "0");
    let done = run(&mut cmd, LIMIT);
    let what = format!("gsmrun -np {np} --fabric {fabric} futures_check");
    assert_exit(&done, 0, &what);
    for rank in 0..np {
        for check in CHECKS {
            let line = format!("ok {check} (rank {rank})");
            assert!(
                done.stdout.lines().any(|l| l == line),
                "{what}: no `{line}`\n{}",
                done.report()
            );
        }
        let last = format!("futures_check: rank {rank} of {np} passed");
        assert!(
            done.stdout.lines().any(|l| l == last),
            "{what}: no `{last}`\n{}",
            done.report()
        );
    }
}

#[test]
fn futures_on_one_rank() {
    job(1, "auto");
}

#[test]
fn futures_across_two_ranks_over_shm() {
    job(2, "shm");
}

#[test]
fn futures_across_two_ranks_over_tcp() {
    job(2, "tcp");
}
