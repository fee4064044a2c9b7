//! Ranks that stop answering without exiting: a rank stopped (SIGSTOP, a debugger, a freezer)
//! while the others wait for it, a whole job suspended together (Slurm's `scontrol suspend`),
//! a rank whose host is lost (a network cut, a host down), and a rank whose launcher daemon
//! (Hydra's proxy, Open MPI's `orted`) is gone from under it.
//!
//! Each wrapper says how its program is (`BEAT`: running or stopped) every [`BEAT_EVERY`] and at
//! once when that changes; a wrapper silent for [`FROZEN_AFTER`] is taken for frozen with its
//! program (a suspension stops both). A rank stopped for [`STOP_CONFIRM`] while another rank
//! runs is said in one line, and the job ends once it has been stopped for `--stop-timeout`; when
//! every running rank is stopped the job is suspended as a whole: that is said, and nothing ends
//! it until it continues. A host that does not answer at all fails the control connection
//! (keepalive and user timeout, `--lost-timeout`): the job ends naming the rank and the host.
//! This module decides only; the frames come from `protocol.rs`.

use super::output::say;
use super::{BEAT_EVERY, Supervisor};
use crate::clock::fmt_secs;
use std::time::{Duration, Instant};

/// A wrapper silent for this long is taken for stopped with its program: three beats missed.
const FROZEN_AFTER: Duration = Duration::from_millis(3 * BEAT_EVERY.as_millis() as u64);
/// How long a stop must last before it is said: the ranks of a suspended job stop within
/// moments of each other, and should be said once as a suspension, not one by one.
const STOP_CONFIRM: Duration = Duration::from_millis(700);
/// A wrapper silent this long has missed a beat (they come every 1.0-1.2 s): it may be frozen
/// too, so no stop is judged until it beats again or counts as frozen. Without it, the first of
/// a suspended job's wrappers to count as frozen (their beats are up to a beat apart) was said
/// as one rank stopped while the others ran.
const UNSURE_AFTER: Duration = Duration::from_millis(3 * BEAT_EVERY.as_millis() as u64 / 2);

/// How a live rank looks from its wrapper's beats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Looks {
    /// Its wrapper beats, and its program runs.
    Running,
    /// Its wrapper has missed a beat, but is not yet silent for [`FROZEN_AFTER`].
    Unsure,
    /// Its wrapper says its program is stopped (`frozen: false`), or the wrapper has been silent
    /// for [`FROZEN_AFTER`] while its host answers TCP (`frozen: true`).
    Stopped { frozen: bool },
}

/// How a rank looks whose wrapper's last beat came `silence` ago saying `stopped`; `host_silent`
/// when its host leaves TCP unanswered (a cut host is `--lost-timeout`'s to judge, not a stop).
pub(super) fn looks(silence: Duration, stopped: bool, host_silent: bool) -> Looks {
    if stopped {
        Looks::Stopped { frozen: false }
    } else if silence >= FROZEN_AFTER && !host_silent {
        Looks::Stopped { frozen: true }
    } else if (UNSURE_AFTER..FROZEN_AFTER).contains(&silence) {
        Looks::Unsure
    } else {
        Looks::Running
    }
}

impl Supervisor<'_> {
    /// A `BEAT` from the wrapper of `conn`.
    pub(super) fn beat(&mut self, conn: usize, stopped: bool) {
        let now = Instant::now();
        let c = self.conns.entry(conn).or_default();
        c.last_beat = Some(now);
        c.stopped = stopped;
        if !stopped && c.stop_since.is_some() {
            if c.stop_said && !self.state.is_ending() && !self.suspended {
                say(format_args!(
                    "gsmrun: rank {} on host {} continues",
                    c.rank.as_deref().unwrap_or("?"),
                    c.host
                ));
            }
            c.stop_since = None;
            c.stop_said = false;
        }
    }

    /// The control connection of `conn` failed: its host stopped answering.
    pub(super) fn lost(&mut self, conn: usize) {
        if self.state.is_ending() {
            return;
        }
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        say(format_args!(
            "gsmrun: rank {} on host {}: lost its host (no answer from it for {} s, \
             --lost-timeout: a network cut, or the host is down); ending the job",
            c.rank.as_deref().unwrap_or("?"),
            c.host,
            fmt_secs(self.opts.lost_timeout)
        ));
        self.end_job(1, Instant::now());
    }

    /// The launcher's daemon that started the wrapper of `conn` (`parent`) is gone: the rank is
    /// cut off from the launcher, which may not notice until the ranks end (Hydra's proxy).
    /// When the launcher itself is gone, its own line explains the rest.
    pub(super) fn orphaned(&mut self, conn: usize, parent: &str) {
        if self.state.is_ending() || self.launcher_status.is_some() {
            return;
        }
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        say(format_args!(
            "gsmrun: rank {} on host {}: the launcher's process that started it there ({parent}) \
             is gone (killed, or crashed); ending the job",
            c.rank.as_deref().unwrap_or("?"),
            c.host
        ));
        self.end_job(1, Instant::now());
    }

    /// The timed side: stops confirmed and said, a suspension said and its end, the stop
    /// timeout. `Some(instant)` to look again then; the job may have started ending.
    pub(super) fn tick_stops(&mut self, now: Instant) -> Option<Instant> {
        let (mut running, mut stopped, mut unsure) = (0, 0, 0);
        for c in self.conns.values_mut() {
            let live = c.rank.as_ref().is_some_and(|r| !r.is_empty()) && !c.reported && !c.closed;
            let Some(last) = c.last_beat.filter(|_| live) else {
                continue;
            };
            let silence = now.saturating_duration_since(last);
            // Only asked of a silent wrapper: it reads the socket's TCP_INFO.
            let host_silent = silence >= FROZEN_AFTER
                && c.writer.as_ref().is_some_and(crate::sys::peer_host_silent);
            match looks(silence, c.stopped, host_silent) {
                Looks::Stopped { frozen } => {
                    c.stop_since.get_or_insert(if frozen { last } else { now });
                    stopped += 1;
                }
                Looks::Unsure => {
                    c.stop_since = None;
                    unsure += 1;
                }
                Looks::Running => {
                    c.stop_since = None;
                    running += 1;
                }
            }
        }
        let wake = now + Duration::from_millis(100);
        if self.suspended && running > 0 {
            // The job continues: the ranks still silent get their beats' time again before they
            // count as stopped, each on its own.
            say(format_args!("gsmrun: the job continues"));
            self.suspended = false;
            for c in self.conns.values_mut() {
                if c.stop_since.take().is_some() && !c.stopped {
                    c.last_beat = Some(now);
                }
                c.stop_said = false;
            }
            return Some(wake);
        }
        if stopped == 0 {
            if self.suspended {
                say(format_args!("gsmrun: the job continues"));
                self.suspended = false;
            }
            return (self.conns.values().any(|c| c.last_beat.is_some())).then_some(wake);
        }
        if unsure > 0 {
            // A rank that missed a beat may be stopping with the others (a suspension): nothing
            // is said, and no stop timeout runs out, until it beats or counts as frozen.
            return Some(wake);
        }
        if running == 0 && stopped + self.ok_ranks.len() >= self.opts.np {
            if !self.suspended
                && (self.conns.values())
                    .filter_map(|c| c.stop_since)
                    .all(|t| now >= t + STOP_CONFIRM)
            {
                say(format_args!(
                    "gsmrun: every rank is stopped (the job is suspended); waiting for it to \
                     continue"
                ));
                self.suspended = true;
            }
            // A suspension has no limit: the clocks start again when a rank continues. Before it
            // is confirmed the clocks run on (reset on every look, they never reached
            // STOP_CONFIRM: a suspension that began with one rank said stopped was never said).
            if self.suspended {
                for c in self.conns.values_mut() {
                    if c.stop_since.is_some() {
                        c.stop_since = Some(now);
                        c.stop_said = true;
                    }
                }
            }
            return Some(wake);
        }
        self.suspended = false;
        self.say_stops(now);
        Some(wake)
    }

    /// Some ranks are stopped while others run: each stop confirmed is said once, and one that
    /// lasts `--stop-timeout` ends the job.
    fn say_stops(&mut self, now: Instant) {
        let limit = self.opts.stop_timeout;
        let mut expired = None;
        for c in self.conns.values_mut() {
            let Some(since) = c.stop_since else { continue };
            let rank = c.rank.clone().unwrap_or_else(|| "?".into());
            if !c.stop_said && now >= since + STOP_CONFIRM {
                let how = if c.stopped {
                    "is stopped (SIGSTOP, a debugger or a freezer?)"
                } else {
                    "does not answer: its wrapper is stopped or frozen with it"
                };
                let end = match limit {
                    Some(t) => format!(
                        "the job ends if it is still stopped {} s from now (--stop-timeout)",
                        fmt_secs(t)
                    ),
                    None => "--stop-timeout is off, so the job waits for it".to_string(),
                };
                say(format_args!(
                    "gsmrun: rank {rank} on host {} {how}; the other ranks wait for it; {end}",
                    c.host
                ));
                c.stop_said = true;
                c.stop_since = Some(now);
            } else if let Some(t) = limit.filter(|_| c.stop_said) {
                if now.saturating_duration_since(since).as_secs_f64() >= t && expired.is_none() {
                    expired = Some(format!(
                        "gsmrun: rank {rank} on host {} stayed stopped for {} s (--stop-timeout) \
                         while the others waited for it; ending the job",
                        c.host,
                        fmt_secs(t)
                    ));
                }
            }
        }
        if let Some(line) = expired {
            say(format_args!("{line}"));
            self.end_job(1, now);
        }
    }
}
