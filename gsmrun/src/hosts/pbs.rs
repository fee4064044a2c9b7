//! Hosts of a PBS/Torque allocation: `PBS_NODEFILE` names a file with one host per line, a host
//! repeated once per slot. This module reads that file; it does not talk to the PBS server.
//! Blank lines and `#` comments are skipped; only the first word of a line is the host; hosts
//! keep the order of their first line.

use super::report::{Source, plain};
use super::{Host, HostSource, HostsError};
use std::path::PathBuf;

/// `None` outside PBS (no `PBS_NODEFILE`).
pub(crate) fn from_environment(
    var: &dyn Fn(&str) -> Option<String>,
) -> Option<Result<(Vec<Host>, HostSource), HostsError>> {
    let path = PathBuf::from(var("PBS_NODEFILE")?);
    Some(match std::fs::read_to_string(&path) {
        Ok(text) => parse_nodefile(&path, &text).map(|h| (h, HostSource::Pbs(path))),
        Err(e) => Err(plain(
            &format!("cannot read PBS_NODEFILE {}: {e}", path.display()),
            "run inside a PBS job, or unset PBS_NODEFILE, or pass -hostfile",
        )),
    })
}

/// Count each host's lines in a PBS node file.
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
        let word = line.split_whitespace().next();
        if let Some(name) = word.filter(|w| !w.starts_with('#')) {
            match index.get(name) {
                Some(&h) => {
                    let host: &mut Host = &mut hosts[h];
                    host.slots = host.slots.checked_add(1).ok_or_else(|| {
                        src.error(
                            offset,
                            name.len(),
                            "too many lines for one host",
                            "check the node file",
                        )
                    })?;
                }
                None => {
                    index.insert(name.to_string(), hosts.len());
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
