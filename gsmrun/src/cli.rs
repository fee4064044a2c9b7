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
use clap::{Parser, ValueEnum};
use gsm_contract::contract::Build;
pub use gsm_contract::contract::FabricChoice;
use std::ffi::OsString;
use std::path::PathBuf;

mod mpirun;

pub use mpirun::refuse_mpirun_only;

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

Hosts: --hostfile/-H win; otherwise a Slurm allocation (SLURM_JOB_ID, with SLURM_JOB_NODELIST
and SLURM_TASKS_PER_NODE, else SLURM_JOB_CPUS_PER_NODE) or PBS_NODEFILE (a host name per slot) is
used; otherwise this machine, with one slot per CPU this process may use. Hostfiles may use Open
MPI's grammar (`node1 slots=4`), MPICH's (`node1:4`) or Slurm hostlists (`node[01-04] slots=2`);
a host named on several lines adds up its slots. Without -np, one rank per slot.

Launcher (--launcher auto): `srun --mpi=pmix` inside a Slurm allocation without --hostfile/-H,
else `mpirun`, else `mpiexec`; whether that is Open MPI or MPICH's Hydra is asked with
`--version` (GSM_MPI_FLAVOUR=openmpi|hydra skips the question). The program and this gsmrun must
be at the same paths on every host. Under `srun -n1 gsmrun …` (a job step) the ranks' step
shares its CPUs (--overlap).

Every rank starts with address-space randomisation off (unless --keep-aslr) through a small
wrapper (this same binary) that also reports its exit to gsmrun: when any rank exits non-zero or is
killed by a signal, gsmrun prints one line naming the rank and host, ends every other rank, and
exits with that status. Rank output is forwarded line by line and byte for byte (a last line
without a newline stays so, and what comes next follows on it); --tag-output prefixes each line
with `[1,RANK]<stdout>:` or `[1,RANK]<stderr>:` as Open MPI does, and ends a last line without a
newline with one. If gsmrun's own output cannot be written, the job ends. A rank whose run ended
only because another rank failed waits up to 1.5 s for that rank's report, which is the one
named; a rank that runs on without joining the Gossamer job is named in a note after 30 s. What a
rank's program leaves running in its process group is ended with it (SIGTERM, SIGKILL 2 s
later), and nothing the launcher started outlives gsmrun. A rank stopped (SIGSTOP, a debugger)
while others run is named within 2 s and ends the job after --stop-timeout; a job stopped as a
whole (scontrol suspend) waits. A rank's host that stops answering (a cut network) ends the job
after --lost-timeout, naming it. A killed gsmrun ends every rank at once. See docs/faults.md.

Environment:
  read by gsmrun   GSM_LOG (see Logs), GSM_MPI_FLAVOUR, GSM_FABRIC (the default of --fabric),
                   GSM_THREADS (refused before the launch, as -t is, when the ranks would refuse
                   it), NO_COLOR, TMPDIR (the job's directory), and the SLURM_*/PBS_NODEFILE
                   variables above
  every rank gets  GSM_JOB_ID, GSM_SIZE, GSM_FABRIC, GSM_THREADS (with -t), GSM_HOSTS and
                   GSM_RANK_HOSTS (not under srun); from its wrapper GSM_RANK, GSM_HOST_ADDR,
                   GSM_LOCAL_RANK, GSM_LOCAL_SIZE and GSM_STATE_FD
  passed on        the -x variables, and every other GSM_* variable of gsmrun's environment
                   (a -x of it wins); a -x of a variable gsmrun sets itself is refused
  Open MPI         OMPI_MCA_pml=ob1 and OMPI_MCA_orte_keep_fqdn_hostnames=1 unless already
                   set; as root, OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1, with a warning

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
  2          bad input: options, hostfile, host list, placement, or GSM_MPI_FLAVOUR,
             GSM_FABRIC or GSM_THREADS in gsmrun's environment
  1          a rank exited 0 where the others would wait for it for ever (it never
             joined the Gossamer job, ran fewer runs, or exited inside a run); not
             every rank started within --start-timeout; a rank stayed stopped for
             --stop-timeout, or its host was lost (--lost-timeout), or its launcher
             daemon vanished; a descriptor limit (ulimit -n) too low; or any other failure of
             gsmrun or of the launcher itself (which exited non-zero, was killed,
             or ran on for 10 s after every rank exited 0; the message says which)

Logs: GSM_LOG=debug gsmrun … prints gsmrun's debug log on stderr.";

/// `--fabric`'s values with their help: the launch contract's choices, one list for `gsmrun` and
/// the runtime (`gsm_contract::contract`), passed on as `GSM_FABRIC`.
fn fabric_values() -> impl clap::builder::TypedValueParser<Value = FabricChoice> {
    let values = FabricChoice::all().map(|c| {
        let help = match c {
            FabricChoice::Auto => FabricChoice::AUTO_OVER.to_string(),
            FabricChoice::Only(k) => match k.build() {
                Build::Always => format!("{}, between every pair of ranks", k.over()),
                Build::Feature { feature, .. } => format!(
                    "{}, between every pair of ranks (the program must be built with \
                     gossamer's `{feature}` feature)",
                    k.over()
                ),
            },
        };
        let help = help[..1].to_uppercase() + &help[1..];
        clap::builder::PossibleValue::new(c.name()).help(help)
    });
    clap::builder::PossibleValuesParser::new(values)
        .map(|w| FabricChoice::parse(&w).expect("each of --fabric's values is a choice"))
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
    if crate::clock::deadline(std::time::Instant::now(), t).is_none() {
        return Err(
            "too many seconds for this system's clock to count to; give a smaller number".into(),
        );
    }
    Ok(t)
}

/// `--stop-timeout`'s value: [`seconds`], or 0 for no limit (returned as infinity).
fn seconds_or_never(s: &str) -> Result<f64, String> {
    if s.trim().parse::<f64>() == Ok(0.0) {
        return Ok(f64::INFINITY);
    }
    seconds(s)
}

/// `--lost-timeout`'s value: [`seconds`], at least 1 (TCP's keepalive counts whole seconds) and
/// at most a day.
fn at_least_a_second(s: &str) -> Result<f64, String> {
    let t = seconds(s)?;
    if !(1.0..=86_400.0).contains(&t) {
        return Err("give 1 to 86400 seconds".to_string());
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

    /// End the job (exit 1) once a rank has stayed stopped (SIGSTOP, a debugger, a freezer) for
    /// SECONDS while other ranks run and wait for it; 0: never. A job stopped as a whole
    /// (Slurm's `scontrol suspend`) waits without limit [default: 60].
    #[arg(
        long = "stop-timeout",
        value_name = "SECONDS",
        allow_negative_numbers = true,
        value_parser = seconds_or_never
    )]
    pub stop_timeout: Option<f64>,

    /// End the job (exit 1) when a rank's host has not answered for SECONDS (a network cut, a
    /// host down), naming it [default: 8].
    #[arg(
        long = "lost-timeout",
        value_name = "SECONDS",
        allow_negative_numbers = true,
        value_parser = at_least_a_second
    )]
    pub lost_timeout: Option<f64>,

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
    #[arg(long, value_name = "FABRIC", value_parser = fabric_values())]
    pub fabric: Option<FabricChoice>,

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
    "--stop-timeout",
    "--lost-timeout",
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
    ("-stop-timeout", "--stop-timeout"),
    ("-lost-timeout", "--lost-timeout"),
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

/// The item as the user wrote it: `NAME` or `NAME=value`.
impl std::fmt::Display for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={v}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests;
