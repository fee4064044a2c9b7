//! The environment variables of a Gossamer job: those `gsmrun` passes to every rank (`GSM_*`),
//! those the rank wrapper adds for its own rank, the MPI settings `gsmrun` supplies unless the
//! user set them, and the few variables `gsmrun` itself reads.
//!
//! The `GSM_*` names, their values and their docs are the settings table of the `gsm-contract`
//! crate (`docs/settings.md` is generated from it), which the runtime reads too; this module
//! groups them by who sets them and computes their values. Who sets them is [`crate::launch`]
//! (job-wide values, given to the launcher's environment and exported with `-x`/`-genv`) and
//! [`crate::wrapper`] (per-rank values, set just before the program starts).

use gsm_contract::table;

/// Variables `gsmrun` passes to every rank (job-wide values).
pub mod job {
    use super::table;
    /// `GSM_JOB_ID`: a name unique to this job (`gsm-<pid of gsmrun>-<hex>`), after which the
    /// runtime names the job's segments ([`crate::segments`]). Always set.
    pub const JOB_ID: &str = table::JOB_ID.name;
    /// `GSM_THREADS`: worker threads per rank, from `-t/--threads-per-rank`. Not set when `-t` is
    /// not given; the runtime then chooses.
    pub const THREADS: &str = table::THREADS.name;
    /// Most worker threads per rank: the runtime refuses a larger `GSM_THREADS` on every rank,
    /// so `gsmrun` refuses a larger `-t` before starting anything.
    pub const MAX_THREADS: u32 = gsm_contract::contract::MAX_WORKERS as u32;
    /// `GSM_FABRIC`, from `--fabric`. Default `auto`.
    pub const FABRIC: &str = table::FABRIC.name;
    /// `GSM_CONTROL`: `address:port` where `gsmrun` listens for the rank wrappers' reports
    /// (`127.0.0.1:…` when every host is this machine, else the local address that routes to the
    /// first remote host).
    pub const CONTROL: &str = table::CONTROL.name;
    /// `GSM_CONTROL_KEY`: the secret a wrapper presents on the control connection.
    pub const CONTROL_KEY: &str = table::CONTROL_KEY.name;
    /// `GSM_HOSTS`: the hosts that got ranks. Unset under `srun`, where Slurm places the ranks.
    pub const HOSTS: &str = table::HOSTS.name;
    /// `GSM_RANK_HOSTS`: each rank's index into `GSM_HOSTS`. Unset under `srun`.
    pub const RANK_HOSTS: &str = table::RANK_HOSTS.name;
    /// `GSM_SIZE`: number of ranks in the job.
    pub const SIZE: &str = table::SIZE.name;
}

/// Variables the rank wrapper sets for its own rank, just before starting the program.
pub mod rank {
    use super::table;
    /// `GSM_RANK`: this rank's number, read from the launcher (`OMPI_COMM_WORLD_RANK`,
    /// `PMIX_RANK`, `PMI_RANK` or `SLURM_PROCID`, first one set).
    pub const RANK: &str = table::RANK.name;
    /// `GSM_HOST_ADDR`: this rank's host as the placement names it. Under `srun`, this machine's
    /// hostname.
    pub const HOST_ADDR: &str = table::HOST_ADDR.name;
    /// `GSM_LOCAL_RANK`: index of this rank among the ranks on its host (0-based).
    pub const LOCAL_RANK: &str = table::LOCAL_RANK.name;
    /// `GSM_LOCAL_SIZE`: number of ranks on this rank's host.
    pub const LOCAL_SIZE: &str = table::LOCAL_SIZE.name;
    /// `GSM_STATE_FD`: `FD:INODE` of the program's end of the stage channel (see
    /// [`crate::progress`]). Set only when the wrapper reports to `gsmrun`.
    pub const STATE_FD: &str = table::STATE_FD.name;
}

/// Variables `gsmrun` reads itself.
pub mod input {
    use super::table;
    /// `GSM_LOG`: `tracing` filter for gsmrun's and the wrapper's logs on stderr (`debug`,
    /// `gsmrun=trace`, …). Off when unset. Passed on to the ranks unchanged.
    pub const LOG: &str = table::LOG.name;
    /// `RUST_LOG`: the runtime's other log filter (it reads `GSM_LOG` first). gsmrun does not
    /// read it; passed on to the ranks unchanged when set, as `GSM_LOG` is.
    pub const RUST_LOG: &str = "RUST_LOG";
    /// `GSM_MPI_FLAVOUR`: `openmpi` or `hydra` skips asking `mpirun --version` which MPI is
    /// installed (for `--dry-run` on a machine without that MPI, and for tests).
    pub const MPI_FLAVOUR: &str = table::MPI_FLAVOUR.name;
}

/// Open MPI settings `gsmrun` adds to the launcher's environment unless the user already set the
/// variable. MPI only bootstraps a Gossamer job, so there is no point probing every network
/// stack at start-up: `OMPI_MCA_pml=ob1` cuts the job's start-up (see docs/performance.md); the
/// BTLs are left alone, so that a user's own MPI traffic may use any of them.
///
/// `OMPI_MCA_orte_keep_fqdn_hostnames=1`: Open MPI otherwise cuts a hostfile's `node01.cluster`
/// down to `node01` before starting its daemon there (seen here: `ssh: Could not resolve hostname
/// nohost` for `nohost.invalid`); a host is reached by exactly the name the hostfile gives.
pub const OPEN_MPI_DEFAULTS: &[(&str, &str)] = &[
    ("OMPI_MCA_pml", "ob1"),
    ("OMPI_MCA_orte_keep_fqdn_hostnames", "1"),
];

/// Variables that let Open MPI run as root. `gsmrun` sets them (with a warning) when run as root.
pub const OPEN_MPI_ROOT: &[(&str, &str)] = &[
    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
];

/// Longest single argument or environment string (`NAME=value`) Linux passes to a program,
/// counting its terminating NUL: `MAX_ARG_STRLEN`, 32 pages of 4 KiB. `execve` fails with "Argument
/// list too long" beyond it, only once the launcher is being started, so `gsmrun` checks first.
pub const MAX_STRING: usize = 32 * 4096;

/// Every variable of [`job`] that may be exported to the ranks, in the order they are exported.
pub const JOB_VARS: &[&str] = &[
    job::JOB_ID,
    job::SIZE,
    job::THREADS,
    job::FABRIC,
    job::CONTROL,
    job::CONTROL_KEY,
    job::HOSTS,
    job::RANK_HOSTS,
    input::LOG,
];

/// Every variable of [`rank`], which the wrapper sets for its rank.
pub const RANK_VARS: &[&str] = &[
    rank::RANK,
    rank::HOST_ADDR,
    rank::LOCAL_RANK,
    rank::LOCAL_SIZE,
    rank::STATE_FD,
];

/// The runtime settings of `gsmrun`'s environment that it passes on to every rank, in name
/// order: each `GSM_*` variable among `names` (`GSM_SLOT_SIZE`, `GSM_PIN`, `GSM_COLL_*`, …) that
/// is not [`taken`](self): set by `gsmrun` for the job, by the wrapper for its rank, read by
/// `gsmrun` alone ([`input::MPI_FLAVOUR`]) or exported with `-x`, whose value wins.
///
/// `srun` passes its whole environment to the tasks, but `mpirun` and `mpiexec` start the ranks on
/// other hosts from a login shell's: there a setting reached only the ranks on the launching host,
/// and a job whose ranks disagree on one (`GSM_SLOT_SIZE`, say) fails at start-up. Passing every
/// `GSM_*` variable, rather than a list of the runtime's, also covers settings added later.
pub fn passed_settings<'a>(
    names: impl IntoIterator<Item = &'a str>,
    taken: &[&str],
) -> Vec<String> {
    let mut passed: Vec<String> = names
        .into_iter()
        .filter(|n| n.starts_with("GSM_") && n.len() > 4)
        .filter(|n| !taken.contains(n) && !RANK_VARS.contains(n) && *n != input::MPI_FLAVOUR)
        .map(str::to_string)
        .collect();
    passed.sort();
    passed.dedup();
    passed
}

/// Parse `GSM_RANK_HOSTS` and `GSM_HOSTS` back: the host of `rank`, its index among the ranks on
/// that host, and how many ranks that host has.
pub fn rank_location(hosts: &str, rank_hosts: &str, rank: usize) -> Option<(String, usize, usize)> {
    let hosts: Vec<&str> = hosts.split(',').collect();
    let idx: Vec<usize> = rank_hosts
        .split(',')
        .map(|s| s.parse().ok())
        .collect::<Option<_>>()?;
    let mine = *idx.get(rank)?;
    let host = hosts.get(mine)?.to_string();
    let local_rank = idx[..rank].iter().filter(|&&h| h == mine).count();
    let local_size = idx.iter().filter(|&&h| h == mine).count();
    Some((host, local_rank, local_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gsm_setting_not_taken_is_passed_on() {
        let env = [
            "PATH",
            "GSM_SLOT_SIZE",
            "GSM_COLL_PIECE",
            "GSM_JOB_ID",
            "GSM_RANK",
            "GSM_MPI_FLAVOUR",
            "GSM_PIN",
            "GSM_",
            "XGSM_PIN",
        ];
        assert_eq!(
            passed_settings(env, &["GSM_JOB_ID", "GSM_PIN"]),
            ["GSM_COLL_PIECE", "GSM_SLOT_SIZE"]
        );
    }

    #[test]
    fn rank_location_counts_ranks_on_the_same_host() {
        assert_eq!(
            rank_location("a,b", "0,1,0,1,0", 4),
            Some(("a".into(), 2, 3))
        );
        assert_eq!(
            rank_location("a,b", "0,1,0,1,0", 3),
            Some(("b".into(), 1, 2))
        );
        assert_eq!(rank_location("a", "0", 1), None);
        assert_eq!(rank_location("a", "0,x", 0), None);
    }
}
