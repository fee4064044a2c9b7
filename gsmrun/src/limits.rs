//! The limit on open descriptors (`ulimit -n`) a job needs on the launching host: `gsmrun` holds
//! one control connection per rank, the launcher pipes per local rank, and every rank opens
//! MPI's and the runtime's descriptors and, over tcp, connections to the workers of the other
//! ranks. Too low a limit made Open MPI fail with "No network interfaces were found for
//! out-of-band communications", and a rank of the tcp fabric fail while connecting; so the soft
//! limit is raised to what the job needs (within the hard limit, as the ranks inherit it), and a
//! hard limit below that is refused before anything starts, naming the limit and the need.
//! It does not look at other hosts: their wrappers raise their own soft limit
//! ([`raise_soft_limit`]).

use crate::error::Error;

/// Descriptors a process of MPI and the runtime holds besides its connections.
const BASE: u64 = 64;

/// What a job of `np` ranks, `here` of them on this host, with `threads` workers each (when
/// known) and the tcp fabric between some of them (`tcp`), needs on this host: `gsmrun`'s own
/// (a control connection and the launcher's pipes per rank) or one rank's (two connections per
/// worker and remote rank), whichever is more.
pub fn needed(np: u64, here: u64, threads: u64, tcp: bool) -> u64 {
    let gsmrun = BASE + 4 * np + 4 * here;
    let rank = BASE
        + if tcp {
            2 * threads * np.saturating_sub(1)
        } else {
            4 * here
        };
    gsmrun.max(rank)
}

/// Raises the soft limit to `need` if the hard limit allows it; refuses the job otherwise.
pub fn ensure(need: u64) -> Result<(), Error> {
    let (soft, hard) = crate::sys::open_files_limit();
    if soft.is_none_or(|s| s >= need) {
        return Ok(());
    }
    if hard.is_some_and(|h| h < need) {
        return Err(Error::Limit(format!(
            "the limit on open files here is {} (ulimit -n; its hard limit, ulimit -Hn, is {}), \
             and this job needs about {need} on this host ({BASE} for MPI and the runtime, and \
             more per rank for the connections between gsmrun, the ranks and their workers); \
             raise the hard limit (ulimit -Hn {need} as root, or `nofile` in \
             /etc/security/limits.conf) or start fewer ranks or threads here",
            soft.unwrap_or(0),
            hard.unwrap_or(0)
        )));
    }
    raise_soft_limit(need);
    Ok(())
}

/// Raises the soft limit to `need`, or to the hard limit if that is lower; a failure is left to
/// show later, where the descriptors run out.
pub fn raise_soft_limit(need: u64) {
    if let (Some(soft), _) = crate::sys::open_files_limit() {
        if soft < need {
            if let Err(e) = crate::sys::raise_open_files_limit(need) {
                tracing::debug!(error = %e, need, "cannot raise the limit on open files");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_need_grows_with_the_ranks_and_with_tcp_workers() {
        assert_eq!(super::needed(2, 2, 1, false), 64 + 8 + 8);
        assert!(super::needed(64, 1, 16, true) > super::needed(64, 1, 16, false));
    }
}
