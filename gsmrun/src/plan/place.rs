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
        let bytes = read_hostfile(path)?;
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

/// The bytes of hostfile `path`, refused before they are read whole when it is not a regular file
/// (`/dev/zero`, a FIFO: reading one grew without bound or blocked) or is larger than
/// [`hosts::MAX_HOSTFILE_BYTES`]; a file growing while it is read stops at that limit too.
pub(crate) fn read_hostfile(path: &std::path::Path) -> Result<Vec<u8>, Error> {
    use std::io::Read as _;
    let unreadable = |source| Error::ReadHostfile {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        use std::os::unix::fs::FileTypeExt as _;
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(Error::Usage(format!(
            "hostfile {} is {what}, not a regular file; give a file of host lines \
             (`node1 slots=4`)",
            crate::shown(&path.display().to_string())
        )));
    }
    let too_big = |size: u64| {
        Error::Usage(format!(
            "hostfile {} has {size} bytes or more, over the {} MiB a hostfile may have; give a \
             file of host lines (`node1 slots=4`), a Slurm range (`node[1-4096]`) for many hosts",
            crate::shown(&path.display().to_string()),
            hosts::MAX_HOSTFILE_BYTES >> 20
        ))
    };
    if meta.len() > hosts::MAX_HOSTFILE_BYTES {
        return Err(too_big(meta.len()));
    }
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    file.take(hosts::MAX_HOSTFILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > hosts::MAX_HOSTFILE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
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
