//! The job's variables: the job-wide values every rank gets (`GSM_JOB_ID`, `GSM_SIZE`, hosts,
//! fabric), the names the launcher exports (gsmrun's, the user's `-x`, the runtime settings of
//! gsmrun's environment), Open MPI's settings, and what `gsmrun` warns about them. Per-rank values
//! are the wrapper's ([`crate::env`] lists both); checks that refuse a plan are in `checks.rs`.

use super::environment::Environment;
use crate::Error;
use crate::cli::{Cli, Export, FabricChoice};
use crate::env;
use crate::launch::Backend;
use crate::placement::Placement;
use crate::segments;

/// The job-wide variables with their values, without the control address and key (added at
/// launch).
pub(super) fn job_env(
    cli: &Cli,
    placement: &Placement,
    backend: &Backend,
    job_id: &str,
    fabric: FabricChoice,
) -> Vec<(String, String)> {
    let mut job_env = vec![
        (env::job::JOB_ID.to_string(), job_id.to_string()),
        (
            env::job::SIZE.to_string(),
            placement.rank_host.len().to_string(),
        ),
    ];
    if let Some(t) = cli.threads_per_rank {
        job_env.push((env::job::THREADS.to_string(), t.to_string()));
    }
    job_env.push((env::job::FABRIC.to_string(), fabric.name().to_string()));
    if *backend != Backend::Srun {
        let (names, idx) = rank_hosts(placement);
        job_env.push((env::job::HOSTS.to_string(), names.join(",")));
        job_env.push((env::job::RANK_HOSTS.to_string(), idx.join(",")));
    }
    job_env
}

/// The names of the variables the launcher exports to every rank: those of `job_env`, the
/// control address and key, `GSM_LOG` and `RUST_LOG` when set, and the runtime settings of gsmrun's environment
/// that no `-x` names. A `-x` of a variable gsmrun sets is refused.
pub(super) fn job_vars(
    exports: &[Export],
    environment: &Environment,
    job_env: &[(String, String)],
) -> Result<Vec<String>, Error> {
    let mut job_vars: Vec<String> = job_env.iter().map(|(k, _)| k.clone()).collect();
    job_vars.push(env::job::CONTROL.to_string());
    job_vars.push(env::job::CONTROL_KEY.to_string());
    // A -x of a variable gsmrun or the wrapper sets for this job would reach the ranks beside, or
    // instead of, gsmrun's own value (the control key and job id among them): refused rather than
    // silently overridden. Those gsmrun leaves unset here (GSM_THREADS without -t, say) may be
    // exported.
    for export in exports {
        let ours = job_vars
            .iter()
            .map(String::as_str)
            .chain(env::RANK_VARS.iter().copied())
            .any(|v| v == export.name && v != env::input::LOG);
        if ours {
            let hint = match export.name.as_str() {
                env::job::THREADS => "use -t N alone",
                env::job::FABRIC => "use --fabric",
                _ => "remove this -x",
            };
            return Err(Error::Usage(format!(
                "-x {export}: gsmrun sets {} itself for every rank of this job; {hint}",
                export.name
            )));
        }
    }
    if environment.var(env::input::LOG).is_some() {
        job_vars.push(env::input::LOG.to_string());
    }
    let exported = || exports.iter().map(|e| e.name.as_str());
    // Launchers start remote ranks without gsmrun's environment: RUST_LOG reaches them only so.
    if environment.var(env::input::RUST_LOG).is_some()
        && !exported().any(|x| x == env::input::RUST_LOG)
    {
        job_vars.push(env::input::RUST_LOG.to_string());
    }
    let taken: Vec<&str> = job_vars
        .iter()
        .map(String::as_str)
        .chain(exported())
        .collect();
    let settings = env::passed_settings(environment.names(), &taken);
    job_vars.extend(settings);

    Ok(job_vars)
}

/// Open MPI's settings and root permission added to the launcher's environment.
pub(super) fn mpi_env(
    backend: &Backend,
    environment: &Environment,
    job_id: &str,
) -> Vec<(String, String)> {
    let var = |k: &str| environment.var(k);
    let mut mpi_env = Vec::new();
    if backend.uses_open_mpi_settings() {
        for (k, v) in env::OPEN_MPI_DEFAULTS {
            if var(k).is_none() {
                mpi_env.push((k.to_string(), v.to_string()));
            }
        }
        // Open MPI's shared-memory segments go into a directory of this job's, which the wrappers
        // create and gsmrun removes afterwards (see `segments`).
        if var(segments::MPI_DIR_VAR).is_none() {
            if let Some(d) = segments::mpi_dir(job_id) {
                mpi_env.push((segments::MPI_DIR_VAR.to_string(), d.display().to_string()));
            }
        }
        // Only when the user has not allowed it already: then there is nothing to warn about.
        if crate::sys::effective_uid() == 0
            && env::OPEN_MPI_ROOT
                .iter()
                .any(|(k, v)| var(k).as_deref() != Some(*v))
        {
            for (k, v) in env::OPEN_MPI_ROOT {
                mpi_env.push((k.to_string(), v.to_string()));
            }
        }
    }

    mpi_env
}

/// The warning of `--launcher srun` outside a Slurm allocation, if it is one.
pub(super) fn srun_warning(backend: &Backend, in_slurm: bool) -> Vec<String> {
    let mut warnings = Vec::new();
    if *backend == Backend::Srun && !in_slurm {
        warnings.push(
            "gsmrun: warning: --launcher srun outside a Slurm allocation: srun makes one of its \
             own and places the ranks on its nodes, not as the placement gsmrun shows (this \
             machine's); run gsmrun inside salloc or sbatch to see where they go"
                .to_string(),
        );
    }
    warnings
}

/// `GSM_HOSTS` and `GSM_RANK_HOSTS` of `placement`: the names of the hosts that got ranks, in
/// host order, and for each rank the index of its host among them. Hosts without a rank are left
/// out: listed, a hostfile of 15 000 hosts made `GSM_HOSTS` too long for a job of two ranks.
fn rank_hosts(placement: &Placement) -> (Vec<&str>, Vec<String>) {
    let mut used = vec![false; placement.hosts.len()];
    for &h in &placement.rank_host {
        used[h] = true;
    }
    let mut names = Vec::new();
    let mut at = vec![0usize; placement.hosts.len()];
    for (h, host) in placement.hosts.iter().enumerate() {
        if used[h] {
            at[h] = names.len();
            names.push(host.name.as_str());
        }
    }
    let idx = (placement.rank_host.iter())
        .map(|&h| at[h].to_string())
        .collect();
    (names, idx)
}
