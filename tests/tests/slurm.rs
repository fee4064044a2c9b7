//! A single-node Slurm started by the test bed: `salloc -n 2 gsmrun gsm-hello`, the same with
//! gsmrun in an `srun` step of its own, and an `sbatch` script all run two ranks with no
//! hostfile. The first test checks the bed itself with plain
//! `mpirun` inside `salloc`.

use gsm_tests::bins::{gsm_hello, gsmrun};
use gsm_tests::job::{assert_exit, assert_ranks};
use gsm_tests::process::{PidGuard, run};
use gsm_tests::slurm::Slurm;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

#[track_caller]
fn assert_on_node(found: &[gsm_tests::hello::Hello], slurm: &Slurm, what: &str) {
    for hello in found {
        assert_eq!(
            hello.host, slurm.node,
            "{what}: rank {} ran on an unexpected host",
            hello.rank
        );
    }
}

#[test]
fn testbed_salloc_runs_plain_mpirun() {
    let slurm = Slurm::shared();
    let guard = PidGuard::new();
    let mut cmd = slurm.command("salloc");
    cmd.args(["-n", "2", "mpirun"])
        .arg(gsm_hello())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "salloc -n 2 mpirun gsm-hello");
    let found = assert_ranks(&done, 2, &guard, "salloc -n 2 mpirun gsm-hello");
    assert_on_node(&found, &slurm, "salloc -n 2 mpirun gsm-hello");
}

#[test]
fn salloc_runs_gsmrun_without_a_hostfile() {
    let slurm = Slurm::shared();
    let guard = PidGuard::new();
    let mut cmd = slurm.command("salloc");
    cmd.args(["-n", "2"]).arg(gsmrun()).arg(gsm_hello());
    cmd.env_remove("OMPI_ALLOW_RUN_AS_ROOT")
        .env_remove("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM");
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "salloc -n 2 gsmrun gsm-hello");
    let found = assert_ranks(&done, 2, &guard, "salloc -n 2 gsmrun gsm-hello");
    assert_on_node(&found, &slurm, "salloc -n 2 gsmrun gsm-hello");
}

/// Under `srun` each rank learns its place on its node (`GSM_LOCAL_RANK` of `GSM_LOCAL_SIZE`),
/// from which the runtime shares the node's CPUs among them: they were unset, and each rank ran
/// a worker per CPU of the node.
#[test]
fn ranks_under_srun_know_their_place_on_the_node() {
    let slurm = Slurm::shared();
    let mut cmd = slurm.command("salloc");
    cmd.args(["-n", "2"]).arg(gsmrun()).args([
        "sh",
        "-c",
        "echo local $GSM_LOCAL_RANK of $GSM_LOCAL_SIZE",
    ]);
    let what = "salloc -n 2 gsmrun sh -c 'echo local $GSM_LOCAL_RANK of $GSM_LOCAL_SIZE'";
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, what);
    let mut lines: Vec<&str> = done
        .stdout
        .lines()
        .filter(|l| l.starts_with("local"))
        .collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["local 0 of 2", "local 1 of 2"],
        "{what}\n{}",
        done.report()
    );
}

/// Inside an allocation, hosts given with `-H` go to Open MPI's `mpirun`, which still holds the
/// job to the allocation's slots and refuses more: gsmrun's line says that this is the likely
/// cause (it listed only unreachable hosts and a missing gsmrun).
#[test]
fn hosts_beyond_the_allocation_are_explained() {
    let slurm = Slurm::shared();
    let mut cmd = slurm.command("salloc");
    cmd.args(["-n", "2"])
        .arg(gsmrun())
        .args(["-H", &format!("{}:4", slurm.node), "-np", "4"])
        .arg(gsm_hello());
    let what = "salloc -n 2 gsmrun -H NODE:4 -np 4 gsm-hello";
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 1, what);
    assert!(
        done.stderr.contains("Likely causes: inside Slurm job ")
            && done
                .stderr
                .contains("holds the job to the allocation's nodes and slots"),
        "{what}\n{}",
        done.report()
    );
}

/// gsmrun started as a job step of its own (`srun -n 1 gsmrun …` inside the allocation) starts
/// its ranks in a step that shares that step's CPUs: Slurm held the ranks' step back for ever
/// ("step creation temporarily disabled … Requested nodes are busy"), and the job never ended.
/// (Its slots are its step's tasks, as Slurm tells it: one here, so two ranks oversubscribe.)
#[test]
fn gsmrun_inside_an_srun_step_runs_its_ranks() {
    let slurm = Slurm::shared();
    let guard = PidGuard::new();
    let mut cmd = slurm.command("salloc");
    cmd.args(["-n", "2", "srun", "-n", "1"])
        .arg(gsmrun())
        .args(["-np", "2", "--oversubscribe"])
        .arg(gsm_hello());
    let what = "salloc -n 2 srun -n 1 gsmrun -np 2 --oversubscribe gsm-hello";
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, what);
    let found = assert_ranks(&done, 2, &guard, what);
    assert_on_node(&found, &slurm, what);
}

/// Submits a `-n 2` batch script whose last line is `exec LAUNCHER gsm-hello`, waits for it with
/// a bounded poll of `scontrol show job`, and checks the two ranks in the job's output.
fn sbatch_two_ranks(slurm: &Slurm, name: &str, launcher: &str) {
    let guard = PidGuard::new();
    let out = slurm.dir().join(format!("{name}.out"));
    let script = slurm.dir().join(format!("{name}.sh"));
    let what = format!("sbatch (-n 2) of a script running `{launcher} gsm-hello`");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#SBATCH -n 2\n#SBATCH -o {out}\n#SBATCH -e {out}\nexec {launcher} {hello}\n",
            out = out.display(),
            hello = gsm_hello().display(),
        ),
    )
    .expect("writing the batch script");
    let mut submit = slurm.command("sbatch");
    submit.arg("--parsable").arg(&script);
    let submitted = run(&mut submit, Duration::from_secs(20));
    assert_exit(&submitted, 0, "sbatch --parsable (submitting the job)");
    let job = submitted
        .stdout
        .trim()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    // Bounded poll of `scontrol show job` (no accounting here, so no sacct): JobState and
    // ExitCode=CODE:SIGNAL once the job has ended.
    let deadline = Instant::now() + LIMIT;
    let record = loop {
        let mut show = slurm.command("scontrol");
        show.args(["-o", "show", "job", &job]);
        let shown = run(&mut show, Duration::from_secs(10));
        let ended = [
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
        ]
        .iter()
        .any(|state| shown.stdout.contains(&format!("JobState={state} ")));
        if ended {
            break shown.stdout;
        }
        if Instant::now() >= deadline {
            let mut cancel = slurm.command("scancel");
            cancel.arg(&job);
            let _ = run(&mut cancel, Duration::from_secs(10));
            panic!(
                "{what}: job {job} did not end within {LIMIT:?}; last record: {}",
                shown.stdout
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let job_output =
        std::fs::read_to_string(&out).unwrap_or_else(|err| format!("(no job output: {err})"));
    let exit = record
        .split_whitespace()
        .find_map(|field| field.strip_prefix("ExitCode="))
        .unwrap_or("?");
    assert!(
        record.contains("JobState=COMPLETED ") && exit == "0:0",
        "{what}: job {job} ended with ExitCode={exit}\n--- job record ---\n{record}\n--- job output ({}) ---\n{job_output}",
        out.display()
    );
    let done = gsm_tests::process::Finished {
        stdout: job_output,
        ..submitted
    };
    let found = assert_ranks(&done, 2, &guard, &what);
    assert_on_node(&found, slurm, &what);
}

#[test]
fn testbed_sbatch_runs_plain_mpirun() {
    let slurm = Slurm::shared();
    sbatch_two_ranks(
        &slurm,
        "sbatch-mpirun",
        "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun",
    );
}

#[test]
fn sbatch_script_runs_gsmrun_without_a_hostfile() {
    let slurm = Slurm::shared();
    let launcher = format!(
        "env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM {}",
        gsmrun().display()
    );
    sbatch_two_ranks(&slurm, "sbatch-gsmrun", &launcher);
}
