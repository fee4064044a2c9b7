//! Command line: the options `gsmrun` accepts, including the single-dash spellings `mpirun` users
//! type (`-np 4`, `-hostfile h`, `-machinefile h`), and their translation into [`Cli`].
//!
//! clap does not parse multi-letter single-dash options, so [`normalize_args`] first rewrites the
//! arguments *before the program path* (`-np` → `--np`, `-hostfile` → `--hostfile`, …) and puts a
//! `--` in front of the program, so that everything from the program path on belongs to the program
//! and is never looked at. This module does not read hostfiles or decide placement; it only says
//! what the user asked for.
//!
//! Before that, [`refuse_mpirun_only`] refuses the mpirun options gsmrun does not take
//! (`--bind-to`, `--mca`, `-N`, `-wdir`, …) and `-np4` written without its space, saying what to
//! write instead: clap alone would call them unexpected and suggest `-- --bind-to`, which would
//! start a program named `--bind-to`.

use crate::placement::MapBy;
use clap::builder::TypedValueParser as _;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

/// Examples and exit statuses, shown at the end of `--help`.
const AFTER_HELP: &str = "\
Examples:
  gsmrun ./app                                one rank per CPU of this machine
  gsmrun -np 4 -hostfile hosts ./app arg1     4 ranks on the hosts listed in `hosts`
  gsmrun -np 4 --oversubscribe ./app          more ranks than slots on this machine
  gsmrun -H node1:2,node2:2 --map-by node ./app
  gsmrun -np 8 -x OMP_NUM_THREADS=1 -x PATH -t 4 ./app
  salloc -N 2 -n 8 gsmrun ./app               inside Slurm: no hostfile needed, runs srun
  gsmrun --dry-run -np 2 -hostfile hosts ./app    show placement and command, start nothing

Hosts: --hostfile/-H win; otherwise a Slurm allocation (SLURM_JOB_ID) or PBS_NODEFILE is used;
otherwise this machine, with one slot per CPU this process may use. Hostfiles may use Open MPI's
grammar (`node1 slots=4`), MPICH's (`node1:4`) or Slurm hostlists (`node[01-04] slots=2`).

Every rank starts with address-space randomisation off (unless --keep-aslr) through a small
wrapper (this same binary) that also reports its exit to gsmrun: when any rank exits non-zero or is
killed by a signal, gsmrun prints one line naming the rank and host, ends every other rank, and
exits with that status. Rank output is forwarded line by line and byte for byte (a last line
without a newline stays so, and what comes next follows on it); --tag-output prefixes each line
with `[1,RANK]<stdout>:` or `[1,RANK]<stderr>:` as Open MPI does, and ends a last line without a
newline with one. If gsmrun's own output cannot be written, the job ends.

Exit status:
  0          every rank exited 0
  N          the first rank that failed exited with status N
  128+S      the first rank that failed was killed by signal S (139 for SIGSEGV)
  124        the job exceeded --timeout
  130, 143   gsmrun was interrupted by SIGINT (Ctrl-C) or SIGTERM (129 SIGHUP, 131 SIGQUIT);
             SIGUSR1 and SIGUSR2 are passed to every rank and the job goes on
  141        gsmrun's output pipe was closed (`gsmrun … | head`), as SIGPIPE ends a filter
  127        the MPI launcher (mpirun, mpiexec, srun) is not installed, or a rank's
             program could not be started (not found, not executable)
  2          bad input: options, hostfile, host list, placement, or GSM_MPI_FLAVOUR
  1          a rank exited 0 where the others would wait for it for ever (it never
             joined the Gossamer job, ran fewer runs, or exited inside a run); not
             every rank started within --start-timeout; or any other failure of
             gsmrun or of the launcher itself (which exited non-zero, was killed,
             or ran on for 10 s after every rank exited 0; the message says which)

Logs: GSM_LOG=debug gsmrun … prints gsmrun's debug log on stderr.";

/// Which fabric the runtime should use between ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Fabric {
    /// Shared memory within a host, TCP between hosts.
    #[default]
    Auto,
    /// Shared memory only (every rank on one host).
    Shm,
    /// TCP between every pair of ranks.
    Tcp,
    /// RDMA verbs: not in any build of the runtime yet, so `gsmrun` refuses it before starting
    /// anything (every rank would fail on it) and `--help` does not list it. gsmrun cannot see
    /// which runtime a program links, only its own build; once a build has verbs, this value is
    /// to be passed on and checked by the ranks.
    #[value(hide = true)]
    Verbs,
}

impl Fabric {
    /// The value passed in `GSM_FABRIC`.
    pub fn as_str(self) -> &'static str {
        match self {
            Fabric::Auto => "auto",
            Fabric::Shm => "shm",
            Fabric::Tcp => "tcp",
            Fabric::Verbs => "verbs",
        }
    }
}

/// Which program starts the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LauncherChoice {
    /// `srun` inside a Slurm allocation without --hostfile/-H, else `mpirun`, else `mpiexec`.
    #[default]
    Auto,
    /// `mpirun` (Open MPI, or MPICH's Hydra under that name).
    Mpirun,
    /// `mpiexec` (MPICH/Hydra, or Open MPI under that name).
    Mpiexec,
    /// Slurm's `srun --mpi=pmix`.
    Srun,
}

/// How ranks are spread over hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum MapByArg {
    /// Fill each host's slots before moving to the next host.
    #[default]
    Slot,
    /// One rank per host in turn (round robin).
    Node,
}

impl From<MapByArg> for MapBy {
    fn from(m: MapByArg) -> MapBy {
        match m {
            MapByArg::Slot => MapBy::Slot,
            MapByArg::Node => MapBy::Node,
        }
    }
}

/// The value of a count option (`-np`, `-t`): a whole number. Clap's own check of a `u32` said
/// "-1 is not in 0..=4294967295"; this says what is wrong with the value in words. The range
/// each option accepts is checked later, with the option's own message (`-np 0`).
fn count(s: &str) -> Result<u32, String> {
    s.trim().parse::<u32>().map_err(|_| {
        if s.trim().starts_with('-') {
            "a count cannot be negative; expected a whole number, such as 4".to_string()
        } else if !s.trim().is_empty() && s.trim().bytes().all(|b| b.is_ascii_digit()) {
            format!("expected a whole number up to {}", u32::MAX)
        } else {
            "expected a whole number, such as 4".to_string()
        }
    })
}

/// The value of a time limit (`--timeout`, `--start-timeout`): a positive number of seconds,
/// finite and within what the clock counts to. Checked here, where the user's text is at hand:
/// the number parsed from it printed `1e300` as 301 digits and 2^64 rounded, and clap's own
/// message for a word was "invalid float literal".
fn seconds(s: &str) -> Result<f64, String> {
    let t: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number of seconds, such as 30 or 0.5".to_string())?;
    if t == f64::INFINITY {
        return Err("give a finite number of seconds (leave the option out for no limit)".into());
    }
    if !(t > 0.0 && t.is_finite()) {
        return Err("give a positive number of seconds".to_string());
    }
    if crate::supervise::deadline(std::time::Instant::now(), t).is_none() {
        return Err(
            "too many seconds for this system's clock to count to; give a smaller number".into(),
        );
    }
    Ok(t)
}

/// The program to run: any name but the empty one, which no rank could start (each of them
/// would report it, after the whole launch).
fn program(p: OsString) -> Result<OsString, String> {
    if p.is_empty() {
        return Err("the program's name is empty; give a program, such as ./app".to_string());
    }
    Ok(p)
}

/// The options of `gsmrun`, as the user gave them. Numeric options take negative numbers as their
/// value, so that `-np -1` is refused as a bad value of `--np`, not as an unknown argument `-1`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "gsmrun",
    version,
    about = "Start a Gossamer job: N copies of a program on the hosts of a hostfile, a host list, \
             a Slurm allocation or this machine",
    override_usage = "gsmrun [OPTIONS] PROGRAM [ARGS]...",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// Number of ranks (default: one per slot). Also `-np N`.
    #[arg(
        short = 'n',
        long = "np",
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = count
    )]
    pub np: Option<u32>,

    /// Hostfile (Open MPI, MPICH or Slurm-hostlist grammar). Also `-hostfile`, `-machinefile`.
    #[arg(
        long = "hostfile",
        visible_alias = "machinefile",
        value_name = "FILE",
        value_parser = clap::builder::OsStringValueParser::new().try_map(non_empty_path)
    )]
    pub hostfile: Option<PathBuf>,

    /// Hosts with optional slot counts, e.g. `a:2,b` or `node[1-4]:2`.
    #[arg(short = 'H', long = "host", value_name = "HOSTS")]
    pub host: Option<String>,

    /// Fill hosts slot by slot, or go round the hosts one rank at a time.
    #[arg(long = "map-by", value_enum, default_value_t = MapByArg::Slot, value_name = "HOW")]
    pub map_by: MapByArg,

    /// Allow more ranks on a host than its slots (never more than its max_slots).
    #[arg(long)]
    pub oversubscribe: bool,

    /// Export VAR (its current value; left out with a warning if it is not set) or set
    /// VAR=value in every rank. Repeatable.
    #[arg(short = 'x', value_name = "VAR[=VALUE]")]
    pub export: Vec<String>,

    /// Prefix each output line with `[1,RANK]<stdout>:` / `[1,RANK]<stderr>:`.
    #[arg(long = "tag-output")]
    pub tag_output: bool,

    /// End the job (exit 124) if it runs longer than SECONDS.
    #[arg(
        long,
        value_name = "SECONDS",
        allow_negative_numbers = true,
        value_parser = seconds
    )]
    pub timeout: Option<f64>,

    /// End the job (exit 1) if not every rank has started within SECONDS, naming the ranks and
    /// hosts that did not [default: 60 under mpirun or mpiexec, none under srun, whose steps may
    /// wait for their nodes].
    #[arg(
        long = "start-timeout",
        value_name = "SECONDS",
        allow_negative_numbers = true,
        value_parser = seconds
    )]
    pub start_timeout: Option<f64>,

    /// Worker threads per rank (1 to 4096), passed to the runtime as GSM_THREADS.
    #[arg(
        short = 't',
        long = "threads-per-rank",
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = count
    )]
    pub threads_per_rank: Option<u32>,

    /// Fabric between ranks, passed to the runtime as GSM_FABRIC [default: GSM_FABRIC of
    /// gsmrun's environment, else auto].
    #[arg(long, value_enum, value_name = "FABRIC")]
    pub fabric: Option<Fabric>,

    /// Program that starts the ranks.
    #[arg(long, value_enum, default_value_t = LauncherChoice::Auto, value_name = "LAUNCHER")]
    pub launcher: LauncherChoice,

    /// Remote shell the MPI launcher uses to reach other hosts (instead of ssh), e.g. `ssh -p 2222`.
    #[arg(long = "launch-agent", value_name = "CMD")]
    pub launch_agent: Option<String>,

    /// Leave address-space randomisation on in the ranks.
    #[arg(long = "keep-aslr")]
    pub keep_aslr: bool,

    /// Print the placement and the exact command, start nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,

    /// Print the placement and the command before running.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// The program to run on every rank.
    #[arg(
        value_name = "PROGRAM",
        required = true,
        value_parser = clap::builder::OsStringValueParser::new().try_map(program)
    )]
    pub program: OsString,

    /// Arguments passed to the program unchanged.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<OsString>,
}

/// Options taking a value, in the spelling clap understands after [`normalize_args`]. Used to find
/// where the program path starts.
const WITH_VALUE: &[&str] = &[
    "-n",
    "--np",
    "--hostfile",
    "--machinefile",
    "-H",
    "--host",
    "--map-by",
    "-x",
    "--timeout",
    "--start-timeout",
    "-t",
    "--threads-per-rank",
    "--fabric",
    "--launcher",
    "--launch-agent",
];

/// Long options that `mpirun` users also write with one dash.
const SINGLE_DASH_LONG: &[(&str, &str)] = &[
    ("-np", "--np"),
    ("-hostfile", "--hostfile"),
    ("-machinefile", "--machinefile"),
    ("-host", "--host"),
    ("-map-by", "--map-by"),
    ("-oversubscribe", "--oversubscribe"),
    ("-tag-output", "--tag-output"),
    ("-timeout", "--timeout"),
    ("-start-timeout", "--start-timeout"),
    ("-threads-per-rank", "--threads-per-rank"),
    ("-fabric", "--fabric"),
    ("-launcher", "--launcher"),
    ("-launch-agent", "--launch-agent"),
    ("-keep-aslr", "--keep-aslr"),
    ("-dry-run", "--dry-run"),
    ("-verbose", "--verbose"),
    ("-version", "--version"),
    ("-help", "--help"),
];

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
/// looked at, as in [`normalize_args`]; the values of gsmrun's own options are skipped.
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

/// Rewrite mpirun-style arguments into ones clap parses: single-dash long options get two dashes
/// (also in `-np=4` form), and a `--` is put before the program path, after which nothing is
/// changed. `args[0]` (the binary name) is kept as is.
pub fn normalize_args(args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len() + 1);
    let mut it = args.into_iter();
    if let Some(arg0) = it.next() {
        out.push(arg0);
    }
    while let Some(arg) = it.next() {
        let Some(text) = arg.to_str().map(str::to_owned) else {
            // Not UTF-8: cannot be one of our options, so it is the program.
            out.push("--".into());
            out.push(arg);
            out.extend(it);
            return out;
        };
        if text == "--" {
            out.push(arg);
            out.extend(it);
            return out;
        }
        if !text.starts_with('-') || text == "-" {
            out.push("--".into());
            out.push(arg);
            out.extend(it);
            return out;
        }
        let (name, inline_value) = match text.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (text.clone(), None),
        };
        let name = SINGLE_DASH_LONG
            .iter()
            .find(|(single, _)| *single == name)
            .map(|(_, double)| double.to_string())
            .unwrap_or(name);
        match &inline_value {
            Some(v) => out.push(format!("{name}={v}").into()),
            None => out.push(name.clone().into()),
        }
        if inline_value.is_none()
            && (WITH_VALUE.contains(&name.as_str()) || short_group_ends_wanting_value(&name))
        {
            if let Some(value) = it.next() {
                out.push(value);
            }
        }
    }
    out
}

/// A path option's value, refused when empty (clap's own parser said "a value is required …
/// but none was supplied" of `-hostfile ''`, which supplies one).
fn non_empty_path(text: OsString) -> Result<PathBuf, String> {
    if text.is_empty() {
        Err("the path is empty".into())
    } else {
        Ok(PathBuf::from(text))
    }
}

/// Whether `arg` is a group of short options (`-vn`, `-vx`) whose last one takes a value, which
/// is then the next argument (`-vn 2`): that argument is not the program.
fn short_group_ends_wanting_value(arg: &str) -> bool {
    let Some(group) = arg.strip_prefix('-').filter(|g| !g.starts_with('-')) else {
        return false;
    };
    for (i, c) in group.char_indices() {
        if WITH_VALUE.contains(&format!("-{c}").as_str()) {
            return i + c.len_utf8() == group.len();
        }
        if !SHORT_FLAGS.contains(&c) {
            return false;
        }
    }
    false
}

/// gsmrun's short options that take no value.
const SHORT_FLAGS: &[char] = &['v', 'h', 'V'];

/// Parse the command line (including `argv[0]`) into [`Cli`], accepting mpirun spellings and
/// refusing, with what to write instead, the mpirun options gsmrun does not take.
pub fn parse_from(args: Vec<OsString>) -> Result<Cli, clap::Error> {
    refuse_mpirun_only(&args)?;
    Cli::try_parse_from(normalize_args(args))
}

/// One `-x` item: a variable to pass on, with its value if the user gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Variable name.
    pub name: String,
    /// `Some` for `-x VAR=value`, `None` for `-x VAR` (its value in gsmrun's environment).
    pub value: Option<String>,
}

impl Export {
    /// Parse `VAR` or `VAR=value`, refusing names that are not shell variable names.
    pub fn parse(text: &str) -> Result<Export, String> {
        let (name, value) = match text.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (text, None),
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "-x {text}: `{name}` is not a variable name; write -x NAME or -x NAME=value"
            ));
        }
        Ok(Export {
            name: name.to_string(),
            value,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(args: &[&str]) -> Vec<String> {
        normalize_args(args.iter().map(OsString::from).collect())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn mpirun_spellings_are_rewritten_before_the_program_only() {
        assert_eq!(
            norm(&[
                "gsmrun",
                "-np",
                "4",
                "-hostfile",
                "h",
                "./app",
                "-np",
                "7",
                "-x"
            ]),
            [
                "gsmrun",
                "--np",
                "4",
                "--hostfile",
                "h",
                "--",
                "./app",
                "-np",
                "7",
                "-x"
            ]
        );
        assert_eq!(
            norm(&[
                "gsmrun",
                "-machinefile=h",
                "-x",
                "A=1",
                "-oversubscribe",
                "app"
            ]),
            [
                "gsmrun",
                "--machinefile=h",
                "-x",
                "A=1",
                "--oversubscribe",
                "--",
                "app"
            ]
        );
        // A value that looks like a program path stays the option's value.
        assert_eq!(
            norm(&["gsmrun", "--launch-agent", "/bin/rsh", "app"]),
            ["gsmrun", "--launch-agent", "/bin/rsh", "--", "app"]
        );
        assert_eq!(
            norm(&["gsmrun", "--", "app", "--"]),
            ["gsmrun", "--", "app", "--"]
        );
    }

    #[test]
    fn parses_every_option() {
        let cli = parse_from(
            [
                "gsmrun",
                "-np",
                "3",
                "-H",
                "a:2,b",
                "--map-by",
                "node",
                "--oversubscribe",
                "-x",
                "A",
                "-x",
                "B=2",
                "--tag-output",
                "--timeout",
                "5",
                "-t",
                "4",
                "--fabric",
                "tcp",
                "--launcher",
                "mpiexec",
                "--launch-agent",
                "ssh -p 2",
                "--keep-aslr",
                "--dry-run",
                "-v",
                "./app",
                "-v",
                "--np",
                "9",
            ]
            .iter()
            .map(OsString::from)
            .collect(),
        )
        .unwrap();
        assert_eq!(cli.np, Some(3));
        assert_eq!(cli.host.as_deref(), Some("a:2,b"));
        assert_eq!(cli.map_by, MapByArg::Node);
        assert!(cli.oversubscribe && cli.tag_output && cli.keep_aslr && cli.dry_run && cli.verbose);
        assert_eq!(cli.export, ["A", "B=2"]);
        assert_eq!(cli.timeout, Some(5.0));
        assert_eq!(cli.threads_per_rank, Some(4));
        assert_eq!(cli.fabric, Some(Fabric::Tcp));
        assert_eq!(cli.launcher, LauncherChoice::Mpiexec);
        assert_eq!(cli.launch_agent.as_deref(), Some("ssh -p 2"));
        assert_eq!(cli.program, "./app");
        assert_eq!(cli.args, ["-v", "--np", "9"]);
    }

    #[test]
    fn short_n_and_machinefile_alias() {
        let cli = parse_from(
            ["gsmrun", "-n", "2", "--machinefile", "m", "app"]
                .iter()
                .map(OsString::from)
                .collect(),
        )
        .unwrap();
        assert_eq!(cli.np, Some(2));
        assert_eq!(cli.hostfile, Some(PathBuf::from("m")));
    }

    /// Short options grouped, the last taking the next argument as its value: `-vn 2 app` is
    /// `-v -n 2 app` (the 2 was taken for the program, and `-n` lacked its value).
    #[test]
    fn grouped_short_options_take_their_value_from_the_next_argument() {
        let parse = |args: &[&str]| {
            let argv = std::iter::once("gsmrun").chain(args.iter().copied());
            parse_from(argv.map(OsString::from).collect()).unwrap()
        };
        let cli = parse(&["-vn", "2", "app", "-vn", "3"]);
        assert!(cli.verbose);
        assert_eq!(cli.np, Some(2));
        assert_eq!(cli.program, "app");
        assert_eq!(cli.args, ["-vn", "3"]);
        assert_eq!(parse(&["-vx", "A=1", "app"]).export, ["A=1"]);
        assert_eq!(parse(&["-vt", "4", "app"]).threads_per_rank, Some(4));
        // A value attached to the group stays there.
        let cli = parse(&["-vn2", "app"]);
        assert_eq!((cli.np, cli.program.to_str()), (Some(2), Some("app")));
        assert!(!short_group_ends_wanting_value("-vq"));
        assert!(!short_group_ends_wanting_value("--vn"));
    }

    #[test]
    fn an_empty_hostfile_path_is_named_as_such() {
        for spelling in ["-hostfile", "--hostfile", "--machinefile"] {
            let e = refused(&[spelling, "", "app"]);
            assert!(
                e.contains("invalid value '' for '--hostfile <FILE>': the path is empty"),
                "{e}"
            );
        }
    }

    /// The message of a command line that [`parse_from`] must refuse with exit status 2.
    fn refused(args: &[&str]) -> String {
        let argv = std::iter::once("gsmrun").chain(args.iter().copied());
        match parse_from(argv.map(OsString::from).collect()) {
            Ok(cli) => panic!("{args:?} was accepted as {cli:?}"),
            Err(e) => {
                assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
                e.to_string()
            }
        }
    }

    #[test]
    fn mpirun_options_gsmrun_does_not_take_say_what_to_write_instead() {
        for (args, says) in [
            (
                &["--bind-to", "core", "app"][..],
                &[
                    "`--bind-to core` is an mpirun option that gsmrun does not take",
                    "not needed: gsmrun starts Open MPI with `--bind-to none`",
                    "`-x GSM_PIN=1`",
                ][..],
            ),
            (
                &["-bind-to", "core", "app"],
                &["`-bind-to core` is an mpirun"],
            ),
            (&["--report-bindings", "app"], &["nothing to report"]),
            (
                &["--mca", "btl", "self,tcp", "app"],
                &[
                    "`--mca btl self,tcp` is an mpirun",
                    "write `-x OMPI_MCA_btl=self,tcp`",
                ],
            ),
            (
                &["-np", "2", "-mca", "btl", "tcp", "app"],
                &["`-mca btl tcp` is an mpirun", "`-x OMPI_MCA_btl=tcp`"],
            ),
            (
                &["-N", "2", "app"],
                &["`-N 2` is an mpirun", "`slots=2`", "`-H host1:2,host2:2`"],
            ),
            (&["-N2", "app"], &["`-N2` is an mpirun", "`slots=2`"]),
            (
                &["-npernode", "4", "app"],
                &["`-npernode 4` is an mpirun", "`slots=4`"],
            ),
            (&["-pernode", "app"], &["one rank per host"]),
            (
                &["-c", "2", "app"],
                &["`-c 2` is an mpirun", "write `-np 2`", "write `-t 2`"],
            ),
            (
                &["-H", "a,b", "-wdir", "/x", "app"],
                &["`-wdir /x` is an mpirun", "`cd /x` before running gsmrun"],
            ),
            (&["--wd=/x", "app"], &["`--wd=/x` is an mpirun", "`cd /x`"]),
            (&["-f", "hosts", "app"], &["write `-hostfile hosts`"]),
            (&["-genv", "A", "1", "app"], &["write `-x A=1`"]),
            (&["--bynode", "app"], &["write `--map-by node`"]),
            (
                &["--map-by", "ppr:1:node", "app"],
                &[
                    "`--map-by ppr:1:node` is an Open MPI mapping that gsmrun does not do",
                    "`slots=1`",
                ],
            ),
            (
                &["-map-by=core", "app"],
                &["`--map-by core` is an Open MPI", "takes `slot`"],
            ),
            (
                &["--map-by", "node:OVERSUBSCRIBE", "app"],
                &["write --oversubscribe"],
            ),
        ] {
            let err = refused(args);
            for s in says {
                assert!(err.contains(s), "{args:?}: no {s:?} in\n{err}");
            }
            // clap's own tip would run a program named after the option.
            assert!(!err.contains("as a value"), "{args:?}: {err}");
        }
    }

    #[test]
    fn np_with_its_number_attached_says_to_add_a_space() {
        let err = refused(&["-np4", "app"]);
        assert!(
            err.contains("`-np4` joins the number of ranks to the option")
                && err.contains("write `-np 4`, with a space"),
            "{err}"
        );
        assert!(!err.contains("invalid value 'p4'"), "{err}");
    }

    #[test]
    fn mpirun_options_after_the_program_or_as_values_are_left_alone() {
        let parse = |args: &[&str]| {
            let argv = std::iter::once("gsmrun").chain(args.iter().copied());
            parse_from(argv.map(OsString::from).collect()).unwrap()
        };
        let cli = parse(&[
            "-x",
            "N",
            "-H",
            "a",
            "app",
            "--bind-to",
            "core",
            "-np1",
            "-N",
        ]);
        assert_eq!(cli.export, ["N"]);
        assert_eq!(cli.args, ["--bind-to", "core", "-np1", "-N"]);
        assert_eq!(parse(&["--", "--mca", "x"]).program, "--mca");
        assert_eq!(parse(&["-np=2", "app"]).np, Some(2));
        assert_eq!(parse(&["-n2", "app"]).np, Some(2));
        assert_eq!(parse(&["--map-by", "node", "app"]).map_by, MapByArg::Node);
        // A --map-by value that is neither gsmrun's nor Open MPI's is clap's to refuse.
        assert!(refused(&["--map-by", "diagonal", "app"]).contains("possible values: slot, node"));
    }

    #[test]
    fn export_parsing() {
        assert_eq!(
            Export::parse("A_1").unwrap(),
            Export {
                name: "A_1".into(),
                value: None
            }
        );
        assert_eq!(
            Export::parse("A=b=c").unwrap(),
            Export {
                name: "A".into(),
                value: Some("b=c".into())
            }
        );
        assert!(Export::parse("1A").is_err());
        assert!(Export::parse("=x").is_err());
        assert!(Export::parse("A-B").is_err());
    }
}
