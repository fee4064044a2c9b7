//! Supervision: run the launcher, collect the rank wrappers' reports over the control connection,
//! forward rank output, and end the job on the first failure, on SIGINT/SIGTERM/SIGHUP/SIGQUIT, or
//! at `--timeout`; SIGUSR1 and SIGUSR2 are passed on to every rank (`SIGNAL`).
//!
//! Protocol (one TCP connection per rank, see [`wire`]): the wrapper sends `HELLO` (key, rank,
//! host; a connection without it within a few seconds is dropped and never counted), then
//! `STDOUT`/`STDERR` chunks of its program's output and `STATE` bytes (the stages of the rank's
//! job, judged by [`crate::progress`]), then one `EXIT` report once the program has ended and its
//! output is drained. `gsmrun` may send `KILL`; the wrapper then ends its
//! program (SIGTERM, SIGKILL after a grace period) and answers `ENDED`. On the first failure
//! `gsmrun` prints one line, sends `KILL` to every wrapper (when the failed rank had found the job
//! deadlocked, only once every rank has reported or after a second: every rank found it in the
//! same wave and reports what its own fibers wait for), waits (at most 1.5 s) for every `ENDED`,
//! then terminates the launcher (SIGTERM, and SIGKILL of its process group 0.2 s later, removing
//! the session directory a killed Open MPI leaves behind) and exits with the
//! failure's status. A launcher that fails on its own (exits non-zero, or is killed, before every
//! rank reported or after they all exited 0) makes `gsmrun` exit 1, "a failure of the launcher
//! itself" in `--help`'s table, with the launcher's status in the message: passed on, mpirun's 255
//! for an unreachable host, or 137 for a launcher killed from outside, would read as a rank's
//! status or signal. Launcher output is forwarded until the job starts ending, then dropped, so
//! the launcher's own reports about ranks we ended do not drown the one line that matters.
//! Output of ranks comes through the wrappers, so it is never lost to a killed launcher.
//!
//! **Nothing of the job outlives `gsmrun`.** A launcher may start helpers in sessions of their
//! own, out of reach of its process group, and leave them behind when it is ended: Hydra's ssh
//! to a host that never answered, the launch agent Open MPI's `mpirun` started for an orted
//! that never came. `gsmrun` is the "child subreaper" of its descendants (`prctl`), so such an
//! orphan becomes its child instead of init's, and when the job is over every process still
//! descending from `gsmrun` is killed (`reaper.rs`).
//!
//! ## The supervisor's states
//!
//! The event loop (`supervise`) holds one `State` and moves between them on events (a rank's
//! report, a closed connection, the launcher's exit, a signal, a failed write) and timers
//! (`tick.rs`):
//!
//! ```text
//! from                     on                                                      to
//! Running                  the failure of a rank that only followed another's      AwaitingCause
//! Running, AwaitingCause   the failure of a rank that found the job deadlocked     DeadlockReports
//! Running, AwaitingCause   any other failure (a report, a vanished wrapper, a      Ending
//!                          stage), --timeout, --start-timeout, a signal, output
//!                          that cannot be written
//! AwaitingCause            its wait is over, or the launcher is gone               Ending
//! DeadlockReports          every rank has reported, or a second has passed         Ending
//! Running, AwaitingCause   every rank exited 0 and the launcher ended (or lingers  exit
//!                          10 s); the launcher ended before every rank reported
//! Ending                   the launcher is gone, or 0.2 s after its SIGTERM        exit
//! DeadlockReports, Ending  a second signal                                         exit
//! ```
//!
//! - `Running`: ranks connect and report; their output is forwarded. Exits directly (no `KILL`
//!   needed) when every rank exited 0 and the launcher ended (0, or 1 if the launcher failed),
//!   when the launcher runs on 10 s after that (1), or when it ended on its own before every
//!   rank reported (1, with the `report.rs` line naming likely causes).
//! - `AwaitingCause`: as `Running`, but the failure of a rank whose run another rank's failure
//!   ended waits (1.5 s, or until the launcher is gone) for that rank's own report; a real
//!   failure replaces it, else it is said and the job ends.
//! - `DeadlockReports`: a rank found the job deadlocked; the others report what they wait for
//!   before `KILL` is sent (once every rank has reported, or after a second). Counts as ending:
//!   reports are not judged and new connections are told `KILL`.
//! - `Ending`: every wrapper was told `KILL`; once all answered `ENDED` (or 1.5 s passed) the
//!   launcher gets SIGTERM, and once it exits (or 0.2 s later) its process group SIGKILL, and
//!   `gsmrun` exits with the status of the failure. A second signal exits at once.
//!
//! The pieces are in files of their own: the control protocol and the serving of a connection
//! (`protocol.rs`), output forwarding (`output.rs`), the launcher (`launcher.rs`), the timers
//! (`tick.rs`) and events (`events.rs`) of the state machine, stopped and lost ranks
//! (`stops.rs`), the states and the way into `Ending` (`state.rs`, which they all call down
//! to), the end-of-job lines (`report.rs`) and the reaping of leftovers (`reaper.rs`). This module does not build command lines
//! ([`crate::launch`]) nor start programs on ranks ([`crate::wrapper`]). See `supervise/README.md`.

mod events;
mod launcher;
mod output;
mod protocol;
mod reaper;
mod report;
mod state;
mod stops;
mod tick;

pub use crate::sys::signal_name;
pub use protocol::{Outcome, wire};

use crate::clock::deadline;
use crate::launch::{LaunchError, Plan};
use crate::progress::Progress;
use launcher::Launcher;
use output::say;
use signal_hook::iterator::Signals;
use state::State;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::process::ExitStatus;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// How to supervise the job.
#[derive(Debug, Clone)]
pub struct Options {
    /// Ranks expected to report.
    pub np: usize,
    /// The key wrappers must present.
    pub key: String,
    /// Prefix lines with `[1,RANK]<stdout>:`.
    pub tag_output: bool,
    /// `--timeout`.
    pub timeout: Option<f64>,
    /// `--start-timeout`, or its default ([`START_TIMEOUT`] unless the launcher is `srun`).
    pub start_timeout: Option<f64>,
    /// The host of each rank, by rank, to name where ranks did not start.
    pub rank_hosts: Vec<String>,
    /// Path of the rank wrapper (this binary), which every host must have: named when the
    /// launcher fails before the ranks report.
    pub wrapper: String,
    /// The Slurm job gsmrun runs in, when Open MPI's `mpirun` is to place the ranks on hosts of
    /// `-H` or `--hostfile` there: it holds a job to the allocation whatever they say, which is
    /// then a likely cause of its failure.
    pub slurm_job_with_hosts: Option<String>,
    /// `--stop-timeout`: how long one rank may stay stopped while others run before the job
    /// ends; `None`: for ever.
    pub stop_timeout: Option<f64>,
    /// `--lost-timeout`: how long a rank's host may not answer before it is taken for lost.
    pub lost_timeout: f64,
    /// The job's id and private directory, for the janitor ([`crate::janitor`]).
    pub job_id: String,
    pub job_dir: std::path::PathBuf,
}

enum Event {
    /// A connection presented the job's key; only these count as ranks.
    Hello {
        conn: usize,
        rank: String,
        host: String,
        writer: TcpStream,
    },
    Report {
        conn: usize,
        outcome: Outcome,
    },
    Stages {
        conn: usize,
        bytes: Vec<u8>,
    },
    /// An exit report that does not decode: the rank's fate is unknown, so it counts as failed.
    BadReport {
        conn: usize,
        text: String,
    },
    Ended {
        conn: usize,
    },
    /// The wrapper's word on its program: stopped or running.
    Beat {
        conn: usize,
        stopped: bool,
    },
    /// The connection failed because the wrapper's host stopped answering.
    Lost {
        conn: usize,
    },
    /// The launcher's daemon that started the wrapper (its command name) is gone.
    Orphaned {
        conn: usize,
        parent: String,
    },
    Closed {
        conn: usize,
    },
    LauncherExited(io::Result<ExitStatus>),
    Signal(i32),
    /// Writing the job's output to gsmrun's own stdout (`stderr` false) or stderr failed.
    OutputFailed {
        stderr: bool,
        error: io::Error,
    },
}

#[derive(Default)]
struct Conn {
    writer: Option<TcpStream>,
    rank: Option<String>,
    host: String,
    /// An exit report (readable or not) came on this connection.
    reported: bool,
    ended: bool,
    closed: bool,
    /// When the wrapper's last `BEAT` came, and whether it said the program is stopped.
    last_beat: Option<Instant>,
    stopped: bool,
    /// Since when the rank has been stopped (by its wrapper's word, or its wrapper's silence),
    /// and whether that was said.
    stop_since: Option<Instant>,
    stop_said: bool,
}

/// Grace between ending the job and SIGKILL of the launcher's process group.
const ENDED_WAIT: Duration = Duration::from_millis(1500);
const LAUNCHER_TERM_WAIT: Duration = Duration::from_millis(200);
/// How long after the launcher exits we wait for reports still in flight.
const LATE_REPORT_WAIT: Duration = Duration::from_millis(1000);
/// How long the launcher may run on once every rank has exited 0: Open MPI's `mpirun` waits for
/// ever for the daemon of a host it lost after the ranks there ended, and a job whose work is
/// done must not hang on it. (It ends within a second of the last rank here.)
const LAUNCHER_LINGER_WAIT: Duration = Duration::from_secs(10);
/// How long a job whose ranks found it deadlocked waits, after the first rank's failure, for
/// the others to end by themselves before they are ended: each reports what its own fibers wait
/// for, and they decided together, so their reports follow within milliseconds.
const DEADLOCK_REPORTS_WAIT: Duration = Duration::from_millis(1000);

/// How long the failure report of a rank whose run another rank's failure ended (it says so:
/// `progress::stage::FOLLOWS`) waits for a report of a rank that failed by itself, which is then
/// the one reported: the rank whose failure it was tells the others at once and exits some
/// 200 ms later, so its report came second, and gsmrun's line named a rank that only followed.
const FOLLOWER_WAIT: Duration = Duration::from_millis(1500);

/// The default of `--stop-timeout`, in seconds: a rank stopped while the others run (SIGSTOP, a
/// debugger, a cgroup freezer) holds every rank that waits for it, so the job ends this long
/// after the stop was said, unless the rank continues. A whole job stopped together (Slurm's
/// `scontrol suspend`) is a suspension and has no limit.
pub const STOP_TIMEOUT: f64 = 60.0;

/// The default of `--lost-timeout`, in seconds: how long a rank's host may not answer on the
/// control connection (TCP keepalive probes every second, and a user timeout on data not
/// acknowledged) before it is taken for lost and the job ends. A stopped process still answers
/// (its kernel does), so this trips only on a network cut or a host that is down.
pub const LOST_TIMEOUT: f64 = 8.0;

/// How often a wrapper says how its program is (`BEAT`), besides at once on a change.
pub const BEAT_EVERY: Duration = Duration::from_millis(1000);

/// The default of `--start-timeout` under `mpirun` and `mpiexec`, in seconds.
///
/// A launcher that cannot start a rank does not always give up: MPICH's Hydra waits for ever
/// for a proxy whose launch failed ("hydra_pmi_proxy: not found" on a host), and `ssh` may wait
/// for a password or a host-key answer nobody will type. Without a limit the job then hung with
/// nothing to say. A minute leaves room for slow `ssh` to many hosts; `srun` has no default,
/// since a step may rightly wait for nodes of its allocation to become free.
pub const START_TIMEOUT: f64 = 60.0;

/// Signals that `gsmrun` passes on to every rank's program instead of ending the job, as
/// `mpirun` does: applications and batch systems use them to ask for a checkpoint or a report
/// (Slurm's `--signal=USR1@60`). Their default action would kill `gsmrun` on the spot, leaving
/// the job's directory and shared-memory segments behind.
pub const FORWARDED: [i32; 2] = [crate::sys::SIGUSR1, crate::sys::SIGUSR2];

/// The signals that end a job (SIGINT, SIGTERM, SIGHUP, SIGQUIT) and those passed on to the ranks
/// ([`FORWARDED`]), caught from now on and handed to [`run`]. The caller installs them before it
/// creates anything that must be removed (the job's directory), so that a Ctrl-C before the
/// launcher starts is not a kill that leaves it behind.
pub fn catch_signals() -> Result<Signals, LaunchError> {
    Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
        signal_hook::consts::SIGUSR1,
        signal_hook::consts::SIGUSR2,
    ])
    .map_err(|source| LaunchError::Io {
        what: "cannot install signal handlers".into(),
        source,
    })
}

/// Start the launcher of `plan` with `env` added and supervise the job; returns gsmrun's exit status.
/// `signals` comes from [`catch_signals`]; one that already arrived ends gsmrun before anything
/// is started.
pub fn run(
    plan: &Plan,
    env: &[(String, String)],
    listener: TcpListener,
    opts: &Options,
    signals: Signals,
) -> Result<i32, LaunchError> {
    // Failure (an old kernel) only loses the clean-up of orphans.
    let _ = crate::sys::become_child_subreaper();
    let status = supervise(plan, env, listener, opts, signals);
    let left = reaper::end_leftovers(std::process::id());
    if !left.is_empty() {
        tracing::debug!(?left, "killed processes the launcher left behind");
    }
    status
}

/// What the loop does after a tick of the timers.
enum Next {
    /// Tick again at once (the state changed).
    Again,
    /// Wait for an event until this instant.
    Wait(Instant),
    /// The job is over: exit with this status.
    Exit(i32),
}

/// The supervisor's state and everything its transitions look at.
struct Supervisor<'a> {
    opts: &'a Options,
    /// The launcher is Slurm's `srun`.
    srun: bool,
    launcher: Launcher,
    /// Set when the job starts ending: the launcher's output is dropped from then on.
    quiet: Arc<AtomicBool>,
    state: State,
    conns: HashMap<usize, Conn>,
    /// Ranks that exited 0 where the job could go on without them.
    ok_ranks: HashSet<String>,
    progress: Progress,
    timeout_at: Option<Instant>,
    /// `--start-timeout`'s instant, until every rank has started.
    start_at: Option<Instant>,
    /// How the launcher ended, and when.
    launcher_status: Option<(ExitStatus, Instant)>,
    /// When every rank had reported exiting 0 with its output closed while the launcher ran on
    /// (see `LAUNCHER_LINGER_WAIT`).
    all_ok_since: Option<Instant>,
    /// Every running rank was stopped at once (a suspended job), and that was said.
    suspended: bool,
}

/// [`run`] without the clean-up of leftovers: start the launcher and run the state machine.
fn supervise(
    plan: &Plan,
    env: &[(String, String)],
    listener: TcpListener,
    opts: &Options,
    mut signals: Signals,
) -> Result<i32, LaunchError> {
    let (tx, rx) = mpsc::channel::<Event>();
    let quiet = Arc::new(AtomicBool::new(false));

    // A signal to pass on that came before any rank exists has nobody to reach.
    if let Some(sig) = signals.pending().find(|s| !FORWARDED.contains(s)) {
        say(format_args!(
            "gsmrun: received {}; the job was not started",
            signal_name(sig)
        ));
        return Ok(128 + sig);
    }
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for s in signals.forever() {
                if tx.send(Event::Signal(s)).is_err() {
                    break;
                }
            }
        });
    }
    let serving = protocol::Serving {
        key: opts.key.clone(),
        tag: opts.tag_output,
        lost: Duration::from_secs_f64(opts.lost_timeout),
    };
    protocol::spawn_acceptor(listener, tx.clone(), serving);
    let launcher = Launcher::start(plan, env, &quiet, &tx)?;
    crate::janitor::start(&opts.job_id, launcher.pid, &opts.job_dir);
    drop(tx);

    let start = Instant::now();
    let mut sup = Supervisor {
        opts,
        srun: plan.backend == crate::launch::Backend::Srun,
        launcher,
        quiet,
        state: State::Running,
        conns: HashMap::new(),
        ok_ranks: HashSet::new(),
        progress: Progress::default(),
        timeout_at: opts.timeout.and_then(|t| deadline(start, t)),
        start_at: opts.start_timeout.and_then(|t| deadline(start, t)),
        launcher_status: None,
        all_ok_since: None,
        suspended: false,
    };
    loop {
        let wake = match sup.tick(Instant::now()) {
            Next::Again => continue,
            Next::Exit(code) => return Ok(code),
            Next::Wait(wake) => wake,
        };
        let wait = wake.saturating_duration_since(Instant::now());
        let event = match rx.recv_timeout(wait) {
            Ok(e) => e,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait);
                continue;
            }
        };
        if let Some(code) = sup.handle(event) {
            return Ok(code);
        }
    }
}

#[cfg(test)]
mod tests;
