//! Ending a run across ranks together: the termination waves (Mattern's four counters), the
//! verdict of each wave (over, deadlocked, or not yet), the failure notes ranks send each other,
//! and the watch over this host's peer processes. It starts and stops nothing itself: the caller
//! (`start.rs`) stops the workers and closes the fabrics once [`terminate`] returns. See
//! `runtime/README.md` for the protocols together.
//!
//! **Ending together.** A rank whose roots are done and whose workers are all quiet may still be
//! sent work by another rank. So the run's thread runs *waves*: when the rank is quiet it
//! contributes `(not quiet, slots sent to other ranks, slots received from them, …)` to a
//! non-blocking sum (`MPI_Iallreduce`). The job is over when two consecutive waves find every
//! rank quiet and the same totals with sent = received (the four-counter method of Mattern,
//! 1987): every slot ever published has been consumed and nothing happened in between. A rank
//! whose roots are *not* done joins the waves too once all its workers are quiet (its workers
//! watch for that as soon as one of them goes to sleep; see `WorkerCore::run_loop`), and says so
//! in its contribution: when the job is found quiet with roots left somewhere, it is deadlocked
//! (quiescence is stable: nothing can wake those roots' fibers), and once every rank has seen
//! that for [`STALL_CONFIRM`] the run fails on every rank with [`Error::Deadlock`], naming what
//! each rank's fibers wait for, instead of hanging. While it waits, the thread watches the
//! processes of this host's peers (`pidfd`) and the runtime's failure flag, so a vanished peer or
//! a failure never leaves it waiting in MPI; peers on other hosts are watched by the tcp fabric
//! (a closed connection).
//!
//! **A failed run is told.** A rank whose run fails (a panic, a broken record, a property
//! count gone wrong) sends every other rank a failure note with its error (an `MPI_Isend` on
//! gossamer's own communicator, driven out for at most [`NOTE_GRACE`] without waiting for the
//! receivers), and each rank's waiting thread takes notes as it goes: the run then fails there
//! with [`Error::PeerFailed`], carrying the first rank's error. Without the note the others ran
//! on until the failed rank's process ended, which need not be soon (its program may handle the
//! error and go on), and then reported it as vanished. A rank that sees a peer vanish waits a
//! moment for that peer's note, so that a rank that failed and then exited is reported with its
//! reason. Losses of peers and deadlocks are not told: every rank finds those by itself.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::bootstrap::Job;
use crate::error::Error;
use crate::fabric::FabricError;
use crate::sys::proc::ProcessWatch;
use crate::worker::{STALL_CONFIRM, Shared};

/// This rank's contribution to a wave, if it is quiet now (see the module docs): `(0, slots
/// sent, slots received, whether roots are left, 0)`; the caller fills in the last element,
/// whether this rank has seen the job stalled for [`STALL_CONFIRM`].
fn sample(sh: &Shared) -> Option<[u64; 5]> {
    let stalled = sh.roots_left.load(Ordering::SeqCst) > 0;
    if !stalled && !sh.draining.load(Ordering::SeqCst) {
        return None;
    }
    let a = sh.rank_quiet.load(Ordering::SeqCst);
    if a == u64::MAX || sh.activity.load(Ordering::SeqCst) != a {
        return None;
    }
    let (s, r) = sh.traffic();
    // Every worker still stands by its report: one that did work while counting was off has
    // withdrawn it without moving `activity` (see `WorkerCore::run_loop`).
    let reports = sh.quiet.iter().all(|q| q.load(Ordering::SeqCst) == a);
    // Fibers in `wait_for` wait for another rank's write to the host board, which no slot
    // counts: every worker with such fibers must have tested them since the last wave ended
    // here, which was after every rank's sample in it. A write that the test missed was made
    // after that rank's last sample, by a turn that bumps its `activity`, so the next wave sees
    // that rank move.
    let waves = sh.waves.load(Ordering::SeqCst);
    let fresh = sh.board_fresh.iter().all(|f| {
        let f = f.load(Ordering::SeqCst);
        f == u64::MAX || f == waves
    });
    (reports && fresh && sh.activity.load(Ordering::SeqCst) == a).then_some([
        0,
        s,
        r,
        u64::from(stalled),
        0,
    ])
}

/// The failure notes of one run (see the module docs): whether this rank has told the others
/// of its failure.
#[derive(Default)]
pub(crate) struct Notes {
    posted: bool,
}

/// How long a rank that saw a peer vanish waits for that peer's failure note, which may come
/// by another path than the one that showed the loss (MPI's own connection, not the fabric's),
/// and how long a failed rank drives its notes out. Only a failing run waits this long.
const NOTE_GRACE: Duration = Duration::from_millis(200);

/// The run's thread waits this long between its looks (failure flag, notes, peers, waves) after
/// one that moved a wave, and twice as long after each look that did not, up to
/// [`LOOK_LONGEST`]; this long again once the job is seen stalled. Not every millisecond
/// throughout: on a host whose workers poll on every CPU, each wake-up takes a worker off its
/// CPU, which showed in the light-load tail of a blocking `apply`.
const LOOK_FIRST: Duration = Duration::from_millis(1);
/// The longest wait between two looks: how late a busy rank sees a peer's failure note, and a
/// rank that has just gone quiet starts its wave (a vanished peer on this host ends the wait at
/// once, through its `pidfd`).
const LOOK_LONGEST: Duration = Duration::from_millis(8);

impl Notes {
    /// Tells the other ranks of `e`, once per run, if it is this rank's own failure: not a
    /// peer's loss or failure (that peer, or the peer that lost it, tells its own story; and
    /// a vanished peer may not be sent to) and not a deadlock (every rank finds that together).
    pub(crate) fn post(&mut self, job: &Job, e: &Error) {
        let own = !another_ranks(e) && !matches!(e, Error::Deadlock { .. });
        if own && !std::mem::replace(&mut self.posted, true) {
            job.post_failure(&e.to_string(), NOTE_GRACE);
        }
    }

    /// A peer's failure note, if one has arrived, as this rank's error.
    fn take(job: &Job) -> Option<Error> {
        let (rank, cause) = job.failure_note()?;
        let host = job
            .peers()
            .iter()
            .find(|p| p.rank == rank)
            .map_or_else(|| "?".to_string(), |p| p.hostname.clone());
        Some(Error::PeerFailed { rank, host, cause })
    }

    /// `lost` (a peer vanished), or the failure note that explains it if one arrives within
    /// [`NOTE_GRACE`]: a peer that failed and then ended (its program returned the error, or
    /// panicked with it) was seen to vanish, but it said why first.
    fn explain(job: &Job, lost: Error) -> Error {
        let until = std::time::Instant::now() + NOTE_GRACE;
        loop {
            if let Some(e) = Self::take(job) {
                return e;
            }
            if std::time::Instant::now() >= until {
                return lost;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Whether `e` is another rank's failure rather than this rank's own: a peer vanished, or told
/// its failure.
pub(crate) fn another_ranks(e: &Error) -> bool {
    peer_lost(e) || matches!(e, Error::PeerFailed { .. })
}

/// Whether `e` says that a peer vanished (this runtime's watch or a fabric's).
fn peer_lost(e: &Error) -> bool {
    matches!(
        e,
        Error::PeerLost { .. } | Error::Fabric(FabricError::PeerLost { .. })
    )
}

/// Waits until every rank agrees that the job is over, or something failed.
///
/// The job is over when two consecutive waves find every rank quiet with the same totals and
/// sent = received, and no rank with roots left. When ranks with roots left are among them, the
/// job is deadlocked instead: quiescence is stable, so nothing can ever wake their fibers. Each
/// rank starts a clock at that wave (the same wave on every rank, since all see the same sums)
/// and says in its later samples whether [`STALL_CONFIRM`] has passed on it; the first wave in
/// which every rank says so ends the job as deadlocked on every rank, together.
///
/// A failure of this rank is told to the others at once ([`Notes::post`]), and a failure
/// another rank told ends this rank's run with [`Error::PeerFailed`]: a rank whose run failed
/// may stay alive (its program caught the error and goes on), and the others would otherwise
/// keep running until its process ended. A peer seen to vanish is explained by its note when
/// one comes ([`Notes::explain`]).
pub(crate) fn terminate(job: &Job, sh: &Shared, notes: &mut Notes) -> Result<(), Error> {
    let mut watch = PeerWatch::new(job);
    let mut wave: Option<crate::bootstrap::Sum> = None;
    let mut prev: Option<(u64, u64)> = None;
    let mut stalled_since: Option<std::time::Instant> = None;
    let mut look = LOOK_FIRST;
    loop {
        if sh.failed() {
            if let Some(w) = wave.take() {
                w.abandon();
            }
            let failure = sh.failure.lock().ok().and_then(|f| f.clone());
            match failure {
                Some(lost) if peer_lost(&lost) => {
                    let why = Notes::explain(job, lost);
                    if matches!(why, Error::PeerFailed { .. }) {
                        if let Ok(mut f) = sh.failure.lock() {
                            *f = Some(why);
                        }
                    }
                }
                Some(e) => notes.post(job, &e),
                None => {}
            }
            tracing::info!(target: "gossamer::quiesce", rank = job.rank(), "the run failed");
            return Ok(()); // the failure itself is returned by `join_workers`
        }
        if let Some(e) = Notes::take(job) {
            if let Some(w) = wave.take() {
                w.abandon();
            }
            tracing::info!(target: "gossamer::quiesce", rank = job.rank(), error = %e, "a peer's run failed");
            return Err(e);
        }
        if let Some(e) = watch.wait(look) {
            // A peer that found the job deadlocked in the wave in flight ends at once (no
            // barrier follows that verdict), and its exit can be seen here before the same
            // verdict is: read the wave once more, so that every rank reports the deadlock,
            // not the first one's exit ("vanished" on rank 1, seen in CI).
            if let Some(mut w) = wave.take() {
                match w.test() {
                    Some(v) => {
                        if let Some(Err(deadlock)) = judge(&v, job, &mut prev, &mut stalled_since) {
                            return Err(deadlock);
                        }
                    }
                    None => w.abandon(),
                }
            }
            tracing::info!(target: "gossamer::quiesce", rank = job.rank(), error = %e, "a peer vanished");
            return Err(Notes::explain(job, e));
        }
        // Whether this look started or finished a wave: then the next comes soon.
        let moved = match &mut wave {
            None => match sample(sh) {
                Some(mut v) => {
                    v[4] = u64::from(stalled_since.is_some_and(|t| t.elapsed() >= STALL_CONFIRM));
                    tracing::trace!(target: "gossamer::quiesce", rank = job.rank(), sample = ?v, "wave started");
                    wave = Some(job.start_sum(&v));
                    true
                }
                None => false,
            },
            Some(w) => match w.test() {
                Some(v) => {
                    wave = None;
                    let n = sh.waves.fetch_add(1, Ordering::SeqCst) + 1;
                    tracing::trace!(target: "gossamer::quiesce", rank = job.rank(), wave = n, totals = ?v, "wave completed");
                    if let Some(verdict) = judge(&v, job, &mut prev, &mut stalled_since) {
                        return verdict;
                    }
                    true
                }
                None => false,
            },
        };
        // Once the job is seen stalled, every rank looks often again: a rank that reaches the
        // deadlock verdict ends at once, and the others must complete that same wave before
        // its exit stops MPI's progress on it (or they report it as vanished).
        look = if moved || stalled_since.is_some() {
            LOOK_FIRST
        } else {
            (look * 2).min(LOOK_LONGEST)
        };
    }
}

/// What the sums `v` of a completed wave say (see [`terminate`]): the job is over (`Ok`),
/// deadlocked (`Err`), or neither yet (`None`), with the previous wave's totals and the
/// stall clock brought up to date.
fn judge(
    v: &[u64],
    job: &Job,
    prev: &mut Option<(u64, u64)>,
    stalled_since: &mut Option<std::time::Instant>,
) -> Option<Result<(), Error>> {
    let at = |i: usize, or: u64| v.get(i).copied().unwrap_or(or);
    let quiet = at(0, 1) == 0;
    let (s, r, stalled, expired) = (at(1, 0), at(2, 1), at(3, 0), at(4, 0));
    if quiet && s == r && *prev == Some((s, r)) {
        if stalled == 0 {
            tracing::info!(target: "gossamer::quiesce", rank = job.rank(), slots = s, "the job is quiet: the run is over");
            return Some(Ok(()));
        }
        if expired == u64::from(job.size()) {
            tracing::info!(target: "gossamer::quiesce", rank = job.rank(), "the job is deadlocked");
            crate::bootstrap::tell(crate::bootstrap::Stage::Deadlocked);
            return Some(Err(Error::Deadlock {
                rank: job.rank(),
                waits: Vec::new(),
            }));
        }
        if stalled_since.is_none() {
            tracing::debug!(target: "gossamer::quiesce", rank = job.rank(), ranks_with_roots_left = stalled, "the job is quiet with roots left: stalled");
        }
        stalled_since.get_or_insert_with(std::time::Instant::now);
    } else {
        *prev = (quiet && s == r).then_some((s, r));
        *stalled_since = None;
    }
    None
}

/// Watches the processes of this host's peer ranks.
struct PeerWatch {
    /// (rank, host, the watch over its process)
    peers: Vec<(u32, String, ProcessWatch)>,
}

impl PeerWatch {
    fn new(job: &Job) -> PeerWatch {
        let peers = job
            .peers()
            .iter()
            .filter(|p| p.rank != job.rank() && job.same_host(p.rank))
            .map(|p| (p.rank, p.hostname.clone(), ProcessWatch::new(p.pid)))
            .collect();
        PeerWatch { peers }
    }

    /// Waits up to `t` for a peer to end; returns the error naming it.
    fn wait(&mut self, t: Duration) -> Option<Error> {
        let watches: Vec<&ProcessWatch> = self.peers.iter().map(|p| &p.2).collect();
        let ended = crate::sys::proc::wait_for_exit(&watches, t);
        let (rank, host, watch) = self.peers.iter().zip(ended).find(|(_, e)| *e)?.0;
        Some(Error::PeerLost {
            rank: *rank,
            host: host.clone(),
            pid: watch.pid(),
            detail: "its process ended before the job did".into(),
        })
    }
}
