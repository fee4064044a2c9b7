//! The supervisor's transitions on events: a rank's hello, its exit report (judged with the
//! stages of its job, [`crate::progress`]), a report it cannot read, `ENDED`, a closed
//! connection, the launcher's exit, a signal, a failed write of the job's output. Timed
//! transitions are `tick.rs`'s; the states are described in the module docs.

use super::output::say;
use super::report::followed;
use super::state::State;
use super::{
    DEADLOCK_REPORTS_WAIT, Event, FOLLOWER_WAIT, FORWARDED, Outcome, Supervisor, signal_name, wire,
};
use std::io;
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Instant;

impl Supervisor<'_> {
    /// Applies `event`; `Some(status)` when the job is over.
    pub(super) fn handle(&mut self, event: Event) -> Option<i32> {
        match event {
            Event::Hello {
                conn,
                rank,
                host,
                writer,
            } => self.hello(conn, rank, host, writer),
            Event::Report { conn, outcome } => self.report(conn, outcome),
            Event::Stages { conn, bytes } => {
                tracing::debug!(conn, stages = %String::from_utf8_lossy(&bytes), "rank stages");
                if self.state.is_ending() {
                    return None;
                }
                if let Some(line) = self.progress.stages(conn, &bytes) {
                    say(format_args!("{line}"));
                    self.end_job(1, Instant::now());
                }
            }
            Event::BadReport { conn, text } => self.bad_report(conn, text),
            Event::Ended { conn } => self.conns.entry(conn).or_default().ended = true,
            Event::Beat { conn, stopped } => self.beat(conn, stopped),
            Event::Lost { conn } => self.lost(conn),
            Event::Orphaned { conn, parent } => self.orphaned(conn, &parent),
            Event::Closed { conn } => self.closed(conn),
            Event::LauncherExited(status) => self.launcher_exited(status),
            Event::Signal(sig) => return self.signal(sig),
            Event::OutputFailed { stderr, error } => self.output_failed(stderr, error),
        }
        None
    }

    /// A connection presented the job's key: it is a rank (told to end at once if the job is
    /// ending).
    fn hello(&mut self, conn: usize, rank: String, host: String, writer: TcpStream) {
        let ending = self.state.is_ending();
        let c = self.conns.entry(conn).or_default();
        tracing::debug!(conn, %rank, %host, "rank connected");
        self.progress.hello(conn, &rank, &host);
        c.rank = Some(rank);
        c.host = host;
        c.writer = Some(writer);
        if ending {
            if let Some(w) = c.writer.as_mut() {
                let _ = wire::write_frame(w, wire::KILL, b"");
            }
        }
    }

    /// A rank's exit report: success, a failure that ends the job, or the failure of a rank
    /// that only followed another's (`AwaitingCause`).
    fn report(&mut self, conn: usize, outcome: Outcome) {
        let c = self.conns.entry(conn).or_default();
        c.reported = true;
        let rank = c.rank.clone().unwrap_or_else(|| "?".into());
        let host = c.host.clone();
        tracing::debug!(%rank, ?outcome, "rank reported");
        if self.state.is_ending() {
            return;
        }
        // The launcher was killed from outside (not by us: the job was not ending): ranks that
        // fail now were ended by its going (Open MPI ends a rank whose daemon is gone with status
        // 195), and the launcher's line, due once the late reports are in, names the cause.
        if outcome.failed() && (self.launcher_status).is_some_and(|(st, _)| st.signal().is_some()) {
            tracing::debug!(%rank, "a rank failed after the launcher was killed");
            return;
        }
        let failure = if outcome.failed() {
            Some((outcome.failure_line(&rank, &host), outcome.exit_code()))
        } else {
            // Exited 0, but where the job cannot go on without it (or after its run failed): a
            // failure all the same.
            self.progress.exited_ok(conn).map(|line| (line, 1))
        };
        match failure {
            None => {
                self.ok_ranks.insert(rank);
            }
            // Its run ended because another rank's failed: that rank's report, which names the
            // cause, normally follows within its note's grace; the first such follower is
            // reported only if it does not.
            Some((line, code)) if self.progress.follows(conn) => {
                if matches!(self.state, State::Running) {
                    self.state = State::AwaitingCause {
                        line: followed(&line),
                        code,
                        until: Instant::now() + FOLLOWER_WAIT,
                    };
                }
            }
            Some((line, code)) => {
                say(format_args!("{line}"));
                // A rank that found the job deadlocked: the others are about to say what their
                // fibers wait for.
                if self.progress.deadlocked(conn) {
                    self.state = State::DeadlockReports {
                        code,
                        until: Instant::now() + DEADLOCK_REPORTS_WAIT,
                    };
                } else {
                    self.end_job(code, Instant::now());
                }
            }
        }
    }

    /// An exit report that does not decode: the rank's fate is unknown, so it counts as failed.
    fn bad_report(&mut self, conn: usize, text: String) {
        let c = self.conns.entry(conn).or_default();
        c.reported = true;
        if self.state.is_ending() {
            return;
        }
        let rank = c.rank.clone().unwrap_or_else(|| "?".into());
        say(format_args!(
            "gsmrun: rank {rank} on host {}: its wrapper sent an exit report gsmrun cannot read \
             ({text:?}); ending the job",
            c.host
        ));
        self.end_job(1, Instant::now());
    }

    /// A control connection closed.
    fn closed(&mut self, conn: usize) {
        let live = !self.state.is_ending() && self.launcher_status.is_none();
        // A connection that never said hello is not a rank: nothing to wait for.
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        tracing::debug!(conn, reported = c.reported, "connection closed");
        c.closed = true;
        c.writer = None;
        // A wrapper that vanished without a report (SIGKILLed, OOM-killed) is a failed rank.
        // Once the job is ending or the launcher is gone, the launcher's own teardown explains
        // closed connections, so only a vanishing while both still run counts.
        let known_rank = c.rank.as_ref().filter(|r| !r.is_empty());
        if let Some(rank) = known_rank {
            if !c.reported && live {
                say(format_args!(
                    "gsmrun: rank {rank} on host {}: its wrapper ended without a report; ending \
                     the job",
                    c.host
                ));
                self.end_job(1, Instant::now());
            }
        }
    }

    /// The launcher exited (a failure to wait for it counts as status 1).
    fn launcher_exited(&mut self, status: io::Result<ExitStatus>) {
        let status = status.unwrap_or_else(|_| ExitStatus::from_raw(1 << 8));
        tracing::debug!(?status, "launcher exited");
        self.launcher_status = Some((status, Instant::now()));
        // Killed from outside (not by us: the job is not ending), Open MPI leaves its session
        // directory as it does when we kill it.
        if !self.state.is_ending() && status.signal().is_some() {
            self.launcher.remove_session_dir();
        }
    }

    /// A signal to gsmrun: passed on to every rank ([`FORWARDED`]), or the end of the job (a
    /// second one while it ends: at once).
    fn signal(&mut self, sig: i32) -> Option<i32> {
        if FORWARDED.contains(&sig) {
            if self.state.is_ending() {
                return None;
            }
            say(format_args!(
                "gsmrun: received {}; passing it to every rank",
                signal_name(sig)
            ));
            let payload = (sig as u32).to_le_bytes();
            for c in self.conns.values_mut() {
                if let Some(w) = c.writer.as_mut() {
                    let _ = wire::write_frame(w, wire::SIGNAL, &payload);
                }
            }
            return None;
        }
        if self.state.is_ending() {
            // A second signal: stop waiting.
            self.launcher.kill_group();
            return Some(128 + sig);
        }
        say(format_args!(
            "gsmrun: received {}; ending the job",
            signal_name(sig)
        ));
        self.end_job(128 + sig, Instant::now());
        None
    }

    /// Writing the job's output to gsmrun's stdout (`stderr` false) or stderr failed.
    fn output_failed(&mut self, stderr: bool, error: io::Error) {
        if self.state.is_ending() {
            return;
        }
        // A closed pipe ends gsmrun as SIGPIPE ends a filter, with its status and no word
        // (`gsmrun … | head`); any other failure is said on the stream still open.
        let code = if error.kind() == io::ErrorKind::BrokenPipe {
            128 + crate::sys::SIGPIPE
        } else {
            let which = if stderr {
                "standard error"
            } else {
                "standard output"
            };
            say(format_args!(
                "gsmrun: cannot write the job's output to gsmrun's {which}: {error}; ending the \
                 job"
            ));
            1
        };
        self.end_job(code, Instant::now());
    }
}
