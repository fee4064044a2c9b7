//! The runtime's bootstrap (`gossamer::bootstrap::Job::init`) in real multi-process jobs: through
//! `gsmrun` with 2 and 3 ranks every rank sees the same key and job id, the right size, every
//! rank's pid and hostname, and every rank's endpoint bytes intact (lengths 0, 307 and 600); and a
//! job whose two ranks run different builds fails on both ranks with a message naming them.
//!
//! The jobs run the example `bootstrap_probe` of the `gossamer` crate, which Cargo puts in
//! `<target>/release/examples/`. `cargo test -p gsm-tests` does not build other packages'
//! examples: `make test` builds all targets of the workspace first
//! (`cargo build --release --workspace --all-targets`), which does.
//!
//! The mismatch test launches with plain `mpirun` in MPMD form (`-np 1 A : -np 1 B`), which
//! `gsmrun` does not offer. B is a copy of A whose GNU build-id note has one byte changed: a
//! copy of one build is, rightly, the same build (appending a byte does not change the build-id,
//! and the test checks that such a job starts), while building a second variant inside a test
//! would need a second Cargo build of the workspace. Changing the build-id is exactly what the
//! linker does for a different build, so it exercises the same check.

use gossamer::bootstrap::BinaryId;
use gsm_tests::bins::profile_dir;
use gsm_tests::job::{assert_exit, gsmrun, mpirun};
use gsm_tests::process::{Finished, PidGuard, run};
use gsm_tests::scratch::{RunId, Scratch};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

fn probe() -> PathBuf {
    let path = profile_dir().join("examples").join("bootstrap_probe");
    assert!(
        path.is_file(),
        "the example `bootstrap_probe` is missing at {}: build it with \
         `cargo build --release --workspace --all-targets` (`make test` does this) using the \
         same CARGO_TARGET_DIR as `cargo test`",
        path.display()
    );
    path
}

/// The endpoint the probe sends from `rank` (mirrors the probe's documented pattern).
fn expected_endpoint(rank: u32) -> String {
    let len = rank as usize * 300 + (rank as usize % 2) * 7;
    if len == 0 {
        return "-".into();
    }
    (0..len)
        .map(|i| format!("{:02x}", (i * 31 + rank as usize * 7) as u8))
        .collect()
}

/// `key value` pairs of a probe line after its first word.
fn fields(line: &str) -> BTreeMap<&str, &str> {
    let words: Vec<&str> = line.split_whitespace().skip(1).collect();
    words
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (c[0], c[1]))
        .collect()
}

#[derive(Debug)]
struct RankView {
    size: u32,
    pid: u32,
    host: String,
    job: String,
    key: String,
    local: String,
    boot_ms: f64,
}

fn check_job(np: u32, done: &Finished, guard: &PidGuard) -> Vec<f64> {
    let report = done.report();
    let mut ranks = BTreeMap::new();
    // peers[(viewer, peer)] = (pid, host, endpoint)
    let mut peers = BTreeMap::new();
    for line in done.stdout.lines() {
        let f = fields(line);
        let num = |k: &str| -> u32 {
            f.get(k)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("field `{k}` in `{line}`\n{report}"))
        };
        if line.starts_with("job ") {
            guard.watch(num("pid"), "bootstrap_probe");
            let view = RankView {
                size: num("size"),
                pid: num("pid"),
                host: f["host"].to_string(),
                job: f["job"].to_string(),
                key: f["key"].to_string(),
                local: f["local"].to_string(),
                boot_ms: f["boot_ms"].parse().unwrap_or(f64::NAN),
            };
            assert!(ranks.insert(num("rank"), view).is_none(), "{report}");
        } else if line.starts_with("peer ") {
            let entry = (num("pid"), f["host"].to_string(), f["endpoint"].to_string());
            peers.insert((num("rank"), num("of")), entry);
        }
    }
    assert_eq!(
        ranks.keys().copied().collect::<Vec<_>>(),
        (0..np).collect::<Vec<_>>(),
        "one `job` line per rank\n{report}"
    );
    let first = &ranks[&0];
    assert_eq!(first.key.len(), 64, "a 32-byte key in hex\n{report}");
    assert_ne!(first.key, "0".repeat(64), "{report}");
    let all_local: Vec<String> = (0..np).map(|r| r.to_string()).collect();
    for (rank, view) in &ranks {
        assert_eq!(view.size, np, "rank {rank}'s size\n{report}");
        assert_eq!(view.key, first.key, "rank {rank}'s key differs\n{report}");
        assert_eq!(
            view.job, first.job,
            "rank {rank}'s job id differs\n{report}"
        );
        assert_eq!(
            view.local,
            all_local.join(","),
            "one host: all local\n{report}"
        );
        for (peer, peer_view) in &ranks {
            let (pid, host, endpoint) = peers
                .get(&(*rank, *peer))
                .unwrap_or_else(|| panic!("rank {rank} printed nothing about {peer}\n{report}"));
            assert_eq!(
                *pid, peer_view.pid,
                "rank {rank}'s view of {peer}'s pid\n{report}"
            );
            assert_eq!(
                *host, peer_view.host,
                "rank {rank}'s view of {peer}'s host\n{report}"
            );
            assert!(
                *endpoint == expected_endpoint(*peer),
                "rank {rank} received rank {peer}'s endpoint altered ({} hex chars, expected {})\n{report}",
                endpoint.len(),
                expected_endpoint(*peer).len()
            );
        }
    }
    let pids: std::collections::BTreeSet<u32> = ranks.values().map(|v| v.pid).collect();
    assert_eq!(pids.len(), np as usize, "distinct processes\n{report}");
    ranks.values().map(|v| v.boot_ms).collect()
}

fn gsmrun_job(np: u32, extra: &[&str]) {
    let guard = PidGuard::new();
    let np_text = np.to_string();
    let mut cmd = gsmrun(["-np", np_text.as_str()]);
    cmd.args(extra).arg(probe());
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, &format!("gsmrun -np {np} bootstrap_probe"));
    let boot = check_job(np, &done, &guard);
    eprintln!("bootstrap of {np} ranks, ms from process start to init returning: {boot:?}");
    assert!(guard.survivors(Duration::from_secs(5)).is_empty());
}

#[test]
fn two_ranks_bootstrap_through_gsmrun() {
    gsmrun_job(2, &[]);
}

#[test]
fn three_ranks_bootstrap_through_gsmrun() {
    gsmrun_job(3, &["--oversubscribe"]);
}

/// Copies the probe to `to`, executable.
fn copy_probe(to: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(probe()).expect("read the probe");
    edit(&mut bytes);
    std::fs::write(to, &bytes).expect("write the copy");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(to, mode).expect("chmod the copy");
}

fn mpmd(a: &Path, b: &Path) -> Finished {
    let mut cmd = mpirun(["--oversubscribe", "-np", "1"]);
    cmd.arg(a).args([":", "-np", "1"]).arg(b);
    run(&mut cmd, LIMIT)
}

#[test]
fn ranks_running_different_builds_refuse_to_start() {
    let scratch = Scratch::new("bootstrap", RunId::next());
    let a = scratch.join("probe_a");
    let same = scratch.join("probe_same");
    let b = scratch.join("probe_b");
    copy_probe(&a, |_| {});
    // A copy of the same build with a byte appended: the build-id is unchanged, the job starts.
    copy_probe(&same, |bytes| bytes.push(0));
    let id_a = BinaryId::of_path(&a).expect("identify the probe");
    let BinaryId::BuildId(build_id) = &id_a else {
        panic!("the probe has no build-id note ({id_a}); this test needs one");
    };
    copy_probe(&b, |bytes| {
        let at = bytes
            .windows(build_id.len())
            .position(|w| w == build_id.as_slice())
            .expect("the build-id bytes are in the file");
        let last = at + build_id.len() - 1;
        bytes[last] ^= 0xff;
    });
    let id_b = BinaryId::of_path(&b).expect("identify the altered probe");
    assert_ne!(id_a, id_b, "the altered copy must have another identity");

    let ok = mpmd(&a, &same);
    assert_exit(&ok, 0, "mpirun probe_a : probe_same (one build)");

    let done = mpmd(&a, &b);
    let report = done.report();
    assert!(!done.timed_out, "a mismatch must fail, not hang\n{report}");
    assert_ne!(done.code(), Some(0), "the job must fail\n{report}");
    assert!(
        !done.stdout.contains("job rank"),
        "no rank may start\n{report}"
    );
    for rank in [0, 1] {
        let line = done
            .stderr
            .lines()
            .find(|l| l.starts_with(&format!("bootstrap_probe: rank {rank}: ")))
            .unwrap_or_else(|| panic!("rank {rank} must report the mismatch\n{report}"));
        for part in [
            "different builds".to_string(),
            "rank 0 on host".to_string(),
            "rank 1 on host".to_string(),
            id_a.to_string(),
            id_b.to_string(),
            "same build of the program on every host".to_string(),
        ] {
            assert!(
                line.contains(&part),
                "rank {rank}'s message lacks `{part}`: {line}\n{report}"
            );
        }
    }
}
