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
//! The `mpirun` peer gets `--oversubscribe` and Open MPI's two run-as-root variables and nothing
//! else; `gsmrun` gets nothing but `-np 2`. This module does not judge a launcher's output beyond
//! its exit status.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::report::{Case, Figure};
use crate::stats::summarize;

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

/// Runs both cases and returns them, ready for [`crate::report::emit`].
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
    ])
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
