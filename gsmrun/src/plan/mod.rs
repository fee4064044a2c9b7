//! The launch plan: raw arguments ([`crate::cli::Cli`]) and the hosts they name turned into
//! everything decided before launching ([`Prepared`]): the placement, the backend and its argv,
//! the job's variables, and what `gsmrun` says first. Each step of [`prepare`] has one job and
//! refuses what it can see is wrong (exit status 2) before anything starts; the only process
//! spawned is `mpirun --version` (unless `GSM_MPI_FLAVOUR` is set). This module starts no job
//! ([`crate::supervise`] does) and builds no command line itself ([`crate::launch`] does).

mod checks;
mod describe;
mod place;
mod vars;

pub use describe::{describe, placement_table};
pub use place::resolve_hosts;

use crate::Error;
use crate::cli::{Cli, Fabric};
use crate::hosts::HostSource;
use crate::jobdir;
use crate::launch::{self, JobSpec, Plan};
use crate::placement::Placement;
use std::path::PathBuf;

/// Everything decided before launching: printed by --dry-run/-v, run otherwise.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub placement: Placement,
    pub source: HostSource,
    /// The fabric the ranks are told to use (`GSM_FABRIC`).
    pub fabric: Fabric,
    pub spec: JobSpec,
    pub plan: Plan,
    /// Job-wide variables (values), without the control address and key.
    pub job_env: Vec<(String, String)>,
    /// Open MPI settings and root permission added to the launcher's environment.
    pub mpi_env: Vec<(String, String)>,
    pub job_id: String,
    pub tmpdir: PathBuf,
    /// What `gsmrun` says before it starts the job (on stderr, also for `--dry-run`).
    pub warnings: Vec<String>,
}

/// Resolve hosts, place ranks, choose the backend and build the plan. Spawns only
/// `mpirun --version` (unless GSM_MPI_FLAVOUR is set).
pub fn prepare(cli: &Cli, var: &dyn Fn(&str) -> Option<String>) -> Result<Prepared, Error> {
    checks::exports_are_variable_names(cli)?;
    let fabric = checks::fabric(cli, var)?;
    checks::threads(cli, var)?;
    let (hosts, source) = resolve_hosts(cli, var)?;
    let placement = place::place(cli, &hosts, &source)?;
    let in_slurm = crate::hosts::slurm::job_id(var).is_some();
    let backend = checks::backend(cli, var, in_slurm)?;
    let job_id = new_job_id();
    let tmpdir = std::env::temp_dir().join(jobdir::dir_name(&job_id));
    let job_env = vars::job_env(cli, &placement, &backend, &job_id, fabric);
    let job_vars = vars::job_vars(cli, var, &job_env)?;
    let mpi_env = vars::mpi_env(&backend, var, &job_id);
    let mut warnings = vars::srun_warning(&backend, in_slurm);
    let exports = vars::exports(cli, var, &mut warnings);
    let wrapper = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "gsmrun".to_string());
    let spec = JobSpec {
        placement: placement.clone(),
        map_by: cli.map_by.into(),
        oversubscribe: cli.oversubscribe,
        exports,
        launch_agent: cli.launch_agent.clone(),
        wrapper,
        keep_aslr: cli.keep_aslr,
        program: cli.program.clone(),
        args: cli.args.clone(),
        hostfile_path: tmpdir.join("hostfile"),
        job_vars,
        in_srun_step: checks::in_srun_step(var),
    };
    let plan = launch::build_plan(&backend, &spec);
    checks::string_lengths(&plan, job_env.iter().chain(&plan.env).chain(&mpi_env))?;
    Ok(Prepared {
        placement,
        source,
        fabric,
        spec,
        plan,
        job_env,
        mpi_env,
        job_id,
        tmpdir,
        warnings,
    })
}

/// A name unique to this job. Uniqueness is all it needs, so without randomness the clock does.
fn new_job_id() -> String {
    let tail = crate::random_hex(4).unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!("{nanos:08x}")
    });
    format!("gsm-{}-{tail}", std::process::id())
}
