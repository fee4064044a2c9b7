//! What `--dry-run` and `-v` print of a plan: the placement table, the fabric the ranks will use,
//! the generated hostfile, the command and the environment added for the launcher. Only text; the
//! plan is made elsewhere.

use super::Prepared;
use super::place::source_name;
use crate::cli::FabricChoice;
use crate::env;
use crate::hosts::HostSource;
use crate::launch;
use crate::placement::Placement;
use crate::plural;
use gsm_contract::contract::Build;

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
pub fn fabric_line(fabric: FabricChoice, p: &Placement) -> String {
    let hosts = (0..p.hosts.len())
        .filter(|&h| p.ranks_on(h).next().is_some())
        .count();
    let what = match (fabric, hosts) {
        (FabricChoice::Auto, 0 | 1) => "auto: shm (every rank on one host)".to_string(),
        (FabricChoice::Auto, _) => "auto: shm within a host; between hosts ofi if the program \
                                    is built with it and libfabric's first RMA provider drives \
                                    RDMA hardware, else tcp (each rank says which with \
                                    RUST_LOG=gossamer::fabric=info)"
            .to_string(),
        (FabricChoice::Only(k), _) => match k.build() {
            Build::Always => format!("{k} between every pair of ranks ({})", k.over()),
            Build::Feature { feature, .. } => format!(
                "{k} between every pair of ranks ({}; the program needs gossamer's `{feature}` \
                 feature, else every rank stops at start saying so)",
                k.over()
            ),
        },
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
