//! Real jobs through `gsmrun` on this machine: every rank says hello once with the right size
//! (also when the hostfile spells one host two ways), ranks start with address-space
//! randomisation off unless `--keep-aslr`, and `--dry-run` prints the placement and command
//! without starting anything.

use gsm_tests::bins::gsm_hello;
use gsm_tests::hello::{ADDR_NO_RANDOMIZE, personalities};
use gsm_tests::job::{assert_exit, assert_ranks, gsmrun};
use gsm_tests::process::{PidGuard, run};
use gsm_tests::scratch::{RunId, Scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn hello_job(np: u32, extra: &[&str]) {
    let guard = PidGuard::new();
    let np_text = np.to_string();
    let mut cmd = gsmrun(["-np", np_text.as_str()]);
    cmd.args(extra).arg(gsm_hello());
    let done = run(&mut cmd, LIMIT);
    let what = format!("gsmrun -np {np} {} gsm-hello", extra.join(" "));
    assert_exit(&done, 0, &what);
    assert_ranks(&done, np, &guard, &what);
}

#[test]
fn one_rank_says_hello() {
    hello_job(1, &[]);
}

#[test]
fn two_ranks_say_hello() {
    hello_job(2, &[]);
}

#[test]
fn four_ranks_oversubscribed_say_hello() {
    hello_job(4, &["--oversubscribe"]);
}

#[test]
fn two_spellings_of_one_host_are_one_host() {
    // Passed on as two hosts, Open MPI refused them: "multiple definitions of the slot count".
    let guard = PidGuard::new();
    let scratch = Scratch::new("hostcase", RunId::next());
    let hostfile = scratch.write("hosts", "Localhost slots=1\nlocalhost slots=1\n");
    let mut cmd = gsmrun(["-np", "2", "-hostfile"]);
    cmd.arg(&hostfile).arg(gsm_hello());
    let done = run(&mut cmd, LIMIT);
    let what = "a hostfile naming Localhost and localhost";
    assert_exit(&done, 0, what);
    assert_ranks(&done, 2, &guard, what);
}

fn personality_job(extra: &[&str]) -> (std::collections::BTreeMap<u32, u32>, String) {
    let guard = PidGuard::new();
    let mut cmd = gsmrun(["-np", "2"]);
    cmd.args(extra).arg(gsm_hello()).arg("--print-personality");
    let done = run(&mut cmd, LIMIT);
    let what = format!(
        "gsmrun -np 2 {} gsm-hello --print-personality",
        extra.join(" ")
    );
    assert_exit(&done, 0, &what);
    assert_ranks(&done, 2, &guard, &what);
    let words = personalities(&done.stdout);
    assert_eq!(
        words.len(),
        2,
        "{what}: expected a personality line from each rank\n{}",
        done.report()
    );
    (words, done.report())
}

#[test]
fn ranks_start_with_aslr_off_by_default() {
    let (words, report) = personality_job(&[]);
    for (rank, word) in words {
        assert!(
            word & ADDR_NO_RANDOMIZE != 0,
            "rank {rank}: personality {word:08x} lacks ADDR_NO_RANDOMIZE ({ADDR_NO_RANDOMIZE:#x})\n{report}"
        );
    }
}

#[test]
fn keep_aslr_leaves_randomisation_on() {
    let (words, report) = personality_job(&["--keep-aslr"]);
    for (rank, word) in words {
        assert!(
            word & ADDR_NO_RANDOMIZE == 0,
            "rank {rank}: personality {word:08x} has ADDR_NO_RANDOMIZE despite --keep-aslr\n{report}"
        );
    }
}

#[test]
fn dry_run_prints_the_placement_and_command_and_starts_nothing() {
    let scratch = Scratch::new("dryrun", RunId::next());
    // Host names that do not resolve: anything that tried to reach them would fail.
    let hostfile = scratch.write(
        "hosts",
        "dryhosta.invalid slots=2\ndryhostb.invalid slots=2\n",
    );
    let mut cmd = gsmrun(["--dry-run", "-np", "4", "-hostfile"]);
    cmd.arg(&hostfile).arg(gsm_hello()).arg("--sleep").arg("30");
    let done = run(&mut cmd, Duration::from_secs(20));
    assert_exit(&done, 0, "gsmrun --dry-run");
    assert!(
        done.elapsed < Duration::from_secs(5),
        "--dry-run took {:?}\n{}",
        done.elapsed,
        done.report()
    );
    assert!(
        !done.stdout.contains("hello from rank"),
        "--dry-run started ranks\n{}",
        done.report()
    );
    let printed = format!("{}{}", done.stdout, done.stderr);
    for needle in [
        "dryhosta.invalid",
        "dryhostb.invalid",
        "-np",
        "4",
        &gsm_hello().display().to_string(),
        "--sleep",
    ] {
        assert!(
            printed.contains(needle),
            "--dry-run output lacks `{needle}`\n{}",
            done.report()
        );
    }
    assert!(
        printed.contains("mpirun") || printed.contains("mpiexec"),
        "--dry-run output names no MPI launcher (mpirun/mpiexec)\n{}",
        done.report()
    );
}
