//! `prepare` with environments made up here: each test gives a variable only through the
//! [`Environment`] (or gives one the process has a different value), so that a step which read
//! `std::env` instead would see something else and fail the test. The flavour of MPI is always
//! given, so that nothing is spawned.

use super::*;
use crate::env;
use gsm_contract::contract::FabricKind;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt as _;

fn cli(args: &[&str]) -> Cli {
    let mut all = vec![OsString::from("gsmrun")];
    all.extend(args.iter().map(OsString::from));
    crate::cli::parse_from(all).expect("the options parse")
}

/// `pairs`, with Open MPI as the MPI of the job.
fn environment(pairs: &[(&str, &str)]) -> Environment {
    let flavour = [(env::input::MPI_FLAVOUR, "openmpi")];
    Environment::from_pairs(flavour.iter().chain(pairs).copied())
}

/// The plan of `args` on two slots of this machine in `environment`.
fn prepared(args: &[&str], environment: &Environment) -> Prepared {
    let mut all = vec!["-H", "localhost:2"];
    all.extend(args);
    all.push("app");
    prepare(&cli(&all), environment).expect("the plan is made")
}

/// The message of the error `prepare` refuses `args` with in `environment`.
fn refusal(args: &[&str], environment: &Environment) -> String {
    let mut all = vec!["-H", "localhost:2"];
    all.extend(args);
    all.push("app");
    match prepare(&cli(&all), environment) {
        Ok(_) => panic!("{args:?} was not refused"),
        Err(e) => e.to_string(),
    }
}

fn value<'a>(vars: &'a [(String, String)], name: &str) -> Option<&'a str> {
    vars.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn an_exported_variable_is_looked_up_in_the_environment_given() {
    assert!(
        std::env::var_os("PATH").is_some(),
        "the test needs PATH in the process's environment"
    );
    let warned = |p: &Prepared| {
        p.warnings
            .iter()
            .any(|w| w.contains("-x PATH: PATH is not set"))
    };
    let without = prepared(&["-x", "PATH"], &environment(&[]));
    assert!(warned(&without), "{:?}", without.warnings);
    assert!(without.spec.exports.is_empty());
    let with = prepared(&["-x", "PATH"], &environment(&[("PATH", "/given")]));
    assert!(!warned(&with), "{:?}", with.warnings);
    assert_eq!(with.spec.exports.len(), 1);
}

#[test]
fn the_job_s_directory_is_under_the_given_tmpdir() {
    let dir = "/nonexistent/gsmrun-plan-test";
    assert_ne!(std::env::var_os("TMPDIR").as_deref(), Some(dir.as_ref()));
    let p = prepared(&[], &environment(&[("TMPDIR", dir)]));
    assert!(p.tmpdir.starts_with(dir), "{}", p.tmpdir.display());
    let hostfile = p.plan.hostfile.expect("Open MPI reads a hostfile");
    assert!(
        hostfile.path.starts_with(dir),
        "{}",
        hostfile.path.display()
    );
    let p = prepared(
        &[],
        &Environment::from_pairs([(env::input::MPI_FLAVOUR, "openmpi")]),
    );
    assert!(p.tmpdir.starts_with("/tmp"), "{}", p.tmpdir.display());
}

#[test]
fn the_settings_passed_on_are_the_given_environment_s() {
    let name = "GSM_PLAN_TEST_SETTING";
    assert!(std::env::var_os(name).is_none());
    let given = environment(&[
        (name, "1"),
        (env::input::LOG, "debug"),
        (env::input::RUST_LOG, "info"),
        ("GSM_OTHER_TEST_SETTING", "2"),
    ]);
    let p = prepared(&["-x", "GSM_OTHER_TEST_SETTING=3"], &given);
    let vars = &p.spec.job_vars;
    for passed in [name, env::input::LOG, env::input::RUST_LOG] {
        assert!(vars.iter().any(|v| v == passed), "{passed} not in {vars:?}");
    }
    // A -x of a setting wins: the launcher passes it as the user gave it, not by name.
    assert!(
        !vars.iter().any(|v| v == "GSM_OTHER_TEST_SETTING"),
        "{vars:?}"
    );
    let p = prepared(&[], &environment(&[]));
    for absent in [name, env::input::LOG, env::input::RUST_LOG] {
        assert!(!p.spec.job_vars.iter().any(|v| v == absent), "{absent}");
    }
}

#[test]
fn gsm_fabric_of_the_given_environment_is_the_default_of_fabric() {
    let p = prepared(&[], &environment(&[(env::job::FABRIC, "tcp")]));
    assert_eq!(p.fabric, FabricChoice::Only(FabricKind::Tcp));
    assert_eq!(value(&p.job_env, env::job::FABRIC), Some("tcp"));
    let p = prepared(
        &["--fabric", "shm"],
        &environment(&[(env::job::FABRIC, "tcp")]),
    );
    assert_eq!(p.fabric, FabricChoice::Only(FabricKind::Shm));
    let said = refusal(&[], &environment(&[(env::job::FABRIC, "fast")]));
    assert!(
        said.starts_with("GSM_FABRIC=fast in gsmrun's environment: expected auto"),
        "{said}"
    );
}

#[test]
fn gsm_threads_every_rank_would_refuse_is_refused_from_either_place() {
    let said = refusal(&[], &environment(&[(env::job::THREADS, "4097")]));
    assert!(
        said.starts_with("GSM_THREADS=4097 in gsmrun's environment: every rank would refuse it"),
        "{said}"
    );
    // A value that is not UTF-8 is seen too, as the ranks would get it.
    let bytes = Environment::from_pairs([
        (
            OsString::from(env::input::MPI_FLAVOUR),
            OsString::from("openmpi"),
        ),
        (
            OsString::from(env::job::THREADS),
            OsString::from_vec(vec![b'4', 0xff]),
        ),
    ]);
    let said = refusal(&[], &bytes);
    assert!(
        said.starts_with("GSM_THREADS=4\u{fffd} in gsmrun's environment"),
        "{said}"
    );
    let said = refusal(&["-x", "GSM_THREADS=0"], &environment(&[]));
    assert!(
        said.starts_with("-x GSM_THREADS=0: every rank would refuse it"),
        "{said}"
    );
    // -t wins over both.
    let p = prepared(&["-t", "2"], &environment(&[(env::job::THREADS, "4097")]));
    assert_eq!(value(&p.job_env, env::job::THREADS), Some("2"));
    assert_eq!(p.threads_per_rank, Some(2));
}

#[test]
fn exports_are_read_once_and_refused_where_they_are_read() {
    let p = prepared(
        &["-x", "A=b=c", "-x", "EMPTY"],
        &environment(&[("EMPTY", "")]),
    );
    let got: Vec<String> = p.spec.exports.iter().map(ToString::to_string).collect();
    assert_eq!(got, ["A=b=c", "EMPTY"]);
    let said = refusal(&["-x", "A=1", "-x", "1A=2"], &environment(&[]));
    assert_eq!(
        said,
        "-x 1A=2: `1A` is not a variable name; write -x NAME or -x NAME=value"
    );
    let said = refusal(&["-x", "GSM_JOB_ID=mine"], &environment(&[]));
    assert_eq!(
        said,
        "-x GSM_JOB_ID=mine: gsmrun sets GSM_JOB_ID itself for every rank of this job; remove \
         this -x"
    );
}

#[test]
fn open_mpi_settings_already_given_are_left_alone() {
    let p = prepared(&[], &environment(&[]));
    assert_eq!(value(&p.mpi_env, "OMPI_MCA_pml"), Some("ob1"));
    let p = prepared(&[], &environment(&[("OMPI_MCA_pml", "ucx")]));
    assert_eq!(value(&p.mpi_env, "OMPI_MCA_pml"), None);
}

#[test]
fn the_flavour_and_the_slurm_job_are_the_given_environment_s() {
    let p = prepared(&[], &environment(&[(env::input::MPI_FLAVOUR, "hydra")]));
    assert!(
        matches!(p.plan.backend, Backend::Hydra { .. }),
        "{:?}",
        p.plan.backend
    );
    assert_eq!(p.watch.slurm_job_with_hosts, None);
    let p = prepared(&[], &environment(&[("SLURM_JOB_ID", "7")]));
    assert_eq!(p.watch.slurm_job_with_hosts.as_deref(), Some("7"));
    let slurm = environment(&[
        ("SLURM_JOB_ID", "7"),
        ("SLURM_JOB_NODELIST", "localhost"),
        ("SLURM_TASKS_PER_NODE", "2"),
        ("SLURM_STEP_ID", "0"),
    ]);
    let p = prepare(&cli(&["app"]), &slurm).expect("the plan is made");
    assert_eq!(p.plan.backend, Backend::Srun);
    assert!(p.spec.in_srun_step);
    assert_eq!(p.watch.slurm_job_with_hosts, None);
    assert_eq!(
        p.watch.start_timeout, None,
        "srun's steps may wait for nodes"
    );
}

#[test]
fn the_plan_says_how_it_is_shown_and_watched() {
    let e = environment(&[]);
    assert_eq!(prepared(&[], &e).mode, Mode::Run);
    assert_eq!(prepared(&["-v"], &e).mode, Mode::Verbose);
    assert_eq!(prepared(&["-v", "--dry-run"], &e).mode, Mode::DryRun);
    let defaults = Watch {
        tag_output: false,
        timeout: None,
        start_timeout: Some(supervise::START_TIMEOUT),
        stop_timeout: Some(supervise::STOP_TIMEOUT),
        lost_timeout: supervise::LOST_TIMEOUT,
        slurm_job_with_hosts: None,
    };
    assert_eq!(prepared(&[], &e).watch, defaults);
    let given = prepared(
        &[
            "--tag-output",
            "--timeout",
            "5",
            "--start-timeout",
            "6",
            "--stop-timeout",
            "0",
            "--lost-timeout",
            "7",
        ],
        &e,
    );
    assert_eq!(
        given.watch,
        Watch {
            tag_output: true,
            timeout: Some(5.0),
            start_timeout: Some(6.0),
            stop_timeout: None,
            lost_timeout: 7.0,
            slurm_job_with_hosts: None,
        }
    );
}

#[test]
fn only_the_first_task_of_a_multi_task_step_launches() {
    let task = |pairs: &[(&str, &str)]| {
        super::other_step_task(&Environment::from_pairs(pairs.iter().copied()))
    };
    let step = [("SLURM_STEP_ID", "0"), ("SLURM_STEP_NUM_TASKS", "4")];
    assert_eq!(task(&[step[0], step[1], ("SLURM_PROCID", "2")]), Some(2));
    assert_eq!(task(&[step[0], step[1], ("SLURM_PROCID", "0")]), None);
    // One task, the batch script's step, or no step at all: gsmrun launches.
    assert_eq!(
        task(&[
            step[0],
            ("SLURM_STEP_NUM_TASKS", "1"),
            ("SLURM_PROCID", "0")
        ]),
        None
    );
    assert_eq!(
        task(&[
            ("SLURM_STEP_ID", "4294967294"),
            step[1],
            ("SLURM_PROCID", "1")
        ]),
        None
    );
    assert_eq!(task(&[("SLURM_NTASKS", "4"), ("SLURM_PROCID", "1")]), None);
}

/// A rank's setting in gsmrun's own environment that every rank would refuse stops the job
/// before the launch, as the same value given with `-x` does; a `-x` of that setting replaces
/// it, and a good value passes.
#[test]
fn a_bad_setting_in_gsmruns_environment_is_refused_before_the_launch() {
    let bad = environment(&[("GSM_SLOT_SIZE", "100")]);
    let e = refusal(&[], &bad);
    assert!(
        e.contains("GSM_SLOT_SIZE=100 in gsmrun's environment, which the ranks inherit")
            && e.contains("multiple of 64"),
        "{e}"
    );
    prepared(&["-x", "GSM_SLOT_SIZE=8K"], &bad);
    prepared(&[], &environment(&[("GSM_SLOT_SIZE", "8K")]));
}
