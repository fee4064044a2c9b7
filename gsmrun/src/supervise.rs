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
//! descending from `gsmrun` is killed (`end_leftovers`).
//!
//! This module does not build command lines ([`crate::launch`]) nor start programs on ranks
//! ([`crate::wrapper`]).

use crate::clock::{deadline, fmt_secs};
use crate::launch::Plan;
use crate::progress::Progress;
use signal_hook::iterator::Signals;
use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// Framing of the control connection: one tag byte, a 4-byte little-endian length, the payload.
pub mod wire {
    use std::io::{self, Read, Write};

    /// wrapper → gsmrun: `key \0 rank \0 host` (rank empty when unknown).
    pub const HELLO: u8 = b'H';
    /// wrapper → gsmrun: bytes the program wrote to stdout.
    pub const STDOUT: u8 = b'O';
    /// wrapper → gsmrun: bytes the program wrote to stderr.
    pub const STDERR: u8 = b'E';
    /// wrapper → gsmrun: how the program ended, as [`super::Outcome::encode`].
    pub const EXIT: u8 = b'X';
    /// wrapper → gsmrun: the program is gone after a `KILL`.
    pub const ENDED: u8 = b'D';
    /// wrapper → gsmrun: stages of the rank's job the runtime entered, one byte each (see
    /// [`crate::progress`]); all of them come before the `EXIT` report.
    pub const STATE: u8 = b'S';
    /// gsmrun → wrapper: end the program now.
    pub const KILL: u8 = b'K';
    /// gsmrun → wrapper: send the program's process group the signal whose number is the
    /// payload (4 bytes, little-endian); one of [`super::FORWARDED`].
    pub const SIGNAL: u8 = b'G';
    /// Largest payload accepted.
    pub const MAX_PAYLOAD: usize = 1 << 20;

    /// Write one frame.
    pub fn write_frame(w: &mut impl Write, tag: u8, payload: &[u8]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(5 + payload.len());
        buf.push(tag);
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        buf.extend_from_slice(payload);
        w.write_all(&buf)?;
        w.flush()
    }

    /// Read one frame; `None` at a clean end of stream.
    pub fn read_frame(r: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
        let mut head = [0u8; 5];
        match r.read_exact(&mut head[..1]) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        r.read_exact(&mut head[1..])?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "control frame too large",
            ));
        }
        let mut payload = vec![0u8; len];
        r.read_exact(&mut payload)?;
        Ok(Some((head[0], payload)))
    }
}

/// How a rank's program ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Exited with this status.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
    /// Could not be started (the message says why).
    NoStart(String),
}

impl Outcome {
    /// Text form on the wire.
    pub fn encode(&self) -> String {
        match self {
            Outcome::Exited(c) => format!("exit {c}"),
            Outcome::Signaled(s) => format!("signal {s}"),
            Outcome::NoStart(m) => format!("nostart {m}"),
        }
    }

    /// Parse [`Outcome::encode`]'s form.
    pub fn decode(text: &str) -> Option<Outcome> {
        let (kind, rest) = text.split_once(' ')?;
        match kind {
            "exit" => rest.parse().ok().map(Outcome::Exited),
            "signal" => rest.parse().ok().map(Outcome::Signaled),
            "nostart" => Some(Outcome::NoStart(rest.to_string())),
            _ => None,
        }
    }

    /// The exit status gsmrun reports for it.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Exited(c) => *c,
            Outcome::Signaled(s) => 128 + s,
            Outcome::NoStart(_) => 127,
        }
    }

    /// Is this a failure that ends the job?
    pub fn failed(&self) -> bool {
        *self != Outcome::Exited(0)
    }

    /// The one line printed for a failing rank.
    pub fn failure_line(&self, rank: &str, host: &str) -> String {
        let what = match self {
            // Open MPI ends the ranks of a host whose daemon it lost (a host gone from the
            // network, a killed `orted`) with this status: the rank is where it showed, not
            // what failed.
            Outcome::Exited(195) => "exited with status 195 (Open MPI's status for a rank \
                                     whose host's daemon it lost: see mpirun's message above)"
                .to_string(),
            Outcome::Exited(c) => format!("exited with status {c}"),
            Outcome::Signaled(s) => format!("was killed by signal {s} ({})", signal_name(*s)),
            Outcome::NoStart(m) => format!("could not start its program: {m}"),
        };
        format!("gsmrun: rank {rank} on host {host} {what}; ending the job")
    }
}

/// Name of a signal number (`SIGSEGV`), or `SIG?` when unknown.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => "SIG?",
    }
}

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

/// The failure `line` of a rank that only followed another rank's failure, as it is said when
/// no report of that rank came: it says so.
fn followed(line: &str) -> String {
    match line.strip_suffix("; ending the job") {
        Some(head) => format!(
            "{head}, its run ended by another rank's failure (its error above names the rank); \
             ending the job"
        ),
        None => line.to_string(),
    }
}

/// The default of `--start-timeout` under `mpirun` and `mpiexec`, in seconds.
///
/// A launcher that cannot start a rank does not always give up: MPICH's Hydra waits for ever
/// for a proxy whose launch failed ("hydra_pmi_proxy: not found" on a host), and `ssh` may wait
/// for a password or a host-key answer nobody will type. Without a limit the job then hung with
/// nothing to say. A minute leaves room for slow `ssh` to many hosts; `srun` has no default,
/// since a step may rightly wait for nodes of its allocation to become free.
pub const START_TIMEOUT: f64 = 60.0;

/// How long a new control connection has to present the job's key before it is dropped.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// Signals that `gsmrun` passes on to every rank's program instead of ending the job, as
/// `mpirun` does: applications and batch systems use them to ask for a checkpoint or a report
/// (Slurm's `--signal=USR1@60`). Their default action would kill `gsmrun` on the spot, leaving
/// the job's directory and shared-memory segments behind.
pub const FORWARDED: [i32; 2] = [libc::SIGUSR1, libc::SIGUSR2];

/// The signals that end a job (SIGINT, SIGTERM, SIGHUP, SIGQUIT) and those passed on to the ranks
/// ([`FORWARDED`]), caught from now on and handed to [`run`]. The caller installs them before it
/// creates anything that must be removed (the job's directory), so that a Ctrl-C before the
/// launcher starts is not a kill that leaves it behind.
pub fn catch_signals() -> Result<Signals, crate::launch::LaunchError> {
    Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
        signal_hook::consts::SIGUSR1,
        signal_hook::consts::SIGUSR2,
    ])
    .map_err(|source| crate::launch::LaunchError::Io {
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
) -> Result<i32, crate::launch::LaunchError> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes one integer argument and changes only this
    // process's attributes. Failure (an old kernel) only loses the clean-up of orphans.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let status = supervise(plan, env, listener, opts, signals);
    let left = end_leftovers(std::process::id());
    if !left.is_empty() {
        tracing::debug!(?left, "killed processes the launcher left behind");
    }
    status
}

/// [`run`] without the clean-up of leftovers.
fn supervise(
    plan: &Plan,
    env: &[(String, String)],
    listener: TcpListener,
    opts: &Options,
    mut signals: Signals,
) -> Result<i32, crate::launch::LaunchError> {
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
    spawn_acceptor(listener, tx.clone(), opts.key.clone(), opts.tag_output);

    let mut cmd = Command::new(&plan.argv[0]);
    cmd.args(&plan.argv[1..])
        .envs(env.iter().map(|(k, v)| (k, v)));
    cmd.process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A launcher in its own process group must not read a terminal (it would be stopped).
    // SAFETY: isatty only inspects file descriptor 0.
    if unsafe { libc::isatty(0) } == 1 {
        cmd.stdin(Stdio::null());
    }
    use std::os::unix::process::CommandExt as _;
    let mut child = cmd
        .spawn()
        .map_err(|e| crate::launch::LaunchError::from_spawn(&plan.argv[0].to_string_lossy(), e))?;
    let launcher_pid = child.id() as i32;
    tracing::debug!(launcher_pid, "launcher started");
    let out_fwd = forward_launcher(child.stdout.take(), false, quiet.clone(), tx.clone());
    let err_fwd = forward_launcher(child.stderr.take(), true, quiet.clone(), tx.clone());
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send(Event::LauncherExited(child.wait()));
        });
    }
    drop(tx);

    let launcher_name = plan.argv[0].to_string_lossy().into_owned();
    let start = Instant::now();
    let timeout_at = opts.timeout.and_then(|t| deadline(start, t));
    let mut start_at = opts.start_timeout.and_then(|t| deadline(start, t));
    let mut conns: HashMap<usize, Conn> = HashMap::new();
    let mut ok_ranks: HashSet<String> = HashSet::new();
    let mut progress = Progress::default();
    let mut ending: Option<(i32, Instant)> = None;
    // Ending a deadlocked job: the other ranks are told to end at this time, unless they have
    // all reported before (see `DEADLOCK_REPORTS_WAIT`).
    let mut end_others_at: Option<Instant> = None;
    let mut launcher_termed: Option<Instant> = None;
    let mut launcher_status: Option<(ExitStatus, Instant)> = None;
    // The failure line and status of the first rank whose run another rank's failure ended,
    // until when it waits for that rank's own report (see `FOLLOWER_WAIT`).
    let mut follower: Option<(String, i32, Instant)> = None;
    // When every rank had reported exiting 0 with its output closed while the launcher ran on
    // (see `LAUNCHER_LINGER_WAIT`).
    let mut all_ok_since: Option<Instant> = None;

    let begin_ending = |conns: &mut HashMap<usize, Conn>, quiet: &AtomicBool| {
        quiet.store(true, Ordering::SeqCst);
        for c in conns.values_mut() {
            if let Some(w) = c.writer.as_mut() {
                let _ = wire::write_frame(w, wire::KILL, b"");
            }
        }
    };

    loop {
        let now = Instant::now();
        let mut wake = now + Duration::from_millis(100);
        if let Some(at) = end_others_at {
            let reported = conns.values().filter(|c| c.reported || c.closed).count();
            if now >= at || reported >= opts.np {
                tracing::debug!(reported, "ending the other ranks of a deadlocked job");
                end_others_at = None;
                begin_ending(&mut conns, &quiet);
                ending = ending.map(|(code, _)| (code, now));
            } else {
                wake = wake.min(at);
            }
        }
        if let Some((code, since)) = ending {
            // Not while the other ranks of a deadlocked job may still report by themselves.
            if end_others_at.is_none() {
                let all_ended = conns.values().all(|c| c.ended || c.closed);
                if launcher_termed.is_none() && (all_ended || now >= since + ENDED_WAIT) {
                    tracing::debug!(all_ended, "terminating the launcher");
                    // SAFETY: kill(2) with a pid we started and have not reaped yet (or ESRCH).
                    unsafe { libc::kill(launcher_pid, libc::SIGTERM) };
                    launcher_termed = Some(now);
                }
                let term_expired = launcher_termed.is_some_and(|t| now >= t + LAUNCHER_TERM_WAIT);
                if launcher_status.is_some() || term_expired {
                    // SAFETY: kill(2) on the launcher's own process group (it was started with
                    // process_group(0), so its pgid is its pid); ESRCH if already empty.
                    unsafe { libc::kill(-launcher_pid, libc::SIGKILL) };
                    remove_open_mpi_session_dir(launcher_pid);
                    return Ok(code);
                }
            }
        } else {
            if let Some((line, code, until)) = &follower {
                // Once the launcher is gone, no other report is coming.
                if now >= *until || launcher_status.is_some() {
                    say(format_args!("{line}"));
                    ending = Some((*code, now));
                    follower = None;
                    begin_ending(&mut conns, &quiet);
                    continue;
                }
                wake = wake.min(*until);
            }
            if let Some(t) = timeout_at {
                if now >= t {
                    say(format_args!(
                        "gsmrun: job exceeded --timeout {} s; ending the job",
                        fmt_secs(opts.timeout.unwrap_or(0.0))
                    ));
                    begin_ending(&mut conns, &quiet);
                    ending = Some((124, now));
                    continue;
                }
                wake = wake.min(t);
            }
            if let Some(t) = start_at {
                let started: HashSet<&str> = (conns.values())
                    .filter_map(|c| c.rank.as_deref().filter(|r| !r.is_empty()))
                    .collect();
                if started.len() >= opts.np {
                    start_at = None;
                } else if now >= t {
                    say(format_args!(
                        "{}",
                        not_started(&launcher_name, opts, &started)
                    ));
                    begin_ending(&mut conns, &quiet);
                    ending = Some((1, now));
                    continue;
                } else {
                    wake = wake.min(t);
                }
            }
            if let Some(note) = progress.waiting_note(now) {
                let end = match opts.timeout {
                    Some(t) => format!("--timeout {} s ends it", fmt_secs(t)),
                    None => "End it with Ctrl-C, or give --timeout".to_string(),
                };
                say(format_args!("{note} {end}"));
            }
            if launcher_status.is_none()
                && ok_ranks.len() >= opts.np
                && conns.values().all(|c| c.closed)
            {
                let since = *all_ok_since.get_or_insert(now);
                if now >= since + LAUNCHER_LINGER_WAIT {
                    join_bounded(out_fwd, err_fwd);
                    say(format_args!(
                        "gsmrun: every rank exited 0, but {launcher_name} had not ended {} s \
                         later (it waits for a host's daemon it lost?); ending it",
                        LAUNCHER_LINGER_WAIT.as_secs()
                    ));
                    // SAFETY: kill(2) on the launcher's own process group (started with
                    // process_group(0)); ESRCH if already empty.
                    unsafe { libc::kill(-launcher_pid, libc::SIGKILL) };
                    remove_open_mpi_session_dir(launcher_pid);
                    return Ok(1);
                }
                wake = wake.min(since + LAUNCHER_LINGER_WAIT);
            }
            if let Some((status, at)) = launcher_status {
                let all_closed = conns.values().all(|c| c.closed);
                if ok_ranks.len() >= opts.np && all_closed {
                    join_bounded(out_fwd, err_fwd);
                    if !status.success() {
                        say(format_args!(
                            "gsmrun: every rank exited 0 but {launcher_name} exited with {}",
                            describe(status)
                        ));
                        return Ok(1);
                    }
                    return Ok(0);
                }
                if now >= at + LATE_REPORT_WAIT {
                    join_bounded(out_fwd, err_fwd);
                    let started = conns
                        .values()
                        .filter(|c| c.rank.as_ref().is_some_and(|r| !r.is_empty()))
                        .count();
                    let failure = LauncherFailure {
                        launcher: &launcher_name,
                        srun: plan.backend == crate::launch::Backend::Srun,
                        status,
                        missing: opts.np.saturating_sub(ok_ranks.len()),
                        np: opts.np,
                        started,
                        wrapper: &opts.wrapper,
                        slurm_job: opts.slurm_job_with_hosts.as_deref(),
                    };
                    say(format_args!("{}", failure.line()));
                    return Ok(1);
                }
            }
        }
        let wait = wake.saturating_duration_since(Instant::now());
        let event = match rx.recv_timeout(wait) {
            Ok(e) => e,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait);
                continue;
            }
        };
        match event {
            Event::Hello {
                conn,
                rank,
                host,
                writer,
            } => {
                let c = conns.entry(conn).or_default();
                tracing::debug!(conn, %rank, %host, "rank connected");
                progress.hello(conn, &rank, &host);
                c.rank = Some(rank);
                c.host = host;
                c.writer = Some(writer);
                if ending.is_some() {
                    if let Some(w) = c.writer.as_mut() {
                        let _ = wire::write_frame(w, wire::KILL, b"");
                    }
                }
            }
            Event::Report { conn, outcome } => {
                let c = conns.entry(conn).or_default();
                c.reported = true;
                let rank = c.rank.clone().unwrap_or_else(|| "?".into());
                tracing::debug!(%rank, ?outcome, "rank reported");
                if ending.is_some() {
                    continue;
                }
                // The launcher was killed from outside (not by us: the job was not ending):
                // ranks that fail now were ended by its going (Open MPI ends a rank whose
                // daemon is gone with status 195), and the launcher's line, due once the late
                // reports are in, names the cause.
                use std::os::unix::process::ExitStatusExt as _;
                if outcome.failed() && launcher_status.is_some_and(|(st, _)| st.signal().is_some())
                {
                    tracing::debug!(%rank, "a rank failed after the launcher was killed");
                    continue;
                }
                let failure = if outcome.failed() {
                    Some((outcome.failure_line(&rank, &c.host), outcome.exit_code()))
                } else {
                    // Exited 0, but where the job cannot go on without it (or after its run
                    // failed): a failure all the same.
                    progress.exited_ok(conn).map(|line| (line, 1))
                };
                match failure {
                    None => {
                        ok_ranks.insert(rank);
                    }
                    // Its run ended because another rank's failed: that rank's report, which
                    // names the cause, normally follows within its note's grace; the first
                    // such follower is reported only if it does not.
                    Some((line, code)) if progress.follows(conn) => {
                        if follower.is_none() {
                            follower =
                                Some((followed(&line), code, Instant::now() + FOLLOWER_WAIT));
                        }
                    }
                    Some((line, code)) => {
                        follower = None;
                        say(format_args!("{line}"));
                        ending = Some((code, Instant::now()));
                        // A rank that found the job deadlocked: the others are about to say
                        // what their fibers wait for.
                        if progress.deadlocked(conn) {
                            end_others_at = Some(Instant::now() + DEADLOCK_REPORTS_WAIT);
                        } else {
                            begin_ending(&mut conns, &quiet);
                        }
                    }
                }
            }
            Event::Stages { conn, bytes } => {
                tracing::debug!(conn, stages = %String::from_utf8_lossy(&bytes), "rank stages");
                if ending.is_some() {
                    continue;
                }
                if let Some(line) = progress.stages(conn, &bytes) {
                    say(format_args!("{line}"));
                    ending = Some((1, Instant::now()));
                    begin_ending(&mut conns, &quiet);
                }
            }
            Event::BadReport { conn, text } => {
                let c = conns.entry(conn).or_default();
                c.reported = true;
                if ending.is_some() {
                    continue;
                }
                let rank = c.rank.clone().unwrap_or_else(|| "?".into());
                say(format_args!(
                    "gsmrun: rank {rank} on host {}: its wrapper sent an exit report gsmrun cannot \
                     read ({text:?}); ending the job",
                    c.host
                ));
                ending = Some((1, Instant::now()));
                begin_ending(&mut conns, &quiet);
            }
            Event::Ended { conn } => conns.entry(conn).or_default().ended = true,
            Event::Closed { conn } => {
                // A connection that never said hello is not a rank: nothing to wait for.
                let Some(c) = conns.get_mut(&conn) else {
                    continue;
                };
                tracing::debug!(conn, reported = c.reported, "connection closed");
                c.closed = true;
                c.writer = None;
                // A wrapper that vanished without a report (SIGKILLed, OOM-killed) is a failed
                // rank. Once the job is ending or the launcher is gone, the launcher's own teardown
                // explains closed connections, so only a vanishing while both still run counts.
                let known_rank = c.rank.as_ref().filter(|r| !r.is_empty());
                if let Some(rank) = known_rank {
                    if !c.reported && ending.is_none() && launcher_status.is_none() {
                        say(format_args!(
                            "gsmrun: rank {rank} on host {}: its wrapper ended without a report; \
                             ending the job",
                            c.host
                        ));
                        ending = Some((1, Instant::now()));
                        begin_ending(&mut conns, &quiet);
                    }
                }
            }
            Event::LauncherExited(status) => {
                let status = status.unwrap_or_else(|_| {
                    use std::os::unix::process::ExitStatusExt as _;
                    ExitStatus::from_raw(1 << 8)
                });
                tracing::debug!(?status, "launcher exited");
                launcher_status = Some((status, Instant::now()));
                // Killed from outside (not by us: the job is not ending), Open MPI leaves its
                // session directory as it does when we kill it.
                use std::os::unix::process::ExitStatusExt as _;
                if ending.is_none() && status.signal().is_some() {
                    remove_open_mpi_session_dir(launcher_pid);
                }
            }
            Event::Signal(sig) if FORWARDED.contains(&sig) => {
                if ending.is_some() {
                    continue;
                }
                say(format_args!(
                    "gsmrun: received {}; passing it to every rank",
                    signal_name(sig)
                ));
                let payload = (sig as u32).to_le_bytes();
                for c in conns.values_mut() {
                    if let Some(w) = c.writer.as_mut() {
                        let _ = wire::write_frame(w, wire::SIGNAL, &payload);
                    }
                }
            }
            Event::Signal(sig) => {
                if ending.is_some() {
                    // A second signal: stop waiting.
                    // SAFETY: as above, the launcher's own process group.
                    unsafe { libc::kill(-launcher_pid, libc::SIGKILL) };
                    return Ok(128 + sig);
                }
                say(format_args!(
                    "gsmrun: received {}; ending the job",
                    signal_name(sig)
                ));
                ending = Some((128 + sig, Instant::now()));
                begin_ending(&mut conns, &quiet);
            }
            Event::OutputFailed { stderr, error } => {
                if ending.is_some() {
                    continue;
                }
                // A closed pipe ends gsmrun as SIGPIPE ends a filter, with its status and no
                // word (`gsmrun … | head`); any other failure is said on the stream still open.
                let code = if error.kind() == io::ErrorKind::BrokenPipe {
                    128 + libc::SIGPIPE
                } else {
                    let which = if stderr {
                        "standard error"
                    } else {
                        "standard output"
                    };
                    say(format_args!(
                        "gsmrun: cannot write the job's output to gsmrun's {which}: {error}; \
                         ending the job"
                    ));
                    1
                };
                ending = Some((code, Instant::now()));
                begin_ending(&mut conns, &quiet);
            }
        }
    }
}

/// The line for a job whose ranks did not all start within `--start-timeout`: how many did,
/// which did not and on which hosts (the first few), and what to do.
fn not_started(launcher: &str, opts: &Options, started: &HashSet<&str>) -> String {
    let missing: Vec<usize> = (0..opts.np)
        .filter(|r| !started.contains(r.to_string().as_str()))
        .collect();
    let mut hosts: Vec<&str> = Vec::new();
    for &r in &missing {
        let h = opts.rank_hosts.get(r).map_or("?", String::as_str);
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    let list = |items: Vec<String>| {
        const SHOWN: usize = 8;
        let more = items.len().saturating_sub(SHOWN);
        let mut text = items.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
    };
    format!(
        "gsmrun: only {} of {} started within --start-timeout {} s (missing: {} {}, on {} {}); \
         {launcher} may be stuck starting them (a host that does not answer, ssh asking for a \
         password, a launcher daemon missing there: see its messages above); ending the job \
         (raise --start-timeout if the start is only slow)",
        started.len(),
        crate::plural(opts.np as u64, "rank"),
        fmt_secs(opts.start_timeout.unwrap_or(0.0)),
        if missing.len() == 1 { "rank" } else { "ranks" },
        list(missing.iter().map(|r| r.to_string()).collect()),
        if hosts.len() == 1 { "host" } else { "hosts" },
        list(hosts.iter().map(|h| h.to_string()).collect()),
    )
}

/// A launcher that ended before every rank reported, and what is known of why.
struct LauncherFailure<'a> {
    launcher: &'a str,
    /// The launcher is Slurm's `srun` (which also fails outside an allocation).
    srun: bool,
    status: ExitStatus,
    /// Ranks that did not report success.
    missing: usize,
    np: usize,
    /// Ranks whose wrapper connected to gsmrun.
    started: usize,
    wrapper: &'a str,
    /// See [`Options::slurm_job_with_hosts`].
    slurm_job: Option<&'a str>,
}

impl LauncherFailure<'_> {
    /// The one line gsmrun prints: the launcher's status, how far the ranks got, and only the
    /// causes that fit what is known (the launcher's own messages, above it, say which).
    fn line(&self) -> String {
        let LauncherFailure {
            launcher,
            status,
            missing,
            np,
            started,
            ..
        } = *self;
        use std::os::unix::process::ExitStatusExt as _;
        let ended = match status.signal() {
            Some(_) => format!("was killed by {}", describe(status)),
            None => format!("exited with {}", describe(status)),
        };
        let head = format!(
            "gsmrun: {launcher} {ended} before {missing} of {} reported",
            crate::plural(np as u64, "rank")
        );
        let how_far = match started {
            0 => "no rank started".to_string(),
            n if n >= np => format!("all {np} had started"),
            n => format!("only {n} of {np} started"),
        };
        if status.signal().is_some() {
            // Killed: whatever the job was like, the launcher did not get to fail by itself.
            return format!("{head} ({how_far})");
        }
        if started >= np {
            return format!(
                "{head}; every rank had started, so {launcher} ended them or was ended itself; \
                 see its messages above"
            );
        }
        let mut causes = Vec::new();
        if self.srun {
            causes.push("no Slurm allocation (outside Slurm, use --launcher mpirun)");
        }
        let slurm = self.slurm_job.map(|job| {
            format!(
                "inside Slurm job {job}, {launcher} holds the job to the allocation's nodes and \
                 slots whatever -H or --hostfile say (run without them to use the allocation, or \
                 set OMPI_MCA_ras=^slurm and OMPI_MCA_plm=^slurm in gsmrun's environment)"
            )
        });
        if let Some(s) = &slurm {
            causes.push(s);
        }
        causes.push("a host that cannot be reached or whose name does not resolve");
        let missing_wrapper = format!("no gsmrun at {} on some host", self.wrapper);
        causes.push(&missing_wrapper);
        let refused = format!("{launcher} refusing the job");
        causes.push(&refused);
        format!(
            "{head} ({how_far}); see its messages above. Likely causes: {}",
            causes.join("; ")
        )
    }
}

/// Kills (SIGKILL) every process that descends from `root` (gsmrun) when the job is over: the
/// launcher's helpers that it left in sessions of their own, adopted by `root` as their
/// subreaper (see the module docs); nothing in the normal case. Returns their pids. They are
/// not reaped: gsmrun exits next, and init reaps them.
fn end_leftovers(root: u32) -> Vec<u32> {
    let left = descendants(root, &process_parents());
    for &p in &left {
        // SAFETY: kill(2) with a pid read from /proc just now; at worst ESRCH.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
    }
    left
}

/// Every process's `(pid, parent pid)`, from /proc (those that end while it is read are left
/// out).
fn process_parents() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Some((pid, parent_in_stat(&stat)?))
    })
    .collect()
}

/// The parent pid in the text of `/proc/PID/stat`: the second field after the command name,
/// which is in parentheses and may itself hold spaces and parentheses.
fn parent_in_stat(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The pids descending from `root` in `parents` (`(pid, parent pid)` pairs), `root` left out.
fn descendants(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut found: Vec<u32> = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in parents {
            if pp == p && c != root && !found.contains(&c) {
                found.push(c);
                frontier.push(c);
            }
        }
    }
    found
}

/// A SIGKILLed Open MPI `mpirun` leaves its session directory
/// (`$TMPDIR/ompi.<host>.<uid>/pid.<pid>`, Open MPI 4's layout) behind; remove it.
fn remove_open_mpi_session_dir(launcher_pid: i32) {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir()
        .join(format!("ompi.{}.{uid}", crate::hostname()))
        .join(format!("pid.{launcher_pid}"));
    // Give the dying launcher a moment to release it.
    std::thread::sleep(Duration::from_millis(20));
    let _ = std::fs::remove_dir_all(dir);
}

/// Writes one line of gsmrun's own to stderr. Unlike `eprintln!`, a stderr that cannot be written
/// (a closed pipe) does not panic: the job still has to be ended.
fn say(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("status {c}"),
        (_, Some(s)) => format!("signal {s} ({})", signal_name(s)),
        _ => "an unknown status".into(),
    }
}

fn join_bounded(a: Option<mpsc::Receiver<()>>, b: Option<mpsc::Receiver<()>>) {
    let deadline = Instant::now() + Duration::from_secs(1);
    for r in [a, b].into_iter().flatten() {
        let _ = r.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

/// Copy the launcher's stdout or stderr to ours, line by line, until `quiet` is set. A write
/// that fails is reported on `tx` once ([`Event::OutputFailed`]); later lines are dropped.
fn forward_launcher(
    pipe: Option<impl Read + Send + 'static>,
    is_err: bool,
    quiet: Arc<AtomicBool>,
    tx: mpsc::Sender<Event>,
) -> Option<mpsc::Receiver<()>> {
    let pipe = pipe?;
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut line = Vec::new();
        let mut out = Output::new(is_err, tx);
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if quiet.load(Ordering::SeqCst) {
                        continue;
                    }
                    out.write(&line);
                }
            }
        }
        let _ = done_tx.send(());
    });
    Some(done_rx)
}

fn spawn_acceptor(listener: TcpListener, tx: mpsc::Sender<Event>, key: String, tag: bool) {
    std::thread::spawn(move || {
        for (conn, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { continue };
            let _ = stream.set_nodelay(true);
            let tx = tx.clone();
            let key = key.clone();
            std::thread::spawn(move || serve(conn, stream, &tx, &key, tag));
        }
    });
}

/// gsmrun's own stdout or stderr, as the job's output reaches it. A write that fails is reported
/// to the supervisor once and ends the job ([`Event::OutputFailed`]): a reader that closed the
/// pipe (`gsmrun … | head`) wants no more, and output that cannot be written (a full disk) must
/// not be dropped while the job runs on. Later writes are dropped without a word.
struct Output {
    is_err: bool,
    tx: Option<mpsc::Sender<Event>>,
}

impl Output {
    fn new(is_err: bool, tx: mpsc::Sender<Event>) -> Self {
        Output {
            is_err,
            tx: Some(tx),
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.tx.is_none() {
            return;
        }
        let r = if self.is_err {
            io::stderr().lock().write_all(bytes)
        } else {
            let mut o = io::stdout().lock();
            o.write_all(bytes).and_then(|()| o.flush())
        };
        if let Err(error) = r {
            if let Some(tx) = self.tx.take() {
                let _ = tx.send(Event::OutputFailed {
                    stderr: self.is_err,
                    error,
                });
            }
        }
    }
}

/// Per-stream line buffer: output is written a whole line at a time so ranks do not interleave
/// inside a line. A line longer than [`PIECE`] goes out in pieces (memory stays bounded); its
/// stream then holds the [`Turn`] of gsmrun's stdout or stderr until the line ends, and only its
/// first piece is tagged.
struct LineOut {
    buf: Vec<u8>,
    prefix: Vec<u8>,
    out: Output,
    /// The connection whose stream this is (the owner's name in the [`Turn`]).
    conn: usize,
    /// The last piece written ended inside a line.
    mid_line: bool,
}

/// Most bytes of one line a stream holds back before it writes them as a piece.
const PIECE: usize = 64 * 1024;

/// How long a stream waits for another one's long line to end before it writes anyway: the
/// rest of that line normally follows within milliseconds, but a rank stopped in the middle of a
/// line must not hold every other rank's output (and the reports behind it) for ever.
const TURN_WAIT: Duration = Duration::from_secs(1);

/// Which connection's stream is in the middle of a line on one of gsmrun's outputs.
struct Turn {
    owner: std::sync::Mutex<Option<usize>>,
    free: std::sync::Condvar,
}

impl Turn {
    const fn new() -> Self {
        Turn {
            owner: std::sync::Mutex::new(None),
            free: std::sync::Condvar::new(),
        }
    }

    /// Waits (at most `wait`) until no other stream than `conn`'s is inside a line, writes with
    /// `write`, and then owns the output if `mid_line` (the write ended inside a line) or frees it.
    ///
    /// A stream that has held the output for `wait` without ending its line (a progress bar
    /// drawn with `\r`, a rank stopped mid-line) loses it to the stream that waited: the others
    /// then wait for it once, not at each write. (They waited a second at every line, so that a
    /// rank's ten lines took ten seconds, and its failure report came behind them.)
    fn write_as(&self, conn: usize, wait: Duration, mid_line: bool, write: impl FnOnce()) {
        let owner = self.owner.lock().unwrap_or_else(|p| p.into_inner());
        let (mut owner, waited) = self
            .free
            .wait_timeout_while(owner, wait, |o| o.is_some_and(|o| o != conn))
            .unwrap_or_else(|p| p.into_inner());
        write();
        if mid_line {
            *owner = Some(conn);
        } else if *owner == Some(conn) || waited.timed_out() {
            *owner = None;
            self.free.notify_all();
        }
    }
}

/// The [`Turn`]s of gsmrun's stdout and stderr.
static TURNS: [Turn; 2] = [Turn::new(), Turn::new()];

impl LineOut {
    fn new(conn: usize, prefix: Vec<u8>, out: Output) -> Self {
        LineOut {
            buf: Vec::new(),
            prefix,
            out,
            conn,
            mid_line: false,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
        if let Some(pos) = self.buf.iter().rposition(|&b| b == b'\n') {
            let rest = self.buf.split_off(pos + 1);
            let lines = std::mem::replace(&mut self.buf, rest);
            self.emit(&lines, false);
        } else if self.buf.len() > PIECE {
            let piece = std::mem::take(&mut self.buf);
            self.emit(&piece, true);
        }
    }

    /// Writes what is left of the last line. Without `--tag-output` it goes out as it is, so the
    /// job's bytes reach gsmrun's stdout unchanged (as `mpirun` passes them: a binary dump or a
    /// last line without a newline stays exact). Tagged output is made of lines, so there the
    /// tagged remainder gets its newline. Either way the stream's line is over: no more of it
    /// comes, so the output is free for the others.
    fn flush(&mut self) {
        if !self.buf.is_empty() || self.mid_line {
            let mut rest = std::mem::take(&mut self.buf);
            if !self.prefix.is_empty() {
                rest.push(b'\n');
            }
            self.emit(&rest, false);
        }
    }

    /// Writes `bytes`, which end a line unless `mid_line`; each line is tagged, except the
    /// continuation of a line whose start an earlier piece wrote.
    fn emit(&mut self, bytes: &[u8], mid_line: bool) {
        let out = tagged(&self.prefix, bytes, self.mid_line);
        let turn = &TURNS[usize::from(self.out.is_err)];
        turn.write_as(self.conn, TURN_WAIT, mid_line, || self.out.write(&out));
        self.mid_line = mid_line;
    }
}

/// `bytes` with `prefix` before each line, except the first when it `continues` a line whose
/// start was written before.
fn tagged(prefix: &[u8], bytes: &[u8], continues: bool) -> Vec<u8> {
    if prefix.is_empty() {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len() + 2 * prefix.len());
    for (i, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        if i > 0 || !continues {
            out.extend_from_slice(prefix);
        }
        out.extend_from_slice(line);
    }
    out
}

fn serve(conn: usize, mut stream: TcpStream, tx: &mpsc::Sender<Event>, key: &str, tag: bool) {
    let closed = |tx: &mpsc::Sender<Event>| {
        let _ = tx.send(Event::Closed { conn });
    };
    // Anyone may connect (a port scanner, a stray process of the launcher's); a connection counts
    // as a rank only once it presents the key, and one that says nothing valid in time is dropped.
    let _ = stream.set_read_timeout(Some(HELLO_WAIT));
    let hello = match wire::read_frame(&mut stream) {
        Ok(Some((wire::HELLO, p))) => p,
        _ => return closed(tx),
    };
    let text = String::from_utf8_lossy(&hello).into_owned();
    let mut parts = text.split('\0');
    if parts.next() != Some(key) {
        tracing::warn!(conn, "control connection without the job key; dropped");
        return closed(tx);
    }
    let rank = parts.next().unwrap_or("").to_string();
    let host = parts.next().unwrap_or("?").to_string();
    let writer = match stream
        .set_read_timeout(None)
        .and_then(|()| stream.try_clone())
    {
        Ok(w) => w,
        Err(_) => return closed(tx),
    };
    let _ = tx.send(Event::Hello {
        conn,
        rank: rank.clone(),
        host,
        writer,
    });
    let prefix = |s: &str| {
        if tag {
            format!("[1,{rank}]<{s}>:").into_bytes()
        } else {
            Vec::new()
        }
    };
    let mut out = LineOut::new(conn, prefix("stdout"), Output::new(false, tx.clone()));
    let mut err = LineOut::new(conn, prefix("stderr"), Output::new(true, tx.clone()));
    loop {
        match wire::read_frame(&mut stream) {
            Ok(Some((wire::STDOUT, p))) => out.push(&p),
            Ok(Some((wire::STDERR, p))) => err.push(&p),
            Ok(Some((wire::EXIT, p))) => {
                out.flush();
                err.flush();
                let text = String::from_utf8_lossy(&p).into_owned();
                match Outcome::decode(&text) {
                    Some(outcome) => {
                        let _ = tx.send(Event::Report { conn, outcome });
                    }
                    None => {
                        let _ = tx.send(Event::BadReport { conn, text });
                    }
                }
            }
            Ok(Some((wire::ENDED, _))) => {
                let _ = tx.send(Event::Ended { conn });
            }
            Ok(Some((wire::STATE, bytes))) => {
                let _ = tx.send(Event::Stages { conn, bytes });
            }
            Ok(Some((tag, _))) => tracing::warn!(conn, tag, "unknown control frame"),
            Ok(None) | Err(_) => break,
        }
    }
    out.flush();
    err.flush();
    closed(tx);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_after_a_command_name_with_spaces_and_parentheses() {
        assert_eq!(parent_in_stat("42 (sleep) S 7 42 42 0 -1"), Some(7));
        assert_eq!(parent_in_stat("42 (a (b) c) R 9 1 1"), Some(9));
        assert_eq!(parent_in_stat("42 (cut"), None);
    }

    #[test]
    fn descendants_are_found_at_any_depth_and_only_they() {
        let parents = [(2, 1), (3, 2), (4, 3), (5, 1), (6, 99), (7, 6), (1, 0)];
        let mut d = descendants(2, &parents);
        d.sort();
        assert_eq!(d, [3, 4]);
        let mut d = descendants(1, &parents);
        d.sort();
        assert_eq!(d, [2, 3, 4, 5]);
        assert!(descendants(4, &parents).is_empty());
    }

    #[test]
    fn only_the_start_of_a_line_is_tagged() {
        assert_eq!(tagged(b"T:", b"a\nb\n", false), b"T:a\nT:b\n");
        assert_eq!(tagged(b"T:", b"rest\nnext", true), b"rest\nT:next");
        assert_eq!(tagged(b"", b"x\ny", true), b"x\ny");
    }

    /// A stream inside a long line keeps the output until the line ends; another stream's line
    /// waits for it, but only for the wait given.
    #[test]
    fn a_long_line_keeps_the_output_until_it_ends() {
        let turn = Arc::new(Turn::new());
        let sink = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let put = |s: &Arc<std::sync::Mutex<Vec<u8>>>, b: &'static [u8]| {
            let s = s.clone();
            move || s.lock().unwrap().extend_from_slice(b)
        };
        turn.write_as(1, TURN_WAIT, true, put(&sink, b"long "));
        let other = {
            let (turn, put) = (turn.clone(), put(&sink, b"other\n"));
            std::thread::spawn(move || turn.write_as(2, Duration::from_secs(10), false, put))
        };
        std::thread::sleep(Duration::from_millis(100));
        turn.write_as(1, TURN_WAIT, true, put(&sink, b"line "));
        turn.write_as(1, TURN_WAIT, false, put(&sink, b"ends\n"));
        other.join().unwrap();
        assert_eq!(&*sink.lock().unwrap(), b"long line ends\nother\n");
        // A stream stopped inside its line holds the others up only for the wait.
        turn.write_as(3, TURN_WAIT, true, put(&sink, b"stuck"));
        let start = Instant::now();
        turn.write_as(4, Duration::from_millis(200), false, put(&sink, b"\n"));
        let waited = start.elapsed();
        assert!(
            (Duration::from_millis(200)..Duration::from_secs(5)).contains(&waited),
            "{waited:?}"
        );
        // ... once: the stalled stream has lost the output, and the next lines go at once.
        let start = Instant::now();
        for _ in 0..3 {
            turn.write_as(4, Duration::from_millis(200), false, put(&sink, b"more\n"));
        }
        let waited = start.elapsed();
        assert!(waited < Duration::from_millis(150), "{waited:?}");
        // The stalled stream writes on when it wakes, and may hold the output again.
        turn.write_as(3, TURN_WAIT, true, put(&sink, b" again"));
        let start = Instant::now();
        turn.write_as(4, Duration::from_millis(200), true, put(&sink, b"mine "));
        assert!(start.elapsed() >= Duration::from_millis(200));
        turn.write_as(3, Duration::from_millis(200), false, put(&sink, b"\n"));
        assert!(
            sink.lock()
                .unwrap()
                .ends_with(b"stuck\nmore\nmore\nmore\n againmine \n")
        );
    }

    #[test]
    fn outcome_round_trip_and_lines() {
        for o in [
            Outcome::Exited(3),
            Outcome::Signaled(11),
            Outcome::NoStart("no such file".into()),
        ] {
            assert_eq!(Outcome::decode(&o.encode()), Some(o));
        }
        assert_eq!(
            Outcome::Exited(3).failure_line("1", "vm"),
            "gsmrun: rank 1 on host vm exited with status 3; ending the job"
        );
        // Open MPI's status for a rank whose host's daemon it lost says so.
        assert_eq!(
            Outcome::Exited(195).failure_line("3", "q2"),
            "gsmrun: rank 3 on host q2 exited with status 195 (Open MPI's status for a rank \
             whose host's daemon it lost: see mpirun's message above); ending the job"
        );
        assert_eq!(
            Outcome::Signaled(11).failure_line("0", "vm"),
            "gsmrun: rank 0 on host vm was killed by signal 11 (SIGSEGV); ending the job"
        );
        assert_eq!(Outcome::Signaled(11).exit_code(), 139);
        assert!(!Outcome::Exited(0).failed());
    }

    #[test]
    fn a_failed_launcher_is_described_by_what_is_known() {
        use std::os::unix::process::ExitStatusExt as _;
        let failure = |srun, started| LauncherFailure {
            launcher: if srun { "srun" } else { "mpirun" },
            srun,
            status: ExitStatus::from_raw(255 << 8),
            missing: 2,
            np: 2,
            started,
            wrapper: "/opt/gsm/gsmrun",
            slurm_job: None,
        };
        let line = failure(false, 0).line();
        assert_eq!(
            line,
            "gsmrun: mpirun exited with status 255 before 2 of 2 ranks reported (no rank \
             started); see its messages above. Likely causes: a host that cannot be reached or \
             whose name does not resolve; no gsmrun at /opt/gsm/gsmrun on some host; mpirun \
             refusing the job"
        );
        let line = failure(true, 1).line();
        assert!(line.contains("(only 1 of 2 started)"), "{line}");
        assert!(
            line.contains("Likely causes: no Slurm allocation"),
            "{line}"
        );
        let killed = LauncherFailure {
            status: ExitStatus::from_raw(libc::SIGKILL),
            ..failure(false, 0)
        };
        assert_eq!(
            killed.line(),
            "gsmrun: mpirun was killed by signal 9 (SIGKILL) before 2 of 2 ranks reported (no \
             rank started)"
        );
        let line = failure(false, 2).line();
        assert!(line.ends_with("every rank had started, so mpirun ended them or was ended itself; see its messages above"), "{line}");
        // Killed once every rank had started: not "only 2 of 2".
        let killed = LauncherFailure {
            status: ExitStatus::from_raw(libc::SIGKILL),
            ..failure(false, 2)
        };
        assert!(
            killed.line().ends_with("(all 2 had started)"),
            "{}",
            killed.line()
        );
        // Inside Slurm with hosts of its own, Open MPI holds the job to the allocation.
        let in_slurm = LauncherFailure {
            slurm_job: Some("42"),
            ..failure(false, 0)
        };
        assert!(
            in_slurm.line().contains(
                "Likely causes: inside Slurm job 42, mpirun holds the job to the allocation's nodes"
            ),
            "{}",
            in_slurm.line()
        );
        assert!(!failure(false, 0).line().contains("Slurm job"));
    }

    #[test]
    fn seconds_are_shown_short_however_small_or_large() {
        assert_eq!(fmt_secs(40.0), "40");
        assert_eq!(fmt_secs(2.5), "2.5");
        assert_eq!(fmt_secs(0.001), "0.001");
        // Not 300 zeros, nor 19 digits of a rounded float.
        assert_eq!(fmt_secs(1e-300), "1e-300");
        assert_eq!(fmt_secs(1e-9), "1e-9");
        assert_eq!(fmt_secs(9.2e18), "9.2e18");
    }

    #[test]
    fn deadline_refuses_what_no_instant_holds() {
        let now = Instant::now();
        assert_eq!(deadline(now, 1.5), Some(now + Duration::from_millis(1500)));
        assert_eq!(deadline(now, 1e19), None);
        assert_eq!(deadline(now, f64::INFINITY), None);
    }

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        wire::write_frame(&mut buf, wire::STDOUT, b"hi\n").unwrap();
        wire::write_frame(&mut buf, wire::KILL, b"").unwrap();
        let mut r = &buf[..];
        assert_eq!(
            wire::read_frame(&mut r).unwrap(),
            Some((wire::STDOUT, b"hi\n".to_vec()))
        );
        assert_eq!(
            wire::read_frame(&mut r).unwrap(),
            Some((wire::KILL, vec![]))
        );
        assert_eq!(wire::read_frame(&mut r).unwrap(), None);
        let bad = [b'O', 0xff, 0xff, 0xff, 0xff];
        assert!(wire::read_frame(&mut &bad[..]).is_err());
    }
}
