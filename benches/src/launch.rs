//! `gsm-bench launch`: `gsmrun` against plain `mpirun`, both starting the same `gsm-hello` binary
//! on 2 ranks, in the same run.
//!
//! Two cases:
//! - **start-up**: wall time from spawning the launcher to its exit for `-np 2 gsm-hello`, after
//!   [`WARMUPS`] untimed runs of each.
//! - **failure to exit**: `gsm-hello --fail-rank 1 --exit-code 3`, where rank 1 exits with status 3
//!   right after printing its hello line and rank 0 goes on into `MPI_Finalize`, which cannot
//!   complete without rank 1. We read the launcher's stdout as it streams and time from the moment
//!   the line `hello from rank 1 …` arrives to the launcher's exit. That line is flushed just
//!   before rank 1 exits, so the figure is (rank 1's exit → launcher exit) plus the output
//!   forwarding delay of each launcher, which is included on both sides. (`--sleep` is not used: in
//!   `gsm-hello` it delays every rank, the failing one too.)
//!
//! - **injected faults** (docs/faults.md): both ranks of `gsm-hello --sleep 20` say hello (with
//!   their pids), then the bench injects a fault and times it to the end: rank 1 SIGKILLed and
//!   rank 1 SIGSTOPped (to the launcher's exit; `gsmrun` with `--stop-timeout 1`), and the
//!   launcher itself SIGKILLed (to the moment both ranks are gone). A launcher that has not ended
//!   [`FAULT_CAP`] after the fault is said to hang: its figure is the cap, named so, and the bench
//!   then kills what is left. Faults between hosts (a cut link) need the test bed's namespaces
//!   and are measured by `tests/tests/faults.rs` only.
//!
//! The `mpirun` peer gets `--oversubscribe` and Open MPI's two run-as-root variables and nothing
//! else; `gsmrun` gets nothing but `-np 2` (and `--stop-timeout 1` for the stop). This module does not judge a launcher's output beyond
//! its exit status.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::case::{Case, Figure};
use crate::stats::summarize;
use crate::sys;

/// Untimed runs of each launcher before the timed ones.
pub const WARMUPS: usize = 2;
/// Any single launch taking longer than this is killed and reported as an error.
const JOB_TIMEOUT: Duration = Duration::from_secs(30);
/// Exit status the failing rank uses.
const FAIL_CODE: i32 = 3;

/// Options of `gsm-bench launch`.
#[derive(Debug, Clone)]
pub struct Options {
    pub runs: usize,
    pub gsmrun: PathBuf,
    pub hello: PathBuf,
    pub mpirun: PathBuf,
}

/// The directory holding the running `gsm-bench`, where cargo also puts `gsmrun` and `gsm-hello`.
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Launcher {
    Gsmrun,
    Mpirun,
}

impl Launcher {
    fn label(self) -> &'static str {
        match self {
            Launcher::Gsmrun => "gsmrun",
            Launcher::Mpirun => "mpirun",
        }
    }
}

fn command(opts: &Options, which: Launcher, hello_args: &[&str]) -> Command {
    let mut cmd = match which {
        Launcher::Gsmrun => {
            let mut c = Command::new(&opts.gsmrun);
            c.args(["-np", "2"]);
            c
        }
        Launcher::Mpirun => {
            let mut c = Command::new(&opts.mpirun);
            c.args(["--oversubscribe", "-np", "2"]);
            c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            c
        }
    };
    cmd.arg(&opts.hello).args(hello_args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// What one launch showed.
struct Outcome {
    /// Spawn → exit.
    wall: Duration,
    /// When the watched line arrived on stdout, measured from spawn.
    line_at: Option<Duration>,
    status: std::process::ExitStatus,
    stderr: String,
}

/// Runs the command to its end (killing it after [`JOB_TIMEOUT`]), noting when a stdout line
/// containing `watch` arrives.
fn launch(mut cmd: Command, what: &str, watch: &str) -> anyhow::Result<Outcome> {
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let stdout = child.stdout.take().expect("stdout was piped");
    let mut stderr_pipe = child.stderr.take().expect("stderr was piped");
    let (tx, rx) = mpsc::channel();
    let watch = watch.to_string();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains(&watch) {
                let _ = tx.send(start.elapsed());
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr_pipe, &mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > JOB_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{what} did not finish within {} s; killed it",
                JOB_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    let wall = start.elapsed();
    // Ranks that outlive the launcher could hold the pipes open; do not wait on them forever.
    let _ = reader.join();
    let stderr = err_reader.join().unwrap_or_default();
    Ok(Outcome {
        wall,
        line_at: rx.try_iter().next(),
        status,
        stderr,
    })
}

fn describe(opts: &Options, which: Launcher, hello_args: &[&str]) -> String {
    let prog = match which {
        Launcher::Gsmrun => format!("{} -np 2", opts.gsmrun.display()),
        Launcher::Mpirun => format!("{} --oversubscribe -np 2", opts.mpirun.display()),
    };
    let line = format!("{prog} {} {}", opts.hello.display(), hello_args.join(" "));
    format!("`{}`", line.trim_end())
}

fn startup_once(opts: &Options, which: Launcher) -> anyhow::Result<f64> {
    let what = describe(opts, which, &[]);
    let out = launch(command(opts, which, &[]), &what, "hello from rank")?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}); its stderr:\n{}",
            out.status,
            out.stderr.trim_end()
        );
    }
    Ok(out.wall.as_secs_f64())
}

fn failure_once(opts: &Options, which: Launcher) -> anyhow::Result<f64> {
    let code = FAIL_CODE.to_string();
    let args = ["--fail-rank", "1", "--exit-code", code.as_str()];
    let what = describe(opts, which, &args);
    let out = launch(command(opts, which, &args), &what, "hello from rank 1 ")?;
    if out.status.success() {
        bail!("{what} exited 0 although rank 1 failed with status {FAIL_CODE}");
    }
    if which == Launcher::Gsmrun && out.status.code() != Some(FAIL_CODE) {
        bail!(
            "{what} exited with {} instead of rank 1's status {FAIL_CODE}; its stderr:\n{}",
            out.status,
            out.stderr.trim_end()
        );
    }
    let Some(line_at) = out.line_at else {
        bail!("{what} never printed rank 1's hello line, so the failure moment is unknown");
    };
    Ok(out.wall.saturating_sub(line_at).as_secs_f64())
}

fn check_exists(path: &Path, what: &str, flag: &str) -> anyhow::Result<()> {
    if path.components().count() > 1 && !path.exists() {
        bail!(
            "{what} not found at {}; build it (`cargo build --release -p {}`) or point {flag} at it",
            path.display(),
            what
        );
    }
    Ok(())
}

/// How long after an injected fault a launcher may take to end before it is said to hang.
const FAULT_CAP: Duration = Duration::from_secs(10);

/// Seconds from a fault to the end, run by run; `None` for a launcher that hung.
type Times = Vec<Option<f64>>;

/// A fault the bench injects into a running `gsm-hello --sleep 20` job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    KillRank,
    StopRank,
    KillLauncher,
}

impl Fault {
    const ALL: [Fault; 3] = [Fault::KillRank, Fault::StopRank, Fault::KillLauncher];

    fn case(self) -> &'static str {
        match self {
            Fault::KillRank => "rank 1 SIGKILLed → launcher exit",
            Fault::StopRank => "rank 1 SIGSTOPped → launcher exit",
            Fault::KillLauncher => "launcher SIGKILLed → every rank gone",
        }
    }
}

/// Signals a process of this bench's own job (a rank that printed its pid a moment ago, or the
/// launcher it spawned), or their group.
fn kill(pid: i32, sig: i32) {
    sys::kill(pid, sig);
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].trim_start().chars().next());
        !matches!(state, Some('Z' | 'X') | None)
    })
}

/// One injected fault under `which`: seconds from the fault to the end, or `None` when the
/// launcher had not ended [`FAULT_CAP`] later (it hangs).
fn fault_once(opts: &Options, which: Launcher, fault: Fault) -> anyhow::Result<Option<f64>> {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = command(opts, which, &["--sleep", "20"]);
    if which == Launcher::Gsmrun && fault == Fault::StopRank {
        cmd = Command::new(&opts.gsmrun);
        cmd.args(["-np", "2", "--stop-timeout", "1"])
            .arg(&opts.hello)
            .args(["--sleep", "20"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
    }
    cmd.stderr(Stdio::null()).process_group(0);
    let what = format!("{} under {:?}", which.label(), fault);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let launcher = child.id() as i32;
    let stdout = child.stdout.take().expect("stdout was piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // `hello from rank R of N on HOST (pid P)`
            let pid = line
                .rsplit_once("(pid ")
                .and_then(|(_, p)| p.trim_end_matches(')').parse::<i32>().ok());
            let rank = line
                .strip_prefix("hello from rank ")
                .and_then(|r| r.split(' ').next()?.parse::<u32>().ok());
            if let (Some(rank), Some(pid)) = (rank, pid) {
                let _ = tx.send((rank, pid));
            }
        }
    });
    let mut ranks = std::collections::BTreeMap::new();
    while ranks.len() < 2 {
        match rx.recv_timeout(JOB_TIMEOUT) {
            Ok((r, p)) => {
                ranks.insert(r, p);
            }
            Err(_) => {
                kill(-launcher, sys::SIGKILL);
                let _ = child.wait();
                bail!(
                    "{what}: the ranks did not say hello within {} s",
                    JOB_TIMEOUT.as_secs()
                );
            }
        }
    }
    let pids: Vec<i32> = ranks.values().copied().collect();
    let at = Instant::now();
    match fault {
        Fault::KillRank => kill(ranks[&1], sys::SIGKILL),
        Fault::StopRank => kill(ranks[&1], sys::SIGSTOP),
        Fault::KillLauncher => kill(launcher, sys::SIGKILL),
    }
    let ended = loop {
        let done = match fault {
            Fault::KillLauncher => pids.iter().all(|&p| !alive(p)),
            _ => child.try_wait()?.is_some(),
        };
        if done {
            break Some(at.elapsed().as_secs_f64());
        }
        if at.elapsed() > FAULT_CAP {
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    // Whatever is left of the job goes: the launcher's group, the ranks (a stopped one too).
    kill(-launcher, sys::SIGKILL);
    for &p in &pids {
        if alive(p) {
            kill(p, sys::SIGKILL);
        }
    }
    let _ = child.wait();
    Ok(ended)
}

/// The figures of one fault: `gsmrun`'s and `mpirun`'s times, the cap standing for a hang (and
/// the figure's name saying so).
fn fault_case(fault: Fault, gsm: &[Option<f64>], mpi: &[Option<f64>]) -> Case {
    let cap = FAULT_CAP.as_secs_f64();
    let values = |v: &[Option<f64>]| v.iter().map(|x| x.unwrap_or(cap)).collect::<Vec<f64>>();
    let hung = |v: &[Option<f64>]| v.iter().filter(|x| x.is_none()).count();
    let name = |label: &str, v: &[Option<f64>]| match hung(v) {
        0 => label.to_string(),
        n => format!(
            "{label} (hung in {n} of {} runs: {cap} s is the cap)",
            v.len()
        ),
    };
    let case = match hung(gsm) {
        0 => fault.case().to_string(),
        n => format!("{} (gsmrun hung in {n} runs)", fault.case()),
    };
    Case {
        case,
        unit: "s".into(),
        higher_is_better: false,
        gsm: summarize(&values(gsm)),
        peers: vec![Figure {
            name: name(Launcher::Mpirun.label(), mpi),
            summary: summarize(&values(mpi)),
        }],
    }
}

/// Runs every case and returns them, ready for [`crate::report::emit`].
pub fn run(opts: &Options) -> anyhow::Result<Vec<Case>> {
    check_exists(&opts.gsmrun, "gsmrun", "--gsmrun")?;
    check_exists(&opts.hello, "gsm-hello", "--hello")?;
    let (mut gsm_start, mut mpi_start, mut gsm_fail, mut mpi_fail) =
        (vec![], vec![], vec![], vec![]);
    for i in 0..WARMUPS + opts.runs {
        crate::report::progress(format_args!(
            "gsm-bench launch: run {}/{} ({} warm-ups)",
            i + 1,
            WARMUPS + opts.runs,
            WARMUPS
        ));
        let g = startup_once(opts, Launcher::Gsmrun)?;
        let m = startup_once(opts, Launcher::Mpirun)?;
        let gf = failure_once(opts, Launcher::Gsmrun)?;
        let mf = failure_once(opts, Launcher::Mpirun)?;
        if i >= WARMUPS {
            gsm_start.push(g);
            mpi_start.push(m);
            gsm_fail.push(gf);
            mpi_fail.push(mf);
        }
    }
    let mut faults: Vec<(Times, Times)> = Fault::ALL.iter().map(|_| (vec![], vec![])).collect();
    for i in 0..opts.runs {
        crate::report::progress(format_args!(
            "gsm-bench launch: faults, run {}/{}",
            i + 1,
            opts.runs
        ));
        for (k, &fault) in Fault::ALL.iter().enumerate() {
            // Alternated within a run, so that both see the same moment of a noisy machine.
            faults[k].0.push(fault_once(opts, Launcher::Gsmrun, fault)?);
            faults[k].1.push(fault_once(opts, Launcher::Mpirun, fault)?);
        }
    }
    crate::report::progress_done();
    let peer = |v: &[f64]| {
        vec![Figure {
            name: Launcher::Mpirun.label().to_string(),
            summary: summarize(v),
        }]
    };
    Ok(vec![
        Case {
            case: "launch -np 2 gsm-hello (wall)".into(),
            unit: "s".into(),
            higher_is_better: false,
            gsm: summarize(&gsm_start),
            peers: peer(&mpi_start),
        },
        Case {
            case: "rank 1 exits 3 → launcher exit".into(),
            unit: "s".into(),
            higher_is_better: false,
            gsm: summarize(&gsm_fail),
            peers: peer(&mpi_fail),
        },
    ]
    .into_iter()
    .chain(
        Fault::ALL
            .iter()
            .zip(&faults)
            .map(|(&f, (g, m))| fault_case(f, g, m)),
    )
    .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_gsmrun_is_a_clear_error_before_anything_starts() {
        let opts = Options {
            runs: 5,
            gsmrun: PathBuf::from("/nonexistent/dir/gsmrun"),
            hello: PathBuf::from("/nonexistent/dir/gsm-hello"),
            mpirun: PathBuf::from("mpirun"),
        };
        let err = run(&opts).unwrap_err().to_string();
        assert!(
            err.contains("gsmrun not found at /nonexistent/dir/gsmrun"),
            "{err}"
        );
        assert!(err.contains("--gsmrun"), "{err}");
    }

    #[test]
    fn a_failing_launcher_is_reported_with_its_status() {
        let opts = Options {
            runs: 5,
            gsmrun: PathBuf::from("/bin/false"),
            hello: PathBuf::from("/bin/true"),
            mpirun: PathBuf::from("/bin/true"),
        };
        let err = run(&opts).unwrap_err().to_string();
        assert!(
            err.contains("/bin/false -np 2") && err.contains("failed"),
            "{err}"
        );
    }
}
