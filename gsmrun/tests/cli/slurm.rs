//! Inside a Slurm allocation: `srun` as the launcher, job steps, and hosts srun cannot honour.

use crate::common::{BIN, dry_command, gsmrun, stderr_of};
use std::process::Command;

/// gsmrun with `args` inside Slurm job 7 (one node `vm`, 2 tasks), in job step `step` if given,
/// and no other `GSM_*` or `SLURM_*` variable of the tests' environment.
fn in_slurm_job(args: &[&str], step: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| k.starts_with("GSM_") || k.starts_with("SLURM_"))
        {
            cmd.env_remove(k);
        }
    }
    cmd.env("SLURM_JOB_ID", "7")
        .env("SLURM_JOB_NODELIST", "vm")
        .env("SLURM_TASKS_PER_NODE", "2")
        .env_remove("PBS_NODEFILE");
    if let Some(s) = step {
        cmd.env("SLURM_STEP_ID", s);
    }
    cmd.args(args).output().expect("run gsmrun")
}

/// gsmrun run inside a Slurm job step (`srun -n1 gsmrun …`) lets its ranks' step share that
/// step's CPUs: without `--overlap`, Slurm held the new step back for ever ("Requested nodes are
/// busy"). The batch script's step is no such step. And `--launcher srun` refuses hosts it
/// cannot honour: they were ignored, while the dry run showed them.
#[test]
fn under_srun_a_step_inside_a_step_overlaps_and_hosts_are_refused() {
    for (step, overlap) in [
        (Some("0"), true),
        (Some("4294967294"), false),
        (None, false),
    ] {
        let out = in_slurm_job(&["--dry-run", "app"], step);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let command = dry_command(&out);
        assert!(command.starts_with("srun "), "{command}");
        assert_eq!(
            command.contains(" --overlap "),
            overlap,
            "step {step:?}: {command}"
        );
    }
    let out = in_slurm_job(
        &["--launcher", "srun", "-H", "a:1,b:1", "--dry-run", "app"],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("-H and --hostfile cannot choose them"),
        "{}",
        stderr_of(&out)
    );
}

/// `--launcher srun` outside an allocation warns that the placement shown is not where srun
/// puts the ranks (it showed this machine's, silently).
#[test]
fn srun_outside_an_allocation_warns_of_its_placement() {
    let out = gsmrun(
        &["--launcher", "srun", "-np", "1", "--dry-run", "app"],
        "openmpi",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("--launcher srun outside a Slurm allocation"),
        "{}",
        stderr_of(&out)
    );
    // Inside an allocation it has nothing to say.
    let inside = in_slurm_job(&["--launcher", "srun", "--dry-run", "app"], None);
    assert_eq!(inside.status.code(), Some(0), "{}", stderr_of(&inside));
    assert!(!stderr_of(&inside).contains("outside a Slurm allocation"));
}
