//! The large-record case of `gsm-bench remote`: the bandwidth of one `apply_with` whose argument
//! is a record of `--record-mib` MiB (64 by default), from rank 0 to a trust on rank 1, against
//! `iperf3` between the same two ranks over the same link (rank 1 serves once, rank 0 sends for
//! one second; its received rate). Over `ofi` the record goes by the rendezvous (the trustee
//! reads it by RMA from the client's registered buffer); over `shm` by one `process_vm_readv`
//! from 512 KiB up; over `tcp` streamed through the rings.
//!
//! The Gossamer figure is bytes of argument over the time from the call to its answer (the
//! trustee's check of the length and two bytes included; building the argument, a copy made
//! before the clock starts, is not). Gbit/s, as iperf3 reports.
//!
//! It measures only; `remote.rs` runs it once per repetition and makes the table.

use gossamer::Trust;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Rank 0's side: `apply_with` of a `len`-byte record to `sink` (on rank 1), one for warm-up,
/// then as many as fit in `budget` (at least 2); the median rate of those, Gbit/s.
pub fn gsm_rate(sink: &Trust<u64>, len: usize, budget: Duration) -> f64 {
    let template: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
    let (first, last) = (template[0], template[len - 1]);
    let once = || {
        let arg = template.clone();
        let start = Instant::now();
        let got = sink.apply_with(arg, move |n, data: Vec<u8>| {
            *n += 1;
            (data.len(), data[0], data[data.len() - 1])
        });
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(
            got,
            (len, first, last),
            "gsm-bench remote: the {len}-byte record arrived changed"
        );
        len as f64 * 8.0 / secs / 1e9
    };
    once();
    let end = Instant::now() + budget;
    let mut rates = Vec::new();
    while rates.len() < 2 || Instant::now() < end {
        rates.push(once());
    }
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// One `iperf3` measurement between the ranks (called on both): rank 1 serves once, rank 0
/// sends to `host` for one second. Rank 0 gets the received rate in Gbit/s, or `None` with a
/// warning when iperf3 cannot run (the case then has no peer figure).
pub fn iperf(world: &SimpleCommunicator, iperf3: &str, host: &str) -> Option<f64> {
    // A port free on rank 1's host, so that jobs running at once (tests) do not collide.
    let mut port: u16 = 0;
    if world.rank() == 1 {
        port = std::net::TcpListener::bind(("0.0.0.0", 0))
            .and_then(|l| l.local_addr())
            .map_or(5298, |a| a.port());
    }
    world.process_at_rank(1).broadcast_into(&mut port);
    let port = port.to_string();
    if world.rank() == 1 {
        let server = Command::new(iperf3)
            .args(["-s", "-1", "-p", &port])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        std::thread::sleep(Duration::from_millis(300));
        world.barrier();
        world.barrier();
        match server {
            Ok(mut s) => {
                let _ = s.kill();
                let _ = s.wait();
            }
            Err(e) => eprintln!(
                "gsm-bench remote: cannot start `{iperf3} -s` ({e}); scripts/install-deps \
                 installs iperf3"
            ),
        }
        return None;
    }
    world.barrier();
    let out = Command::new(iperf3)
        .args(["-c", host, "-p", &port, "-t", "1", "-J"])
        .output();
    world.barrier();
    let parsed = out.ok().and_then(|o| {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        v["end"]["sum_received"]["bits_per_second"].as_f64()
    });
    if parsed.is_none() {
        eprintln!("gsm-bench remote: `{iperf3} -c {host}` gave no rate; no iperf3 figure");
    }
    parsed.map(|bps| bps / 1e9)
}
