//! `gsmrun`: the Gossamer job launcher, as a library so that tests can check a launch plan's argv
//! without spawning anything. `main.rs` only parses arguments, calls [`run`] and maps the error
//! to an exit code.
//!
//! The path of a launch, top to bottom: [`cli`] (raw arguments: what the user asked) → [`plan`]
//! (a validated launch plan, made from the arguments and a snapshot of the environment and read
//! by nothing else afterwards: [`hosts`] says where the job may run, [`placement`] which rank
//! runs where, [`launch`] the launcher's exact command line) → [`supervise`] (run it, forward
//! output, share fate), with [`wrapper`] on every rank and the variables of [`env`](mod@env)
//! between them; [`segments`] removes the shared memory a crashed job leaves, and [`jobdir`] the
//! job's directory and what a killed `gsmrun` leaves. [`sys`] is the only code that calls the
//! operating system. The crate's README follows a launch through the folders.

pub mod cli;
pub mod clock;
pub mod env;
pub mod error;
pub mod hosts;
pub mod janitor;
pub mod jobdir;
pub mod launch;
pub mod limits;
pub mod local;
pub mod names;
pub mod placement;
pub mod plan;
pub mod proctree;
pub mod progress;
pub mod segments;
pub mod supervise;
pub mod sys;
pub mod wrapper;

pub use error::Error;
pub use local::{control_ip, is_local_host};
pub use plan::{
    Environment, Mode, Prepared, Watch, describe, placement_table, prepare, resolve_hosts,
};
pub use sys::{hostname, usable_cpus};

use cli::Cli;
use launch::LaunchError;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};

/// `n` random bytes from the kernel, as lowercase hex.
pub(crate) fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|x| format!("{x:02x}")).collect())
}

/// `text` as an error message shows it: control characters other than tab escaped (`\0`, `\n`,
/// `\u{1b}`), so that a NUL or an escape sequence from a file, a path or an argument is seen for
/// what it is instead of reaching the terminal, where it is invisible or rewrites the line.
pub fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A multi-line message as [`shown`] shows each of its lines.
pub fn shown_lines(text: &str) -> String {
    text.split('\n').map(shown).collect::<Vec<_>>().join("\n")
}

/// `n thing` or `n things`, for messages (`1 slot`, `2 slots`).
pub(crate) fn plural(n: impl Into<u64>, thing: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("{n} {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// Run `gsmrun` with these options in this process's environment; returns its exit status.
pub fn run(cli: &Cli) -> Result<i32, Error> {
    let environment = Environment::of_process();
    if let Some(task) = plan::other_step_task(&environment) {
        tracing::debug!(task, "another task of this Slurm step launches the job");
        return Ok(0);
    }
    let prepared = prepare(cli, &environment)?;
    for w in &prepared.warnings {
        eprintln!("{w}");
    }
    match prepared.mode {
        Mode::DryRun => {
            print!("{}", describe(&prepared));
            let _ = std::io::stdout().flush();
            Ok(0)
        }
        Mode::Verbose => {
            eprint!("{}", describe(&prepared));
            start(&prepared)
        }
        Mode::Run => start(&prepared),
    }
}

/// Start the job `prepared` plans and supervise it; returns gsmrun's exit status. Everything it
/// needs is in the plan: neither the options nor gsmrun's environment are read here.
fn start(prepared: &Prepared) -> Result<i32, Error> {
    let hostfile_text = match &prepared.source {
        hosts::HostSource::Hostfile(path) => plan::read_hostfile(path)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    };
    names::check(
        &prepared.placement,
        &prepared.source,
        prepared.spec.launch_agent.as_deref(),
        hostfile_text.as_deref(),
    )?;
    if prepared
        .mpi_env
        .iter()
        .any(|(k, _)| k == "OMPI_ALLOW_RUN_AS_ROOT")
    {
        eprintln!(
            "gsmrun: warning: running as root; allowing Open MPI to run as root \
             (OMPI_ALLOW_RUN_AS_ROOT=1)"
        );
    }
    {
        let np = prepared.placement.rank_host.len() as u64;
        let here = (prepared.placement.rank_host.iter())
            .filter(|&&h| local::is_local_host(&prepared.placement.hosts[h].name))
            .count() as u64;
        let tcp = here < np
            || prepared.fabric == cli::FabricChoice::Only(gsm_contract::contract::FabricKind::Tcp);
        let threads = prepared.threads_per_rank.map_or(1, u64::from);
        limits::ensure(limits::needed(np, here, threads, tcp))?;
    }
    let io = |what: &str| {
        let what = what.to_string();
        move |source| LaunchError::Io { what, source }
    };
    // control_ip may wait for DNS; done before the job's directory exists, a Ctrl-C there leaves
    // nothing behind.
    let ip = control_ip(&prepared.placement);
    let listener = TcpListener::bind(SocketAddr::new(ip, 0))
        .map_err(io(&format!("cannot listen on {ip} for the ranks' reports")))?;
    let addr = listener
        .local_addr()
        .map_err(io("cannot read the control address"))?;
    // The control key authenticates the wrappers' reports, so it must be random: no fallback.
    let key = random_hex(20).map_err(io("cannot read /dev/urandom for the job's control key"))?;
    // From here on a signal is caught, not fatal, so the directory below is always removed.
    let signals = supervise::catch_signals()?;
    // What killed gsmruns left on this host goes first (only theirs: see `jobdir`).
    if let Some(parent) = prepared.tmpdir.parent() {
        let cleaned = jobdir::remove_dead_jobs(parent);
        if !cleaned.is_empty() {
            tracing::debug!(?cleaned, "removed what killed gsmruns left behind");
        }
    }
    // Always created, also without a hostfile: its lock tells later gsmruns this job lives.
    let _dir = jobdir::JobDir::create(&prepared.tmpdir)
        .map_err(io(&format!("cannot create {}", prepared.tmpdir.display())))?;
    if let Some(h) = &prepared.plan.hostfile {
        std::fs::write(&h.path, &h.contents)
            .map_err(io(&format!("cannot write {}", h.path.display())))?;
    }
    let mut env: Vec<(String, String)> = prepared.job_env.clone();
    env.push((env::job::CONTROL.to_string(), addr.to_string()));
    env.push((env::job::CONTROL_KEY.to_string(), key.clone()));
    env.extend(prepared.plan.env.iter().cloned());
    env.extend(prepared.mpi_env.iter().cloned());
    tracing::debug!(%addr, argv = ?prepared.plan.argv, "launching");
    let watch = &prepared.watch;
    let opts = supervise::Options {
        np: prepared.placement.rank_host.len(),
        key,
        tag_output: watch.tag_output,
        timeout: watch.timeout,
        start_timeout: watch.start_timeout,
        rank_hosts: (prepared.placement.rank_host.iter())
            .map(|&h| prepared.placement.hosts[h].name.clone())
            .collect(),
        wrapper: prepared.spec.wrapper.clone(),
        stop_timeout: watch.stop_timeout,
        lost_timeout: watch.lost_timeout,
        job_id: prepared.job_id.clone(),
        job_dir: prepared.tmpdir.clone(),
        slurm_job_with_hosts: watch.slurm_job_with_hosts.clone(),
    };
    let result = supervise::run(&prepared.plan, &env, listener, &opts, signals);
    // Whatever happened, no segment of this job stays in this host's /dev/shm (ranks on other
    // hosts are cleaned by their wrappers).
    let removed = segments::remove_job_segments(&prepared.job_id)
        + segments::remove_mpi_dir(&prepared.job_id);
    if removed > 0 {
        tracing::debug!(removed, job_id = %prepared.job_id, "removed leftover segments");
    }
    Ok(result?)
}

/// Turn on `tracing` output on stderr when `GSM_LOG` is set, coloured only when stderr is a
/// terminal (a log sent to a file or a pipe gets no escape sequences) and `NO_COLOR` is unset.
pub fn init_logging() {
    if let Ok(filter) = std::env::var(env::input::LOG) {
        use std::io::IsTerminal as _;
        let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .with_ansi(colour)
            .try_init();
    }
}
