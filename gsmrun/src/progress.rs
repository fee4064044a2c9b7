//! How far each rank has got in its Gossamer job, and the clean exits that would leave the other
//! ranks waiting for ever.
//!
//! MPI cannot tell a rank that will never come from one that is late, and Open MPI's `mpirun`
//! counts a rank that exits 0 without ever calling `MPI_Init` as a success. So a rank whose program
//! returns before `gossamer::run` hangs the job: the others wait in the bootstrap for a rank that
//! is gone. A rank that calls `run`/`spmd` fewer times than the others hangs it too: it waits in
//! `MPI_Finalize` for the others, and they for it in their next run. The runtime therefore tells
//! its rank wrapper each stage it enters, one byte per stage (see [`stage`]; both sides use the
//! `gsm-contract` crate's `Stage`), the wrapper passes them on in `STATE` frames before its exit
//! report, and [`Progress`] decides, as stages and clean exits arrive in any order, whether the
//! job cannot go on:
//!
//! - a rank **exited 0 inside its job**: it joined and neither left nor gave the job up, as when
//!   `std::process::exit(0)` is called in the middle of a run;
//! - a rank **is done short of a stage another rank reached** (it exited 0, or is leaving: about
//!   to finalise MPI, it starts no more runs): it never joined while another rank has, or it ran
//!   fewer `run`/`spmd`s than another rank has started;
//! - a rank **exited 0 after its run failed**: the program was handed the error by `run`/`spmd`
//!   and went on to exit 0. Its job failed all the same: the runtime gave MPI up without
//!   finalising it (Open MPI's `mpirun` then kills the other ranks and prints a page on "exiting
//!   improperly"), and every other rank's run failed with it. The job ends at once with status 1
//!   and a line that says so, whichever launcher runs it.
//!
//! A rank that never says anything (a program that does not use the runtime, `hostname`, a
//! script) has reached nothing, so a job of such ranks ends as before. Ranks that exit with a
//! failure are the supervisor's business, not this module's.
//!
//! One hang is left that nothing here can end: a rank that runs, but another program than the
//! others (an MPI program that never calls `gossamer::run`, a different binary at the same path
//! on one host), while they wait for it in the bootstrap. It may also be a rank that is merely
//! slow to get there (reading its input first), so the job is not ended; after
//! [`JOIN_WAIT_NOTE`] [`Progress::waiting_note`] says once which ranks wait for which.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long ranks wait in the bootstrap for running ranks that have not joined before `gsmrun`
/// says so (once). Far longer than ranks of one program take to get there from their start,
/// short enough that a user looking at a silent job gets the word before giving up on it.
pub const JOIN_WAIT_NOTE: Duration = Duration::from_secs(30);

/// The stage bytes a rank sends: the launch contract's `Stage`, which the runtime sends with the
/// same type, as constants to match on.
pub mod stage {
    use gsm_contract::contract::Stage;
    /// About to initialise MPI and wait for every rank in the bootstrap exchange.
    pub const JOINING: u8 = Stage::Joining.byte();
    /// About to start one collective `run`/`spmd`.
    pub const RUN: u8 = Stage::Run.byte();
    /// About to finalise MPI: the rank starts no more runs.
    pub const LEAVING: u8 = Stage::Leaving.byte();
    /// MPI given up after a failure: the rank has failed, even if it then exits 0.
    pub const ABANDONED: u8 = Stage::Abandoned.byte();
    /// The job was found deadlocked: every rank found it in the same wave, and each is ending
    /// with its own report of what its fibers wait for.
    pub const DEADLOCKED: u8 = Stage::Deadlocked.byte();
    /// The rank's run failed because another rank's did (it vanished, or told its failure).
    pub const FOLLOWS: u8 = Stage::Follows.byte();
}

/// How far a rank got: joined the job, and how many runs it started. A later stage compares
/// greater (a run implies having joined).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Reached {
    joined: bool,
    runs: u32,
}

impl Reached {
    /// "is in the gossamer job" / "is in gossamer run 2", for a rank still running.
    fn started(self) -> String {
        match self.runs {
            0 => "is in the gossamer job".into(),
            n => format!("is in gossamer run {n}"),
        }
    }

    /// "without joining the gossamer job" / "after 1 gossamer run", for a rank that is done.
    fn exited(self) -> String {
        match (self.joined, self.runs) {
            (false, _) => "without joining the gossamer job".into(),
            (true, 0) => "after joining the gossamer job without a run".into(),
            (true, 1) => "after 1 gossamer run".into(),
            (true, n) => format!("after {n} gossamer runs"),
        }
    }
}

#[derive(Debug, Default)]
struct Rank {
    label: String,
    host: String,
    reached: Reached,
    /// Joined and neither left nor gave up since.
    inside: bool,
    /// Exited with status 0.
    exited: bool,
    /// Gave MPI up after a failed run.
    abandoned: bool,
    /// Leaving the job (about to finalise MPI) since its last stage.
    leaving: bool,
    /// Found the job deadlocked.
    deadlocked: bool,
    /// Its run failed because another rank's did.
    follows: bool,
    /// When it joined (its first stage).
    joined_at: Option<Instant>,
}

impl Rank {
    /// Will never reach a later stage.
    fn done(&self) -> bool {
        self.exited || self.leaving
    }

    /// "exited with status 0" / "is leaving the gossamer job".
    fn how_done(&self) -> &'static str {
        if self.exited {
            "exited with status 0"
        } else {
            "is leaving the gossamer job (finalising MPI)"
        }
    }
}

/// The stages of every rank of a job, keyed by control connection.
#[derive(Debug, Default)]
pub struct Progress {
    ranks: HashMap<usize, Rank>,
    /// [`waiting_note`](Self::waiting_note) has said its line.
    noted: bool,
}

impl Progress {
    /// Names connection `conn`'s rank (`label`, empty when the launcher did not say) and host.
    pub fn hello(&mut self, conn: usize, label: &str, host: &str) {
        let r = self.ranks.entry(conn).or_default();
        r.label = if label.is_empty() {
            "?".into()
        } else {
            label.into()
        };
        r.host = host.into();
    }

    /// Stages `bytes` of connection `conn`'s rank arrived. Returns the failure line when this
    /// rank is now done short of where another rank is, or another rank, done, will never reach
    /// where this one now is. Unknown bytes are ignored (a newer runtime's stages).
    pub fn stages(&mut self, conn: usize, bytes: &[u8]) -> Option<String> {
        let r = self.ranks.entry(conn).or_default();
        for &b in bytes {
            match b {
                stage::JOINING | stage::RUN => {
                    r.joined_at.get_or_insert_with(Instant::now);
                    r.reached.joined = true;
                    r.reached.runs += u32::from(b == stage::RUN);
                    r.inside = true;
                    r.leaving = false;
                }
                stage::LEAVING => {
                    r.inside = false;
                    r.leaving = true;
                }
                stage::ABANDONED => {
                    r.inside = false;
                    r.abandoned = true;
                }
                stage::DEADLOCKED => r.deadlocked = true,
                stage::FOLLOWS => r.follows = true,
                _ => {}
            }
        }
        self.short_of_another(conn)
    }

    /// Whether connection `conn`'s rank found the job deadlocked: then every rank did, in the
    /// same wave, and each is about to report what its own fibers wait for.
    pub fn deadlocked(&self, conn: usize) -> bool {
        self.ranks.get(&conn).is_some_and(|r| r.deadlocked)
    }

    /// Whether connection `conn`'s rank's run failed because another rank's did: the report of
    /// the rank whose failure it was names the cause, and is worth waiting a little for.
    pub fn follows(&self, conn: usize) -> bool {
        self.ranks.get(&conn).is_some_and(|r| r.follows)
    }

    /// Connection `conn`'s rank exited with status 0. Returns the failure line when it exited
    /// after its run failed, inside its job, or short of a stage another rank (still running)
    /// has reached.
    pub fn exited_ok(&mut self, conn: usize) -> Option<String> {
        let r = self.ranks.entry(conn).or_default();
        r.exited = true;
        if r.abandoned {
            return Some(format!(
                "gsmrun: rank {} on host {} exited with status 0 after its gossamer run failed \
                 (gossamer::run or spmd returned the error to the program, which went on and \
                 ended without failing); a failed job does not end as a success; ending the job",
                r.label, r.host
            ));
        }
        if r.inside {
            return Some(format!(
                "gsmrun: rank {} on host {} exited with status 0 in the middle of its gossamer job \
                 (during a run, or without finalising the job: std::process::exit inside a \
                 run?); the other ranks cannot finish without it; ending the job",
                r.label, r.host
            ));
        }
        self.short_of_another(conn)
    }

    /// Once, when a rank has waited [`JOIN_WAIT_NOTE`] in the bootstrap (joined, no run yet)
    /// while ranks that run (they said hello and have not exited) have not joined: the line that
    /// says so, naming both (see the module docs); the caller adds how the job can end.
    pub fn waiting_note(&mut self, now: Instant) -> Option<String> {
        if self.noted {
            return None;
        }
        let mut waiting: Vec<&Rank> = (self.ranks.values())
            .filter(|r| {
                r.inside
                    && r.reached.runs == 0
                    && r.joined_at
                        .is_some_and(|t| now.saturating_duration_since(t) >= JOIN_WAIT_NOTE)
            })
            .collect();
        let mut absent: Vec<&Rank> = (self.ranks.values())
            .filter(|r| !r.reached.joined && !r.exited && !r.label.is_empty())
            .collect();
        if waiting.is_empty() || absent.is_empty() {
            return None;
        }
        self.noted = true;
        let order = |r: &&Rank| (r.label.parse::<u64>().unwrap_or(u64::MAX), r.label.clone());
        waiting.sort_by_key(order);
        absent.sort_by_key(order);
        let waited = waiting
            .iter()
            .filter_map(|r| r.joined_at)
            .map(|t| now.saturating_duration_since(t))
            .max()
            .unwrap_or(JOIN_WAIT_NOTE);
        // The absent ranks' hosts have no waiting rank: the network between the hosts may be
        // what keeps them out (MPI's start-up exchange waits for ever for a host cut off).
        let apart = absent
            .iter()
            .any(|a| waiting.iter().all(|w| w.host != a.host));
        let network = if apart {
            " Or their host cannot reach the others' (a network down): MPI's start-up exchange \
             then waits for ever too."
        } else {
            ""
        };
        Some(format!(
            "gsmrun: note: {} {} waited {} s in the gossamer bootstrap for {}, which {} running \
             but {} not joined the gossamer job. If {} another program (one that does not call \
             gossamer::run or spmd, or a different build at the same path), the job waits for \
             ever: every rank must run the same gossamer program.{network}",
            ranks_on_hosts(&waiting),
            if waiting.len() == 1 { "has" } else { "have" },
            waited.as_secs(),
            ranks_on_hosts(&absent),
            if absent.len() == 1 { "is" } else { "are" },
            if absent.len() == 1 { "has" } else { "have" },
            if absent.len() == 1 {
                "it runs"
            } else {
                "they run"
            },
        ))
    }

    /// The failure line when connection `conn`'s rank is done short of where a rank not done is,
    /// or is not done and ahead of a rank that is done.
    fn short_of_another(&self, conn: usize) -> Option<String> {
        let r = self.ranks.get(&conn)?;
        let (behind, ahead) = if r.done() {
            let ahead = self
                .ranks
                .values()
                .filter(|a| !a.done() && a.reached > r.reached)
                .max_by_key(|a| a.reached)?;
            (r, ahead)
        } else {
            let behind = self
                .ranks
                .values()
                .filter(|b| b.done() && b.reached < r.reached)
                .min_by_key(|b| b.reached)?;
            (behind, r)
        };
        Some(short_line(behind, ahead))
    }
}

/// "rank 1 on host b" / "ranks 1 and 2 on host b" / "ranks 0 (host a), 3 (host b) and 4 more".
fn ranks_on_hosts(ranks: &[&Rank]) -> String {
    const NAMED: usize = 8;
    let one_host = ranks.windows(2).all(|w| w[0].host == w[1].host);
    let names: Vec<String> = (ranks.iter().take(NAMED))
        .map(|r| {
            if one_host {
                r.label.clone()
            } else {
                format!("{} (host {})", r.label, r.host)
            }
        })
        .collect();
    let mut list = match names.as_slice() {
        [one] => one.clone(),
        [rest @ .., last] if ranks.len() <= NAMED => format!("{} and {last}", rest.join(", ")),
        all => format!("{} and {} more", all.join(", "), ranks.len() - NAMED),
    };
    if one_host {
        list = format!("{list} on host {}", ranks[0].host);
    }
    format!("rank{} {list}", if ranks.len() == 1 { "" } else { "s" })
}

/// The line for rank `behind`, done, that will never reach where rank `ahead` is.
fn short_line(behind: &Rank, ahead: &Rank) -> String {
    let rule = if behind.reached.joined {
        "every rank must call gossamer::run or spmd the same number of times"
    } else {
        "every rank must run the same gossamer program"
    };
    format!(
        "gsmrun: rank {} on host {} {} {}, but rank {} {} and waits for it; {rule}; ending the job",
        behind.label,
        behind.host,
        behind.how_done(),
        behind.reached.exited(),
        ahead.label,
        ahead.reached.started(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: usize) -> Progress {
        let mut p = Progress::default();
        for conn in 0..n {
            p.hello(conn, &conn.to_string(), "vm");
        }
        p
    }

    #[test]
    fn ranks_waiting_in_the_bootstrap_for_running_ranks_are_noted_once() {
        let later = |secs| Instant::now() + Duration::from_secs(secs);
        let mut p = job(4);
        assert_eq!(p.stages(0, b"J"), None);
        assert_eq!(p.stages(3, b"J"), None);
        assert_eq!(p.waiting_note(later(5)), None, "not yet");
        let line = p.waiting_note(later(31)).expect("the note");
        assert!(
            line.starts_with(
                "gsmrun: note: ranks 0 and 3 on host vm have waited 3"
            ) && line.contains(
                "s in the gossamer bootstrap for ranks 1 and 2 on host vm, which are running but \
                 have not joined the gossamer job. If they run another program"
            ) && line.ends_with("every rank must run the same gossamer program."),
            "{line}"
        );
        assert_eq!(p.waiting_note(later(60)), None, "said once");
        // Nobody is missing once every running rank joined, nor waits once its run started.
        let mut p = job(2);
        assert_eq!(p.stages(0, b"J"), None);
        assert_eq!(p.stages(1, b"J"), None);
        assert_eq!(p.waiting_note(later(31)), None);
        let mut p = job(2);
        assert_eq!(p.stages(0, b"JR"), None);
        assert_eq!(p.waiting_note(later(31)), None);
        // A rank on another host is named with its host.
        let mut p = job(2);
        p.hello(1, "1", "far");
        p.hello(2, "2", "farther");
        assert_eq!(p.stages(0, b"J"), None);
        let line = p.waiting_note(later(31)).expect("the note");
        assert!(
            line.contains("for ranks 1 (host far) and 2 (host farther), which are running")
                && line.ends_with(
                    "Or their host cannot reach the others' (a network down): MPI's start-up \
                     exchange then waits for ever too."
                ),
            "{line}"
        );
    }

    #[test]
    fn ranks_that_never_join_end_nothing_alone() {
        let mut p = job(2);
        assert_eq!(p.exited_ok(1), None);
        assert_eq!(p.exited_ok(0), None);
    }

    #[test]
    fn a_rank_that_never_joined_is_reported_whichever_comes_first() {
        let line = "gsmrun: rank 1 on host vm exited with status 0 without joining the gossamer \
                    job, but rank 0 is in the gossamer job and waits for it; every rank \
                    must run the same gossamer program; ending the job";
        // The exit first, then rank 0 joins.
        let mut p = job(2);
        assert_eq!(p.exited_ok(1), None);
        assert_eq!(p.stages(0, b"J").as_deref(), Some(line));
        // Rank 0 joins first.
        let mut p = job(2);
        assert_eq!(p.stages(0, b"J"), None);
        assert_eq!(p.exited_ok(1).as_deref(), Some(line));
    }

    #[test]
    fn fewer_runs_than_another_rank_is_reported() {
        let mut p = job(3);
        assert_eq!(p.stages(0, b"JR"), None);
        assert_eq!(p.stages(1, b"JR"), None);
        assert_eq!(p.stages(2, b"JRL"), None);
        assert_eq!(
            p.exited_ok(2),
            None,
            "rank 2 did as many runs as the others"
        );
        assert_eq!(
            p.stages(0, b"R").as_deref(),
            Some(
                "gsmrun: rank 2 on host vm exited with status 0 after 1 gossamer run, but rank 0 \
                 is in gossamer run 2 and waits for it; every rank must call gossamer::run \
                 or spmd the same number of times; ending the job"
            )
        );
        // Joined (a program that only bootstraps) but no run, while others run.
        let mut p = job(2);
        assert_eq!(p.stages(1, b"JL"), None);
        assert_eq!(p.exited_ok(1), None);
        let line = p.stages(0, b"JR").expect("rank 0 waits in its run");
        assert!(
            line.contains(
                "after joining the gossamer job without a run, but rank 0 is in gossamer run 1"
            ),
            "{line}"
        );
    }

    #[test]
    fn an_exit_inside_the_job_is_reported_and_a_clean_end_is_not() {
        let mut p = job(2);
        assert_eq!(p.stages(1, b"JR"), None);
        let line = p.exited_ok(1).expect("exit during a run");
        assert!(
            line.starts_with(
                "gsmrun: rank 1 on host vm exited with status 0 in the middle of its gossamer job"
            ),
            "{line}"
        );
        // Every rank ran twice and left: nothing to say, in any order.
        let mut p = job(2);
        assert_eq!(p.stages(0, b"JR"), None);
        assert_eq!(p.stages(1, b"JRR"), None);
        assert_eq!(p.stages(1, b"L"), None);
        assert_eq!(p.exited_ok(1), None);
        assert_eq!(p.stages(0, b"R"), None);
        assert_eq!(p.stages(0, b"L?"), None, "unknown bytes are ignored");
        assert_eq!(p.exited_ok(0), None);
        // A rank that gave up after a failure is out of the job, and failed even if it exits 0.
        let mut p = job(2);
        assert_eq!(p.stages(1, b"JRA"), None);
        assert_eq!(
            p.exited_ok(1).as_deref(),
            Some(
                "gsmrun: rank 1 on host vm exited with status 0 after its gossamer run failed \
                 (gossamer::run or spmd returned the error to the program, which went on and \
                 ended without failing); a failed job does not end as a success; ending the job"
            )
        );
    }

    #[test]
    fn a_rank_that_found_the_job_deadlocked_is_known_as_such() {
        let mut p = job(2);
        assert_eq!(p.stages(0, b"JR"), None);
        assert!(!p.deadlocked(0));
        assert_eq!(
            p.stages(0, b"D"),
            None,
            "a deadlock is no stage short of another"
        );
        assert!(p.deadlocked(0));
        assert!(!p.deadlocked(1));
        assert!(!p.deadlocked(7), "an unknown connection");
        // A rank whose run another rank's failure ended says so.
        assert_eq!(p.stages(1, b"JRFA"), None);
        assert!(p.follows(1) && !p.follows(0) && !p.follows(7));
    }

    #[test]
    fn leaving_short_of_another_rank_is_reported_before_any_exit() {
        // Rank 1 waits in MPI_Finalize for rank 0, which waits for it in run 2: neither exits.
        let mut p = job(2);
        assert_eq!(p.stages(0, b"JRR"), None);
        assert_eq!(p.stages(1, b"JR"), None);
        assert_eq!(
            p.stages(1, b"L").as_deref(),
            Some(
                "gsmrun: rank 1 on host vm is leaving the gossamer job (finalising MPI) after 1 \
                 gossamer run, but rank 0 is in gossamer run 2 and waits for it; every rank must \
                 call gossamer::run or spmd the same number of times; ending the job"
            )
        );
        // The other order: rank 1 is leaving when rank 0 starts run 2.
        let mut p = job(2);
        assert_eq!(p.stages(1, b"JRL"), None);
        assert_eq!(p.stages(0, b"JR"), None);
        assert!(
            p.stages(0, b"R")
                .is_some_and(|l| l.contains("rank 1 on host vm is leaving"))
        );
        // A rank that gave up is not done until it exits: its status may be the failure, and
        // an exit 0 is reported as the failed run it follows.
        let mut p = job(2);
        assert_eq!(p.stages(0, b"JRR"), None);
        assert_eq!(p.stages(1, b"JRA"), None);
        assert!(
            p.exited_ok(1)
                .is_some_and(|l| l.contains("exited with status 0 after its gossamer run failed"))
        );
    }
}
