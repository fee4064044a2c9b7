//! The per-rank variables the wrapper gives its program: `GSM_RANK`, and where the rank is
//! (`GSM_HOST_ADDR`, `GSM_LOCAL_RANK`, `GSM_LOCAL_SIZE`) from the job's host list or, under
//! `srun`, from Slurm's step layout; and this rank's number from whichever launcher started it.
//! Job-wide variables come from `gsmrun` through the launcher ([`crate::plan`]).

use crate::env;
use std::process::Command;

/// This rank's number, from whichever launcher started us.
pub(super) fn from_env() -> Option<String> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
}

/// Read by libinfinipath (loaded with libfabric's PSM provider) before `main`.
const PSM_NO_BACKTRACE: &str = "IPATH_NO_BACKTRACE";

/// Sets the per-rank variables of `rank` (when the launcher said which) on `cmd`, and removes
/// the control address and key, which are the wrapper's alone.
pub(super) fn set_vars(cmd: &mut Command, rank: Option<&str>, host: &str) {
    cmd.env_remove(env::job::CONTROL)
        .env_remove(env::job::CONTROL_KEY);
    // libfabric's PSM providers load libinfinipath, whose constructor takes SIGSEGV, SIGBUS and
    // SIGABRT (exiting 1) unless this is set: a crash would no longer be reported as one.
    if std::env::var_os(PSM_NO_BACKTRACE).is_none() {
        cmd.env(PSM_NO_BACKTRACE, "1");
    }
    let Some(r) = rank else {
        return;
    };
    cmd.env(env::rank::RANK, r);
    let located = match (
        std::env::var(env::job::HOSTS),
        std::env::var(env::job::RANK_HOSTS),
        r.parse::<usize>(),
    ) {
        (Ok(h), Ok(rh), Ok(r)) => env::rank_location(&h, &rh, r),
        _ => None,
    };
    match located {
        Some((addr, local_rank, local_size)) => {
            cmd.env(env::rank::HOST_ADDR, addr)
                .env(env::rank::LOCAL_RANK, local_rank.to_string())
                .env(env::rank::LOCAL_SIZE, local_size.to_string());
        }
        None => {
            cmd.env(env::rank::HOST_ADDR, host);
            let var = |k: &str| std::env::var(k).ok();
            if let Some((l, n)) = slurm_local(&var) {
                cmd.env(env::rank::LOCAL_RANK, l.to_string())
                    .env(env::rank::LOCAL_SIZE, n.to_string());
            }
        }
    }
}

/// This task's index among its step's tasks on its node, and how many there are, under `srun`:
/// `SLURM_LOCALID`, and this node's entry (`SLURM_NODEID`) of `SLURM_STEP_TASKS_PER_NODE`
/// (`2(x3),1`). (`SLURM_NTASKS_PER_NODE`, read before, is set only when the user asked
/// `--ntasks-per-node`, and then counts the allocation's tasks, not the step's: ranks went
/// without `GSM_LOCAL_*`, and so each ran a worker per CPU of the node.)
pub(super) fn slurm_local(var: &dyn Fn(&str) -> Option<String>) -> Option<(u32, u32)> {
    let local: u32 = var("SLURM_LOCALID")?.trim().parse().ok()?;
    let node: usize = var("SLURM_NODEID")?.trim().parse().ok()?;
    let per_node =
        crate::hosts::slurm::parse_tasks_per_node(&var("SLURM_STEP_TASKS_PER_NODE")?).ok()?;
    let size = *per_node.get(node)?;
    (local < size).then_some((local, size))
}
