//! MPICH's Hydra `mpiexec`: a hostfile that spells out the placement rank by rank, `-n`,
//! `-genvlist` for variables passed with their current value, `-genv VAR value` for
//! `-x VAR=value`, and `-launcher-exec CMD` for the launch agent. Hydra's hostfile has no user
//! names; a `user@` is dropped with a warning (use the launch agent's own configuration for
//! remote users).
//!
//! **No mapping option.** Hydra places ranks in the order of its hostfile, `host:N` giving the
//! next N ranks to `host`, and a host may appear on several lines. So the hostfile lists the
//! runs of consecutive ranks gsmrun placed on one host, in rank order (`a:1`, `b:1`, `a:2` for
//! `a,b,a,a`), and Hydra starts every rank where gsmrun placed it, by slot or by node,
//! oversubscribed or not. Checked with MPICH 4.0.2's `mpiexec.hydra` (Debian 12). The mapping
//! options would not do: `-rr`, which gsmrun passed for `--map-by node` before, is refused by
//! that Hydra ("unrecognized argument rr", so every such job failed to start), and `-ppn 1`
//! deals ranks one per host in turn whatever the counts (`a,b,a,b` for `a:3,b:1`).

use super::{JobSpec, Plan};

/// Hydra's hostfile for the placement: a `host:N` line for each run of N consecutive ranks
/// placed on one host, in rank order.
pub fn hostfile(spec: &JobSpec) -> String {
    let p = &spec.placement;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &h in &p.rank_host {
        match runs.last_mut() {
            Some((last, n)) if *last == h => *n += 1,
            _ => runs.push((h, 1)),
        }
    }
    let mut warned = vec![false; p.hosts.len()];
    let mut text = String::new();
    for (h, n) in runs {
        let host = &p.hosts[h];
        if host.user.is_some() && !std::mem::replace(&mut warned[h], true) {
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
    use crate::placement::MapBy;

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
        // Rank by rank: 0 on a, 1 on b, 2 on c, 3 on a again.
        assert_eq!(p.hostfile.unwrap().contents, "a:1\nb:1\nc:1\na:1\n");
    }

    #[test]
    fn the_hostfile_spells_out_every_placement_rank_by_rank() {
        let mut s = spec();
        for (rank_host, file) in [
            (vec![0, 0, 1], "a:2\nb:1\n"),
            (vec![0, 1, 0, 0], "a:1\nb:1\na:2\n"),
            (vec![0, 0, 0, 1, 0, 0], "a:3\nb:1\na:2\n"),
            (vec![1, 2, 1], "b:1\nc:1\nb:1\n"),
        ] {
            s.placement.rank_host = rank_host.clone();
            assert_eq!(hostfile(&s), file, "{rank_host:?}");
        }
    }
}
