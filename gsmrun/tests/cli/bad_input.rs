//! Bad input exits 2 before anything starts, saying what is wrong: counts, time limits, mpirun
//! options gsmrun does not take, settings every rank would refuse, an empty program name.

use crate::common::{gsmrun, gsmrun_with, stderr_of};

#[test]
fn bad_input_exits_2() {
    for args in [
        &["--map-by", "diagonal", "app"][..],
        &["-x", "1BAD", "app"],
        &["--timeout", "-1", "app"],
        &["--start-timeout", "0", "app"],
        &["--start-timeout", "1e30", "app"],
        &["-np", "3", "-H", "a:1", "app"],
        &["--hostfile", "/nonexistent/hosts", "app"],
    ] {
        let out = gsmrun(args, "openmpi");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = gsmrun(&["-np", "3", "-H", "a:1", "app"], "openmpi");
    assert_eq!(
        stderr_of(&out).trim_end(),
        "gsmrun: 3 ranks asked for but the hosts have only 1 slot; add hosts or slots, or pass \
         --oversubscribe (the hosts and slots of -H)"
    );
    // The user's GSM_MPI_FLAVOUR is input too.
    let out = gsmrun(&["--dry-run", "app"], "bogus");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("GSM_MPI_FLAVOUR=bogus"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn settings_every_rank_would_refuse_are_refused_up_front() {
    // The runtime's GSM_THREADS range is 1 to 4096.
    let out = gsmrun(&["-t", "4097", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("-t 4097: the runtime runs at most 4096 worker threads"),
        "{}",
        stderr_of(&out)
    );
    let out = gsmrun(&["-t", "4096", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// GSM_THREADS of gsmrun's environment reaches every rank unless -t is given: a value every
/// rank would refuse is refused before the launch, as -t's is; with -t it does not matter.
#[test]
fn a_worker_count_every_rank_would_refuse_is_refused_before_the_launch() {
    for v in ["0", "5000", "99999999999999999999999", "four", "-2"] {
        let out = gsmrun_with(&["--dry-run", "app"], "openmpi", &[("GSM_THREADS", v)]);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "GSM_THREADS={v}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "GSM_THREADS={v} in gsmrun's environment: every rank would refuse it; give a \
                 whole number of worker threads from 1 to 4096"
            )),
            "GSM_THREADS={v}: {stderr}"
        );
    }
    // The same value given with -x, which goes before the environment's.
    let out = gsmrun(&["-x", "GSM_THREADS=0", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("-x GSM_THREADS=0: every rank would refuse it"),
        "{}",
        stderr_of(&out)
    );
    let out = gsmrun_with(
        &["-x", "GSM_THREADS=2", "--dry-run", "app"],
        "openmpi",
        &[("GSM_THREADS", "0")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    for (env, args) in [
        ("3", &["--dry-run", "app"][..]),
        ("", &["--dry-run", "app"]),
        ("0", &["-t", "2", "--dry-run", "app"]),
    ] {
        let out = gsmrun_with(args, "openmpi", &[("GSM_THREADS", env)]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "GSM_THREADS={env:?} {args:?}: {}",
            stderr_of(&out)
        );
    }
}

/// A bad time limit is refused quoting the user's text and saying what is wrong with it.
#[test]
fn a_bad_time_limit_is_quoted_as_given_and_explained() {
    for (option, value, why) in [
        (
            "--timeout",
            "1e300",
            "too many seconds for this system's clock",
        ),
        ("--timeout", "18446744073709551616", "too many seconds"),
        (
            "--start-timeout",
            "soon",
            "expected a number of seconds, such as 30",
        ),
        ("--timeout", "nan", "give a positive number of seconds"),
        ("--timeout", "inf", "give a finite number of seconds"),
        ("--start-timeout", "-5", "give a positive number of seconds"),
    ] {
        let out = gsmrun(&[option, value, "--dry-run", "app"], "openmpi");
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{option} {value}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "invalid value '{value}' for '{option} <SECONDS>': {why}"
            )) && stderr.len() < 400,
            "{option} {value}: {stderr}"
        );
    }
}

#[test]
fn huge_timeout_is_refused_even_in_a_dry_run() {
    for t in ["1e19", "1e20"] {
        let out = gsmrun(&["--timeout", t, "--dry-run", "app"], "openmpi");
        assert_eq!(out.status.code(), Some(2), "{t}: {}", stderr_of(&out));
        assert!(stderr_of(&out).contains("--timeout"), "{}", stderr_of(&out));
    }
}

#[test]
fn rank_counts_beyond_the_limits_are_refused() {
    let out = gsmrun(
        &["-np", "4294967295", "--oversubscribe", "--dry-run", "app"],
        "openmpi",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("at most"), "{}", stderr_of(&out));
    // Within the rank limit but GSM_RANK_HOSTS would exceed the kernel's limit on one string.
    let out = gsmrun(
        &[
            "-np",
            "65529",
            "-H",
            "a",
            "--oversubscribe",
            "--dry-run",
            "app",
        ],
        "openmpi",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("GSM_RANK_HOSTS"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn mpirun_options_gsmrun_does_not_take_exit_2_saying_what_to_do() {
    for (args, says) in [
        (
            &["--bind-to", "core"][..],
            "`--bind-to core` is an mpirun option",
        ),
        (&["--map-by", "ppr:1:node"], "`slots=1`"),
        (&["--mca", "btl", "self,tcp"], "`-x OMPI_MCA_btl=self,tcp`"),
        (&["-N", "2"], "`slots=2`"),
        (&["-c", "2"], "`-np 2`"),
        (&["-wdir", "/x"], "`cd /x`"),
        (&["--report-bindings"], "nothing to report"),
        (&["-np1"], "write `-np 1`"),
    ] {
        let all: Vec<&str> = args.iter().copied().chain(["--dry-run", "app"]).collect();
        let out = gsmrun(&all, "openmpi");
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("as a value"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing planned");
    }
}

#[test]
fn negative_numbers_name_the_option() {
    for (opt, shown) in [
        ("-np", "--np"),
        ("-t", "--threads-per-rank"),
        ("--timeout", "--timeout"),
        ("--start-timeout", "--start-timeout"),
    ] {
        let out = gsmrun(&[opt, "-1", "--dry-run", "app"], "openmpi");
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(err.contains(shown) && err.contains("-1"), "{opt}: {err}");
        assert!(!err.contains("unexpected argument"), "{opt}: {err}");
        // Said in words, not as the range of a `u32`.
        assert!(!err.contains("4294967295"), "{opt}: {err}");
        if !opt.ends_with("timeout") {
            assert!(err.contains("a count cannot be negative"), "{opt}: {err}");
        }
    }
    let out = gsmrun(&["-np", "four", "--dry-run", "app"], "openmpi");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("'four'") && err.contains("expected a whole number, such as 4"),
        "{err}"
    );
}

/// An empty program name is bad input, refused before anything starts: every rank failed to
/// start it, after the whole launch.
#[test]
fn an_empty_program_name_is_refused_up_front() {
    let out = gsmrun(&["-np", "2", ""], "openmpi");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("the program's name is empty"),
        "{}",
        stderr_of(&out)
    );
}

/// Every `-x` of a Gossamer setting is checked against the settings table before the launch: a
/// value the ranks would refuse and a name one typo away from a setting's exit 2 naming both;
/// a `GSM_*` name far from every setting is the program's own and passes.
#[test]
fn x_values_are_checked_against_the_settings_table() {
    let out = gsmrun(&["-x", "GSM_SLOT_SIZE=4000", "--dry-run", "app"], "openmpi");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("-x GSM_SLOT_SIZE=4000: ") && stderr.contains("multiple of 64"),
        "{stderr}"
    );
    let out = gsmrun(&["-x", "GSM_SLOT_SIZ=4096", "--dry-run", "app"], "openmpi");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did you mean GSM_SLOT_SIZE?"), "{stderr}");
    // From gsmrun's environment, with -x NAME.
    let out = gsmrun_with(
        &["-x", "GSM_SLOT_SIZE", "--dry-run", "app"],
        "openmpi",
        &[("GSM_SLOT_SIZE", "12")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    for ok in ["GSM_SLOT_SIZE=4096", "GSM_MY_PROGRAMS_OWN_KNOB=7"] {
        let out = gsmrun(&["-x", ok, "--dry-run", "app"], "openmpi");
        assert_eq!(out.status.code(), Some(0), "-x {ok}: {}", stderr_of(&out));
    }
}
