//! The launch plan: raw arguments ([`crate::cli::Cli`]), gsmrun's environment
//! ([`Environment`]) and the hosts they name turned into everything decided before launching
//! ([`Prepared`]): the placement, the backend and its argv, the job's variables, how the job is
//! watched, and what `gsmrun` says first. Each step of [`prepare`] has one job and refuses what
//! it can see is wrong (exit status 2) before anything starts; the only process spawned is
//! `mpirun --version` (unless `GSM_MPI_FLAVOUR` is set). `-x` items are read once, in
//! `exports.rs`, and every variable through the [`Environment`] given: after `prepare`, neither
//! the raw arguments nor the environment are read again. This module starts no job
//! ([`crate::supervise`] does) and builds no command line itself ([`crate::launch`] does).

mod checks;
mod describe;
mod environment;
mod exports;
mod place;
mod vars;

pub use checks::other_step_task;
pub use describe::{describe, placement_table};
pub use environment::Environment;
pub(crate) use place::read_hostfile;
pub use place::resolve_hosts;

use crate::Error;
use crate::cli::{Cli, FabricChoice};
use crate::hosts::HostSource;
use crate::jobdir;
use crate::launch::{self, Backend, JobSpec, Plan};
use crate::placement::Placement;
use crate::supervise;
use std::path::PathBuf;

/// Everything decided before launching: printed by --dry-run/-v, run otherwise.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub placement: Placement,
    pub source: HostSource,
    /// The fabric the ranks are told to use (`GSM_FABRIC`).
    pub fabric: FabricChoice,
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
    /// Whether the plan is printed, and whether it runs.
    pub mode: Mode,
    /// `-t`: worker threads per rank (`None`: the runtime chooses), counted in the descriptors
    /// the job needs.
    pub threads_per_rank: Option<u32>,
    /// How the job is watched once it runs.
    pub watch: Watch,
}

/// What `gsmrun` does with a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Run it.
    Run,
    /// Print it on stderr, then run it (`-v`).
    Verbose,
    /// Print it on stdout and start nothing (`--dry-run`, which wins over `-v`).
    DryRun,
}

/// How the supervisor watches the job: the options' values with their defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Watch {
    /// `--tag-output`.
    pub tag_output: bool,
    /// `--timeout`.
    pub timeout: Option<f64>,
    /// `--start-timeout`, or [`supervise::START_TIMEOUT`] unless the launcher is `srun`.
    pub start_timeout: Option<f64>,
    /// `--stop-timeout`, or [`supervise::STOP_TIMEOUT`]; `None` for `0` (never).
    pub stop_timeout: Option<f64>,
    /// `--lost-timeout`, or [`supervise::LOST_TIMEOUT`].
    pub lost_timeout: f64,
    /// The Slurm job gsmrun runs in, when Open MPI's `mpirun` is to place the ranks on the
    /// hosts of `-H` or `--hostfile`: named if the launcher fails.
    pub slurm_job_with_hosts: Option<String>,
}

/// Resolve hosts, place ranks, choose the backend and build the plan, reading gsmrun's
/// environment from `environment` only. Spawns only `mpirun --version` (unless
/// GSM_MPI_FLAVOUR is set).
pub fn prepare(cli: &Cli, environment: &Environment) -> Result<Prepared, Error> {
    let var = |k: &str| environment.var(k);
    let exports = exports::parse(&cli.export)?;
    let fabric = checks::fabric(cli, environment)?;
    checks::threads(cli, &exports, environment)?;
    exports::check_settings(&exports, environment)?;
    let (hosts, source) = resolve_hosts(cli, &var)?;
    let placement = place::place(cli, &hosts, &source)?;
    let slurm_job = crate::hosts::slurm::job_id(&var);
    let backend = checks::backend(cli, environment, slurm_job.is_some())?;
    let job_id = new_job_id();
    let tmpdir = environment.temp_dir().join(jobdir::dir_name(&job_id));
    let job_env = vars::job_env(cli, &placement, &backend, &job_id, fabric);
    let job_vars = vars::job_vars(&exports, environment, &job_env)?;
    let mpi_env = vars::mpi_env(&backend, environment, &job_id);
    let mut warnings = vars::srun_warning(&backend, slurm_job.is_some());
    let exports = exports::passed(&exports, environment, &mut warnings);
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
        in_srun_step: checks::in_srun_step(environment),
    };
    let plan = launch::build_plan(&backend, &spec);
    checks::string_lengths(&plan, job_env.iter().chain(&plan.env).chain(&mpi_env))?;
    let watch = watch(cli, &backend, slurm_job);
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
        mode: match (cli.dry_run, cli.verbose) {
            (true, _) => Mode::DryRun,
            (false, true) => Mode::Verbose,
            (false, false) => Mode::Run,
        },
        threads_per_rank: cli.threads_per_rank,
        watch,
    })
}

/// The supervisor's options of `cli` for a job started by `backend` inside Slurm job
/// `slurm_job`, if any.
fn watch(cli: &Cli, backend: &Backend, slurm_job: Option<String>) -> Watch {
    let explicit_hosts = cli.hostfile.is_some() || cli.host.is_some();
    Watch {
        tag_output: cli.tag_output,
        timeout: cli.timeout,
        start_timeout: cli.start_timeout.or(match backend {
            Backend::Srun => None,
            _ => Some(supervise::START_TIMEOUT),
        }),
        stop_timeout: match cli.stop_timeout {
            Some(t) if t.is_infinite() => None,
            Some(t) => Some(t),
            None => Some(supervise::STOP_TIMEOUT),
        },
        lost_timeout: cli.lost_timeout.unwrap_or(supervise::LOST_TIMEOUT),
        slurm_job_with_hosts: slurm_job
            .filter(|_| explicit_hosts && matches!(backend, Backend::OpenMpi { .. })),
    }
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

#[cfg(test)]
mod tests;
