//! Where the job runs: the hosts (`--hostfile`, `-H`, a Slurm or PBS allocation, or this
//! machine) and which rank runs on which of them. Parsing host lists is [`crate::hosts`]'s job and
//! the placement rule [`crate::placement`]'s; this step picks the source and names it in errors.

use crate::Error;
use crate::cli::Cli;
use crate::hosts::{self, Host, HostSource};
use crate::local::plainly_this_machine;
use crate::placement::{self, Placement};

/// The hosts the job may use and where they came from: --hostfile, else -H, else a Slurm or PBS
/// allocation, else this machine with one slot per usable CPU.
pub fn resolve_hosts(
    cli: &Cli,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<Host>, HostSource), Error> {
    if cli.hostfile.is_some() && cli.host.is_some() {
        return Err(Error::Usage(
            "--hostfile and -H/--host both given; use one of them".to_string(),
        ));
    }
    if let Some(path) = &cli.hostfile {
        let bytes = std::fs::read(path).map_err(|source| Error::ReadHostfile {
            path: path.clone(),
            source,
        })?;
        let found = hosts::parse_hostfile_bytes(path, &bytes)?;
        if found.is_empty() {
            // Said here, where the file is known; placement would only say "no hosts".
            return Err(Error::Usage(format!(
                "hostfile {} names no host; add lines like `node1 slots=4`",
                path.display()
            )));
        }
        return Ok((found, HostSource::Hostfile(path.clone())));
    }
    if let Some(h) = &cli.host {
        return Ok((hosts::parse_host_option(h)?, HostSource::HostOption));
    }
    if let Some(found) = hosts::from_environment(var) {
        return Ok(found?);
    }
    let local = Host {
        name: "localhost".into(),
        user: None,
        slots: crate::sys::usable_cpus(),
        max_slots: None,
    };
    Ok((vec![local], HostSource::Localhost))
}

/// The ranks placed on `hosts` as the options say, refused when they do not fit (naming where
/// the hosts came from) or when this machine is named twice.
pub(super) fn place(cli: &Cli, hosts: &[Host], source: &HostSource) -> Result<Placement, Error> {
    let placement =
        placement::place(hosts, cli.np, cli.map_by.into(), cli.oversubscribe).map_err(|error| {
            Error::Placement {
                error,
                from: source_name(source),
            }
        })?;
    one_name_for_this_machine(&placement, &crate::sys::hostname())?;
    Ok(placement)
}

/// Refuses a placement that uses this machine under two names (`localhost` and its hostname, say):
/// the MPI launcher takes them for two hosts, starts a second daemon here and fails with an
/// internal error (Open MPI 4.1: "ORTE ... FORCE-TERMINATE") that points nowhere near the cause.
fn one_name_for_this_machine(placement: &Placement, me: &str) -> Result<(), Error> {
    let names: Vec<&str> = (0..placement.hosts.len())
        .filter(|&h| placement.ranks_on(h).next().is_some())
        .map(|h| placement.hosts[h].name.as_str())
        .filter(|n| plainly_this_machine(n, me))
        .collect();
    if let [first, second, ..] = names[..] {
        return Err(Error::Usage(format!(
            "the hosts name this machine twice, as `{first}` and `{second}`; the MPI launcher \
             would take them for two hosts and fail. Name it once, with the slots of both \
             (`{first}:N` or `{first} slots=N`)"
        )));
    }
    Ok(())
}

/// Where the hosts came from: `hostfile F`, `-H`, `Slurm job N`, `PBS node file F`, `this
/// machine`.
pub(super) fn source_name(source: &HostSource) -> String {
    match source {
        HostSource::Hostfile(path) => format!("hostfile {}", path.display()),
        HostSource::HostOption => "-H".to_string(),
        HostSource::Slurm { job_id } => format!("Slurm job {job_id}"),
        HostSource::Pbs(path) => format!("PBS node file {}", path.display()),
        HostSource::Localhost => "this machine".to_string(),
    }
}
