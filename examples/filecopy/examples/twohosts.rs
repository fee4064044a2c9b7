//! Runs one `gsmrun -np 2` job across two simulated hosts (network namespaces, the test bed of
//! `tests/src/netns.rs`), one rank on each, for measurements by hand:
//!
//! ```text
//! cargo run --release -p gsm-filecopy --example twohosts -- target/release/gsm-filecopy SRC DST
//! cargo run --release -p gsm-filecopy --example twohosts -- target/release/gsm-bench streams --iperf-host {h2}
//! ```
//!
//! `{h2}` in the arguments becomes the second host's address (where rank 1 runs). Needs root (to
//! make namespaces), as the namespace tests do; everything is removed when it ends.

use gsm_tests::netns::TwoHosts;
use std::process::Command;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: twohosts PROGRAM [ARGS...]   ({{h2}} = the second host's address)");
        std::process::exit(2);
    }
    let bed = TwoHosts::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = std::env::temp_dir().join(format!("gsm-twohosts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let hostfile = dir.join("hosts");
    std::fs::write(&hostfile, bed.hostfile(1)).expect("the hostfile");
    let h2 = bed.hosts[1].addr.clone();
    // `<target>/<profile>/examples/twohosts`: gsmrun is in `<target>/<profile>/`.
    let exe = std::env::current_exe().expect("this program's path");
    let gsmrun = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("a profile directory")
        .join("gsmrun");
    let status = Command::new(gsmrun)
        .args(["-np", "2", "--hostfile"])
        .arg(&hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .args(args.iter().map(|a| a.replace("{h2}", &h2)))
        .envs(bed.mpi_env())
        .env_remove("GSM_FABRIC")
        .status()
        .expect("running gsmrun");
    let _ = std::fs::remove_dir_all(&dir);
    drop(bed);
    std::process::exit(status.code().unwrap_or(1));
}
