//! The variables of a job: `-x`, the runtime settings of gsmrun's environment, gsmrun's own
//! variables, and gsmrun's log.

use crate::common::{BIN, dry_command, gsmrun, gsmrun_with, stderr_of};
use std::process::Command;

/// `-x NAME` of a variable gsmrun's environment does not have is left out of the launch, with a
/// warning in gsmrun's words (Open MPI printed one of its own, MPICH and srun nothing); one that
/// is set, if only to the empty string, is passed on.
#[test]
fn an_exported_variable_that_is_not_set_is_left_out_saying_so() {
    let args = [
        "-np",
        "1",
        "-x",
        "GOSSAMER_TEST_NOT_SET",
        "-x",
        "GOSSAMER_TEST_EMPTY",
        "--dry-run",
        "app",
    ];
    for flavour in ["openmpi", "hydra"] {
        let out = gsmrun_with(&args, flavour, &[("GOSSAMER_TEST_EMPTY", "")]);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let command = dry_command(&out);
        assert!(
            !command.contains("GOSSAMER_TEST_NOT_SET") && command.contains("GOSSAMER_TEST_EMPTY"),
            "{flavour}: {command}"
        );
        assert!(
            stderr.contains(
                "gsmrun: warning: -x GOSSAMER_TEST_NOT_SET: GOSSAMER_TEST_NOT_SET is not set in \
                 gsmrun's environment, so the ranks do not get it"
            ) && !stderr.contains("GOSSAMER_TEST_EMPTY"),
            "{flavour}: {stderr}"
        );
    }
}

/// Runtime settings in gsmrun's environment reach every rank, on every host: mpirun and mpiexec
/// start remote ranks in a login environment, so they are exported by name (a `-x` of one keeps
/// its own value), and `GSM_FABRIC` is `--fabric`'s default instead of being overridden by it.
#[test]
fn runtime_settings_of_the_environment_reach_every_rank() {
    let env = [
        ("GSM_SLOT_SIZE", "65536"),
        ("GSM_PIN", "0"),
        ("GSM_COLL_PIECE", "4096"),
        ("GSM_FABRIC", "tcp"),
    ];
    let args = [
        "-np",
        "2",
        "-H",
        "a,b",
        "-x",
        "GSM_PIN=1",
        "--dry-run",
        "app",
    ];
    let out = gsmrun_with(&args, "openmpi", &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        dry_command(&out),
        format!(
            "mpirun --hostfile TMP/hostfile -np 2 --map-by slot --bind-to none -x GSM_JOB_ID \
             -x GSM_SIZE -x GSM_FABRIC -x GSM_HOSTS -x GSM_RANK_HOSTS -x GSM_CONTROL \
             -x GSM_CONTROL_KEY -x GSM_COLL_PIECE -x GSM_SLOT_SIZE -x GSM_PIN=1 {BIN} \
             --rank-wrapper -- app"
        )
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  GSM_FABRIC=tcp\n"), "{text}");
    let out = gsmrun_with(&args, "hydra", &env);
    assert!(
        dry_command(&out).contains(
            " -genvlist GSM_JOB_ID,GSM_SIZE,GSM_FABRIC,GSM_HOSTS,GSM_RANK_HOSTS,GSM_CONTROL,\
             GSM_CONTROL_KEY,GSM_COLL_PIECE,GSM_SLOT_SIZE -genv GSM_PIN 1 "
        ),
        "{}",
        dry_command(&out)
    );
    // --fabric wins over the environment; a bad GSM_FABRIC is named as such.
    let mut with_flag = args.to_vec();
    with_flag.splice(0..0, ["--fabric", "shm"]);
    let out = gsmrun_with(&with_flag, "openmpi", &env);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  GSM_FABRIC=shm\n"), "{text}");
    let out = gsmrun_with(&args, "openmpi", &[("GSM_FABRIC", "infiniband")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("GSM_FABRIC=infiniband in gsmrun's environment"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn exporting_gsmrun_s_own_variables_is_refused() {
    for args in [
        &["-x", "GSM_JOB_ID=x"][..],
        &["-x", "GSM_CONTROL_KEY=k"],
        &["-x", "GSM_RANK_HOSTS"],
        &["-x", "GSM_RANK=1"],
        &["-t", "2", "-x", "GSM_THREADS=8"],
    ] {
        let mut all = args.to_vec();
        all.extend(["--dry-run", "app"]);
        let out = gsmrun(&all, "openmpi");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains("gsmrun sets"),
            "{}",
            stderr_of(&out)
        );
    }
    // Without -t gsmrun leaves GSM_THREADS to the user.
    let out = gsmrun(&["-x", "GSM_THREADS=8", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// A log sent to a file or a pipe has no terminal escape sequences in it.
#[test]
fn the_debug_log_is_plain_text_off_a_terminal() {
    // The launcher's detection logs (a forced flavour skips it).
    let out = Command::new(BIN)
        .args(["--dry-run", "app"])
        .env("GSM_LOG", "debug")
        .env_remove("GSM_MPI_FLAVOUR")
        .env_remove("SLURM_JOB_ID")
        .env_remove("PBS_NODEFILE")
        .output()
        .expect("run gsmrun");
    let log = stderr_of(&out);
    assert!(log.contains("DEBUG"), "no debug log: {log}");
    assert!(
        !log.contains('\x1b'),
        "escape sequences in a piped log: {log:?}"
    );
}
