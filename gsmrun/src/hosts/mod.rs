//! Hosts: where a job may run, read from a hostfile (Open MPI, MPICH/Hydra or Slurm-hostlist
//! grammar), from `-H a:2,b`, from a Slurm allocation, or from a PBS node file.
//!
//! CONTRACT (fixed by the lead; the hosts work fills in the bodies, the launch work calls them):
//! - [`parse_hostfile`] parses a whole hostfile; hosts named on several lines (in any ASCII case)
//!   are merged in order of first appearance with their slots added up.
//! - [`parse_host_option`] parses the value of `-H/--host` (`a:2,b,node[1-2]:4`).
//! - [`from_environment`] looks at `SLURM_*` then `PBS_NODEFILE` and returns `None` outside both.
//! - Every error is a [`HostsError`] whose `Display` is the full user-facing report (file:line:column,
//!   the line, a caret, and what to do). Exit status 2 is the caller's business.

mod grammar;
mod hostlist;
mod parse;
pub mod pbs;
mod report;
pub mod slurm;
#[cfg(test)]
mod tests;

pub use hostlist::{MAX_EXPANSION, MAX_NAME_LEN};
pub use parse::{MAX_KEYS, MAX_TOTAL_NAMES, SLOTS_KEYS, USER_KEYS};

use std::path::Path;

/// The largest hostfile gsmrun reads: far above any real cluster's list (a line per host), and
/// small enough that a wrong path (a log, a device) is refused before it fills memory.
pub const MAX_HOSTFILE_BYTES: u64 = 16 << 20;

/// One host and its slots, after merging every line that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Host name or address exactly as first written (after hostlist expansion).
    pub name: String,
    /// `user@` prefix, if any.
    pub user: Option<String>,
    /// Slots: ranks that may run there without oversubscribing. Hostfile default is 1.
    pub slots: u32,
    /// Hard limit even with `--oversubscribe`, if given.
    pub max_slots: Option<u32>,
}

/// Where the host list came from, for messages and for the launcher's choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSource {
    Hostfile(std::path::PathBuf),
    HostOption,
    Slurm { job_id: String },
    Pbs(std::path::PathBuf),
    Localhost,
}

/// A bad hostfile, host option, or scheduler environment. `Display` is the whole report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{report}")]
pub struct HostsError {
    /// The full multi-line report.
    pub report: String,
    /// 1-based line and column where the problem is, when it is in a file or option text.
    pub line: Option<usize>,
    pub column: Option<usize>,
}

/// Parse a hostfile's text; `path` is used only in messages.
///
/// Accepted, line by line (see `hostfiles/README.md` and `grammar.pest`):
/// `[user@]host[:N] [slots=N] [max_slots=M] [user=NAME]` where `host` is a name, an IPv4
/// address, or a Slurm hostlist pattern (`node[01-04,07]`), several comma-separated items sharing
/// the keys; comments `#`, `//`, `/* … */` (a block comment counts as a space, as in C); blank
/// lines, CRLF and a UTF-8 BOM. Decisions where Open MPI, Hydra and Slurm are silent or differ:
/// - default slots are 1 per line; `max_slots` alone sets slots to it (as Open MPI does);
/// - Hydra's `host:N` is a slot count; a third `:` field is refused (Hydra ignores it silently);
///   a host with two or more `:` (an IPv6 address) is refused, since no MPI launcher can start
///   a rank at one (see `ipv6_host` in `parse.rs`);
/// - `^host` exclusions, relative nodes and Open MPI's topology keys (`cores=` …) are refused;
/// - keys are case-sensitive, as in Open MPI.
///
/// Hosts named on several lines are merged in order of first appearance (see the merge rule on
/// `Merger::add` in `parse.rs`: names that differ only in ASCII case are one host, spelled as first
/// written; slots add up, `max_slots` add up unless a line is unlimited).
pub fn parse_hostfile(path: &Path, text: &str) -> Result<Vec<Host>, HostsError> {
    let label = path.display().to_string();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    parse::hostfile(report::Source {
        label: &label,
        text,
    })
}

/// Parse a hostfile's bytes as read from disk: like [`parse_hostfile`], after checking that they
/// are UTF-8, so that a Latin-1 `ü` in a comment is reported at its file:line:column rather than
/// as a bare "stream did not contain valid UTF-8".
pub fn parse_hostfile_bytes(path: &Path, bytes: &[u8]) -> Result<Vec<Host>, HostsError> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let at = e.valid_up_to();
            let label = path.display().to_string();
            // Everything before `at` is valid, so the lossy text has the same offsets up to it.
            let lossy = String::from_utf8_lossy(bytes);
            return Err(report::Source {
                label: &label,
                text: &lossy,
            }
            .error(
                at,
                1,
                &format!("byte 0x{:02x} is not UTF-8", bytes[at]),
                "save the hostfile as UTF-8 (for Latin-1: iconv -f latin1 -t utf-8)",
            ));
        }
    };
    parse_hostfile(path, text)
}

/// Parse the value of `-H/--host`: comma-separated `[user@]host[:N]` items, where `host` may be a
/// Slurm hostlist pattern whose own commas (inside `[...]`) do not split items. Each item has
/// `N` slots (default 1); repeated hosts (in any ASCII case) add up.
pub fn parse_host_option(text: &str) -> Result<Vec<Host>, HostsError> {
    parse::host_option(report::Source {
        label: "-H/--host",
        text,
    })
}

/// Hosts of the scheduler allocation we are inside, if any (Slurm first, then PBS), read through
/// `var` so tests can pass a fake environment. See [`slurm`] and [`pbs`] for the variables read.
pub fn from_environment(
    var: &dyn Fn(&str) -> Option<String>,
) -> Option<Result<(Vec<Host>, HostSource), HostsError>> {
    if let Some(found) = slurm::from_environment(var) {
        return Some(found);
    }
    pbs::from_environment(var)
}
