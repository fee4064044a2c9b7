//! Dry runs: the exact launcher command lines of Open MPI and Hydra, the fabric line, the help.

use crate::common::{BIN, dry_command, gsmrun, stderr_of};

#[test]
fn dry_run_open_mpi_exact_command() {
    let out = gsmrun(
        &[
            "-np",
            "3",
            "-H",
            "a:2,b:2",
            "-x",
            "A=1",
            "--dry-run",
            "/bin/app",
            "-np",
            "9",
        ],
        "openmpi",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        dry_command(&out),
        format!(
            "mpirun --hostfile TMP/hostfile -np 3 --map-by slot --bind-to none -x GSM_JOB_ID \
             -x GSM_SIZE -x GSM_FABRIC -x GSM_HOSTS -x GSM_RANK_HOSTS -x GSM_CONTROL \
             -x GSM_CONTROL_KEY -x A=1 {BIN} --rank-wrapper -- /bin/app -np 9"
        )
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // The path is printed, but the file is only written for a real run.
    assert!(
        text.contains("/hostfile (exists only while the job runs):\n  a slots=2\n  b slots=1\n"),
        "{text}"
    );
    assert!(text.contains("  0     a\n  1     a\n  2     b\n"), "{text}");
}

#[test]
fn dry_run_hydra_exact_command_by_node() {
    let out = gsmrun(
        &[
            "-n",
            "3",
            "-H",
            "a:2,b:2",
            "--map-by",
            "node",
            "--keep-aslr",
            "--launch-agent",
            "/x/rsh",
            "-t",
            "2",
            "--dry-run",
            "app",
        ],
        "hydra",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        dry_command(&out),
        format!(
            "mpirun -f TMP/hostfile -n 3 -launcher-exec /x/rsh -genvlist \
             GSM_JOB_ID,GSM_SIZE,GSM_THREADS,GSM_FABRIC,GSM_HOSTS,GSM_RANK_HOSTS,GSM_CONTROL,GSM_CONTROL_KEY \
             {BIN} --rank-wrapper --keep-aslr -- app"
        )
    );
    // By node, rank by rank (Hydra follows the file's order; it has no `-rr`).
    assert!(String::from_utf8_lossy(&out.stdout).contains("  a:1\n  b:1\n  a:1\n"));
}

#[test]
fn fabric_ofi_is_passed_on_and_shown_by_dry_run() {
    let out = gsmrun(&["--fabric", "ofi", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("GSM_FABRIC=ofi"), "{shown}");
}

/// `--fabric verbs` is passed on (only the ranks know whether the program has the `rdma`
/// feature and the host a device), listed by `--help`, and the dry run's fabric line says what
/// it means; `auto` says its rule for the placement.
#[test]
fn fabric_verbs_is_passed_on_and_the_dry_run_shows_the_choice() {
    let out = gsmrun(&["--fabric", "verbs", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("GSM_FABRIC=verbs"), "{shown}");
    assert!(
        shown.contains("fabric: verbs between every pair of ranks (RC queue pairs on"),
        "{shown}"
    );
    let help = gsmrun(&["--help"], "openmpi");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("verbs"), "{help}");
    let one = gsmrun(&["--dry-run", "app"], "openmpi");
    let one = String::from_utf8_lossy(&one.stdout);
    assert!(
        one.contains("fabric: auto: shm (every rank on one host)"),
        "{one}"
    );
    let two = gsmrun(&["-H", "a,b", "-np", "2", "--dry-run", "app"], "openmpi");
    let two = String::from_utf8_lossy(&two.stdout);
    assert!(
        two.contains("fabric: auto: shm within a host; between hosts ofi if"),
        "{two}"
    );
    let tcp = gsmrun(&["--fabric", "tcp", "--dry-run", "app"], "openmpi");
    let tcp = String::from_utf8_lossy(&tcp.stdout);
    assert!(
        tcp.contains("fabric: tcp between every pair of ranks"),
        "{tcp}"
    );
}

#[test]
fn counts_of_one_are_singular() {
    let out = gsmrun(&["-np", "1", "-H", "a", "--dry-run", "app"], "openmpi");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("placement: 1 rank on 1 host (from -H)"),
        "{text}"
    );
    let out = gsmrun(&["-np", "3", "-H", "a:2,b", "--dry-run", "app"], "openmpi");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("placement: 3 ranks on 2 hosts (from -H)"),
        "{text}"
    );
    let out = gsmrun(&["-np", "2", "-H", "a", "--dry-run", "app"], "openmpi");
    assert!(
        stderr_of(&out).contains("the hosts have only 1 slot;"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn help_hides_the_wrapper_and_shows_examples() {
    let out = gsmrun(&["--help"], "openmpi");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(!text.contains("rank-wrapper"));
    assert!(text.contains("Examples:") && text.contains("-hostfile"));
}
