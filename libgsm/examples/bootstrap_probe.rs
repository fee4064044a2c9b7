//! `bootstrap_probe`: bootstraps a job with [`gossamer::bootstrap::Job::init`] and prints what
//! every rank learnt, for the multi-process tests (`tests/tests/bootstrap.rs` in `gsm-tests`).
//!
//! Each rank's endpoint is a test pattern whose length depends on the rank (rank r sends
//! `r * 300 + (r % 2) * 7` bytes, byte i being `(i * 31 + r * 7) mod 256`; rank 0 sends none).
//! The rank is not known before `init`, so it is read from the launcher's environment
//! (`OMPI_COMM_WORLD_RANK`, `PMI_RANK`, or 0 for a singleton) and checked after.
//!
//! Output, one line per item:
//! - `job rank R size N pid P host H job J key K id I local L boot_ms B main_ms M`
//!   (`boot_ms`: from the process's start, per `/proc/self/stat`, to `init` returning, 10 ms
//!   resolution; `main_ms`: from `main` to `init` returning);
//! - `peer rank R of Q pid P host H endpoint E` for each peer Q (`E` in hex, `-` when empty).
//!
//! On a bootstrap error it prints `bootstrap_probe: rank R: <error>` to stderr and exits with 3.

use gossamer::bootstrap::Job;
use std::time::Instant;

/// The endpoint rank `rank` sends (see the module docs).
fn endpoint(rank: u32) -> Vec<u8> {
    let len = rank as usize * 300 + (rank as usize % 2) * 7;
    (0..len)
        .map(|i| (i * 31 + rank as usize * 7) as u8)
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "-".into();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn rank_from_env() -> u32 {
    ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"]
        .iter()
        .find_map(|var| std::env::var(var).ok()?.parse().ok())
        .unwrap_or(0)
}

/// Milliseconds since this process started, from `/proc/self/stat` (start time in clock ticks
/// since boot) and `/proc/uptime`; `None` if either cannot be read.
fn ms_since_process_start() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let after = &stat[stat.rfind(')')? + 2..];
    // starttime is field 22 overall, the 20th after the name.
    let start_ticks: f64 = after.split(' ').nth(19)?.parse().ok()?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((uptime - start_ticks / ticks) * 1000.0)
}

fn main() {
    let main_start = Instant::now();
    let hint = rank_from_env();
    let job = match Job::init(&endpoint(hint)) {
        Ok(job) => job,
        Err(err) => {
            gossamer::eprint_line(format_args!("bootstrap_probe: rank {hint}: {err}"));
            // A mismatch keeps MPI initialised until here, so the message is out before
            // MPI_Finalize lets the launcher end the job.
            drop(err);
            std::process::exit(3);
        }
    };
    let main_ms = main_start.elapsed().as_secs_f64() * 1000.0;
    let boot_ms = ms_since_process_start().unwrap_or(f64::NAN);
    if job.rank() != hint {
        eprintln!(
            "bootstrap_probe: the launcher said rank {hint}, MPI says rank {}",
            job.rank()
        );
        std::process::exit(4);
    }
    let local: Vec<String> = job.local_ranks().iter().map(u32::to_string).collect();
    let me = &job.peers()[job.rank() as usize];
    println!(
        "job rank {} size {} pid {} host {} job {} key {} id {} local {} boot_ms {:.1} main_ms {:.1}",
        job.rank(),
        job.size(),
        std::process::id(),
        me.hostname,
        job.job_id(),
        hex(job.key()),
        me.binary_id.to_string().replace(' ', "_"),
        local.join(","),
        boot_ms,
        main_ms
    );
    for peer in job.peers() {
        println!(
            "peer rank {} of {} pid {} host {} endpoint {}",
            job.rank(),
            peer.rank,
            peer.pid,
            peer.hostname,
            hex(&peer.endpoint)
        );
    }
    if let Err(err) = job.barrier() {
        eprintln!("bootstrap_probe: barrier: {err}");
        std::process::exit(3);
    }
    job.finalize();
}
