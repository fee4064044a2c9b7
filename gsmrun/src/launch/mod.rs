//! Launch backends: turn a placement into the exact command line (argv, extra environment, and a
//! generated hostfile) of the program that starts the ranks — Open MPI's `mpirun`, MPICH/Hydra's
//! `mpiexec`, or Slurm's `srun`.
//!
//! The backends are a closed enum, [`Backend`], matched in one place ([`build_plan`]); each
//! flavour's grammar lives in its own file. Building a [`Plan`] spawns nothing and touches no file,
//! so tests check the argv directly. Running the plan and watching the ranks is
//! [`crate::supervise`]'s business; parsing hosts and placing ranks is not done here.
//!
//! Every backend starts the same thing on every rank: this very binary in its hidden wrapper mode
//! (`gsmrun --rank-wrapper [--keep-aslr] -- PROGRAM ARGS…`), which turns randomisation off and
//! reports to `gsmrun` (see [`crate::wrapper`]). The wrapper is therefore expected at the same
//! path on every host, as the program is.

pub mod detect;
pub mod hydra;
pub mod openmpi;
pub mod srun;

use crate::cli::{Export, LauncherChoice};
use crate::placement::{MapBy, Placement};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// Which MPI implementation a `mpirun`/`mpiexec` belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// Open MPI (`mpirun (Open MPI) 4.1.4`).
    OpenMpi,
    /// MPICH's process manager Hydra (`HYDRA build details`).
    Hydra,
}

/// The program that starts the ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// Open MPI's launcher, under the given program name (`mpirun` or `mpiexec`).
    OpenMpi { program: String },
    /// MPICH/Hydra's launcher, under the given program name.
    Hydra { program: String },
    /// Slurm's `srun`, inside an allocation.
    Srun,
}

impl Backend {
    /// The program to execute.
    pub fn program(&self) -> &str {
        match self {
            Backend::OpenMpi { program } | Backend::Hydra { program } => program,
            Backend::Srun => "srun",
        }
    }

    /// Does this backend start Open MPI processes (so Open MPI's settings apply)? `srun --mpi=pmix`
    /// starts ranks of whatever MPI the program links, which on these machines is Open MPI.
    pub fn uses_open_mpi_settings(&self) -> bool {
        matches!(self, Backend::OpenMpi { .. } | Backend::Srun)
    }
}

/// A launcher failed before the job started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The launcher program is not installed (or not on `PATH`).
    #[error("`{program}` was not found on PATH; {hint}")]
    NotFound { program: String, hint: String },
    /// `--version` did not say Open MPI or Hydra.
    #[error(
        "`{program} --version` printed `{first_line}`, which is neither Open MPI nor MPICH/Hydra; \
         install Open MPI (apt-get install openmpi-bin) or MPICH (apt-get install mpich), \
         or set GSM_MPI_FLAVOUR=openmpi|hydra if it is compatible with one of them"
    )]
    UnknownFlavour { program: String, first_line: String },
    /// `GSM_MPI_FLAVOUR` has a value we do not know.
    #[error("GSM_MPI_FLAVOUR={0} is not understood; use `openmpi` or `hydra`")]
    BadFlavourVariable(String),
    /// Any other operating-system failure while preparing or starting the launcher.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl LaunchError {
    /// Map the error of spawning `program` to a message that says what to install.
    pub fn from_spawn(program: &str, source: std::io::Error) -> LaunchError {
        if source.kind() == std::io::ErrorKind::NotFound {
            let hint = if program == "srun" {
                "install Slurm's client tools (Debian: apt-get install slurm-client), or pass \
                 --launcher mpirun"
            } else {
                "install an MPI: Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev) or \
                 MPICH (apt-get install mpich)"
            };
            LaunchError::NotFound {
                program: program.to_string(),
                hint: hint.to_string(),
            }
        } else {
            LaunchError::Io {
                what: format!("cannot run `{program}`"),
                source,
            }
        }
    }
}

/// Pick the backend. `in_slurm` is "SLURM_JOB_ID is set"; `explicit_hosts` is "--hostfile or -H was
/// given" (then `auto` uses MPI even inside Slurm, since `srun` would ignore those hosts).
/// `flavour_of` tells the flavour of `mpirun`/`mpiexec` (normally [`detect::detect`]).
pub fn choose_backend(
    choice: LauncherChoice,
    in_slurm: bool,
    explicit_hosts: bool,
    forced_flavour: Option<&str>,
    flavour_of: &dyn Fn(&str) -> Result<Flavour, LaunchError>,
) -> Result<Backend, LaunchError> {
    let flavour = |program: &str| -> Result<Flavour, LaunchError> {
        match forced_flavour {
            Some("openmpi") | Some("ompi") => Ok(Flavour::OpenMpi),
            Some("hydra") | Some("mpich") => Ok(Flavour::Hydra),
            Some(other) => Err(LaunchError::BadFlavourVariable(other.to_string())),
            None => flavour_of(program),
        }
    };
    let mpi = |program: &str| -> Result<Backend, LaunchError> {
        let program = program.to_string();
        Ok(match flavour(&program)? {
            Flavour::OpenMpi => Backend::OpenMpi { program },
            Flavour::Hydra => Backend::Hydra { program },
        })
    };
    match choice {
        LauncherChoice::Srun => Ok(Backend::Srun),
        LauncherChoice::Mpirun => mpi("mpirun"),
        LauncherChoice::Mpiexec => mpi("mpiexec"),
        LauncherChoice::Auto if in_slurm && !explicit_hosts => Ok(Backend::Srun),
        LauncherChoice::Auto => match mpi("mpirun") {
            Err(LaunchError::NotFound { .. }) => match mpi("mpiexec") {
                Err(LaunchError::NotFound { hint, .. }) => Err(LaunchError::NotFound {
                    program: "mpirun` or `mpiexec".to_string(),
                    hint,
                }),
                other => other,
            },
            other => other,
        },
    }
}

/// Everything a backend needs to write its command line.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Where each rank runs.
    pub placement: Placement,
    /// How the placement was made (the launcher is told the same).
    pub map_by: MapBy,
    /// Whether the user allowed oversubscription (only `srun` needs to hear it; the generated
    /// hostfile already gives each host as many slots as ranks placed there).
    pub oversubscribe: bool,
    /// `-x` items, in order.
    pub exports: Vec<Export>,
    /// `--launch-agent`.
    pub launch_agent: Option<String>,
    /// Path of this binary, run as the rank wrapper.
    pub wrapper: String,
    /// `--keep-aslr`.
    pub keep_aslr: bool,
    /// The user's program and its arguments.
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Where the generated hostfile goes.
    pub hostfile_path: PathBuf,
    /// Names of the job-wide `GSM_*` variables to export (their values are in the launcher's
    /// environment, never on the command line).
    pub job_vars: Vec<String>,
    /// gsmrun itself runs as a task of a Slurm job step (`srun … gsmrun`): only `srun` hears it.
    pub in_srun_step: bool,
}

impl JobSpec {
    /// The wrapper and the program: the tail shared by every backend's command line.
    pub fn rank_command(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![self.wrapper.clone().into(), "--rank-wrapper".into()];
        if self.keep_aslr {
            v.push("--keep-aslr".into());
        }
        v.push("--".into());
        v.push(colons_escaped(&self.program));
        v.extend(self.args.iter().map(|a| colons_escaped(a)));
        v
    }

    /// `(host line name, ranks placed there)` for every host that got at least one rank, in host
    /// order.
    pub fn hosts_with_ranks(&self) -> Vec<(&crate::hosts::Host, usize)> {
        let p = &self.placement;
        (0..p.hosts.len())
            .map(|h| (&p.hosts[h], p.ranks_on(h).count()))
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    /// Number of ranks.
    pub fn np(&self) -> usize {
        self.placement.rank_host.len()
    }
}

/// `arg` as it goes on the launcher's command line. `mpirun`, `mpiexec` and `srun` take an
/// argument that is exactly `:` as the start of another program (MPMD, or a heterogeneous
/// step), wherever it stands: `gsmrun ./app a : b` ran `./app a` and then tried to run `b`. So
/// an argument made of colons only gets one more, and the rank wrapper takes it off again
/// ([`colons_restored`]); every other argument goes as it is.
pub fn colons_escaped(arg: &OsStr) -> OsString {
    let mut out = arg.to_os_string();
    if only_colons(arg) {
        out.push(":");
    }
    out
}

/// The argument [`colons_escaped`] made `arg` from.
pub fn colons_restored(arg: OsString) -> OsString {
    if only_colons(&arg) && arg.len() >= 2 {
        let mut bytes = arg.into_encoded_bytes();
        bytes.pop();
        // SAFETY: the bytes were an `OsStr`'s; only an ASCII `:` was removed from their end.
        unsafe { OsString::from_encoded_bytes_unchecked(bytes) }
    } else {
        arg
    }
}

fn only_colons(arg: &OsStr) -> bool {
    !arg.is_empty() && arg.as_encoded_bytes().iter().all(|&b| b == b':')
}

/// A generated hostfile: where it goes and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedHostfile {
    pub path: PathBuf,
    pub contents: String,
}

/// The exact launch: run `argv` with `env` added to gsmrun's environment, after writing `hostfile`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub backend: Backend,
    /// Full argv, `argv[0]` being the launcher program.
    pub argv: Vec<OsString>,
    /// Variables to set in the launcher's environment (user `-x VAR=value` for `srun`; the job's
    /// `GSM_*` values are added by the caller).
    pub env: Vec<(String, String)>,
    pub hostfile: Option<GeneratedHostfile>,
}

impl Plan {
    /// The plan of an MPI launcher that reads a generated hostfile (`contents`) at the spec's
    /// hostfile path; the job's variables travel on the command line, so `env` starts empty.
    fn with_hostfile(
        backend: Backend,
        argv: Vec<OsString>,
        spec: &JobSpec,
        contents: String,
    ) -> Plan {
        Plan {
            backend,
            argv,
            env: Vec::new(),
            hostfile: Some(GeneratedHostfile {
                path: spec.hostfile_path.clone(),
                contents,
            }),
        }
    }
}

/// Build the launch plan for `spec` with `backend`. Pure: spawns nothing, writes nothing.
pub fn build_plan(backend: &Backend, spec: &JobSpec) -> Plan {
    match backend {
        Backend::OpenMpi { program } => openmpi::plan(program, spec),
        Backend::Hydra { program } => hydra::plan(program, spec),
        Backend::Srun => srun::plan(spec),
    }
}

/// Quote one argument for a shell, only when needed, for printing a command line that can be
/// pasted: as it is when plain, in single quotes (POSIX) when it is text a terminal shows as it
/// is, and otherwise in bash's `$'…'` with `\xNN` for each byte that is not UTF-8 or is a control
/// character (a lossy print of `\xff` pasted back other bytes, and an escape sequence printed
/// raw drove the terminal).
pub fn shell_quote(arg: &OsStr) -> String {
    let bytes = arg.as_encoded_bytes();
    let plain = !bytes.is_empty()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-_./:=,@+%^".contains(&b));
    if plain {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    match arg.to_str() {
        Some(text) if !text.chars().any(char::is_control) => {
            format!("'{}'", text.replace('\'', r"'\''"))
        }
        _ => {
            let mut out = String::from("$'");
            for chunk in bytes.utf8_chunks() {
                for c in chunk.valid().chars() {
                    match c {
                        '\\' | '\'' => {
                            out.push('\\');
                            out.push(c);
                        }
                        c if c.is_control() => {
                            let mut utf8 = [0u8; 4];
                            for b in c.encode_utf8(&mut utf8).bytes() {
                                out.push_str(&format!("\\x{b:02x}"));
                            }
                        }
                        c => out.push(c),
                    }
                }
                for b in chunk.invalid() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            out.push('\'');
            out
        }
    }
}

/// The argv as one shell-quoted line.
pub fn command_line(argv: &[OsString]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::hosts::Host;

    pub fn host(name: &str, slots: u32) -> Host {
        Host {
            name: name.into(),
            user: None,
            slots,
            max_slots: None,
        }
    }

    /// Hosts a (2 slots), b (2 slots), c (1 slot, unused); ranks 0,1 on a, 2 on b (by slot).
    pub fn spec() -> JobSpec {
        JobSpec {
            placement: Placement {
                hosts: vec![host("a", 2), host("b", 2), host("c", 1)],
                rank_host: vec![0, 0, 1],
            },
            map_by: MapBy::Slot,
            oversubscribe: false,
            exports: vec![
                Export {
                    name: "PATH".into(),
                    value: None,
                },
                Export {
                    name: "OMP_NUM_THREADS".into(),
                    value: Some("1".into()),
                },
            ],
            launch_agent: None,
            wrapper: "/opt/gsm/gsmrun".into(),
            keep_aslr: false,
            program: "./app".into(),
            args: vec!["-v".into(), "x y".into()],
            hostfile_path: "/tmp/gsmrun.J/hostfile".into(),
            job_vars: vec!["GSM_JOB_ID".into(), "GSM_FABRIC".into()],
            in_srun_step: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colon_arguments_are_escaped_for_the_launcher_and_restored() {
        for (arg, sent) in [
            (":", "::"),
            ("::", ":::"),
            ("a", "a"),
            (":a", ":a"),
            ("a:", "a:"),
            ("", ""),
        ] {
            let escaped = colons_escaped(OsStr::new(arg));
            assert_eq!(escaped, OsStr::new(sent), "{arg:?}");
            assert_ne!(escaped, OsStr::new(":"), "{arg:?} goes as a bare colon");
            assert_eq!(colons_restored(escaped), OsStr::new(arg), "{arg:?}");
        }
    }

    fn fail(_: &str) -> Result<Flavour, LaunchError> {
        panic!("detection must not run")
    }

    #[test]
    fn auto_uses_srun_inside_slurm_without_explicit_hosts() {
        let b = choose_backend(LauncherChoice::Auto, true, false, None, &fail).unwrap();
        assert_eq!(b, Backend::Srun);
        let b = choose_backend(LauncherChoice::Auto, true, true, Some("openmpi"), &fail).unwrap();
        assert_eq!(
            b,
            Backend::OpenMpi {
                program: "mpirun".into()
            }
        );
    }

    #[test]
    fn auto_falls_back_to_mpiexec_when_mpirun_is_missing() {
        let probe = |p: &str| {
            if p == "mpirun" {
                Err(LaunchError::from_spawn(
                    p,
                    std::io::ErrorKind::NotFound.into(),
                ))
            } else {
                Ok(Flavour::Hydra)
            }
        };
        let b = choose_backend(LauncherChoice::Auto, false, false, None, &probe).unwrap();
        assert_eq!(
            b,
            Backend::Hydra {
                program: "mpiexec".into()
            }
        );
        let e = choose_backend(LauncherChoice::Mpirun, false, false, None, &probe).unwrap_err();
        assert!(e.to_string().contains("apt-get install openmpi-bin"), "{e}");
    }

    #[test]
    fn forced_flavour_is_checked() {
        let e = choose_backend(LauncherChoice::Mpirun, false, false, Some("lam"), &fail);
        assert!(matches!(e, Err(LaunchError::BadFlavourVariable(_))));
    }

    #[test]
    fn quoting() {
        let q = |s: &str| shell_quote(OsStr::new(s));
        assert_eq!(q("a/b-c=1,2"), "a/b-c=1,2");
        assert_eq!(q("x y"), "'x y'");
        assert_eq!(q("it's"), r"'it'\''s'");
        assert_eq!(q(""), "''");
        assert_eq!(q("é ü"), "'é ü'");
        // Bytes a terminal would not show as they are, or that are not UTF-8, are spelled out.
        assert_eq!(q("a\nb"), r"$'a\x0ab'");
        assert_eq!(q("\u{1b}[2J"), r"$'\x1b[2J'");
        assert_eq!(q("it's\t\\"), r"$'it\'s\x09\\'");
        use std::os::unix::ffi::OsStrExt as _;
        assert_eq!(
            shell_quote(OsStr::from_bytes(b"\xff\xfe-\xc3\xa9")),
            r"$'\xff\xfe-é'"
        );
    }
}
