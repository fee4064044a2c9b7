//! Slurm's `srun` inside an allocation: `srun --mpi=pmix --kill-on-bad-exit=1 -n N
//! --cpu-bind=none`, with `--distribution=cyclic` for `--map-by node` and `--overcommit` for
//! `--oversubscribe`. Slurm places the ranks on the allocation's nodes itself, so no hostfile is
//! written; `srun` passes gsmrun's whole environment to the tasks, so `-x VAR=value` becomes a
//! variable of `srun`'s environment and `-x VAR` needs nothing. Debian's Open MPI speaks only PMIx,
//! hence `--mpi=pmix`. A `--launch-agent` has no meaning here and is ignored with a warning.
//! When gsmrun itself runs in a job step (`srun -n1 gsmrun …`), its step may share that step's
//! CPUs (`--overlap`): without it, Slurm held the new step back for ever, for want of CPUs.

use super::{Backend, JobSpec, Plan};
use crate::placement::MapBy;

/// The `srun` command line.
pub fn plan(spec: &JobSpec) -> Plan {
    let mut argv = vec![
        "srun".to_string(),
        "--mpi=pmix".to_string(),
        "--kill-on-bad-exit=1".to_string(),
        "-n".to_string(),
        spec.np().to_string(),
        "--cpu-bind=none".to_string(),
    ];
    if spec.map_by == MapBy::Node {
        argv.push("--distribution=cyclic".to_string());
    }
    if spec.oversubscribe {
        argv.push("--overcommit".to_string());
    }
    if spec.in_srun_step {
        argv.push("--overlap".to_string());
    }
    if spec.launch_agent.is_some() {
        eprintln!("gsmrun: warning: --launch-agent is ignored under srun (Slurm starts the ranks)");
    }
    let mut argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    argv.extend(spec.rank_command());
    let env = spec
        .exports
        .iter()
        .filter_map(|e| e.value.as_ref().map(|v| (e.name.clone(), v.clone())))
        .collect();
    Plan {
        backend: Backend::Srun,
        argv,
        env,
        hostfile: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::spec;
    use super::*;

    #[test]
    fn exact_argv() {
        let p = plan(&spec());
        assert_eq!(
            p.argv,
            [
                "srun",
                "--mpi=pmix",
                "--kill-on-bad-exit=1",
                "-n",
                "3",
                "--cpu-bind=none",
                "/opt/gsm/gsmrun",
                "--rank-wrapper",
                "--",
                "./app",
                "-v",
                "x y",
            ]
        );
        assert_eq!(p.env, [("OMP_NUM_THREADS".to_string(), "1".to_string())]);
        assert_eq!(p.hostfile, None);
    }

    #[test]
    fn inside_a_step_the_ranks_overlap_it() {
        let mut s = spec();
        s.in_srun_step = true;
        assert!(plan(&s).argv.iter().any(|a| a == "--overlap"));
        assert!(!plan(&spec()).argv.iter().any(|a| a == "--overlap"));
    }

    #[test]
    fn by_node_oversubscribed() {
        let mut s = spec();
        s.map_by = MapBy::Node;
        s.oversubscribe = true;
        s.keep_aslr = true;
        s.args.clear();
        let p = plan(&s);
        assert_eq!(
            p.argv,
            [
                "srun",
                "--mpi=pmix",
                "--kill-on-bad-exit=1",
                "-n",
                "3",
                "--cpu-bind=none",
                "--distribution=cyclic",
                "--overcommit",
                "/opt/gsm/gsmrun",
                "--rank-wrapper",
                "--keep-aslr",
                "--",
                "./app",
            ]
        );
    }
}
