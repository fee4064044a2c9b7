//! Open MPI's `mpirun`: hostfile lines `[user@]host slots=N`, `-np`, `--map-by slot|node`,
//! `--bind-to none` (the runtime pins its own threads), `-x VAR` for every exported variable and
//! `--mca plm_rsh_agent CMD` for the launch agent.

use super::{JobSpec, Plan};
use crate::placement::MapBy;

/// Open MPI's hostfile for the placement: each used host with as many slots as ranks placed there.
pub fn hostfile(spec: &JobSpec) -> String {
    let mut text = String::new();
    for (host, n) in spec.hosts_with_ranks() {
        match &host.user {
            Some(user) => text.push_str(&format!("{user}@{} slots={n}\n", host.name)),
            None => text.push_str(&format!("{} slots={n}\n", host.name)),
        }
    }
    text
}

/// The `mpirun` command line.
pub fn plan(program: &str, spec: &JobSpec) -> Plan {
    let mut argv = vec![
        program.to_string(),
        "--hostfile".to_string(),
        spec.hostfile_path.display().to_string(),
        "-np".to_string(),
        spec.np().to_string(),
        "--map-by".to_string(),
        match spec.map_by {
            MapBy::Slot => "slot",
            MapBy::Node => "node",
        }
        .to_string(),
        "--bind-to".to_string(),
        "none".to_string(),
    ];
    if let Some(agent) = &spec.launch_agent {
        argv.extend([
            "--mca".to_string(),
            "plm_rsh_agent".to_string(),
            agent.clone(),
        ]);
    }
    for var in &spec.job_vars {
        argv.extend(["-x".to_string(), var.clone()]);
    }
    for e in &spec.exports {
        let item = match &e.value {
            Some(v) => format!("{}={v}", e.name),
            None => e.name.clone(),
        };
        argv.extend(["-x".to_string(), item]);
    }
    let mut argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    argv.extend(spec.rank_command());
    Plan::with_hostfile(
        super::Backend::OpenMpi {
            program: program.to_string(),
        },
        argv,
        spec,
        hostfile(spec),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testutil::spec;
    use super::*;

    #[test]
    fn exact_argv_by_slot() {
        let p = plan("mpirun", &spec());
        assert_eq!(
            p.argv,
            [
                "mpirun",
                "--hostfile",
                "/tmp/gsmrun.J/hostfile",
                "-np",
                "3",
                "--map-by",
                "slot",
                "--bind-to",
                "none",
                "-x",
                "GSM_JOB_ID",
                "-x",
                "GSM_FABRIC",
                "-x",
                "PATH",
                "-x",
                "OMP_NUM_THREADS=1",
                "/opt/gsm/gsmrun",
                "--rank-wrapper",
                "--",
                "./app",
                "-v",
                "x y",
            ]
        );
        assert_eq!(p.hostfile.unwrap().contents, "a slots=2\nb slots=1\n");
        assert!(p.env.is_empty());
    }

    #[test]
    fn exact_argv_by_node_with_agent_user_and_keep_aslr() {
        let mut s = spec();
        s.map_by = MapBy::Node;
        s.placement.rank_host = vec![0, 1, 0, 1];
        s.placement.hosts[1].user = Some("me".into());
        s.launch_agent = Some("/usr/bin/nsrsh".into());
        s.keep_aslr = true;
        s.exports.clear();
        s.job_vars.clear();
        s.args.clear();
        let p = plan("mpiexec", &s);
        assert_eq!(
            p.argv,
            [
                "mpiexec",
                "--hostfile",
                "/tmp/gsmrun.J/hostfile",
                "-np",
                "4",
                "--map-by",
                "node",
                "--bind-to",
                "none",
                "--mca",
                "plm_rsh_agent",
                "/usr/bin/nsrsh",
                "/opt/gsm/gsmrun",
                "--rank-wrapper",
                "--keep-aslr",
                "--",
                "./app",
            ]
        );
        assert_eq!(p.hostfile.unwrap().contents, "a slots=2\nme@b slots=2\n");
    }
}
