//! The timed transitions of the supervisor's state machine: what happens when no event comes,
//! checked before each wait for one (deadlock reports' grace, the ending's waits for `ENDED` and
//! for the launcher, a follower's wait for its cause, `--timeout`, `--start-timeout`, the
//! progress notes, a launcher that lingers or ended on its own). Events are `events.rs`'s.

use super::output::say;
use super::report::{LauncherFailure, describe, not_started};
use super::state::State;
use super::{
    ENDED_WAIT, LATE_REPORT_WAIT, LAUNCHER_LINGER_WAIT, LAUNCHER_TERM_WAIT, Next, Supervisor,
};
use crate::clock::fmt_secs;
use std::collections::HashSet;
use std::time::{Duration, Instant};

impl Supervisor<'_> {
    /// Applies the transitions due at `now`; says when to look again.
    pub(super) fn tick(&mut self, now: Instant) -> Next {
        let wake = now + Duration::from_millis(100);
        if let State::DeadlockReports { code, until } = self.state {
            let reported = (self.conns.values())
                .filter(|c| c.reported || c.closed)
                .count();
            if now >= until || reported >= self.opts.np {
                tracing::debug!(reported, "ending the other ranks of a deadlocked job");
                self.end_job(code, now);
            } else {
                return Next::Wait(wake.min(until));
            }
        }
        if matches!(self.state, State::Ending { .. }) {
            self.tick_ending(now, wake)
        } else {
            self.tick_live(now, wake)
        }
    }

    /// `Ending`: once every wrapper answered (or `ENDED_WAIT` passed) the launcher gets SIGTERM,
    /// and once it exited (or `LAUNCHER_TERM_WAIT` passed) its process group SIGKILL.
    fn tick_ending(&mut self, now: Instant, wake: Instant) -> Next {
        let all_ended = self.conns.values().all(|c| c.ended || c.closed);
        let State::Ending {
            code,
            since,
            launcher_termed,
        } = &mut self.state
        else {
            return Next::Wait(wake);
        };
        if launcher_termed.is_none() && (all_ended || now >= *since + ENDED_WAIT) {
            tracing::debug!(all_ended, "terminating the launcher");
            self.launcher.terminate();
            *launcher_termed = Some(now);
        }
        let term_expired = launcher_termed.is_some_and(|t| now >= t + LAUNCHER_TERM_WAIT);
        if self.launcher_status.is_some() || term_expired {
            let code = *code;
            self.launcher.kill_group();
            self.launcher.remove_session_dir();
            return Next::Exit(code);
        }
        Next::Wait(wake)
    }

    /// `Running` and `AwaitingCause`: the timers that end the job, and the launcher's end.
    fn tick_live(&mut self, now: Instant, mut wake: Instant) -> Next {
        if let State::AwaitingCause { line, code, until } = &self.state {
            // Once the launcher is gone, no other report is coming.
            if now >= *until || self.launcher_status.is_some() {
                let (line, code) = (line.clone(), *code);
                say(format_args!("{line}"));
                self.end_job(code, now);
                return Next::Again;
            }
            wake = wake.min(*until);
        }
        if let Some(t) = self.timeout_at {
            if now >= t {
                say(format_args!(
                    "gsmrun: job exceeded --timeout {} s; ending the job",
                    fmt_secs(self.opts.timeout.unwrap_or(0.0))
                ));
                self.end_job(124, now);
                return Next::Again;
            }
            wake = wake.min(t);
        }
        if let Some(t) = self.start_at {
            let started: HashSet<&str> = (self.conns.values())
                .filter_map(|c| c.rank.as_deref().filter(|r| !r.is_empty()))
                .collect();
            if started.len() >= self.opts.np {
                self.start_at = None;
            } else if now >= t {
                let line = not_started(&self.launcher.name, self.opts, &started);
                say(format_args!("{line}"));
                self.end_job(1, now);
                return Next::Again;
            } else {
                wake = wake.min(t);
            }
        }
        if let Some(at) = self.tick_stops(now) {
            if self.state.is_ending() {
                return Next::Again;
            }
            wake = wake.min(at);
        }
        if let Some(note) = self.progress.waiting_note(now) {
            let end = match self.opts.timeout {
                Some(t) => format!("--timeout {} s ends it", fmt_secs(t)),
                None => "End it with Ctrl-C, or give --timeout".to_string(),
            };
            say(format_args!("{note} {end}"));
        }
        match self.launcher_end(now) {
            Ok(code) => Next::Exit(code),
            Err(at) => Next::Wait(at.map_or(wake, |at| wake.min(at))),
        }
    }

    /// The launcher's part in a job that is not ending: it lingers once every rank exited 0
    /// (`LAUNCHER_LINGER_WAIT`, then it is killed: 1), or it has ended, with every rank's success
    /// (0, or 1 if it failed) or before them (1, once late reports had `LATE_REPORT_WAIT`).
    /// `Err` holds when to look again, if sooner than usual.
    fn launcher_end(&mut self, now: Instant) -> Result<i32, Option<Instant>> {
        let np = self.opts.np;
        let mut again = None;
        if self.launcher_status.is_none()
            && self.ok_ranks.len() >= np
            && self.conns.values().all(|c| c.closed)
        {
            let since = *self.all_ok_since.get_or_insert(now);
            if now >= since + LAUNCHER_LINGER_WAIT {
                self.launcher.join_output();
                say(format_args!(
                    "gsmrun: every rank exited 0, but {} had not ended {} s later (it waits for \
                     a host's daemon it lost?); ending it",
                    self.launcher.name,
                    LAUNCHER_LINGER_WAIT.as_secs()
                ));
                self.launcher.kill_group();
                self.launcher.remove_session_dir();
                return Ok(1);
            }
            again = Some(since + LAUNCHER_LINGER_WAIT);
        }
        let Some((status, at)) = self.launcher_status else {
            return Err(again);
        };
        let all_closed = self.conns.values().all(|c| c.closed);
        if self.ok_ranks.len() >= np && all_closed {
            self.launcher.join_output();
            if !status.success() {
                say(format_args!(
                    "gsmrun: every rank exited 0 but {} exited with {}",
                    self.launcher.name,
                    describe(status)
                ));
                return Ok(1);
            }
            return Ok(0);
        }
        if now >= at + LATE_REPORT_WAIT {
            self.launcher.join_output();
            let started = (self.conns.values())
                .filter(|c| c.rank.as_ref().is_some_and(|r| !r.is_empty()))
                .count();
            let started_ranks: HashSet<&str> = (self.conns.values())
                .filter_map(|c| c.rank.as_deref().filter(|r| !r.is_empty()))
                .collect();
            let hosts_at_fault = if started < np {
                super::report::cut_hosts(self.opts, &started_ranks)
            } else {
                String::new()
            };
            let failure = LauncherFailure {
                launcher: &self.launcher.name,
                srun: self.srun,
                status,
                missing: np.saturating_sub(self.ok_ranks.len()),
                np,
                started,
                wrapper: &self.opts.wrapper,
                slurm_job: self.opts.slurm_job_with_hosts.as_deref(),
                hosts_at_fault,
            };
            say(format_args!("{}", failure.line()));
            return Ok(1);
        }
        Err(again)
    }
}
