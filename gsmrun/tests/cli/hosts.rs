//! Where the hosts come from: hostfiles, host lists and PBS node files, named in errors.

use crate::common::{BIN, TempDir, gsmrun, stderr_of};
use std::process::Command;

/// A job of two ranks from a list of 15 000 hosts starts: the hosts without a rank are not
/// passed to the ranks (`GSM_HOSTS` listed all of them, 150 KB, and gsmrun refused the job as
/// too long for the kernel).
#[test]
fn a_small_job_from_a_long_host_list_is_not_refused() {
    let out = gsmrun(
        &["-np", "3", "-H", "node[00001-15000]:2", "--dry-run", "app"],
        "openmpi",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("GSM_HOSTS=node00001,node00002\n") && text.contains("GSM_RANK_HOSTS=0,0,1\n"),
        "{text}"
    );
}

#[test]
fn a_hostfile_without_hosts_is_named() {
    let dir = TempDir::new("empty-hostfile");
    for text in ["", "# only a comment\n\n"] {
        let path = dir.write("hosts", text.as_bytes());
        let out = gsmrun(&["--hostfile", &path, "--dry-run", "app"], "openmpi");
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(&format!("hostfile {path} names no host"))
                && stderr_of(&out).contains("node1 slots=4"),
            "{}",
            stderr_of(&out)
        );
    }
}

#[test]
fn an_empty_host_list_is_named() {
    for value in ["", " "] {
        let out = gsmrun(&["-H", value, "--dry-run", "app"], "openmpi");
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(
            err.starts_with("gsmrun: -H/--host: the host list is empty\n"),
            "{value:?}: {err}"
        );
        assert!(!err.contains("unexpected"), "{value:?}: {err}");
    }
}

#[test]
fn a_non_utf8_hostfile_points_at_the_bad_byte() {
    let dir = TempDir::new("latin1-hostfile");
    let path = dir.write("hosts", b"a\n# M\xfcller\n");
    let out = gsmrun(&["--hostfile", &path, "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(&format!("{path}:2:4: ")),
        "{}",
        stderr_of(&out)
    );
}

/// A PBS node file's names are merged in any ASCII case, as a hostfile's are: Open MPI, given
/// `vm` and `VM`, counted one host's slots twice and ended with an internal error.
#[test]
fn a_pbs_node_file_names_one_host_in_any_case_and_refuses_more_than_names() {
    let dir = std::env::temp_dir().join(format!("gsmrun-cli-pbs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a test directory");
    let file = dir.join("nodes");
    let run = |text: &str| {
        std::fs::write(&file, text).expect("the node file");
        let mut cmd = Command::new(BIN);
        for (k, _) in std::env::vars_os() {
            if k.to_str().is_some_and(|k| k.starts_with("GSM_")) {
                cmd.env_remove(k);
            }
        }
        cmd.args(["-np", "2", "--dry-run", "app"])
            .env("GSM_MPI_FLAVOUR", "openmpi")
            .env_remove("SLURM_JOB_ID")
            .env("PBS_NODEFILE", &file)
            .output()
            .expect("run gsmrun")
    };
    let out = run("localhost\nLOCALHOST\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(text.contains("  localhost slots=2\n"), "{text}");
    let out = run("localhost\nlocalhost slots=2\n");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let at = format!("{}:2:11: `slots=2` follows the host name", file.display());
    assert!(stderr_of(&out).contains(&at), "{}", stderr_of(&out));
    std::fs::remove_dir_all(&dir).expect("remove the test directory");
}

/// This machine under two names would be two hosts to the MPI launcher, which then failed with
/// an internal error that named neither; gsmrun says what is wrong before starting anything.
#[test]
fn this_machine_under_two_names_is_refused_saying_so() {
    let me = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the hostname");
    let me = me.trim();
    for hosts in [
        format!("localhost:1,{me}:1"),
        "127.0.0.1,localhost".to_string(),
        // DNS names compare in any ASCII case, and so does the launcher's resolver.
        format!("LocalHost:1,{me}:1"),
        format!("localhost:1,{}:1", me.to_ascii_uppercase()),
    ] {
        let out = gsmrun(&["-np", "2", "-H", &hosts, "--dry-run", "app"], "openmpi");
        assert_eq!(
            out.status.code(),
            Some(2),
            "-H {hosts}: {}",
            stderr_of(&out)
        );
        assert!(
            stderr_of(&out).contains("the hosts name this machine twice"),
            "-H {hosts}: {}",
            stderr_of(&out)
        );
    }
    // One name, or a second host left without ranks, is fine.
    for hosts in [format!("{me}:2"), format!("localhost:2,{me}:1")] {
        let out = gsmrun(&["-np", "2", "-H", &hosts, "--dry-run", "app"], "openmpi");
        assert_eq!(
            out.status.code(),
            Some(0),
            "-H {hosts}: {}",
            stderr_of(&out)
        );
    }
}
