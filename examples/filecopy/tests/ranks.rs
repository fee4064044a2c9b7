//! Segments and streams between ranks through `gsmrun`: `gsm-segcheck` on one host (shared
//! memory), over the tcp fabric (requests to the owner's handler), and across two namespace
//! hosts, and (with `--features ofi`) over the ofi fabric; a writer that dies ends the job with a report; `gsm-filecopy` copies a 1 GiB file
//! between the two namespace hosts byte for byte.

use gsm_tests::job::{assert_exit, gsmrun};
use gsm_tests::netns::TwoHosts;
use gsm_tests::process::run;
use gsm_tests::scratch::{RunId, Scratch};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// Open MPI launches on the namespace hosts take turns (see tests/tests/two_hosts.rs).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

const CHECKS: [&str; 6] = [
    "segcheck: each operation across ranks ok",
    "segcheck: violations from another rank ok",
    "segcheck: concurrent fetch_add from every worker of every rank ok",
    "segcheck: typed atomics of every type and operation across ranks ok",
    "segcheck: notifications after their data ok",
    "segcheck: two streams at once, random lengths, byte for byte ok",
];

fn segcheck(launch: &[&str], bed: Option<&TwoHosts>, what: &str) {
    segcheck_with(launch, bed, &[], what);
}

fn segcheck_with(launch: &[&str], bed: Option<&TwoHosts>, env: &[(&str, &str)], what: &str) {
    let scratch = Scratch::new("segcheck", RunId::next());
    let mut cmd = gsmrun(["-np", "2", "--oversubscribe"]);
    cmd.args(launch).env_remove("GSM_FABRIC");
    cmd.envs(env.iter().copied());
    if let Some(bed) = bed {
        let hostfile = scratch.write("hosts", &bed.hostfile(1));
        cmd.arg("--hostfile")
            .arg(hostfile)
            .arg("--launch-agent")
            .arg(TwoHosts::agent());
        cmd.envs(bed.mpi_env());
    }
    cmd.arg(env!("CARGO_BIN_EXE_gsm-segcheck"));
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, what);
    for c in CHECKS {
        assert!(
            done.stdout.contains(c),
            "{what}: no `{c}`\n{}",
            done.report()
        );
    }
}

#[test]
fn segments_and_streams_between_two_ranks_of_one_host() {
    segcheck(&[], None, "gsm-segcheck, 2 ranks on one host");
}

#[test]
fn segments_and_streams_over_the_tcp_fabric() {
    segcheck(&["--fabric", "tcp"], None, "gsm-segcheck over tcp");
}

/// With `--features ofi` (`make test`, in target/ofi): every operation over the ofi fabric
/// (libfabric's `tcp;ofi_rxm` provider), which `GSM_FABRIC=ofi` makes carry them: `get`, `put`
/// and the atomics as RMA on the owner's registered memory (checked: some must have gone so),
/// notifications and streams as requests.
#[cfg(feature = "ofi")]
#[test]
fn segments_and_streams_over_the_ofi_fabric() {
    let _serial = serial();
    segcheck_with(
        &["--fabric", "ofi"],
        None,
        &[
            ("GSM_OFI_PROVIDER", "tcp;ofi_rxm"),
            ("GSM_SEGCHECK_RMA", "1"),
        ],
        "gsm-segcheck over ofi",
    );
}

#[test]
fn segments_and_streams_between_two_namespace_hosts() {
    let _serial = serial();
    let bed = TwoHosts::shared();
    segcheck(&[], Some(&bed), "gsm-segcheck across two namespace hosts");
}

/// Runs `gsm-segcheck MODE`, in which rank `dies` ends its process mid-stream with `status`.
fn one_side_dies(mode: &str, launch: &[&str], dies: u32, status: u32) {
    let mut cmd = gsmrun(["-np", "2", "--oversubscribe"]);
    cmd.args(launch)
        .env_remove("GSM_FABRIC")
        .arg(env!("CARGO_BIN_EXE_gsm-segcheck"))
        .arg(mode);
    let done = run(&mut cmd, LIMIT);
    let what = format!("gsm-segcheck {mode} {launch:?}");
    assert!(
        !done.timed_out && done.shell_code() != 0,
        "{what}: the job must fail, not hang\n{}",
        done.report()
    );
    assert!(
        done.stderr.contains(&format!("rank {dies}"))
            && done.stderr.contains(&format!("status {status}")),
        "{what}: the report names the rank that died\n{}",
        done.report()
    );
}

#[test]
fn a_writer_that_dies_ends_the_job_with_a_report() {
    one_side_dies("writer-dies", &[], 0, 3);
    one_side_dies("writer-dies", &["--fabric", "tcp"], 0, 3);
}

#[test]
fn a_reader_that_dies_ends_the_job_with_a_report() {
    one_side_dies("reader-dies", &[], 1, 4);
    one_side_dies("reader-dies", &["--fabric", "tcp"], 1, 4);
}

/// The size: 1 GiB, written and compared in 1 MiB chunks so the test holds 2 MiB, not
/// 2 GiB (the two files take 2 GiB of `/tmp` while it runs; the scratch directory goes after).
const COPY_BYTES: usize = 1 << 30;
const CHUNK: usize = 1 << 20;

/// Fills `buf` with the next bytes of a xorshift sequence (a file no compressor or page sharing
/// makes cheap, and whose every chunk differs).
fn pseudo_random(x: &mut u64, buf: &mut [u8]) {
    for b in buf {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *b = (*x >> 24) as u8;
    }
}

#[test]
fn filecopy_copies_1_gib_between_two_namespace_hosts() {
    use std::io::{Read, Write};
    let _serial = serial();
    let bed = TwoHosts::shared();
    let scratch = Scratch::new("filecopy", RunId::next());
    let (src, dst) = (scratch.join("src.bin"), scratch.join("dst.bin"));
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut chunk = vec![0u8; CHUNK];
    let mut out = std::io::BufWriter::new(std::fs::File::create(&src).unwrap());
    for _ in 0..COPY_BYTES / CHUNK {
        pseudo_random(&mut x, &mut chunk);
        out.write_all(&chunk).unwrap();
    }
    out.into_inner().unwrap().sync_all().unwrap();
    let hostfile = scratch.write("hosts", &bed.hostfile(1));
    let mut cmd = gsmrun(["-np", "2", "--hostfile"]);
    cmd.arg(hostfile)
        .arg("--launch-agent")
        .arg(TwoHosts::agent())
        .envs(bed.mpi_env())
        .env_remove("GSM_FABRIC")
        .arg(env!("CARGO_BIN_EXE_gsm-filecopy"))
        .arg(&src)
        .arg(&dst);
    let done = run(&mut cmd, LIMIT);
    let what = "gsm-filecopy of 1 GiB between two namespace hosts";
    assert_exit(&done, 0, what);
    assert!(
        done.stdout
            .contains(&format!("gsm-filecopy: {COPY_BYTES} bytes")),
        "{what}\n{}",
        done.report()
    );
    let (mut a, mut b) = (
        std::fs::File::open(&src).unwrap(),
        std::fs::File::open(&dst).unwrap(),
    );
    assert_eq!(
        b.metadata().unwrap().len(),
        COPY_BYTES as u64,
        "{what}: the copy's length"
    );
    let mut other = vec![0u8; CHUNK];
    for i in 0..COPY_BYTES / CHUNK {
        a.read_exact(&mut chunk).unwrap();
        b.read_exact(&mut other).unwrap();
        assert!(
            chunk == other,
            "{what}: the copy differs from the source in MiB {i}"
        );
    }
}

#[test]
fn filecopy_of_a_missing_file_ends_the_job_naming_it() {
    let scratch = Scratch::new("filecopy", RunId::next());
    let (src, dst) = (scratch.join("absent.bin"), scratch.join("dst.bin"));
    let mut cmd = gsmrun(["-np", "2", "--oversubscribe"]);
    cmd.env_remove("GSM_FABRIC")
        .arg(env!("CARGO_BIN_EXE_gsm-filecopy"))
        .arg(&src)
        .arg(&dst);
    let done = run(&mut cmd, LIMIT);
    let what = "gsm-filecopy of a file that does not exist";
    assert!(
        !done.timed_out && done.shell_code() != 0,
        "{what}: the job must fail, not hang\n{}",
        done.report()
    );
    assert!(
        done.stderr
            .contains(&format!("{}: No such file", src.display())),
        "{what}: the error names the file\n{}",
        done.report()
    );
}
