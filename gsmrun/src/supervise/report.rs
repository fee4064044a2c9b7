//! What `gsmrun` says when a job ends other than by a rank's own failure line: ranks that did not
//! start in time, a launcher that failed on its own (with only the causes that fit what is
//! known), a rank that only followed another's failure, and a launcher's exit status in words.
//! Only text: the decisions are the supervisor's.

use super::Options;
use crate::clock::fmt_secs;
use crate::sys::signal_name;
use std::collections::HashSet;
use std::process::ExitStatus;

/// The failure `line` of a rank that only followed another rank's failure, as it is said when
/// no report of that rank came: it says so.
pub(super) fn followed(line: &str) -> String {
    match line.strip_suffix("; ending the job") {
        Some(head) => format!(
            "{head}, its run ended by another rank's failure (its error above names the rank); \
             ending the job"
        ),
        None => line.to_string(),
    }
}

/// The line for a job whose ranks did not all start within `--start-timeout`: how many did,
/// which did not and on which hosts (the first few), and what to do.
pub(super) fn not_started(launcher: &str, opts: &Options, started: &HashSet<&str>) -> String {
    let missing: Vec<usize> = (0..opts.np)
        .filter(|r| !started.contains(r.to_string().as_str()))
        .collect();
    let mut hosts: Vec<&str> = Vec::new();
    for &r in &missing {
        let h = opts.rank_hosts.get(r).map_or("?", String::as_str);
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    let list = |items: Vec<String>| {
        const SHOWN: usize = 8;
        let more = items.len().saturating_sub(SHOWN);
        let mut text = items.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
    };
    // The launcher starts the ranks of every host once it reaches them all, so this machine's
    // ranks missing beside other hosts' only waited on those: the other hosts are named.
    if hosts.iter().any(|h| !crate::local::is_local_host(h)) {
        hosts.retain(|h| !crate::local::is_local_host(h));
    }
    let cut = cut_note(&hosts);
    // Hosts found at fault are the ones named: the ranks of the others (this machine) wait on
    // them, so listing those too blamed hosts that were fine.
    let on = if cut.is_empty() {
        format!(
            ", on {} {}",
            if hosts.len() == 1 { "host" } else { "hosts" },
            list(hosts.iter().map(|h| h.to_string()).collect()),
        )
    } else {
        String::new()
    };
    format!(
        "gsmrun: only {} of {} started within --start-timeout {} s (missing: {} {}{on});{cut} \
         {launcher} may be stuck starting them (a host that does not answer, ssh asking for a \
         password, a launcher daemon missing there: see its messages above); ending the job \
         (raise --start-timeout if the start is only slow)",
        started.len(),
        crate::plural(opts.np as u64, "rank"),
        fmt_secs(opts.start_timeout.unwrap_or(0.0)),
        if missing.len() == 1 { "rank" } else { "ranks" },
        list(missing.iter().map(|r| r.to_string()).collect()),
    )
}

/// Which hosts of ranks not started (not in `started`) do not resolve or cannot be reached, said
/// as a clause that ends with `;`, or nothing when all answer.
pub(super) fn cut_hosts(opts: &Options, started: &HashSet<&str>) -> String {
    let mut hosts: Vec<&str> = Vec::new();
    for r in (0..opts.np).filter(|r| !started.contains(r.to_string().as_str())) {
        let h = opts.rank_hosts.get(r).map_or("?", String::as_str);
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    cut_note(&hosts)
}

pub(super) fn cut_note(hosts: &[&str]) -> String {
    let faults = at_fault(hosts);
    let said = |fault: Fault| -> Vec<String> {
        (faults.iter())
            .filter(|(_, f)| *f == fault)
            .map(|(h, _)| format!("host {}", crate::shown(h)))
            .collect()
    };
    let listed = |names: Vec<String>| {
        let more = names.len().saturating_sub(8);
        let mut text = names.into_iter().take(8).collect::<Vec<_>>().join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
    };
    let mut note = String::new();
    let unresolved = said(Fault::Unresolved);
    if !unresolved.is_empty() {
        note.push_str(&format!(
            " {}: {} not resolve (a typing error, or a name this host's resolver does not know);",
            listed(unresolved.clone()),
            if unresolved.len() == 1 {
                "its name does"
            } else {
                "their names do"
            },
        ));
    }
    let cut = said(Fault::Cut);
    if !cut.is_empty() {
        note.push_str(&format!(
            " {} cannot be reached: nothing answered a connection to its port {PROBE_PORT} \
             within {} s (down, or cut off from this host's network);",
            listed(cut),
            PROBE_WAIT.as_secs()
        ));
    }
    note
}

/// The port the reachability probe knocks at: ssh's, which the launcher uses to reach a host. A
/// refusal proves the host is there as well as an answer does.
const PROBE_PORT: u16 = 22;
/// How long the probe waits for any answer (the name's look-up included).
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// What is wrong with a host the launcher could not start ranks on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Its name does not resolve.
    Unresolved,
    /// A TCP connection to [`PROBE_PORT`] got neither an answer nor a refusal within
    /// [`PROBE_WAIT`] (or the network said there is no route).
    Cut,
}

/// Which of `hosts` (other than this machine) are at fault, and how. Probed at once, each for at
/// most [`PROBE_WAIT`]: a probe still looking the name up then is left to finish on its own and
/// judges nothing (a slow resolver is not a fault of the host).
fn at_fault<'a>(hosts: &[&'a str]) -> Vec<(&'a str, Fault)> {
    use std::io::ErrorKind;
    use std::net::ToSocketAddrs as _;
    let deadline = std::time::Instant::now() + PROBE_WAIT + std::time::Duration::from_millis(200);
    let probes: Vec<_> = (hosts.iter())
        .filter(|h| !crate::local::is_local_host(h))
        .map(|&h| {
            let name = h.rsplit('@').next().unwrap_or(h).to_string();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let fault = match (name.as_str(), PROBE_PORT).to_socket_addrs() {
                    Err(_) => Some(Fault::Unresolved),
                    Ok(mut addrs) => match addrs.next() {
                        None => Some(Fault::Unresolved),
                        Some(addr) => match std::net::TcpStream::connect_timeout(&addr, PROBE_WAIT)
                        {
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    ErrorKind::TimedOut
                                        | ErrorKind::HostUnreachable
                                        | ErrorKind::NetworkUnreachable
                                ) =>
                            {
                                Some(Fault::Cut)
                            }
                            _ => None,
                        },
                    },
                };
                let _ = tx.send(fault);
            });
            (h, rx)
        })
        .collect();
    (probes.into_iter())
        .filter_map(|(h, rx)| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            rx.recv_timeout(left).ok().flatten().map(|f| (h, f))
        })
        .collect()
}

/// A launcher that ended before every rank reported, and what is known of why.
pub(super) struct LauncherFailure<'a> {
    pub launcher: &'a str,
    /// The launcher is Slurm's `srun` (which also fails outside an allocation).
    pub srun: bool,
    pub status: ExitStatus,
    /// Ranks that did not report success.
    pub missing: usize,
    pub np: usize,
    /// Ranks whose wrapper connected to gsmrun.
    pub started: usize,
    pub wrapper: &'a str,
    /// See [`Options::slurm_job_with_hosts`].
    pub slurm_job: Option<&'a str>,
    /// The clause naming the hosts of ranks not started that are at fault (see [`cut_hosts`]),
    /// empty when none is known to be.
    pub hosts_at_fault: String,
}

impl LauncherFailure<'_> {
    /// The one line gsmrun prints: the launcher's status, how far the ranks got, and only the
    /// causes that fit what is known (the launcher's own messages, above it, say which).
    pub(super) fn line(&self) -> String {
        let LauncherFailure {
            launcher,
            status,
            missing,
            np,
            started,
            ..
        } = *self;
        use std::os::unix::process::ExitStatusExt as _;
        let ended = match status.signal() {
            Some(_) => format!("was killed by {}", describe(status)),
            None => format!("exited with {}", describe(status)),
        };
        let head = format!(
            "gsmrun: {launcher} {ended} before {missing} of {} reported",
            crate::plural(np as u64, "rank")
        );
        let how_far = match started {
            0 => "no rank started".to_string(),
            n if n >= np => format!("all {np} had started"),
            n => format!("only {n} of {np} started"),
        };
        if status.signal().is_some() {
            // Killed: whatever the job was like, the launcher did not get to fail by itself.
            return match self.hosts_at_fault.as_str() {
                "" => format!("{head} ({how_far})"),
                clause => format!("{head} ({how_far});{clause}"),
            };
        }
        if started >= np {
            return format!(
                "{head}; every rank had started, so {launcher} ended them or was ended itself; \
                 see its messages above"
            );
        }
        if !self.hosts_at_fault.is_empty() {
            // A host named as at fault is the cause; the others would only blur it.
            return format!(
                "{head} ({how_far});{} see its messages above",
                self.hosts_at_fault
            );
        }
        let mut causes = Vec::new();
        if self.srun {
            causes.push("no Slurm allocation (outside Slurm, use --launcher mpirun)");
        }
        let slurm = self.slurm_job.map(|job| {
            format!(
                "inside Slurm job {job}, {launcher} holds the job to the allocation's nodes and \
                 slots whatever -H or --hostfile say (run without them to use the allocation, or \
                 set OMPI_MCA_ras=^slurm and OMPI_MCA_plm=^slurm in gsmrun's environment)"
            )
        });
        if let Some(s) = &slurm {
            causes.push(s);
        }
        causes.push("a host that cannot be reached or whose name does not resolve");
        let missing_wrapper = format!("no gsmrun at {} on some host", self.wrapper);
        causes.push(&missing_wrapper);
        let refused = format!("{launcher} refusing the job");
        causes.push(&refused);
        format!(
            "{head} ({how_far}); see its messages above. Likely causes: {}",
            causes.join("; ")
        )
    }
}

/// A launcher's exit status in words: `status N` or `signal S (SIGNAME)`.
pub(super) fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("status {c}"),
        (_, Some(s)) => format!("signal {s} ({})", signal_name(s)),
        _ => "an unknown status".into(),
    }
}
