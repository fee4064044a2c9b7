//! The checks of a launch plan that refuse, before anything starts, what every rank or the
//! launcher would refuse after it: the fabric, worker-thread counts, a launcher that cannot use
//! the hosts given, and strings longer than the kernel passes (`-x` names are refused where they
//! are read, in `exports.rs`). Each check only says yes or no (with the message); building the
//! plan is the other steps' business.

use super::environment::Environment;
use crate::Error;
use crate::cli::{Cli, Export, FabricChoice};
use crate::env;
use crate::launch::{self, Backend, Plan};

/// The fabric of the job: `--fabric`, else `GSM_FABRIC` of gsmrun's environment (which the ranks
/// would otherwise have seen only on the launching host, and there overridden), else `auto`.
/// Every value is passed on: whether the program has the fabric (`ofi`, `verbs` are cargo
/// features of its runtime) and whether the hosts have the device, only its ranks can tell, and
/// each stops at start with one line saying what is missing.
pub(super) fn fabric(cli: &Cli, environment: &Environment) -> Result<FabricChoice, Error> {
    if let Some(f) = cli.fabric {
        return Ok(f);
    }
    let Some(v) = environment.var(env::job::FABRIC) else {
        return Ok(FabricChoice::Auto);
    };
    FabricChoice::parse(&v).ok_or_else(|| {
        Error::Usage(format!(
            "GSM_FABRIC={v} in gsmrun's environment: expected {} (or pass --fabric, which takes \
             precedence)",
            FabricChoice::listed(FabricChoice::all())
        ))
    })
}

/// The worker threads per rank are ones the runtime takes: `-t`'s, or else `GSM_THREADS` as the
/// ranks would get it.
pub(super) fn threads(
    cli: &Cli,
    exports: &[Export],
    environment: &Environment,
) -> Result<(), Error> {
    // GSM_THREADS reaches every rank when -t is not given, from `-x GSM_THREADS=N` or else from
    // gsmrun's environment (see `env::passed_settings`): a value the runtime would refuse is
    // refused here, before the launch, as -t's is, instead of by every rank after it.
    if cli.threads_per_rank.is_none() {
        let given = exports
            .iter()
            .filter(|e| e.name == env::job::THREADS)
            .find_map(|e| e.value.clone());
        let from_x = given.is_some();
        // A value that is not UTF-8 is passed on too, and refused by the runtime.
        let value = given.or_else(|| {
            environment
                .var_os(env::job::THREADS)
                .map(|v| v.to_string_lossy().into_owned())
        });
        if let Some(v) = value.filter(|v| !v.trim().is_empty()) {
            let t = v.trim();
            let in_range = t.bytes().all(|b| b.is_ascii_digit())
                && t.parse::<u32>()
                    .is_ok_and(|n| (1..=env::job::MAX_THREADS).contains(&n));
            if !in_range {
                let what = if from_x {
                    format!("-x {}={v}", env::job::THREADS)
                } else {
                    format!("{}={v} in gsmrun's environment", env::job::THREADS)
                };
                return Err(Error::Usage(format!(
                    "{what}: every rank would refuse it; give a whole number of worker threads \
                     from 1 to {} (or pass -t N, which takes precedence)",
                    env::job::MAX_THREADS
                )));
            }
        }
    }
    if cli.threads_per_rank == Some(0) {
        return Err(Error::Usage(
            "-t 0: a rank needs at least one worker thread".into(),
        ));
    }
    if let Some(t) = cli.threads_per_rank.filter(|&t| t > env::job::MAX_THREADS) {
        return Err(Error::Usage(format!(
            "-t {t}: the runtime runs at most {} worker threads per rank (GSM_THREADS), so every \
             rank would fail; give 1 to {}",
            env::job::MAX_THREADS,
            env::job::MAX_THREADS
        )));
    }
    Ok(())
}

/// The launcher that starts the ranks ([`launch::choose_backend`]), refused when it cannot place
/// them on the hosts given.
pub(super) fn backend(
    cli: &Cli,
    environment: &Environment,
    in_slurm: bool,
) -> Result<Backend, Error> {
    let explicit = cli.hostfile.is_some() || cli.host.is_some();
    let forced = environment.var(env::input::MPI_FLAVOUR);
    let backend = launch::choose_backend(
        cli.launcher,
        in_slurm,
        explicit,
        forced.as_deref(),
        &launch::detect::detect,
    )?;
    if backend == Backend::Srun && explicit {
        return Err(Error::Usage(
            "--launcher srun places the ranks on the Slurm allocation's nodes itself, so -H and \
             --hostfile cannot choose them (they were ignored): drop them, or start the ranks \
             on those hosts with --launcher mpirun"
                .into(),
        ));
    }
    Ok(backend)
}

/// Whether gsmrun runs as a task of a Slurm job step (`srun -n1 gsmrun …` in an allocation):
/// `SLURM_STEP_ID` names a step, not the batch script's (`4294967294`, or unset) nor the
/// extern step's. Its own `srun` then waits for ever for the CPUs that step holds ("step creation
/// temporarily disabled … Requested nodes are busy") unless it may share them (`--overlap`).
pub(super) fn in_srun_step(environment: &Environment) -> bool {
    environment
        .var("SLURM_STEP_ID")
        .or_else(|| environment.var("SLURM_STEPID"))
        .and_then(|s| s.trim().parse::<u64>().ok())
        .is_some_and(|id| id < 0xffff_fff0)
}

/// This gsmrun's task number when it is one of several tasks of a Slurm job step and not the
/// first (`srun -N 2 -n 4 gsmrun app`: `SLURM_PROCID` 1 to 3 of `SLURM_STEP_NUM_TASKS` 4). Task 0
/// alone launches the job over the allocation's slots; each other task would start a whole job
/// of its own, so it ends at once with success instead.
pub fn other_step_task(environment: &Environment) -> Option<u64> {
    if !in_srun_step(environment) {
        return None;
    }
    let number = |name: &str| environment.var(name)?.trim().parse::<u64>().ok();
    let tasks = number("SLURM_STEP_NUM_TASKS").or_else(|| number("SLURM_NTASKS"))?;
    let task = number("SLURM_PROCID")?;
    (tasks > 1 && task > 0).then_some(task)
}

/// Refuse a launch whose argv or environment has a string over [`env::MAX_STRING`]: the kernel
/// would refuse to start the launcher (`GSM_RANK_HOSTS` grows with the ranks, `-x` values and
/// program arguments with the user).
pub(super) fn string_lengths<'a>(
    plan: &Plan,
    vars: impl Iterator<Item = &'a (String, String)>,
) -> Result<(), Error> {
    let too_long = |what: String, len: usize| {
        Err(Error::Usage(format!(
            "{what} would be {len} bytes, over the {} bytes Linux allows in one argument or \
             environment string (MAX_ARG_STRLEN), so the launcher could not start; use fewer \
             ranks or hosts, or shorter values",
            env::MAX_STRING
        )))
    };
    for (k, v) in vars {
        let len = k.len() + 1 + v.len() + 1;
        if len > env::MAX_STRING {
            return too_long(format!("the variable {k}"), len);
        }
    }
    for a in &plan.argv {
        if a.len() + 1 > env::MAX_STRING {
            let head: String = a.to_string_lossy().chars().take(20).collect();
            return too_long(format!("the argument `{head}…`"), a.len() + 1);
        }
    }
    Ok(())
}
