//! Hosts of a PBS/Torque allocation: `PBS_NODEFILE` names a file with one host per line, a host
//! repeated once per slot. This module reads that file; it does not talk to the PBS server.
//!
//! Blank lines and `#` comments are skipped, and hosts keep the order of their first line. Names
//! that differ only in ASCII case are one host (spelled as first written), as in a hostfile: DNS
//! names are case-insensitive, and Open MPI, given both spellings, counts the slots of one host
//! twice and ends with an internal error. PBS writes nothing but the name on a line, so anything
//! else there (a second word such as `slots=2`, a `:` or other characters no host name has) is
//! refused at its line and column rather than dropped or passed on to the MPI launcher.

use super::report::{Source, plain};
use super::{Host, HostSource, HostsError, MAX_NAME_LEN};
use std::path::PathBuf;

/// What a PBS node file line holds, for the help of every report about one.
const ONE_NAME: &str = "a PBS node file has one host name per line, repeated once per slot; \
                        for a list of your own, use -hostfile";

/// `None` outside PBS (no `PBS_NODEFILE`).
pub(crate) fn from_environment(
    var: &dyn Fn(&str) -> Option<String>,
) -> Option<Result<(Vec<Host>, HostSource), HostsError>> {
    let path = PathBuf::from(var("PBS_NODEFILE")?);
    Some(match std::fs::read(&path) {
        Ok(bytes) => parse_nodefile_bytes(&path, &bytes).map(|h| (h, HostSource::Pbs(path))),
        Err(e) => Err(plain(
            &format!("cannot read PBS_NODEFILE {}: {e}", path.display()),
            "run inside a PBS job, or unset PBS_NODEFILE, or pass -hostfile",
        )),
    })
}

/// [`parse_nodefile`] of a file's bytes, refusing bytes that are not UTF-8 at their position.
fn parse_nodefile_bytes(path: &std::path::Path, bytes: &[u8]) -> Result<Vec<Host>, HostsError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_nodefile(path, text),
        Err(e) => {
            let lossy = String::from_utf8_lossy(bytes);
            let label = path.display().to_string();
            Err(Source {
                label: &label,
                text: &lossy,
            }
            .error(
                e.valid_up_to(),
                1,
                &format!("byte 0x{:02x} is not UTF-8", bytes[e.valid_up_to()]),
                ONE_NAME,
            ))
        }
    }
}

/// Counts each host's lines in a PBS node file.
pub fn parse_nodefile(path: &std::path::Path, text: &str) -> Result<Vec<Host>, HostsError> {
    let label = path.display().to_string();
    let src = Source {
        label: &label,
        text,
    };
    let mut hosts: Vec<Host> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let mut words = words(line).map(|(at, w)| (offset + at, w));
        if let Some((at, name)) = words.next().filter(|(_, w)| !w.starts_with('#')) {
            check_name(&src, at, name)?;
            if let Some((extra, word)) = words.next().filter(|(_, w)| !w.starts_with('#')) {
                return Err(src.error(
                    extra,
                    word.chars().count(),
                    &format!("`{word}` follows the host name `{name}`"),
                    ONE_NAME,
                ));
            }
            match index.get(&name.to_ascii_lowercase()) {
                Some(&h) => {
                    let host: &mut Host = &mut hosts[h];
                    host.slots = host.slots.checked_add(1).ok_or_else(|| {
                        src.error(
                            at,
                            name.len(),
                            "too many lines for one host",
                            "check the node file",
                        )
                    })?;
                }
                None => {
                    index.insert(name.to_ascii_lowercase(), hosts.len());
                    hosts.push(Host {
                        name: name.to_string(),
                        user: None,
                        slots: 1,
                        max_slots: None,
                    });
                }
            }
        }
        offset += line.len();
    }
    if hosts.is_empty() {
        return Err(plain(
            &format!("PBS node file {label} names no host"),
            "check the PBS job's node request",
        ));
    }
    Ok(hosts)
}

/// The words of `line` between ASCII white space, with their byte offsets in it (other white
/// space is part of a word, which [`check_name`] then refuses).
fn words(line: &str) -> impl Iterator<Item = (usize, &str)> {
    line.split(|c: char| c.is_ascii_whitespace())
        .scan(0usize, |at, w| {
            let here = *at;
            *at += w.len() + 1;
            Some((here, w))
        })
        .filter(|(_, w)| !w.is_empty())
}

/// Refuses `name` (at byte `at` of the file) unless it is a host name or an IPv4 address: ASCII
/// letters, digits, `-`, `_` and `.`, at most [`MAX_NAME_LEN`] characters.
fn check_name(src: &Source<'_>, at: usize, name: &str) -> Result<(), HostsError> {
    if let Some((i, c)) = name
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(src.error(
            at + i,
            1,
            &format!("`{name}` is not a host name: it has `{}`", c.escape_debug()),
            ONE_NAME,
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(src.error(
            at,
            1,
            &format!("host name longer than {MAX_NAME_LEN} characters"),
            ONE_NAME,
        ));
    }
    Ok(())
}
