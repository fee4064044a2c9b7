//! What `--dry-run` and `-v` print of a plan: the placement table, the fabric the ranks will use,
//! the generated hostfile, the command and the environment added for the launcher. Only text; the
//! plan is made elsewhere.

use super::Prepared;
use super::place::source_name;
use crate::cli::Fabric;
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

/// The fabric line: what `fabric` means for this placement. Between hosts `auto` depends on the
/// program's build and on libfabric's providers where the ranks run, which only the ranks can
/// see: the line says the rule, and the ranks log their choice at info level.
pub fn fabric_line(fabric: Fabric, p: &Placement) -> String {
    let hosts = (0..p.hosts.len())
        .filter(|&h| p.ranks_on(h).next().is_some())
        .count();
    let what = match (fabric, hosts) {
        (Fabric::Auto, 0 | 1) => "auto: shm (every rank on one host)".to_string(),
        (Fabric::Auto, _) => "auto: shm within a host; between hosts ofi if the program is built \
                              with it and libfabric's first RMA provider drives RDMA hardware, else \
                              tcp (each rank says which with RUST_LOG=gossamer::fabric=info)"
            .to_string(),
        (Fabric::Verbs, _) => "verbs between every pair of ranks (RC queue pairs on \
                               GSM_VERBS_DEVICE or the first active RDMA port; the program needs \
                               gossamer's `rdma` feature, else every rank stops at start saying so)"
            .to_string(),
        (f, _) => format!("{} between every pair of ranks", f.as_str()),
    };
    format!("fabric: {what}\n")
}

/// What `--dry-run` and `-v` print: the placement, the generated hostfile, the command, and the
/// environment added for the launcher. The hostfile's contents are printed with its path, since
/// the file exists only while the job runs (a dry run never writes it).
pub fn describe(p: &Prepared) -> String {
    let mut s = placement_table(&p.placement, &p.source);
    s.push_str(&fabric_line(p.fabric, &p.placement));
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
