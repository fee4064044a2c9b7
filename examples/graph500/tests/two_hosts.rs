//! `--engine gsm` on two simulated hosts (network namespaces, `tcp` between them), one rank of
//! two workers on each, at SCALE 14: every search validates, on the sequential engine's roots and
//! with its edge counts. Delegated visits, relaxations and the completion scopes' probes all
//! cross the tcp fabric.

#[allow(dead_code)] // the helpers of the other engines' tests
mod engines;

use engines::{assert_same_work, sequential_with};
use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::netns::TwoHosts;
use gsm_tests::process::run;
use gsm_tests::scratch::{RunId, Scratch};

const ROOTS: [&str; 2] = ["--roots", "16"];

#[test]
fn scale_14_on_two_hosts_over_tcp_matches_the_sequential_engine() {
    let seq = sequential_with(14, &ROOTS);
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("g500hosts", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(1));
    let json = scratch.write("results.json", "");
    let mut cmd = gsmrun(["-np", "2", "-t", "2", "-hostfile"]);
    cmd.arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .args([
            env!("CARGO_BIN_EXE_graph500"),
            "14",
            "--engine",
            "gsm",
            "--json",
        ])
        .arg(&json)
        .args(ROOTS)
        .envs(bed.mpi_env());
    let done = run(&mut cmd, engines::LIMIT);
    assert_exit(&done, 0, "graph500 14 --engine gsm on two namespaces");
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    let got: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("no JSON results ({e})\n{}", done.report()));
    assert_same_work(&seq, &got, &done, 4);
}
