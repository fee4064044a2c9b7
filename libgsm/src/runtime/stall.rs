//! The stall watch: a thread per run that reports a worker stuck in one delegated closure.
//!
//! A closure that never returns (a loop waiting for something only another worker could do, a
//! blocking call) holds its trustee's worker, every request queued behind it and every fiber
//! waiting for their answers, and the deadlock watch cannot see it: the worker is busy, not idle.
//! Each worker marks the run of closures it serves (`worker::Busy`: the closure's type and a run
//! count, two relaxed stores per run); this thread looks every [`LOOK_EVERY`], and a worker found
//! in the same run for `GSM_STALL_REPORT` seconds (default 10, see `docs/settings.md`) is reported once on
//! standard error, naming the rank, its host, the worker and the closure's type. The job goes
//! on: a long computation is allowed, and `gsmrun --timeout` or Ctrl-C ends a job that is stuck.
//! It does not look at fibers that spin without yielding.

use crate::worker::Shared;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often the watch looks.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// `GSM_STALL_REPORT`: how long a closure may run before it is reported (the run refused a
/// value not allowed when it started).
fn report_after() -> Duration {
    gsm_contract::value(&gsm_contract::table::STALL_REPORT)
}

/// Starts the watch over `shared`'s workers; it ends when the run stops.
pub(crate) fn watch(shared: &Arc<Shared>) {
    // Weak: the watch must not keep the run's shared state (its fabrics' bells) alive.
    let weak = Arc::downgrade(shared);
    let workers = shared.busy.len();
    let after = report_after();
    let spawned = std::thread::Builder::new()
        .name("gsm-stall-watch".into())
        .spawn(move || {
            // Per worker: the run seen, since when, and whether it was reported.
            let mut seen: Vec<Option<(u64, Instant, bool)>> = vec![None; workers];
            loop {
                std::thread::sleep(LOOK_EVERY);
                let Some(shared) = weak.upgrade() else { return };
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                for (local, busy) in shared.busy.iter().enumerate() {
                    let Some((run, name)) = busy.now() else {
                        seen[local] = None;
                        continue;
                    };
                    let slot = match &mut seen[local] {
                        Some(s) if s.0 == run => s,
                        other => other.insert((run, Instant::now(), false)),
                    };
                    if !slot.2 && slot.1.elapsed() >= after {
                        slot.2 = true;
                        report(&shared, local, name, slot.1.elapsed());
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::debug!(target: "gossamer::quiesce", error = %e, "no stall watch");
    }
}

fn report(shared: &Shared, local: usize, name: &str, for_: Duration) {
    let place = &shared.place;
    let rank = place.rank;
    let host = place.hosts.get(rank as usize).map_or("?", String::as_str);
    tracing::warn!(target: "gossamer::quiesce", rank, worker = place.base + local, closure = name, "a delegated closure has not returned");
    crate::eprint_line(format_args!(
        "gossamer: rank {rank} on host {host}: worker {} has been running one delegated closure, \
         `{name}`, for {} s and it has not returned; the requests queued behind it, and the \
         fibers waiting for their answers, wait as long (a delegated closure must not loop \
         waiting for other workers, nor block)",
        place.base + local,
        for_.as_secs()
    ));
}
