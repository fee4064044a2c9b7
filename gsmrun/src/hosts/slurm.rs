//! Hosts of a Slurm allocation, from the variables `salloc`/`sbatch` set. This module reads
//! variables only; it does not talk to `slurmctld` or run `scontrol`.
//!
//! - Inside a job when `SLURM_JOB_ID` (or the older `SLURM_JOBID`) is set.
//! - Hosts from `SLURM_JOB_NODELIST` (else `SLURM_NODELIST`), a hostlist such as `n[01-04,07]`.
//! - Slots from `SLURM_TASKS_PER_NODE` (else `SLURM_JOB_CPUS_PER_NODE`), such as `2(x3),1`
//!   = 2,2,2,1, one entry per node in node-list order. A count that does not match the node list
//!   is an error rather than a guess.

use super::report::{Source, plain};
use super::{Host, HostSource, HostsError};

/// Parse `SLURM_TASKS_PER_NODE`-style counts: comma-separated `N` or `N(xR)` (N repeated R times).
pub fn parse_tasks_per_node(text: &str) -> Result<Vec<u32>, HostsError> {
    parse_counts("SLURM_TASKS_PER_NODE", text)
}

/// Expand a Slurm node list (`SLURM_JOB_NODELIST` syntax), keeping duplicates and Slurm's order.
pub fn expand_nodelist(text: &str) -> Result<Vec<String>, HostsError> {
    super::parse::nodelist(Source {
        label: "SLURM_JOB_NODELIST",
        text,
    })
}

fn parse_counts(label: &str, text: &str) -> Result<Vec<u32>, HostsError> {
    let src = Source { label, text };
    let help = "expected counts such as `2(x3),1`";
    let mut out = Vec::new();
    let mut at = 0usize;
    for part in text.split(',') {
        let (num, rep) = match part.find('(') {
            Some(i) => {
                let inner = &part[i + 1..];
                let Some(r) = inner.strip_prefix('x').and_then(|r| r.strip_suffix(')')) else {
                    return Err(src.error(
                        at + i,
                        part.len() - i,
                        "malformed repeat, expected `(xR)`",
                        help,
                    ));
                };
                (&part[..i], Some((r, at + i + 2)))
            }
            None => (part, None),
        };
        let n = number(&src, num, at, help)?;
        let r = match rep {
            Some((r, rat)) => number(&src, r, rat, help)?,
            None => 1,
        };
        if out.len() as u64 + u64::from(r) > super::MAX_TOTAL_NAMES {
            return Err(src.error(at, part.len(), "more nodes than gsmrun accepts", help));
        }
        out.extend(std::iter::repeat_n(n, r as usize));
        at += part.len() + 1;
    }
    Ok(out)
}

fn number(src: &Source<'_>, s: &str, at: usize, help: &str) -> Result<u32, HostsError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(src.error(at, s.len(), &format!("`{s}` is not a count"), help));
    }
    match s.parse::<u32>() {
        Ok(0) => Err(src.error(at, s.len(), "a count of 0", help)),
        Ok(n) => Ok(n),
        Err(_) => Err(src.error(at, s.len(), &format!("`{s}` is too large"), help)),
    }
}

/// The Slurm job gsmrun runs in: `SLURM_JOB_ID` (or the older `SLURM_JOBID`), unless empty
/// (an empty one was taken for a job, "from Slurm job ", and chose `srun`).
pub fn job_id(var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    ["SLURM_JOB_ID", "SLURM_JOBID"]
        .into_iter()
        .filter_map(var)
        .map(|v| v.trim().to_string())
        .find(|v| !v.is_empty())
}

/// `None` outside Slurm; see the module doc.
pub(crate) fn from_environment(
    var: &dyn Fn(&str) -> Option<String>,
) -> Option<Result<(Vec<Host>, HostSource), HostsError>> {
    let job_id = job_id(var)?;
    Some(inside(&job_id, var))
}

fn inside(
    job_id: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<Host>, HostSource), HostsError> {
    let Some(list) = var("SLURM_JOB_NODELIST").or_else(|| var("SLURM_NODELIST")) else {
        return Err(plain(
            &format!("SLURM_JOB_ID={job_id} is set but SLURM_JOB_NODELIST is not"),
            "run gsmrun inside salloc/sbatch, or unset SLURM_JOB_ID, or pass -hostfile",
        ));
    };
    let names = expand_nodelist(&list)?;
    let (label, counts) = match var("SLURM_TASKS_PER_NODE") {
        Some(t) => ("SLURM_TASKS_PER_NODE", t),
        None => match var("SLURM_JOB_CPUS_PER_NODE") {
            Some(c) => ("SLURM_JOB_CPUS_PER_NODE", c),
            None => {
                return Err(plain(
                    "inside Slurm but neither SLURM_TASKS_PER_NODE nor SLURM_JOB_CPUS_PER_NODE is set",
                    "run gsmrun inside salloc/sbatch, or pass -hostfile",
                ));
            }
        },
    };
    let slots = parse_counts(label, &counts)?;
    if slots.len() != names.len() {
        return Err(plain(
            &format!(
                "{label}={counts} gives {} but SLURM_JOB_NODELIST={list} has {}",
                crate::plural(slots.len() as u64, "count"),
                crate::plural(names.len() as u64, "node")
            ),
            "the allocation's variables disagree; run inside an unmodified salloc/sbatch, or pass -hostfile",
        ));
    }
    let mut hosts: Vec<Host> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for (name, n) in names.into_iter().zip(slots) {
        match index.get(&name) {
            Some(&h) => {
                let host: &mut Host = &mut hosts[h];
                host.slots = host.slots.saturating_add(n);
            }
            None => {
                index.insert(name.clone(), hosts.len());
                hosts.push(Host {
                    name,
                    user: None,
                    slots: n,
                    max_slots: None,
                });
            }
        }
    }
    Ok((
        hosts,
        HostSource::Slurm {
            job_id: job_id.to_string(),
        },
    ))
}
