//! `gsm-bench kv`: `gsm-kv` against `redis-server`, both driven by `redis-benchmark` in the same
//! run, on the same cores, with the same clients, keys and values.
//!
//! Two set-ups: 1 worker against 1 `redis-server`, and 2 workers (one rank) against 2
//! `redis-server` instances. Each is driven by 50 connections in all (with 2 servers, two
//! `redis-benchmark` processes of 25 connections, one per Redis instance; for `gsm-kv`, both
//! against its one port, whose rank hands connections to its workers in turn), at pipeline 1
//! and 16, 64-byte values, keys drawn from 100,000 (`-r 100000`), `SET` then `GET`. Before the
//! timed runs each server is loaded with the keyspace (untimed), so that `GET`s hit.
//!
//! Servers are started and stopped by this module for every run, one system at a time (which
//! goes first alternates), so that an idle server never shares the cores with the one being
//! measured. On a machine of at least 2 CPUs, with 1 server the server is pinned to CPU 0 and the
//! clients to CPU 1; with 2 servers the servers and the clients share CPUs 0-1 (`taskset`).
//! Redis runs with persistence off (`--save "" --appendonly no`); `gsm-kv` has none.
//!
//! Throughput is the sum over the client processes, p99 latency the largest of their p99s, both
//! from `redis-benchmark --csv`. Each figure is the median over `--runs`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::case::{Case, Figure};
use crate::stats::summarize;

/// Options of `gsm-bench kv`.
#[derive(Debug, Clone)]
pub struct Options {
    pub runs: usize,
    pub gsm_kv: PathBuf,
    pub redis_server: PathBuf,
    pub redis_benchmark: PathBuf,
    /// The first TCP port to use (servers take this one and the next).
    pub port: u16,
    /// Requests per timed run are divided by this (1 normally; 20 for `--quick`).
    pub scale: u64,
}

/// The systems compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    Gsm,
    Redis,
}

impl System {
    pub fn name(self) -> &'static str {
        match self {
            System::Gsm => "gsm-kv",
            System::Redis => "redis-server",
        }
    }
}

/// Connections in all, over the client processes.
pub const CONNECTIONS: usize = 50;
/// Keys drawn from.
pub const KEYSPACE: u64 = 100_000;
/// Value bytes.
pub const VALUE: usize = 64;
/// How long a server may take to start answering.
const START: Duration = Duration::from_secs(20);
/// How long one `redis-benchmark` run may take.
const DRIVE: Duration = Duration::from_secs(120);

/// What one client run measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Requests per second.
    pub rps: f64,
    /// Latency percentiles in milliseconds.
    pub p50: f64,
    pub p99: f64,
}

/// Running servers of one system.
pub struct Servers {
    children: Vec<Child>,
    /// The ports the clients go to, one per client process.
    pub ports: Vec<u16>,
}

/// `taskset -c cpus program` when `cpus` is set.
pub fn pinned(cpus: Option<&str>, program: &std::path::Path) -> Command {
    match cpus {
        Some(c) => {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", c]).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

/// Waits until the server on `port` answers `PING`.
fn wait_ready(port: u16, child: &mut Child) -> anyhow::Result<()> {
    let deadline = Instant::now() + START;
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::{Read, Write};
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            let mut buf = [0u8; 7];
            if s.write_all(b"PING\r\n").is_ok()
                && s.read_exact(&mut buf).is_ok()
                && &buf == b"+PONG\r\n"
            {
                return Ok(());
            }
        }
        if let Some(status) = child.try_wait()? {
            bail!("the server for port {port} exited while starting ({status})");
        }
        if Instant::now() > deadline {
            bail!("no server answered PING on port {port} within {START:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Servers {
    /// Starts `servers` servers of `system` on `cpus` from port `port`.
    pub fn start(
        opts: &Options,
        system: System,
        servers: usize,
        cpus: Option<&str>,
    ) -> anyhow::Result<Self> {
        let mut children = Vec::new();
        let ports: Vec<u16>;
        match system {
            System::Gsm => {
                let mut cmd = pinned(cpus, &opts.gsm_kv);
                cmd.args(["--port", &opts.port.to_string()])
                    .env("GSM_THREADS", servers.to_string())
                    .stdout(Stdio::null())
                    .stderr(Stdio::inherit());
                let mut child = cmd.spawn().context("starting gsm-kv")?;
                wait_ready(opts.port, &mut child)?;
                children.push(child);
                ports = vec![opts.port; servers];
            }
            System::Redis => {
                ports = (0..servers as u16).map(|i| opts.port + i).collect();
                for &p in &ports {
                    let mut cmd = pinned(cpus, &opts.redis_server);
                    cmd.args(["--port", &p.to_string(), "--bind", "127.0.0.1"])
                        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                        .stdout(Stdio::null())
                        .stderr(Stdio::inherit());
                    let mut child = cmd.spawn().with_context(|| {
                        format!(
                            "starting {} (install redis-server)",
                            opts.redis_server.display()
                        )
                    })?;
                    wait_ready(p, &mut child)?;
                    children.push(child);
                }
            }
        }
        Ok(Self { children, ports })
    }

    /// `SHUTDOWN NOSAVE` to every server, then waits for them (killing one that lingers).
    pub fn stop(mut self) {
        for &p in &self.ports {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", p)) {
                use std::io::Write;
                let _ = s.write_all(b"SHUTDOWN NOSAVE\r\n");
            }
        }
        self.reap();
    }

    fn reap(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        for c in &mut self.children {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.children.clear();
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs one `redis-benchmark` per port (the connections split among them) and sums them up.
pub fn drive(
    opts: &Options,
    ports: &[u16],
    cpus: Option<&str>,
    test: &str,
    pipeline: usize,
    requests: u64,
) -> anyhow::Result<Sample> {
    let k = ports.len();
    let mut children = Vec::new();
    for &p in ports {
        let mut cmd = pinned(cpus, &opts.redis_benchmark);
        cmd.args(["-h", "127.0.0.1", "-p", &p.to_string()])
            .args(["-c", &(CONNECTIONS / k).to_string()])
            .args(["-n", &(requests / k as u64).to_string()])
            .args(["-P", &pipeline.to_string()])
            .args(["-d", &VALUE.to_string(), "-r", &KEYSPACE.to_string()])
            .args(["-t", test, "--csv"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        children.push(cmd.spawn().with_context(|| {
            format!(
                "starting {} (install redis-tools)",
                opts.redis_benchmark.display()
            )
        })?);
    }
    let mut total = Sample::default();
    for mut c in children {
        let out = c.stdout.take().context("redis-benchmark's stdout")?;
        let deadline = Instant::now() + DRIVE;
        let mut found = None;
        for line in BufReader::new(out).lines() {
            let line = line?;
            if let Some(s) = parse_csv(&line) {
                found = Some(s);
            }
            if Instant::now() > deadline {
                break;
            }
        }
        let status = c.wait()?;
        let s = found
            .with_context(|| format!("redis-benchmark -t {test} printed no result ({status})"))?;
        total.rps += s.rps;
        total.p50 = total.p50.max(s.p50);
        total.p99 = total.p99.max(s.p99);
    }
    Ok(total)
}

/// One result line of `redis-benchmark --csv` (7.x): test, rps, avg, min, p50, p95, p99, max.
pub fn parse_csv(line: &str) -> Option<Sample> {
    let fields: Vec<&str> = line.split(',').map(|f| f.trim_matches('"')).collect();
    if fields.len() < 8 || fields[0] == "test" {
        return None;
    }
    let num = |i: usize| fields[i].parse::<f64>().ok();
    Some(Sample {
        rps: num(1)?,
        p50: num(4)?,
        p99: num(6)?,
    })
}

/// One cell of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub servers: usize,
    pub pipeline: usize,
    pub test: &'static str,
}

impl Cell {
    pub fn label(&self) -> String {
        let who = if self.servers == 1 {
            "1 worker vs 1 redis-server".to_string()
        } else {
            format!("{0} workers vs {0} redis-servers", self.servers)
        };
        format!("{who}: {} P{}", self.test.to_uppercase(), self.pipeline)
    }

    fn requests(&self, scale: u64) -> u64 {
        let n: u64 = if self.pipeline == 1 { 60_000 } else { 600_000 };
        (n / scale).max(1000)
    }
}

/// The cells, in the order they are run and reported.
pub fn cells() -> Vec<Cell> {
    let mut v = Vec::new();
    for servers in [1, 2] {
        for pipeline in [1, 16] {
            for test in ["set", "get"] {
                v.push(Cell {
                    servers,
                    pipeline,
                    test,
                });
            }
        }
    }
    v
}

/// The CPUs of the servers and of the clients for `servers` servers.
fn cpus(servers: usize) -> (Option<&'static str>, Option<&'static str>) {
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    match (online >= 2, servers) {
        (false, _) => (None, None),
        (true, 1) => (Some("0"), Some("1")),
        (true, _) => (Some("0,1"), Some("0,1")),
    }
}

/// Samples of every cell for one system: `samples[cell]`.
type Samples = Vec<Vec<Sample>>;

/// Runs every cell `opts.runs` times for both systems, alternating which goes first.
pub fn measure(opts: &Options) -> anyhow::Result<(Samples, Samples)> {
    let cells = cells();
    let mut gsm: Samples = vec![Vec::new(); cells.len()];
    let mut redis: Samples = vec![Vec::new(); cells.len()];
    for run in 0..opts.runs {
        let order = if run % 2 == 0 {
            [System::Gsm, System::Redis]
        } else {
            [System::Redis, System::Gsm]
        };
        for servers in [1, 2] {
            let (server_cpus, client_cpus) = cpus(servers);
            for system in order {
                crate::report::progress(format_args!(
                    "kv: run {}/{}, {} x{servers}",
                    run + 1,
                    opts.runs,
                    system.name()
                ));
                let s = Servers::start(opts, system, servers, server_cpus)?;
                // Untimed: fill the keyspace so that GETs hit.
                drive(
                    opts,
                    &s.ports,
                    client_cpus,
                    "set",
                    16,
                    (KEYSPACE * 3 / opts.scale).max(1000),
                )?;
                for (i, cell) in cells
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.servers == servers)
                {
                    let sample = drive(
                        opts,
                        &s.ports,
                        client_cpus,
                        cell.test,
                        cell.pipeline,
                        cell.requests(opts.scale),
                    )?;
                    match system {
                        System::Gsm => gsm[i].push(sample),
                        System::Redis => redis[i].push(sample),
                    }
                }
                s.stop();
            }
        }
    }
    crate::report::progress_done();
    Ok((gsm, redis))
}

/// The table's cases: per cell, throughput and p99 latency.
pub fn cases(gsm: &Samples, redis: &Samples) -> Vec<Case> {
    let mut out = Vec::new();
    for (i, cell) in cells().iter().enumerate() {
        let pick =
            |s: &Samples, f: fn(&Sample) -> f64| summarize(&s[i].iter().map(f).collect::<Vec<_>>());
        out.push(Case {
            case: format!("{} throughput", cell.label()),
            unit: "kreq/s".into(),
            higher_is_better: true,
            gsm: pick(gsm, |s| s.rps / 1e3),
            peers: vec![Figure {
                name: System::Redis.name().into(),
                summary: pick(redis, |s| s.rps / 1e3),
            }],
        });
        out.push(Case {
            case: format!("{} p99", cell.label()),
            unit: "ms".into(),
            higher_is_better: false,
            gsm: pick(gsm, |s| s.p99),
            peers: vec![Figure {
                name: System::Redis.name().into(),
                summary: pick(redis, |s| s.p99),
            }],
        });
    }
    out
}

/// `gsm-bench kv`.
pub fn run(opts: &Options) -> anyhow::Result<Vec<Case>> {
    let (gsm, redis) = measure(opts)?;
    Ok(cases(&gsm, &redis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_lines_of_redis_benchmark_7_are_read() {
        let head = r#""test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms""#;
        assert!(parse_csv(head).is_none());
        let s = parse_csv(r#""SET","32341.53","1.480","0.216","1.367","2.791","3.631","9.319""#)
            .unwrap();
        assert_eq!((s.rps, s.p50, s.p99), (32341.53, 1.367, 3.631));
    }

    #[test]
    fn every_cell_of_the_issue_is_run() {
        let c = cells();
        assert_eq!(c.len(), 8);
        assert!(
            c.iter()
                .any(|c| c.servers == 2 && c.pipeline == 16 && c.test == "get")
        );
    }
}
