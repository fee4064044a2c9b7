use super::output::{TURN_WAIT, Turn, tagged};
use super::report::LauncherFailure;
use super::stops::{Looks, looks};
use super::*;
use crate::clock::fmt_secs;
use crate::proctree::{descendants, parent_in_stat};

#[test]
fn the_parent_is_read_after_a_command_name_with_spaces_and_parentheses() {
    assert_eq!(parent_in_stat("42 (sleep) S 7 42 42 0 -1"), Some(7));
    assert_eq!(parent_in_stat("42 (a (b) c) R 9 1 1"), Some(9));
    assert_eq!(parent_in_stat("42 (cut"), None);
}

#[test]
fn descendants_are_found_at_any_depth_and_only_they() {
    let parents = [(2, 1), (3, 2), (4, 3), (5, 1), (6, 99), (7, 6), (1, 0)];
    let mut d = descendants(2, &parents);
    d.sort();
    assert_eq!(d, [3, 4]);
    let mut d = descendants(1, &parents);
    d.sort();
    assert_eq!(d, [2, 3, 4, 5]);
    assert!(descendants(4, &parents).is_empty());
}

#[test]
fn only_the_start_of_a_line_is_tagged() {
    assert_eq!(tagged(b"T:", b"a\nb\n", false), b"T:a\nT:b\n");
    assert_eq!(tagged(b"T:", b"rest\nnext", true), b"rest\nT:next");
    assert_eq!(tagged(b"", b"x\ny", true), b"x\ny");
}

/// A stream inside a long line keeps the output until the line ends; another stream's line
/// waits for it, but only for the wait given.
#[test]
fn a_long_line_keeps_the_output_until_it_ends() {
    let turn = Arc::new(Turn::new());
    let sink = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let put = |s: &Arc<std::sync::Mutex<Vec<u8>>>, b: &'static [u8]| {
        let s = s.clone();
        move || s.lock().unwrap().extend_from_slice(b)
    };
    turn.write_as(1, TURN_WAIT, true, put(&sink, b"long "));
    let other = {
        let (turn, put) = (turn.clone(), put(&sink, b"other\n"));
        std::thread::spawn(move || turn.write_as(2, Duration::from_secs(10), false, put))
    };
    std::thread::sleep(Duration::from_millis(100));
    turn.write_as(1, TURN_WAIT, true, put(&sink, b"line "));
    turn.write_as(1, TURN_WAIT, false, put(&sink, b"ends\n"));
    other.join().unwrap();
    assert_eq!(&*sink.lock().unwrap(), b"long line ends\nother\n");
    // A stream stopped inside its line holds the others up only for the wait.
    turn.write_as(3, TURN_WAIT, true, put(&sink, b"stuck"));
    let start = Instant::now();
    turn.write_as(4, Duration::from_millis(200), false, put(&sink, b"\n"));
    let waited = start.elapsed();
    assert!(
        (Duration::from_millis(200)..Duration::from_secs(5)).contains(&waited),
        "{waited:?}"
    );
    // ... once: the stalled stream has lost the output, and the next lines go at once.
    let start = Instant::now();
    for _ in 0..3 {
        turn.write_as(4, Duration::from_millis(200), false, put(&sink, b"more\n"));
    }
    let waited = start.elapsed();
    assert!(waited < Duration::from_millis(150), "{waited:?}");
    // The stalled stream writes on when it wakes, and may hold the output again.
    turn.write_as(3, TURN_WAIT, true, put(&sink, b" again"));
    let start = Instant::now();
    turn.write_as(4, Duration::from_millis(200), true, put(&sink, b"mine "));
    assert!(start.elapsed() >= Duration::from_millis(200));
    turn.write_as(3, Duration::from_millis(200), false, put(&sink, b"\n"));
    assert!(
        sink.lock()
            .unwrap()
            .ends_with(b"stuck\nmore\nmore\nmore\n againmine \n")
    );
}

#[test]
fn outcome_round_trip_and_lines() {
    for o in [
        Outcome::Exited(3),
        Outcome::Signaled(11),
        Outcome::NoStart("no such file".into()),
    ] {
        assert_eq!(Outcome::decode(&o.encode()), Some(o));
    }
    assert_eq!(
        Outcome::Exited(3).failure_line("1", "vm"),
        "gsmrun: rank 1 on host vm exited with status 3; ending the job"
    );
    // Open MPI's status for a rank whose host's daemon it lost says so.
    assert_eq!(
        Outcome::Exited(195).failure_line("3", "q2"),
        "gsmrun: rank 3 on host q2 exited with status 195 (Open MPI's status for a rank \
         whose host's daemon it lost: see mpirun's message above); ending the job"
    );
    assert_eq!(
        Outcome::Signaled(11).failure_line("0", "vm"),
        "gsmrun: rank 0 on host vm was killed by signal 11 (SIGSEGV); ending the job"
    );
    assert_eq!(Outcome::Signaled(11).exit_code(), 139);
    assert!(!Outcome::Exited(0).failed());
}

#[test]
fn a_failed_launcher_is_described_by_what_is_known() {
    use std::os::unix::process::ExitStatusExt as _;
    let failure = |srun, started| LauncherFailure {
        launcher: if srun { "srun" } else { "mpirun" },
        srun,
        status: ExitStatus::from_raw(255 << 8),
        missing: 2,
        np: 2,
        started,
        wrapper: "/opt/gsm/gsmrun",
        slurm_job: None,
        hosts_at_fault: String::new(),
    };
    let line = failure(false, 0).line();
    assert_eq!(
        line,
        "gsmrun: mpirun exited with status 255 before 2 of 2 ranks reported (no rank \
         started); see its messages above. Likely causes: a host that cannot be reached or \
         whose name does not resolve; no gsmrun at /opt/gsm/gsmrun on some host; mpirun \
         refusing the job"
    );
    let line = failure(true, 1).line();
    assert!(line.contains("(only 1 of 2 started)"), "{line}");
    assert!(
        line.contains("Likely causes: no Slurm allocation"),
        "{line}"
    );
    let killed = LauncherFailure {
        status: ExitStatus::from_raw(crate::sys::SIGKILL),
        ..failure(false, 0)
    };
    assert_eq!(
        killed.line(),
        "gsmrun: mpirun was killed by signal 9 (SIGKILL) before 2 of 2 ranks reported (no \
         rank started)"
    );
    let line = failure(false, 2).line();
    assert!(line.ends_with("every rank had started, so mpirun ended them or was ended itself; see its messages above"), "{line}");
    // Killed once every rank had started: not "only 2 of 2".
    let killed = LauncherFailure {
        status: ExitStatus::from_raw(crate::sys::SIGKILL),
        ..failure(false, 2)
    };
    assert!(
        killed.line().ends_with("(all 2 had started)"),
        "{}",
        killed.line()
    );
    // Inside Slurm with hosts of its own, Open MPI holds the job to the allocation.
    let in_slurm = LauncherFailure {
        slurm_job: Some("42"),
        ..failure(false, 0)
    };
    assert!(
        in_slurm.line().contains(
            "Likely causes: inside Slurm job 42, mpirun holds the job to the allocation's nodes"
        ),
        "{}",
        in_slurm.line()
    );
    assert!(!failure(false, 0).line().contains("Slurm job"));
    // A host found at fault is the cause named, alone.
    let named = LauncherFailure {
        hosts_at_fault: " host nosuchhost: its name does not resolve;".into(),
        ..failure(false, 0)
    };
    assert_eq!(
        named.line(),
        "gsmrun: mpirun exited with status 255 before 2 of 2 ranks reported (no rank \
         started); host nosuchhost: its name does not resolve; see its messages above"
    );
}

#[test]
fn hosts_at_fault_are_named_and_this_machine_is_not() {
    let note = super::report::cut_note(&["localhost", "nosuchhost.invalid", "a\u{1b}[2J.invalid"]);
    assert_eq!(
        note,
        " host nosuchhost.invalid, host a\\u{1b}[2J.invalid: their names do not resolve (a \
         typing error, or a name this host's resolver does not know);"
    );
    assert_eq!(super::report::cut_note(&["localhost"]), "");
}

#[test]
fn seconds_are_shown_short_however_small_or_large() {
    assert_eq!(fmt_secs(40.0), "40");
    assert_eq!(fmt_secs(2.5), "2.5");
    assert_eq!(fmt_secs(0.001), "0.001");
    // Not 300 zeros, nor 19 digits of a rounded float.
    assert_eq!(fmt_secs(1e-300), "1e-300");
    assert_eq!(fmt_secs(1e-9), "1e-9");
    assert_eq!(fmt_secs(9.2e18), "9.2e18");
}

#[test]
fn deadline_refuses_what_no_instant_holds() {
    let now = Instant::now();
    assert_eq!(deadline(now, 1.5), Some(now + Duration::from_millis(1500)));
    assert_eq!(deadline(now, 1e19), None);
    assert_eq!(deadline(now, f64::INFINITY), None);
}

#[test]
fn frames_round_trip() {
    let mut buf = Vec::new();
    wire::write_frame(&mut buf, wire::STDOUT, b"hi\n").unwrap();
    wire::write_frame(&mut buf, wire::KILL, b"").unwrap();
    let mut r = &buf[..];
    assert_eq!(
        wire::read_frame(&mut r).unwrap(),
        Some((wire::STDOUT, b"hi\n".to_vec()))
    );
    assert_eq!(
        wire::read_frame(&mut r).unwrap(),
        Some((wire::KILL, vec![]))
    );
    assert_eq!(wire::read_frame(&mut r).unwrap(), None);
    let bad = [b'O', 0xff, 0xff, 0xff, 0xff];
    assert!(wire::read_frame(&mut &bad[..]).is_err());
}

/// A wrapper that missed a beat is neither running nor stopped until it beats again or has been
/// silent for three beats; a wrapper's word that its program is stopped counts at once, and a
/// silent wrapper whose host answers nothing is left to `--lost-timeout`.
#[test]
fn a_rank_looks_stopped_unsure_or_running_from_its_beats() {
    let ms = Duration::from_millis;
    assert_eq!(looks(ms(0), true, false), Looks::Stopped { frozen: false });
    assert_eq!(looks(ms(1200), false, false), Looks::Running);
    assert_eq!(looks(ms(1500), false, false), Looks::Unsure);
    assert_eq!(looks(ms(2999), false, false), Looks::Unsure);
    assert_eq!(
        looks(ms(3000), false, false),
        Looks::Stopped { frozen: true }
    );
    assert_eq!(looks(ms(9000), false, true), Looks::Running);
}

#[test]
fn ranks_not_started_are_placed_on_the_other_hosts_not_this_one() {
    let opts = Options {
        np: 3,
        key: String::new(),
        tag_output: false,
        timeout: None,
        start_timeout: Some(3.0),
        rank_hosts: vec![
            "localhost".into(),
            "nosuchhost.invalid".into(),
            "localhost".into(),
        ],
        wrapper: "/opt/gsm/gsmrun".into(),
        slurm_job_with_hosts: None,
        stop_timeout: None,
        lost_timeout: 8.0,
        job_id: "gsm-1-x".into(),
        job_dir: "/nonexistent".into(),
    };
    let started = std::collections::HashSet::new();
    let line = super::report::not_started("mpirun", &opts, &started);
    assert!(
        line.contains(
            "(missing: ranks 0, 1, 2); host nosuchhost.invalid: its name does not resolve"
        ),
        "{line}"
    );
    assert!(!line.contains("localhost"), "{line}");
}
