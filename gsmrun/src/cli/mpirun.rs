//! The mpirun options `gsmrun` does not take, refused before clap parses the command line, each
//! with what to write instead (`--bind-to`, `--mca`, `-N`, `-wdir`, Open MPI's `--map-by`
//! policies, `-np4` without its space). This module only refuses; it accepts nothing.

use super::{Cli, SINGLE_DASH_LONG, WITH_VALUE};
use clap::CommandFactory as _;
use clap::error::ErrorKind;
use std::ffi::OsString;

/// mpirun options that gsmrun does not take, and how many values follow each: Open MPI's, plus
/// MPICH Hydra's `-f`, `-hosts`, `-ppn`, `-genv` and `-env`. Written with two dashes (mpirun also
/// takes `-mca`, `-bind-to`, `-wdir`: [`mpirun_only`] adds the dash); `-N`, `-c` and `-f` are
/// single letters. What to do instead of each is [`instead_of`].
const MPIRUN_ONLY: &[(&str, usize)] = &[
    ("--bind-to", 1),
    ("--bind-to-core", 0),
    ("--bind-to-socket", 0),
    ("--cpu-set", 1),
    ("--cpu-list", 1),
    ("--report-bindings", 0),
    ("--display-map", 0),
    ("--display-allocation", 0),
    ("--mca", 2),
    ("--gmca", 2),
    ("-N", 1),
    ("--npernode", 1),
    ("--pernode", 0),
    ("--npersocket", 1),
    ("--ppr", 1),
    ("--ppn", 1),
    ("--rank-by", 1),
    ("--bynode", 0),
    ("--byslot", 0),
    ("-c", 1),
    ("--wdir", 1),
    ("--wd", 1),
    ("--allow-run-as-root", 0),
    ("-f", 1),
    ("--hosts", 1),
    ("--genv", 2),
    ("--env", 2),
];

/// Open MPI `--map-by` objects that gsmrun does not map by (it places ranks on hosts only).
const MPIRUN_MAP_BY: &[&str] = &[
    "hwthread", "core", "l1cache", "l2cache", "l3cache", "socket", "package", "numa", "board",
    "seq", "dist", "rankfile", "ppr", "pe-list",
];

/// The [`MPIRUN_ONLY`] entry for an option name as typed (`--mca`, `-mca`, `-N`), if any.
fn mpirun_only(name: &str) -> Option<(&'static str, usize)> {
    let doubled;
    let name = if name.len() > 2 && name.starts_with('-') && !name.starts_with("--") {
        doubled = format!("-{name}");
        doubled.as_str()
    } else {
        name
    };
    MPIRUN_ONLY.iter().find(|(n, _)| *n == name).copied()
}

/// `N` of Open MPI's `N:node` (`--ppr 2:node`, `--map-by ppr:2:node`): N ranks on every host.
fn per_node(ppr: &str) -> Option<&str> {
    ppr.split_once(':')
        .filter(|(n, object)| !n.is_empty() && object.eq_ignore_ascii_case("node"))
        .map(|(n, _)| n)
}

/// What gsmrun takes instead of N ranks on every host (`-N N`, `--npernode N`, `ppr:N:node`).
fn slots_per_host(n: &str) -> String {
    format!(
        "gsmrun places ranks by slots: give every host `slots={n}` in the hostfile, or write \
         `-H host1:{n},host2:{n}`, and leave out -np (one rank per slot)"
    )
}

/// Instead of ranks per socket or core (`--npersocket`, `--ppr 2:socket`).
const NOT_ON_SOCKETS: &str = "gsmrun places ranks on hosts by slots, not on sockets or cores: \
    give each host its number of ranks as `slots=N` in the hostfile (or `-H host:N`)";

/// What to do instead of the mpirun option `option` (its [`MPIRUN_ONLY`] spelling), given the
/// values that followed it (fewer than it takes if the command line ended).
fn instead_of(option: &str, values: &[&str]) -> String {
    let value = |i: usize, placeholder: &'static str| values.get(i).copied().unwrap_or(placeholder);
    match option {
        "--bind-to" | "--bind-to-core" | "--bind-to-socket" | "--cpu-set" | "--cpu-list" => {
            "not needed: gsmrun starts Open MPI with `--bind-to none`, and each rank's runtime runs \
             its worker threads on the CPUs the rank may use; to pin each worker to one CPU, add \
             `-x GSM_PIN=1` (meant for one rank per host)"
                .to_string()
        }
        "--report-bindings" => "gsmrun binds no rank (Open MPI runs with `--bind-to none`), so \
             there is nothing to report; `-v` or `--dry-run` shows the host of each rank"
            .to_string(),
        "--display-map" | "--display-allocation" => "`-v` prints the placement (the host of each \
             rank) before running; `--dry-run` prints it and starts nothing"
            .to_string(),
        "--mca" | "--gmca" => format!(
            "write `-x OMPI_MCA_{}={}`: Open MPI reads its parameters from `OMPI_MCA_*` \
             variables (for a parameter of mpirun itself, set the variable in gsmrun's \
             environment instead)",
            value(0, "KEY"),
            value(1, "VALUE")
        ),
        "-N" | "--npernode" | "--ppn" => slots_per_host(value(0, "N")),
        "--pernode" => "one rank per host: list each host once with one slot (the default of a \
             hostfile line or of an `-H` item) and leave out -np"
            .to_string(),
        "--ppr" => match per_node(value(0, "")) {
            Some(n) => slots_per_host(n),
            None => NOT_ON_SOCKETS.to_string(),
        },
        "--npersocket" => NOT_ON_SOCKETS.to_string(),
        "--rank-by" => "ranks are numbered in placement order: `--map-by slot` (the default) \
             fills each host before the next, `--map-by node` goes round the hosts"
            .to_string(),
        "--bynode" => "write `--map-by node`".to_string(),
        "--byslot" => "leave it out: `--map-by slot` is the default".to_string(),
        "-c" => format!(
            "Open MPI's `-c N` is `-np N`: write `-np {n}` (for {n} worker threads per rank, as \
             srun's `-c`, write `-t {n}`)",
            n = value(0, "N")
        ),
        "--wdir" | "--wd" => format!(
            "ranks start in gsmrun's working directory: `cd {}` before running gsmrun (the \
             directory must exist on every host)",
            value(0, "DIR")
        ),
        "--allow-run-as-root" => "not needed: as root, gsmrun allows Open MPI to run as root \
             itself (OMPI_ALLOW_RUN_AS_ROOT=1, with a warning)"
            .to_string(),
        "-f" => format!(
            "`-f` is MPICH's hostfile option: write `-hostfile {}`",
            value(0, "FILE")
        ),
        "--hosts" => format!("write `-H {}`", value(0, "HOSTS")),
        "--genv" | "--env" => format!("write `-x {}={}`", value(0, "NAME"), value(1, "VALUE")),
        _ => "see `gsmrun --help` for the options gsmrun takes".to_string(),
    }
}

/// A usage error in clap's layout (`error: …`, a tip, the usage line), exit status 2.
fn refusal(kind: ErrorKind, what: &str, tip: &str) -> clap::Error {
    Cli::command().error(kind, format!("{what}\n\n  tip: {tip}"))
}

/// Refuse, before clap parses them, the mpirun spellings gsmrun does not take, each with what to
/// write instead: the options of `MPIRUN_ONLY`, Open MPI's `--map-by` policies other than
/// `slot` and `node`, and `-np4` for `-np 4` (which Open MPI's and MPICH's mpirun also refuse, as
/// an unknown option: both match option names whole). Only the arguments before the program are
/// looked at, as in [`super::normalize_args`]; the values of gsmrun's own options are skipped.
pub fn refuse_mpirun_only(args: &[OsString]) -> Result<(), clap::Error> {
    let word = |i: usize| args.get(i).and_then(|a| a.to_str());
    let mut i = 1;
    while let Some(text) = word(i) {
        if text == "--" || text == "-" || !text.starts_with('-') {
            break;
        }
        let (name, inline) = match text.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (text, None),
        };
        // An option of MPIRUN_ONLY (`-N 2`, `-mca btl tcp`), or `-N`/`-c` with its number
        // attached (`-N2`), which clap would read as `-N 2` too if it knew `-N`.
        let attached = ["-N", "-c"].iter().find_map(|short| {
            let rest = name.strip_prefix(short)?;
            let digits = !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit());
            (digits && inline.is_none()).then_some((*short, rest))
        });
        let found = match attached {
            Some((short, rest)) => Some((short, 1, vec![rest])),
            None => mpirun_only(name).map(|(option, n)| {
                let following = (i + 1..).map_while(word);
                let values: Vec<&str> = inline.into_iter().chain(following).take(n).collect();
                (option, n, values)
            }),
        };
        if let Some((option, n, values)) = found {
            let typed: Vec<&str> = std::iter::once(text)
                .chain((i + 1..).map_while(word))
                .take(1 + n.saturating_sub(usize::from(inline.is_some() || attached.is_some())))
                .collect();
            return Err(refusal(
                ErrorKind::UnknownArgument,
                &format!(
                    "`{}` is an mpirun option that gsmrun does not take",
                    typed.join(" ")
                ),
                &instead_of(option, &values),
            ));
        }
        if let Some(count) = name.strip_prefix("-np") {
            if inline.is_none() && !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit()) {
                return Err(refusal(
                    ErrorKind::UnknownArgument,
                    &format!("`{text}` joins the number of ranks to the option"),
                    &format!(
                        "write `-np {count}`, with a space (or `-np={count}`); Open MPI's and \
                         MPICH's mpirun refuse `{text}` as an unknown option too"
                    ),
                ));
            }
        }
        let own = SINGLE_DASH_LONG
            .iter()
            .find(|(single, _)| *single == name)
            .map_or(name, |(_, double)| double);
        if own == "--map-by" {
            if let Some(how) = inline.or_else(|| word(i + 1)) {
                let object = how.split(':').next().unwrap_or(how).to_ascii_lowercase();
                if how.contains(':') || MPIRUN_MAP_BY.contains(&object.as_str()) {
                    let ppr = how
                        .split_once(':')
                        .filter(|(p, _)| p.eq_ignore_ascii_case("ppr"))
                        .and_then(|(_, rest)| per_node(rest));
                    let tip = match ppr {
                        Some(n) => slots_per_host(n),
                        None => {
                            "gsmrun's --map-by takes `slot` (fill each host's slots first, the \
                                 default) or `node` (one rank per host in turn), without \
                                 modifiers; it places ranks on hosts, never on cores or sockets \
                                 (for `:OVERSUBSCRIBE`, write --oversubscribe)"
                                .to_string()
                        }
                    };
                    return Err(refusal(
                        ErrorKind::InvalidValue,
                        &format!("`--map-by {how}` is an Open MPI mapping that gsmrun does not do"),
                        &tip,
                    ));
                }
            }
        }
        i += if inline.is_none() && WITH_VALUE.contains(&own) {
            2
        } else {
            1
        };
    }
    Ok(())
}
