//! MPICH's Hydra `mpiexec`: hostfile lines `host:N`, `-n`, `-rr` for round-robin (by node)
//! mapping (Hydra's default fills each host in turn, which is by slot), `-genvlist` for variables
//! passed with their current value, `-genv VAR value` for `-x VAR=value`, and `-launcher-exec CMD`
//! for the launch agent. Hydra's hostfile has no user names; a `user@` is dropped with a warning
//! (use the launch agent's own configuration for remote users).

use super::{JobSpec, Plan};
use crate::placement::MapBy;

/// Hydra's hostfile for the placement: `host:N` with N the ranks placed there.
pub fn hostfile(spec: &JobSpec) -> String {
    let mut text = String::new();
    for (host, n) in spec.hosts_with_ranks() {
        if host.user.is_some() {
            eprintln!(
                "gsmrun: warning: Hydra's hostfile cannot name a user; {}@{} is reached as {} \
                 (set the user in the launch agent's configuration, ~/.ssh/config say)",
                host.user.as_deref().unwrap_or_default(),
                host.name,
                host.name
            );
        }
        text.push_str(&format!("{}:{n}\n", host.name));
    }
    text
}

/// The `mpiexec` command line.
pub fn plan(program: &str, spec: &JobSpec) -> Plan {
    let mut argv = vec![
        program.to_string(),
        "-f".to_string(),
        spec.hostfile_path.display().to_string(),
        "-n".to_string(),
        spec.np().to_string(),
    ];
    if spec.map_by == MapBy::Node {
        argv.push("-rr".to_string());
    }
    if let Some(agent) = &spec.launch_agent {
        argv.extend(["-launcher-exec".to_string(), agent.clone()]);
    }
    let mut list: Vec<String> = spec.job_vars.clone();
    list.extend(
        spec.exports
            .iter()
            .filter(|e| e.value.is_none())
            .map(|e| e.name.clone()),
    );
    if !list.is_empty() {
        argv.extend(["-genvlist".to_string(), list.join(",")]);
    }
    for e in &spec.exports {
        if let Some(v) = &e.value {
            argv.extend(["-genv".to_string(), e.name.clone(), v.clone()]);
        }
    }
    let mut argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    argv.extend(spec.rank_command());
    Plan::with_hostfile(
        super::Backend::Hydra {
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
        let p = plan("mpiexec", &spec());
        assert_eq!(
            p.argv,
            [
                "mpiexec",
                "-f",
                "/tmp/gsmrun.J/hostfile",
                "-n",
                "3",
                "-genvlist",
                "GSM_JOB_ID,GSM_FABRIC,PATH",
                "-genv",
                "OMP_NUM_THREADS",
                "1",
                "/opt/gsm/gsmrun",
                "--rank-wrapper",
                "--",
                "./app",
                "-v",
                "x y",
            ]
        );
        assert_eq!(p.hostfile.unwrap().contents, "a:2\nb:1\n");
    }

    #[test]
    fn exact_argv_by_node_with_agent() {
        let mut s = spec();
        s.map_by = MapBy::Node;
        s.placement.rank_host = vec![0, 1, 2, 0];
        s.launch_agent = Some("/usr/bin/nsrsh".into());
        s.exports.clear();
        s.job_vars.clear();
        s.keep_aslr = true;
        let p = plan("mpiexec.hydra", &s);
        assert_eq!(
            p.argv,
            [
                "mpiexec.hydra",
                "-f",
                "/tmp/gsmrun.J/hostfile",
                "-n",
                "4",
                "-rr",
                "-launcher-exec",
                "/usr/bin/nsrsh",
                "/opt/gsm/gsmrun",
                "--rank-wrapper",
                "--keep-aslr",
                "--",
                "./app",
                "-v",
                "x y",
            ]
        );
        assert_eq!(p.hostfile.unwrap().contents, "a:2\nb:1\nc:1\n");
    }
}
