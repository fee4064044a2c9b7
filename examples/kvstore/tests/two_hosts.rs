//! `gsm-kv` as a job over two simulated hosts (network namespaces, the tcp fabric between them):
//! clients on this machine reach each rank at its host's address and get the same answers.
//! Needs root, as the other namespace tests (`tests/tests/two_hosts.rs`).

mod common;

use common::{gsm_kv, start};
use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::netns::TwoHosts;
use gsm_tests::scratch::{RunId, Scratch};

#[test]
fn a_job_over_two_hosts_gives_every_client_the_same_answers() {
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("kvhosts", RunId::next());
    let hostfile = scratch.write("hosts", &bed.hostfile(1));
    let mut cmd = gsmrun(["-np", "2", "-t", "2", "-hostfile"]);
    cmd.arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .arg(gsm_kv())
        .args(["--port", "0", "--bind", "0.0.0.0"]);
    cmd.envs(bed.mpi_env());
    let hosts: Vec<String> = bed.hosts.iter().map(|h| h.addr.clone()).collect();
    let store = start(&mut cmd, 2, Some(&hosts));
    let mut con = store.client(1);
    common::every_command(&mut con, "h2");
    common::pipelined(&mut con, "h2", 200);
    common::same_answers(&store, "hosts");
    common::concurrent(&store, "hosts", 4, 50);
    let done = store.shutdown(0);
    assert_exit(&done, 0, "gsm-kv over two hosts after SHUTDOWN");
}
