//! `--engine seq` started as one of several ranks (`gsmrun -np 2 graph500 10 --engine seq`) is
//! refused with status 2: each rank ran the whole benchmark alone and printed its own results.

use graph500::driver::ranks_of_job;
use std::process::{Command, Output};

/// graph500 with `args` and only the launcher variable `var` set to `value`.
fn graph500_as(var: &str, value: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graph500"))
        .args(args)
        .env_remove("GSM_SIZE")
        .env_remove("OMPI_COMM_WORLD_SIZE")
        .env_remove("PMI_SIZE")
        .env(var, value)
        .output()
        .expect("run graph500")
}

#[test]
fn seq_is_refused_in_a_rank_of_several() {
    for var in ["GSM_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"] {
        let out = graph500_as(var, "2", &["6", "--engine", "seq"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}: {err}");
        assert!(out.stdout.is_empty(), "{var}: results were printed");
        assert!(
            err.contains("--engine seq") && err.contains(&format!("({var}=2)")),
            "{var}: {err}"
        );
    }
}

#[test]
fn seq_runs_in_a_job_of_one_rank() {
    let out = graph500_as("GSM_SIZE", "1", &["6", "--engine", "seq", "--roots", "4"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("SCALE:"));
}

#[test]
fn the_first_size_variable_set_decides() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(ranks_of_job(&env(&[])), None);
    assert_eq!(ranks_of_job(&env(&[("GSM_SIZE", "1")])), None);
    assert_eq!(
        ranks_of_job(&env(&[("GSM_SIZE", "1"), ("OMPI_COMM_WORLD_SIZE", "4")])),
        None,
        "gsmrun's size wins"
    );
    assert_eq!(
        ranks_of_job(&env(&[("PMI_SIZE", " 3 ")])),
        Some(("PMI_SIZE", 3))
    );
}
