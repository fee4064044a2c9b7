//! What `--dry-run` and `-v` print of a plan: the placement table, the generated hostfile, the
//! command and the environment added for the launcher. Only text; the plan is made elsewhere.

use super::Prepared;
use super::place::source_name;
use crate::env;
use crate::hosts::HostSource;
use crate::launch;
use crate::placement::Placement;
use crate::plural;

/// Human-readable placement table.
pub fn placement_table(p: &Placement, source: &HostSource) -> String {
    let from = source_name(source);
    let used_hosts = (0..p.hosts.len())
        .filter(|&h| p.ranks_on(h).next().is_some())
        .count();
    let mut s = format!(
        "placement: {} on {} (from {from})\n",
        plural(p.rank_host.len() as u64, "rank"),
        plural(used_hosts as u64, "host")
    );
    s.push_str("  rank  host\n");
    for (r, &h) in p.rank_host.iter().enumerate() {
        s.push_str(&format!("  {r:<5} {}\n", p.hosts[h].name));
    }
    s
}

/// What `--dry-run` and `-v` print: the placement, the generated hostfile, the command, and the
/// environment added for the launcher. The hostfile's contents are printed with its path, since
/// the file exists only while the job runs (a dry run never writes it).
pub fn describe(p: &Prepared) -> String {
    let mut s = placement_table(&p.placement, &p.source);
    if let Some(h) = &p.plan.hostfile {
        s.push_str(&format!(
            "hostfile {} (exists only while the job runs):\n",
            h.path.display()
        ));
        for line in h.contents.lines() {
            s.push_str(&format!("  {line}\n"));
        }
    }
    s.push_str(&format!(
        "command:\n  {}\n",
        launch::command_line(&p.plan.argv)
    ));
    s.push_str("environment:\n");
    for (k, v) in p.job_env.iter().chain(&p.plan.env).chain(&p.mpi_env) {
        s.push_str(&format!(
            "  {k}={}\n",
            launch::shell_quote(std::ffi::OsStr::new(v))
        ));
    }
    s.push_str(&format!(
        "  {}=<address gsmrun listens on>\n  {}=<random per job>\n",
        env::job::CONTROL,
        env::job::CONTROL_KEY
    ));
    s
}
