//! Where the supervisor is in a job's life ([`State`], whose transitions the module docs draw)
//! and the one transition every event and timer may take: ending the job, which tells every
//! wrapper `KILL` and drops the launcher's output from then on. The event loop (`mod.rs`) calls
//! the transitions (`events.rs`, `tick.rs`, `stops.rs`), and they come down here to end the job;
//! nothing here calls back up. What happens once the job is ending is `tick.rs`'s.

use super::{Supervisor, wire};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Where the supervisor is in a job's life (see the module docs for the transitions).
#[derive(Debug)]
pub(super) enum State {
    /// The job runs.
    Running,
    /// A rank whose run another rank's failure ended has failed: its `line` and `code` wait
    /// until `until` for the report of the rank whose failure it was.
    AwaitingCause {
        line: String,
        code: i32,
        until: Instant,
    },
    /// A rank found the job deadlocked (status `code`): the others are told to end at `until`,
    /// or once every rank has reported.
    DeadlockReports { code: i32, until: Instant },
    /// Every wrapper was told to end at `since`; the job exits with `code`. `launcher_termed`:
    /// when the launcher got SIGTERM.
    Ending {
        code: i32,
        since: Instant,
        launcher_termed: Option<Instant>,
    },
}

impl State {
    /// Whether the job is ending: reports are no longer judged and new ranks are told to end.
    pub(super) fn is_ending(&self) -> bool {
        matches!(self, State::DeadlockReports { .. } | State::Ending { .. })
    }
}

impl Supervisor<'_> {
    /// Tells every wrapper to end its program, and drops the launcher's output from now on.
    fn begin_ending(&mut self) {
        self.quiet.store(true, Ordering::SeqCst);
        for c in self.conns.values_mut() {
            if let Some(w) = c.writer.as_mut() {
                let _ = wire::write_frame(w, wire::KILL, b"");
            }
        }
    }

    /// Ends the job with status `code`, starting at `now`.
    pub(super) fn end_job(&mut self, code: i32, now: Instant) {
        self.state = State::Ending {
            code,
            since: now,
            launcher_termed: None,
        };
        self.begin_ending();
    }
}
