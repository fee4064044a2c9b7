//! The host names a job is about to be started on, looked up before the launcher runs: a name
//! that does not resolve is refused with one line naming it and where it was written (exit 2),
//! instead of after the launcher's own pages of text (Open MPI's ORTE printed about 20 lines and
//! gsmrun then exited 1).
//!
//! Decisions: only hosts the user wrote (a hostfile or `-H`) are looked up, and only when no
//! `--launch-agent` is given; node names from a Slurm or PBS allocation are the scheduler's to
//! reach, and names under a launch agent are the agent's (a namespace's `nsrsh` knows names the
//! resolver does not), so neither need resolve on the submitting host. The look-ups run at once, each in its own thread, for at most [`LOOKUP_WAIT`] together:
//! a name still being looked up then judges nothing (a slow resolver is not a wrong name), and the
//! launcher goes on as before.

use crate::Error;
use crate::hosts::HostSource;
use crate::placement::Placement;
use std::time::{Duration, Instant};

/// How long the look-ups may take together before gsmrun launches anyway.
pub const LOOKUP_WAIT: Duration = Duration::from_millis(800);

/// Refuse the job when a host that runs one of its ranks, written in `source`, has a name that
/// does not resolve. `text` is the hostfile's text, when there is one, to say the line.
pub fn check(
    placement: &Placement,
    source: &HostSource,
    launch_agent: Option<&str>,
    text: Option<&str>,
) -> Result<(), Error> {
    if launch_agent.is_some() || !matches!(source, HostSource::Hostfile(_) | HostSource::HostOption)
    {
        return Ok(());
    }
    let mut names: Vec<&str> = Vec::new();
    for &h in &placement.rank_host {
        let name = placement.hosts[h].name.as_str();
        if !names.contains(&name) && !crate::local::is_local_host(name) {
            names.push(name);
        }
    }
    let bad = unresolved(&names, LOOKUP_WAIT);
    let Some(first) = bad.first() else {
        return Ok(());
    };
    let more = match bad.len() {
        1 => String::new(),
        n => format!(" (and {} more: {})", n - 1, shown_list(&bad[1..])),
    };
    Err(Error::Usage(format!(
        "host {}{more}{} does not resolve: a typing error, or a name this host's resolver does \
         not know (check /etc/hosts or DNS); no rank was started",
        crate::shown(first),
        written_at(first, source, text),
    )))
}

/// Which of `names` fail to resolve within `wait`; a look-up still running then counts as fine.
fn unresolved<'a>(names: &[&'a str], wait: Duration) -> Vec<&'a str> {
    use std::net::ToSocketAddrs as _;
    let deadline = Instant::now() + wait;
    let lookups: Vec<_> = (names.iter())
        .map(|&name| {
            let (tx, rx) = std::sync::mpsc::channel();
            let owned = name.to_string();
            // Detached: a look-up past the deadline finishes on its own and is not waited for.
            std::thread::spawn(move || {
                let fails = (owned.as_str(), 0u16)
                    .to_socket_addrs()
                    .map_or(true, |mut a| a.next().is_none());
                let _ = tx.send(fails);
            });
            (name, rx)
        })
        .collect();
    (lookups.into_iter())
        .filter(|(_, rx)| {
            let left = deadline.saturating_duration_since(Instant::now());
            rx.recv_timeout(left).unwrap_or(false)
        })
        .map(|(name, _)| name)
        .collect()
}

/// Where `name` was written: the hostfile's path with the line and column of its first mention
/// (when the name is written out there, not produced by a range), or the `-H` option.
fn written_at(name: &str, source: &HostSource, text: Option<&str>) -> String {
    match source {
        HostSource::Hostfile(path) => {
            let path = crate::shown(&path.display().to_string());
            match text.and_then(|t| first_mention(t, name)) {
                Some((line, column)) => format!(" ({path}:{line}:{column})"),
                None => format!(" (hostfile {path})"),
            }
        }
        _ => " (-H/--host)".to_string(),
    }
}

/// The 1-based line and column of the first whole-word mention of `name` in `text`.
pub(crate) fn first_mention(text: &str, name: &str) -> Option<(usize, usize)> {
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    for (i, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(at) = line[from..].find(name).map(|a| a + from) {
            let end = at + name.len();
            let before = line[..at].chars().next_back();
            let after = line[end..].chars().next();
            if !before.is_some_and(word) && !after.is_some_and(word) {
                return Some((i + 1, line[..at].chars().count() + 1));
            }
            from = end;
        }
    }
    None
}

fn shown_list(names: &[&str]) -> String {
    let mut text: Vec<String> = names.iter().take(8).map(|n| crate::shown(n)).collect();
    if names.len() > 8 {
        text.push("…".to_string());
    }
    text.join(", ")
}

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
