//! How a `gsmrun` job ends when something goes wrong: fate sharing on a rank's failure (fast,
//! naming the rank), a segfault, SIGINT to `gsmrun`, `--timeout`, bad input (exit 2), and a
//! launcher that cannot reach a host (exit 1), leaving nothing of that attempt behind, a reader
//! that closes gsmrun's stdout; and that output reaches it byte for byte.

use gsm_tests::bins::{gsm_hello, hydra_path, testbed_script};
use gsm_tests::hello::hellos;
use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::process::{PidGuard, run, spawn};
use gsm_tests::scratch::{RunId, Scratch};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// Asserts that every rank the job reported is gone (within a short grace).
#[track_caller]
fn assert_no_rank_left(guard: &PidGuard, stdout: &str, what: &str, report: &str) {
    for hello in hellos(stdout) {
        guard.watch(hello.pid, "gsm-hello");
    }
    let left = guard.survivors(Duration::from_millis(500));
    assert!(
        left.is_empty(),
        "{what}: gsm-hello processes {left:?} still running after gsmrun exited\n{report}"
    );
}

#[test]
fn a_rank_exiting_3_ends_the_job_fast_with_status_3() {
    let guard = PidGuard::new();
    // Rank 1 says hello and exits 3 at once; rank 0 would sleep 30 s (gsm-hello's --sleep applies
    // to every rank, so `by-rank` gives the ranks different arguments).
    let mut cmd = gsmrun(["-np", "2"]);
    cmd.arg(testbed_script("by-rank"))
        .args(["1"])
        .arg(gsm_hello())
        .args([
            "--fail-rank",
            "1",
            "--exit-code",
            "3",
            "--",
            "--sleep",
            "30",
        ]);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 3, "a rank exiting 3");
    let failed_at = done
        .stdout_lines
        .iter()
        .find(|l| l.text.contains("hello from rank 1 "))
        .map(|l| l.at);
    eprintln!(
        "rank 1 said hello at {failed_at:?}; gsmrun exited at {:?}",
        done.elapsed
    );
    assert!(
        done.elapsed < Duration::from_secs(3),
        "the job took {:?} to end after rank 1 failed (rank 0 sleeps 30 s; expected < 3 s in all, < 2 s after the failure)\n{}",
        done.elapsed,
        done.report()
    );
    if let Some(at) = failed_at {
        assert!(
            done.elapsed.saturating_sub(at) < Duration::from_secs(2),
            "gsmrun exited {:?} after rank 1's last output (expected < 2 s)\n{}",
            done.elapsed - at,
            done.report()
        );
    }
    assert!(
        done.stderr.contains("rank 1") && done.stderr.contains("status 3"),
        "stderr does not name rank 1 and its status 3\n{}",
        done.report()
    );
    assert_no_rank_left(&guard, &done.stdout, "a rank exiting 3", &done.report());
}

/// Checks the test program, not `gsmrun`: run alone (an MPI singleton), `--segfault-rank 0` must
/// die of SIGSEGV, or the segfault test below cannot tell anything about `gsmrun`.
#[test]
fn testbed_gsm_hello_segfault_switch_dies_of_sigsegv() {
    let mut cmd = std::process::Command::new(gsm_hello());
    cmd.args(["--segfault-rank", "0"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let done = run(&mut cmd, Duration::from_secs(20));
    assert_exit(
        &done,
        139,
        "gsm-hello --segfault-rank 0 run alone (a bug in gsm-hello, not gsmrun)",
    );
}

#[test]
fn a_segfaulting_rank_ends_the_job_with_139() {
    let guard = PidGuard::new();
    let mut cmd = gsmrun(["-np", "2"]);
    cmd.arg(gsm_hello()).args(["--segfault-rank", "1"]);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 139, "a rank dying of SIGSEGV");
    assert!(
        done.stderr.contains("rank 1"),
        "stderr does not name rank 1\n{}",
        done.report()
    );
    assert_no_rank_left(&guard, &done.stdout, "a segfault", &done.report());
}

/// The same through a rank that is a shell killing itself with SIGSEGV while the other sleeps,
/// so `gsmrun`'s handling of a signal death is checked whatever `gsm-hello`'s switch does.
#[test]
fn a_rank_killed_by_sigsegv_ends_the_job_fast_with_139() {
    let mut cmd = gsmrun(["-np", "2"]);
    cmd.arg(testbed_script("by-rank")).args([
        "1",
        "/bin/sh",
        "-c",
        "kill -SEGV $$",
        "--",
        "-c",
        "sleep 30",
    ]);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 139, "a rank (a shell) killed by SIGSEGV");
    assert!(
        done.elapsed < Duration::from_secs(5),
        "the job took {:?} to end\n{}",
        done.elapsed,
        done.report()
    );
    assert!(
        done.stderr.contains("rank 1") && done.stderr.contains("signal"),
        "stderr does not name rank 1 and the signal\n{}",
        done.report()
    );
}

#[test]
fn sigint_to_gsmrun_ends_every_rank_with_130() {
    let guard = PidGuard::new();
    let mut cmd = gsmrun(["-np", "2"]);
    cmd.arg(gsm_hello()).args(["--sleep", "30"]);
    let mut job = spawn(&mut cmd);
    let started = job.wait_for_stdout(Duration::from_secs(30), |lines| {
        lines
            .iter()
            .filter(|l| l.text.contains("hello from rank"))
            .count()
            >= 2
    });
    for hello in hellos(
        &job.stdout_lines()
            .iter()
            .map(|l| format!("{}\n", l.text))
            .collect::<String>(),
    ) {
        guard.watch(hello.pid, "gsm-hello");
    }
    job.signal(libc::SIGINT);
    let done = job.wait(Duration::from_secs(15));
    assert!(
        started,
        "both ranks did not say hello before the SIGINT\n{}",
        done.report()
    );
    assert_exit(&done, 130, "SIGINT to gsmrun");
    assert!(
        done.elapsed < Duration::from_secs(10),
        "SIGINT took too long to end the job\n{}",
        done.report()
    );
    assert_no_rank_left(&guard, &done.stdout, "SIGINT to gsmrun", &done.report());
}

/// SIGUSR1 to `gsmrun` reaches every rank's program and the job goes on, as under `mpirun`
/// (Slurm's `--signal=USR1@…` asks for a checkpoint so); SIGQUIT ends it as SIGTERM does. Both
/// used to kill `gsmrun` on the spot (exit 138 and 131, no word), leaving the ranks to the
/// launcher and the job's files behind.
#[test]
fn sigusr1_reaches_every_rank_and_sigquit_ends_the_job() {
    let scratch = Scratch::new("usr1", RunId::next());
    let script = scratch.write(
        "trap.sh",
        "got=0\ntrap 'echo \"rank $GSM_RANK got USR1\"; got=1' USR1\necho \"ready $GSM_RANK\"\n\
         for i in $(seq 150); do [ $got = 1 ] && break; sleep 0.1; done\necho \"rank $GSM_RANK done\"\n",
    );
    let ready = |lines: &[gsm_tests::process::Line]| {
        lines
            .iter()
            .filter(|l| l.text.starts_with("ready "))
            .count()
            >= 2
    };
    let mut cmd = gsmrun(["-np", "2", "bash"]);
    cmd.arg(&script);
    let mut job = spawn(&mut cmd);
    let started = job.wait_for_stdout(Duration::from_secs(30), ready);
    job.signal(libc::SIGUSR1);
    let done = job.wait(Duration::from_secs(30));
    assert!(started, "the ranks did not start\n{}", done.report());
    assert_exit(&done, 0, "SIGUSR1 to gsmrun");
    for r in 0..2 {
        for line in [format!("rank {r} got USR1"), format!("rank {r} done")] {
            assert!(
                done.stdout.lines().any(|l| l == line),
                "SIGUSR1 to gsmrun: no `{line}`\n{}",
                done.report()
            );
        }
    }
    assert!(
        done.elapsed < Duration::from_secs(12),
        "the ranks did not see SIGUSR1 (they wait 15 s for it)\n{}",
        done.report()
    );
    assert!(
        done.stderr
            .contains("received SIGUSR1; passing it to every rank"),
        "{}",
        done.report()
    );

    let mut cmd = gsmrun(["-np", "2", "bash"]);
    cmd.arg(&script);
    let mut job = spawn(&mut cmd);
    let started = job.wait_for_stdout(Duration::from_secs(30), ready);
    job.signal(libc::SIGQUIT);
    let done = job.wait(Duration::from_secs(15));
    assert!(started, "the ranks did not start\n{}", done.report());
    assert_exit(&done, 131, "SIGQUIT to gsmrun");
    assert!(
        done.stderr.contains("received SIGQUIT; ending the job") && !done.stdout.contains(" done"),
        "SIGQUIT to gsmrun: the job was not ended with a report\n{}",
        done.report()
    );
}

#[test]
fn timeout_ends_the_job_and_names_the_timeout() {
    let guard = PidGuard::new();
    let mut cmd = gsmrun(["-np", "2", "--timeout", "1"]);
    cmd.arg(gsm_hello()).args(["--sleep", "30"]);
    let done = run(&mut cmd, LIMIT);
    assert!(
        !done.timed_out && done.elapsed < Duration::from_secs(5),
        "--timeout 1 did not end the job promptly\n{}",
        done.report()
    );
    assert!(
        !done.status.success(),
        "a job ended by --timeout reported success\n{}",
        done.report()
    );
    assert!(
        done.stderr.to_lowercase().contains("timeout"),
        "stderr does not name the timeout\n{}",
        done.report()
    );
    assert_no_rank_left(&guard, &done.stdout, "--timeout", &done.report());
}

#[test]
fn a_bad_hostfile_exits_2_naming_file_line_and_column() {
    let scratch = Scratch::new("badhosts", RunId::next());
    let hostfile = scratch.write(
        "hosts",
        "# two hosts\nnodea slots=2\nnodeb slots=2 slots=3\n",
    );
    let mut cmd = gsmrun(["-np", "2", "-hostfile"]);
    cmd.arg(&hostfile).arg(gsm_hello());
    let done = run(&mut cmd, Duration::from_secs(20));
    assert_exit(&done, 2, "a hostfile with a duplicated slots");
    let prefix = format!("{}:3:", hostfile.display());
    let column_follows = done
        .stderr
        .match_indices(&prefix)
        .any(|(at, _)| done.stderr[at + prefix.len()..].starts_with(|c: char| c.is_ascii_digit()));
    assert!(
        column_follows,
        "stderr lacks `{prefix}COLUMN`\n{}",
        done.report()
    );
    assert!(
        !done.stdout.contains("hello from rank"),
        "ranks started despite the bad hostfile\n{}",
        done.report()
    );
}

#[test]
fn an_unresolvable_host_is_refused_in_one_line_before_launching() {
    // Before the look-up, mpirun printed its ORTE pages and gsmrun exited 1 after them.
    let scratch = Scratch::new("nohost", RunId::next());
    let hostfile = scratch.write("hosts", "# two lines\nnosuchhost.invalid slots=1\n");
    let mut cmd = gsmrun(["-np", "1", "-hostfile"]);
    cmd.arg(&hostfile).arg(gsm_hello());
    let began = std::time::Instant::now();
    let done = run(&mut cmd, Duration::from_secs(30));
    let took = began.elapsed();
    assert_exit(&done, 2, "a host whose name does not resolve");
    let at = format!("{}:2:1", hostfile.display());
    assert!(
        done.stderr.trim_end().lines().count() == 1
            && done.stderr.contains("host nosuchhost.invalid")
            && done.stderr.contains(&at)
            && done.stderr.contains("does not resolve"),
        "stderr is not one line naming the host and {at}\n{}",
        done.report()
    );
    // The look-ups wait at most 0.8 s; the margin is for a loaded machine.
    assert!(took < Duration::from_secs(5), "refused after {took:?}");
    let mut cmd = gsmrun(["-np", "2", "-H", "localhost,nosuchhost.invalid"]);
    cmd.arg(gsm_hello());
    let done = run(&mut cmd, Duration::from_secs(30));
    assert_exit(&done, 2, "-H with a host whose name does not resolve");
    assert!(
        done.stderr.trim_end().lines().count() == 1
            && done.stderr.contains("host nosuchhost.invalid (-H/--host)"),
        "stderr does not name the -H host in one line\n{}",
        done.report()
    );
}

#[test]
fn more_ranks_than_slots_without_oversubscribe_exits_2() {
    let scratch = Scratch::new("fewslots", RunId::next());
    let hostfile = scratch.write("hosts", "localhost slots=1\n");
    let mut cmd = gsmrun(["-np", "2", "-hostfile"]);
    cmd.arg(&hostfile).arg(gsm_hello());
    let done = run(&mut cmd, Duration::from_secs(20));
    assert_exit(&done, 2, "2 ranks on 1 slot without --oversubscribe");
    assert!(
        done.stderr.contains("--oversubscribe"),
        "stderr does not say to add --oversubscribe\n{}",
        done.report()
    );
    assert!(
        !done.stdout.contains("hello from rank"),
        "ranks started despite too few slots\n{}",
        done.report()
    );
}

/// `gsmrun … | head`: once the reader closes gsmrun's stdout, the job ends as a filter killed by
/// SIGPIPE does (status 141, no message), instead of the ranks running on with their output
/// thrown away. Each rank prints its PID, then floods stdout with `yes`.
#[test]
fn a_closed_stdout_pipe_ends_the_job_with_141() {
    use std::io::{BufRead as _, BufReader};
    use std::os::unix::process::CommandExt as _;
    use std::process::Stdio;
    let guard = PidGuard::new();
    let mut cmd = gsmrun(["-np", "2", "sh", "-c", "echo pid $$; exec yes"]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().expect("gsmrun starts");
    let gsmrun_pid = child.id() as i32;
    // Kills gsmrun's group however the test ends; the ranks are in the guard.
    let _group = scopeguard(move || {
        // SAFETY: kill(2) on the process group this test created; ESRCH once it is gone.
        unsafe { libc::kill(-gsmrun_pid, libc::SIGKILL) };
    });
    let stderr = child.stderr.take().expect("stderr is piped");
    let err_reader =
        std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let mut out = BufReader::new(child.stdout.take().expect("stdout is piped"));
    let mut pids = Vec::new();
    let mut line = String::new();
    // Both PIDs come within the first lines of either rank; the bound keeps a broken job from
    // keeping the test reading.
    for _ in 0..1_000_000 {
        line.clear();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(pid) = line.trim().strip_prefix("pid ") {
            let pid: u32 = pid.parse().expect("a PID");
            guard.watch(pid, "yes");
            pids.push(pid);
            if pids.len() == 2 {
                break;
            }
        }
    }
    assert_eq!(pids.len(), 2, "both ranks print their PID first");
    drop(out);
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for gsmrun") {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if status.is_none() {
        // SAFETY: as above.
        unsafe { libc::kill(-gsmrun_pid, libc::SIGKILL) };
        let _ = child.wait();
    }
    let stderr = err_reader.join().unwrap_or_default();
    let status = status.unwrap_or_else(|| {
        panic!("gsmrun ran on for 20 s after its stdout was closed; stderr:\n{stderr}")
    });
    assert_eq!(
        status.code(),
        Some(141),
        "gsmrun must end like a filter killed by SIGPIPE; stderr:\n{stderr}"
    );
    assert!(
        !stderr.contains("ending the job"),
        "a closed pipe is the reader's choice, not an error to report; stderr:\n{stderr}"
    );
    let left = guard.survivors(Duration::from_secs(5));
    assert!(
        left.is_empty(),
        "ranks {left:?} still run; stderr:\n{stderr}"
    );
}

/// A rank's output reaches gsmrun's stdout byte for byte, as `mpirun` passes it: no newline is
/// added after a last line without one, and binary data goes through unchanged.
#[test]
fn output_arrives_byte_for_byte() {
    let scratch = Scratch::new("failures", RunId::next());
    let data: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let file = scratch.join("data.bin");
    std::fs::write(&file, &data).expect("the scratch directory is writable");
    let exact = |args: &[&str], expected: &[u8], what: &str| {
        let mut cmd = gsmrun(["--timeout", "60", "-np", "1"]);
        cmd.args(args);
        let out = cmd.output().expect("gsmrun starts");
        assert_eq!(out.status.code(), Some(0), "{what}: {out:?}");
        assert!(
            out.stdout == expected,
            "{what}: {} bytes out for {} in; the first difference at byte {:?}",
            out.stdout.len(),
            expected.len(),
            out.stdout.iter().zip(expected).position(|(a, b)| a != b)
        );
    };
    exact(
        &["printf", "no newline"],
        b"no newline",
        "printf without a newline",
    );
    exact(
        &["cat", file.to_str().expect("a UTF-8 path")],
        &data,
        "cat of binary data",
    );
    // Arguments reach the program unchanged, bytes that are not UTF-8 included (gsmrun refused
    // them: "invalid UTF-8 was detected").
    use std::os::unix::ffi::OsStrExt as _;
    let odd = std::ffi::OsStr::from_bytes(b"\xff\xfe-arg");
    let out = gsmrun(["--timeout", "60", "-np", "1", "printf", "%s"])
        .arg(odd)
        .output()
        .expect("gsmrun starts");
    assert_eq!(out.status.code(), Some(0), "a non-UTF-8 argument: {out:?}");
    assert_eq!(out.stdout, b"\xff\xfe-arg", "a non-UTF-8 argument: {out:?}");
    // So do arguments made of colons, under either MPI launcher: each takes a bare `:` as the
    // start of another program (Open MPI's mpirun refused the job for lack of slots; Hydra ran
    // the program with `a` alone and then tried to run `b`).
    let colons = ["a", ":", "b", "::", ":c", ""];
    let expected = "[a][:][b][::][:c][]";
    let path = hydra_path(scratch.path());
    for hydra in [false, true] {
        let mut cmd = gsmrun(["--timeout", "60", "-np", "1"]);
        if hydra {
            cmd.args(["--launcher", "mpiexec"]).env("PATH", &path);
        }
        cmd.args(["printf", "[%s]"]).args(colons);
        let out = cmd.output().expect("gsmrun starts");
        let what = if hydra { "under Hydra" } else { "under mpirun" };
        assert_eq!(out.status.code(), Some(0), "colons {what}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            expected,
            "colons {what}: {out:?}"
        );
    }
}

/// A rank stopped in the middle of a long line (70 KB without a newline, then a sleep) holds
/// the other ranks' output up once, for about a second, not at each of their lines: rank 1's ten
/// lines and its failure come out within a few seconds. (Each line used to wait a second.)
#[test]
fn a_rank_stopped_inside_a_long_line_holds_the_others_up_once() {
    let script = "if [ \"$GSM_RANK\" = 0 ]; then head -c 70000 /dev/zero | tr '\\0' x; sleep 60; \
                  else sleep 1; for i in $(seq 10); do echo result $i; sleep 0.05; done; exit 3; fi";
    let start = Instant::now();
    let out = gsmrun(["--timeout", "60", "-np", "2", "sh", "-c", script])
        .output()
        .expect("gsmrun starts");
    let took = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        (1..=10).all(|i| stdout.contains(&format!("result {i}\n"))),
        "rank 1's lines are missing: {stdout:.300}"
    );
    assert!(
        took < Duration::from_secs(6),
        "the job took {took:?} to end; stderr:\n{stderr}"
    );
}

/// Lines longer than gsmrun's 64 KiB pieces stay whole and tagged once, while two ranks print
/// them at the same time (with `--tag-output`, 200 KB lines came out with the tag three times,
/// two of them inside the line; without it, 17 of 40 lines of 300 KB were mixed between ranks).
#[test]
fn long_lines_of_two_ranks_stay_whole() {
    const LEN: usize = 300_000;
    const LINES: usize = 10;
    let script = format!(
        "for i in $(seq {LINES}); do head -c {LEN} /dev/zero | tr '\\0' \"$GSM_RANK\"; echo; done"
    );
    for tag in [false, true] {
        let mut cmd = gsmrun(["--timeout", "60", "-np", "2"]);
        if tag {
            cmd.arg("--tag-output");
        }
        cmd.args(["bash", "-c", &script]);
        let out = cmd.output().expect("gsmrun starts");
        let what = if tag { "with --tag-output" } else { "untagged" };
        assert_eq!(out.status.code(), Some(0), "{what}: {:?}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        let mut per_rank = [0usize; 2];
        for (n, line) in text.lines().enumerate() {
            let body = if tag {
                match ["[1,0]<stdout>:", "[1,1]<stdout>:"]
                    .iter()
                    .find_map(|t| line.strip_prefix(t))
                {
                    Some(b) => b,
                    None => panic!("{what}: line {n} has no tag: {:.60}…", line),
                }
            } else {
                line
            };
            let rank = body.chars().next().and_then(|c| c.to_digit(10));
            let whole = body.len() == LEN && body.bytes().all(|b| b == body.as_bytes()[0]);
            assert!(
                whole && rank.is_some_and(|r| r < 2),
                "{what}: line {n} is not one rank's whole line ({} bytes, starts {:.40}…)",
                body.len(),
                body
            );
            if tag {
                assert!(
                    line.starts_with(&format!("[1,{}]", rank.unwrap())),
                    "{what}: line {n}: the tag names another rank"
                );
            }
            per_rank[rank.unwrap() as usize] += 1;
        }
        assert_eq!(per_rank, [LINES, LINES], "{what}: lines per rank");
    }
}

/// What a rank's program leaves running in its process group when it exits ends with it, and
/// does not hold the rank's report back: a `sleep 300 &` kept the output pipes open, so each
/// rank's end was reported only after the wrapper's waits, and the `sleep` outlived the job,
/// when the rank exited 0 as when it failed.
#[test]
fn what_a_rank_leaves_running_ends_with_it() {
    for (code, script) in [
        (0, "sleep 300 & echo \"left $!\"; exit 0"),
        (
            3,
            "sleep 300 & echo \"left $!\"; [ $GSM_RANK = 1 ] && exit 3; sleep 30",
        ),
    ] {
        let guard = PidGuard::new();
        let mut cmd = gsmrun(["--timeout", "60", "-np", "2", "bash", "-c", script]);
        let done = run(&mut cmd, LIMIT);
        let left: Vec<u32> = done
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("left ")?.parse().ok())
            .collect();
        for &pid in &left {
            guard.watch(pid, "sleep");
        }
        assert_exit(&done, code, script);
        assert!(
            !left.is_empty(),
            "{script}: no rank said what it left\n{}",
            done.report()
        );
        assert!(
            done.elapsed < Duration::from_secs(4),
            "{script}: the job took {:?}\n{}",
            done.elapsed,
            done.report()
        );
        let alive = guard.survivors(Duration::from_millis(500));
        assert!(
            alive.is_empty(),
            "{script}: {alive:?} outlived the job\n{}",
            done.report()
        );
    }
}

/// A launcher that never starts every rank ends the job at `--start-timeout`, with a line that
/// names the ranks missing and their hosts, and nothing of the start is left running. Here one
/// host's launch agent hangs, as ssh waiting for a password does: Open MPI waits for that host's
/// daemon for ever, and Hydra for its proxy. The job hung until killed.
#[test]
fn a_launcher_stuck_starting_ranks_ends_the_job_at_the_start_timeout() {
    let scratch = Scratch::new("stuck", RunId::next());
    let hydra = gsm_tests::bins::hydra_path(scratch.path());
    let stuck_pids = scratch.path().join("stuck-pids");
    // As in the placement tests: each host's daemon runs here, with a session directory of its
    // own; `stuckhost` never answers (its agent becomes a `sleep` and says which).
    let agent = scratch.write_executable(
        "agent",
        &format!(
            "#!/bin/sh\nwhile [ $# -gt 0 ]; do case \"$1\" in -*) shift;; *) break;; esac; done\n\
             host=\"$1\"\nshift\n\
             if [ \"$host\" = stuckhost ]; then echo $$ >> '{pids}'; exec sleep 300; fi\n\
             tmp='{dir}'/\"$host\"\nmkdir -p \"$tmp\"\n\
             exec env -i PATH=\"$PATH\" HOME=\"$HOME\" OMPI_MCA_orte_tmpdir_base=\"$tmp\" \
             OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 sh -c \"$*\"\n",
            pids = stuck_pids.display(),
            dir = scratch.path().display()
        ),
    );
    for (launcher, path) in [("mpirun", None), ("mpiexec", Some(&hydra))] {
        let guard = PidGuard::new();
        let what = format!("gsmrun --launcher {launcher} with a host that never answers");
        let mut cmd = gsmrun([
            "--launcher",
            launcher,
            "-H",
            "placea,stuckhost",
            "-np",
            "2",
            "--start-timeout",
            "2",
            "--launch-agent",
        ]);
        cmd.arg(&agent).args(["sh", "-c", "sleep 30"]);
        if let Some(path) = path {
            cmd.env("PATH", path);
        }
        let done = run(&mut cmd, LIMIT);
        let stuck: Vec<u32> = std::fs::read_to_string(&stuck_pids)
            .unwrap_or_default()
            .lines()
            .filter_map(|pid| pid.trim().parse().ok())
            .collect();
        let _ = std::fs::remove_file(&stuck_pids);
        assert!(
            !stuck.is_empty(),
            "{what}: the launcher never tried the stuck host\n{}",
            done.report()
        );
        for pid in stuck {
            guard.watch(pid, "the stuck host's launch agent");
        }
        assert_exit(&done, 1, &what);
        assert!(
            done.elapsed < Duration::from_secs(10),
            "{what}: the job took {:?}\n{}",
            done.elapsed,
            done.report()
        );
        assert!(
            done.stderr
                .contains("started within --start-timeout 2 s (missing: rank")
                && done.stderr.contains("host stuckhost")
                && done.stderr.contains(" not resolve")
                && done.stderr.contains("may be stuck starting them"),
            "{what}: the line must say which ranks and hosts did not start\n{}",
            done.report()
        );
        let left = guard.survivors(Duration::from_millis(1000));
        assert!(
            left.is_empty(),
            "{what}: {left:?} outlived the job\n{}",
            done.report()
        );
    }
}

/// Runs `f` when dropped.
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// A launch agent that never reaches its host and runs in a session of its own, as Hydra starts
/// ssh: gsmrun ends the job at `--start-timeout` and leaves none of it running, under Open MPI's
/// `mpirun` and Hydra's `mpiexec`. (Neither launcher ended it, nor did the SIGKILL of the
/// launcher's process group, and it ran on for as long as its connection tried.)
#[test]
fn an_agent_that_never_reaches_its_host_does_not_outlive_gsmrun() {
    let scratch = Scratch::new("silent-agent", RunId::next());
    let path = hydra_path(scratch.path());
    for (launcher, hydra) in [("mpirun", false), ("mpiexec", true)] {
        let guard = PidGuard::new();
        let log = scratch.join(&format!("{launcher}-agent-pids"));
        let what = format!(
            "gsmrun --launcher {launcher} --launch-agent silent-agent -H 127.0.0.2:2 -np 2 true"
        );
        let mut cmd = gsmrun(["--launcher", launcher, "--launch-agent"]);
        cmd.arg(testbed_script("silent-agent"))
            .args([
                "--start-timeout",
                "2",
                "-H",
                "127.0.0.2:2",
                "-np",
                "2",
                "true",
            ])
            .env("GSM_TEST_AGENT_LOG", &log);
        if hydra {
            cmd.env("PATH", &path);
        }
        let done = run(&mut cmd, LIMIT);
        let report = done.report();
        let pids: Vec<u32> = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        for &pid in &pids {
            guard.watch(pid, "sleep");
        }
        assert_exit(&done, 1, &what);
        assert!(
            !pids.is_empty(),
            "{what}: the launcher never ran the agent, so this proves nothing\n{report}"
        );
        let left = guard.survivors(Duration::from_millis(500));
        assert!(
            left.is_empty(),
            "{what}: the agent's processes {left:?} outlived gsmrun\n{report}"
        );
    }
}

/// A launcher that runs on after every rank exited 0 (Open MPI's `mpirun` waiting for ever for
/// the daemon of a host it lost once the ranks there had ended) no longer hangs the job: gsmrun
/// says so 10 s later, ends it with everything it started, and exits 1.
#[test]
fn a_launcher_lingering_after_every_rank_exited_0_is_ended_with_a_line() {
    let scratch = Scratch::new("linger", RunId::next());
    // An `mpirun` first on PATH that runs the real one, then lingers.
    scratch.write_executable(
        "mpirun",
        "#!/bin/sh\n/usr/bin/mpirun \"$@\"\nrc=$?\nsleep 120\nexit $rc\n",
    );
    let path = format!(
        "{}:{}",
        scratch.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = gsmrun(["-np", "2"]);
    cmd.env("PATH", path)
        .env("GSM_MPI_FLAVOUR", "openmpi")
        .arg(gsm_hello());
    let running = spawn(&mut cmd);
    let prefix = gsm_tests::cluster::job_prefix(running.pid() as u32);
    let done = running.wait(LIMIT);
    let what = "gsmrun -np 2 gsm-hello under an mpirun that lingers";
    assert_exit(&done, 1, what);
    assert!(
        done.stderr.contains(
            "gsmrun: every rank exited 0, but mpirun had not ended 10 s later (it waits for a \
             host's daemon it lost?); ending it"
        ),
        "{what}\n{}",
        done.report()
    );
    assert!(
        done.elapsed < Duration::from_secs(30),
        "{what}: took {:?}",
        done.elapsed
    );
    assert_eq!(hellos(&done.stdout).len(), 2, "{what}\n{}", done.report());
    let (processes, _) = gsm_tests::cluster::leftovers(&prefix, Duration::from_secs(3));
    assert!(processes.is_empty(), "{what}: left running: {processes:?}");
}
