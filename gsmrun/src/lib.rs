//! `gsmrun`: the Gossamer job launcher, as a library so that tests can check a launch plan's argv
//! without spawning anything. `main.rs` only parses arguments, calls [`run`] and maps the error
//! to an exit code.
//!
//! The path of a launch: [`cli`] (what the user asked) → [`hosts`] (where the job may run) →
//! [`placement`] (which rank runs where) → [`launch`] (the launcher's exact command line) →
//! [`supervise`] (run it, forward output, share fate), with [`wrapper`] on every rank and the
//! variables of [`env`](mod@env) between them; [`segments`] removes the shared memory a crashed job
//! leaves, and [`jobdir`] the job's directory and what a killed `gsmrun` leaves.

pub mod cli;
pub mod clock;
pub mod env;
pub mod hosts;
pub mod jobdir;
pub mod launch;
pub mod placement;
pub mod progress;
pub mod segments;
pub mod supervise;
pub mod sys;
pub mod wrapper;

pub use sys::{hostname, usable_cpus};

use cli::{Cli, Export};
use hosts::{Host, HostSource, HostsError};
use launch::{Backend, JobSpec, LaunchError, Plan};
use placement::{Placement, PlacementError};
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;

/// Why `gsmrun` could not run the job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A bad hostfile, host list or scheduler environment.
    #[error(transparent)]
    Hosts(#[from] HostsError),
    /// The ranks do not fit the hosts (`from`: where the hosts came from, named when their
    /// slots are the problem).
    #[error("{error}{}", slots_from(error, from))]
    Placement { error: PlacementError, from: String },
    /// Options that do not go together or a bad value.
    #[error("{0}")]
    Usage(String),
    /// The hostfile cannot be read.
    #[error("cannot read hostfile {path}: {source}")]
    ReadHostfile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The launcher could not be found or started.
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

impl Error {
    /// gsmrun's exit status for this error: 2 for bad input (a `GSM_MPI_FLAVOUR` gsmrun does not
    /// know among it: the user's setting, like an option), 127 for a missing launcher, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Hosts(_)
            | Error::Placement { .. }
            | Error::Usage(_)
            | Error::ReadHostfile { .. }
            | Error::Launch(LaunchError::BadFlavourVariable(_)) => 2,
            Error::Launch(LaunchError::NotFound { .. }) => 127,
            Error::Launch(_) => 1,
        }
    }
}

/// Is `name` plainly this machine, without asking the resolver: `localhost`, a loopback
/// address, or this machine's hostname (full or short), in any ASCII case (as DNS compares)?
fn plainly_this_machine(name: &str, me: &str) -> bool {
    name.eq_ignore_ascii_case("localhost")
        || name.eq_ignore_ascii_case(me)
        || me
            .split('.')
            .next()
            .is_some_and(|short| name.eq_ignore_ascii_case(short))
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Refuses a placement that uses this machine under two names (`localhost` and its hostname, say):
/// the MPI launcher takes them for two hosts, starts a second daemon here and fails with an
/// internal error (Open MPI 4.1: "ORTE ... FORCE-TERMINATE") that points nowhere near the cause.
fn one_name_for_this_machine(placement: &Placement, me: &str) -> Result<(), Error> {
    let names: Vec<&str> = (0..placement.hosts.len())
        .filter(|&h| placement.ranks_on(h).next().is_some())
        .map(|h| placement.hosts[h].name.as_str())
        .filter(|n| plainly_this_machine(n, me))
        .collect();
    if let [first, second, ..] = names[..] {
        return Err(Error::Usage(format!(
            "the hosts name this machine twice, as `{first}` and `{second}`; the MPI launcher \
             would take them for two hosts and fail. Name it once, with the slots of both \
             (`{first}:N` or `{first} slots=N`)"
        )));
    }
    Ok(())
}

/// Is `name` this machine (loopback, our hostname, or an address of ours)?
pub fn is_local_host(name: &str) -> bool {
    if plainly_this_machine(name, &hostname()) {
        return true;
    }
    let Ok(addrs) = (name, 0u16).to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| a.ip().is_loopback() || UdpSocket::bind(SocketAddr::new(a.ip(), 0)).is_ok())
}

/// The hosts the job may use and where they came from: --hostfile, else -H, else a Slurm or PBS
/// allocation, else this machine with one slot per usable CPU.
pub fn resolve_hosts(
    cli: &Cli,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<Host>, HostSource), Error> {
    if cli.hostfile.is_some() && cli.host.is_some() {
        return Err(Error::Usage(
            "--hostfile and -H/--host both given; use one of them".to_string(),
        ));
    }
    if let Some(path) = &cli.hostfile {
        let bytes = std::fs::read(path).map_err(|source| Error::ReadHostfile {
            path: path.clone(),
            source,
        })?;
        let found = hosts::parse_hostfile_bytes(path, &bytes)?;
        if found.is_empty() {
            // Said here, where the file is known; placement would only say "no hosts".
            return Err(Error::Usage(format!(
                "hostfile {} names no host; add lines like `node1 slots=4`",
                path.display()
            )));
        }
        return Ok((found, HostSource::Hostfile(path.clone())));
    }
    if let Some(h) = &cli.host {
        return Ok((hosts::parse_host_option(h)?, HostSource::HostOption));
    }
    if let Some(found) = hosts::from_environment(var) {
        return Ok(found?);
    }
    let local = Host {
        name: "localhost".into(),
        user: None,
        slots: usable_cpus(),
        max_slots: None,
    };
    Ok((vec![local], HostSource::Localhost))
}

/// Address for the control listener: loopback when every used host is this machine, else the
/// local address that routes to the first remote host.
pub fn control_ip(placement: &Placement) -> IpAddr {
    let used: Vec<&Host> = (0..placement.hosts.len())
        .filter(|&h| placement.ranks_on(h).next().is_some())
        .map(|h| &placement.hosts[h])
        .collect();
    for h in used {
        if is_local_host(&h.name) {
            continue;
        }
        let Some(addr) = (h.name.as_str(), 9u16)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
        else {
            continue;
        };
        let bind: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        if let Ok(sock) = UdpSocket::bind(bind) {
            if sock.connect(addr).is_ok() {
                if let Ok(local) = sock.local_addr() {
                    return local.ip();
                }
            }
        }
    }
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

/// `n` random bytes from the kernel, as lowercase hex.
fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|x| format!("{x:02x}")).collect())
}

/// A name unique to this job. Uniqueness is all it needs, so without randomness the clock does.
fn new_job_id() -> String {
    let tail = random_hex(4).unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!("{nanos:08x}")
    });
    format!("gsm-{}-{tail}", std::process::id())
}

/// `n thing` or `n things`, for messages (`1 slot`, `2 slots`).
pub(crate) fn plural(n: impl Into<u64>, thing: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("{n} {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// Where the hosts came from: `hostfile F`, `-H`, `Slurm job N`, `PBS node file F`, `this
/// machine`.
fn source_name(source: &HostSource) -> String {
    match source {
        HostSource::Hostfile(path) => format!("hostfile {}", path.display()),
        HostSource::HostOption => "-H".to_string(),
        HostSource::Slurm { job_id } => format!("Slurm job {job_id}"),
        HostSource::Pbs(path) => format!("PBS node file {}", path.display()),
        HostSource::Localhost => "this machine".to_string(),
    }
}

/// What a placement error adds about the hosts' origin: where their slots came from, when the
/// slots are the problem (inside Slurm they are the allocation's, which `salloc -n` sets).
fn slots_from(error: &PlacementError, from: &str) -> String {
    match error {
        PlacementError::NotEnoughSlots { .. }
        | PlacementError::ExceedsMaxSlots { .. }
        | PlacementError::TooManySlots { .. } => format!(" (the hosts and slots of {from})"),
        _ => String::new(),
    }
}

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

/// Everything decided before launching: printed by --dry-run/-v, run otherwise.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub placement: Placement,
    pub source: HostSource,
    pub spec: JobSpec,
    pub plan: Plan,
    /// Job-wide variables (values), without the control address and key.
    pub job_env: Vec<(String, String)>,
    /// Open MPI settings and root permission added to the launcher's environment.
    pub mpi_env: Vec<(String, String)>,
    pub job_id: String,
    pub tmpdir: PathBuf,
    /// What `gsmrun` says before it starts the job (on stderr, also for `--dry-run`).
    pub warnings: Vec<String>,
}

/// The fabric of the job: `--fabric`, else `GSM_FABRIC` of gsmrun's environment (which the ranks
/// would otherwise have seen only on the launching host, and there overridden), else `auto`.
fn fabric(cli: &Cli, var: &dyn Fn(&str) -> Option<String>) -> Result<cli::Fabric, Error> {
    use clap::ValueEnum;
    if let Some(f) = cli.fabric {
        return Ok(f);
    }
    let Some(v) = var(env::job::FABRIC) else {
        return Ok(cli::Fabric::Auto);
    };
    cli::Fabric::from_str(v.trim(), true).map_err(|_| {
        Error::Usage(format!(
            "GSM_FABRIC={v} in gsmrun's environment: expected auto, shm or tcp (or pass --fabric, \
             which takes precedence)"
        ))
    })
}

/// Resolve hosts, place ranks, choose the backend and build the plan. Spawns only
/// `mpirun --version` (unless GSM_MPI_FLAVOUR is set).
pub fn prepare(cli: &Cli, var: &dyn Fn(&str) -> Option<String>) -> Result<Prepared, Error> {
    for e in &cli.export {
        Export::parse(e).map_err(Error::Usage)?;
    }
    let fabric = fabric(cli, var)?;
    if fabric == cli::Fabric::Verbs {
        let given = if cli.fabric.is_some() {
            "--fabric verbs"
        } else {
            "GSM_FABRIC=verbs in gsmrun's environment"
        };
        return Err(Error::Usage(format!(
            "{given}: Gossamer has no RDMA (verbs) fabric yet, so every rank would fail to \
             start; use --fabric auto, shm or tcp"
        )));
    }
    // GSM_THREADS reaches every rank when -t is not given, from `-x GSM_THREADS=N` or else from
    // gsmrun's environment (see `env::passed_settings`): a value the runtime would refuse is
    // refused here, before the launch, as -t's is, instead of by every rank after it.
    if cli.threads_per_rank.is_none() {
        let given = cli
            .export
            .iter()
            .filter_map(|e| Export::parse(e).ok())
            .filter(|e| e.name == env::job::THREADS)
            .find_map(|e| e.value);
        let from_x = given.is_some();
        // A value that is not UTF-8 is passed on too, and refused by the runtime.
        let value = given.or_else(|| {
            var(env::job::THREADS).or_else(|| {
                std::env::var_os(env::job::THREADS).map(|v| v.to_string_lossy().into_owned())
            })
        });
        if let Some(v) = value.filter(|v| !v.trim().is_empty()) {
            let t = v.trim();
            let in_range = t.bytes().all(|b| b.is_ascii_digit())
                && t.parse::<u32>()
                    .is_ok_and(|n| (1..=env::job::MAX_THREADS).contains(&n));
            if !in_range {
                let what = if from_x {
                    format!("-x {}={v}", env::job::THREADS)
                } else {
                    format!("{}={v} in gsmrun's environment", env::job::THREADS)
                };
                return Err(Error::Usage(format!(
                    "{what}: every rank would refuse it; give a whole number of worker threads \
                     from 1 to {} (or pass -t N, which takes precedence)",
                    env::job::MAX_THREADS
                )));
            }
        }
    }
    if cli.threads_per_rank == Some(0) {
        return Err(Error::Usage(
            "-t 0: a rank needs at least one worker thread".into(),
        ));
    }
    if let Some(t) = cli.threads_per_rank.filter(|&t| t > env::job::MAX_THREADS) {
        return Err(Error::Usage(format!(
            "-t {t}: the runtime runs at most {} worker threads per rank (GSM_THREADS), so every \
             rank would fail; give 1 to {}",
            env::job::MAX_THREADS,
            env::job::MAX_THREADS
        )));
    }
    let (hosts, source) = resolve_hosts(cli, var)?;
    let placement = placement::place(&hosts, cli.np, cli.map_by.into(), cli.oversubscribe)
        .map_err(|error| Error::Placement {
            error,
            from: source_name(&source),
        })?;
    one_name_for_this_machine(&placement, &hostname())?;
    let explicit = cli.hostfile.is_some() || cli.host.is_some();
    let in_slurm = hosts::slurm::job_id(var).is_some();
    let forced = var(env::input::MPI_FLAVOUR);
    let backend = launch::choose_backend(
        cli.launcher,
        in_slurm,
        explicit,
        forced.as_deref(),
        &launch::detect::detect,
    )?;
    if backend == Backend::Srun && explicit {
        return Err(Error::Usage(
            "--launcher srun places the ranks on the Slurm allocation's nodes itself, so -H and \
             --hostfile cannot choose them (they were ignored): drop them, or start the ranks \
             on those hosts with --launcher mpirun"
                .into(),
        ));
    }
    let job_id = new_job_id();
    let tmpdir = std::env::temp_dir().join(jobdir::dir_name(&job_id));

    let mut job_env = vec![
        (env::job::JOB_ID.to_string(), job_id.clone()),
        (
            env::job::SIZE.to_string(),
            placement.rank_host.len().to_string(),
        ),
    ];
    if let Some(t) = cli.threads_per_rank {
        job_env.push((env::job::THREADS.to_string(), t.to_string()));
    }
    job_env.push((env::job::FABRIC.to_string(), fabric.as_str().to_string()));
    if backend != Backend::Srun {
        let (names, idx) = rank_hosts(&placement);
        job_env.push((env::job::HOSTS.to_string(), names.join(",")));
        job_env.push((env::job::RANK_HOSTS.to_string(), idx.join(",")));
    }
    let mut job_vars: Vec<String> = job_env.iter().map(|(k, _)| k.clone()).collect();
    job_vars.push(env::job::CONTROL.to_string());
    job_vars.push(env::job::CONTROL_KEY.to_string());
    // A -x of a variable gsmrun or the wrapper sets for this job would reach the ranks beside, or
    // instead of, gsmrun's own value (the control key and job id among them): refused rather than
    // silently overridden. Those gsmrun leaves unset here (GSM_THREADS without -t, say) may be
    // exported.
    for e in &cli.export {
        let export = Export::parse(e).map_err(Error::Usage)?;
        let ours = job_vars
            .iter()
            .map(String::as_str)
            .chain(env::RANK_VARS.iter().copied())
            .any(|v| v == export.name && v != env::input::LOG);
        if ours {
            let hint = match export.name.as_str() {
                env::job::THREADS => "use -t N alone",
                env::job::FABRIC => "use --fabric",
                _ => "remove this -x",
            };
            return Err(Error::Usage(format!(
                "-x {e}: gsmrun sets {} itself for every rank of this job; {hint}",
                export.name
            )));
        }
    }
    if var(env::input::LOG).is_some() {
        job_vars.push(env::input::LOG.to_string());
    }
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    let exported: Vec<String> = cli
        .export
        .iter()
        .filter_map(|e| Export::parse(e).ok().map(|x| x.name))
        .collect();
    let taken: Vec<&str> = job_vars
        .iter()
        .chain(&exported)
        .map(String::as_str)
        .collect();
    let settings = env::passed_settings(names.iter().map(String::as_str), &taken);
    job_vars.extend(settings);

    let mut mpi_env = Vec::new();
    if backend.uses_open_mpi_settings() {
        for (k, v) in env::OPEN_MPI_DEFAULTS {
            if var(k).is_none() {
                mpi_env.push((k.to_string(), v.to_string()));
            }
        }
        // Open MPI's shared-memory segments go into a directory of this job's, which the wrappers
        // create and gsmrun removes afterwards (see `segments`).
        if var(segments::MPI_DIR_VAR).is_none() {
            if let Some(d) = segments::mpi_dir(&job_id) {
                mpi_env.push((segments::MPI_DIR_VAR.to_string(), d.display().to_string()));
            }
        }
        // Only when the user has not allowed it already: then there is nothing to warn about.
        if sys::effective_uid() == 0
            && env::OPEN_MPI_ROOT
                .iter()
                .any(|(k, v)| var(k).as_deref() != Some(*v))
        {
            for (k, v) in env::OPEN_MPI_ROOT {
                mpi_env.push((k.to_string(), v.to_string()));
            }
        }
    }

    // `-x NAME` of a variable gsmrun's environment does not have is passed on as nothing, with
    // a word from gsmrun: Open MPI printed a warning of its own for it (about a variable
    // "requested to be forwarded but not found"), and MPICH and srun said nothing.
    let mut warnings = Vec::new();
    if backend == Backend::Srun && !in_slurm {
        warnings.push(
            "gsmrun: warning: --launcher srun outside a Slurm allocation: srun makes one of its \
             own and places the ranks on its nodes, not as the placement gsmrun shows (this \
             machine's); run gsmrun inside salloc or sbatch to see where they go"
                .to_string(),
        );
    }
    let exports: Vec<Export> = cli
        .export
        .iter()
        .filter_map(|e| Export::parse(e).ok())
        .filter(|e| {
            // A value that is not UTF-8 is set all the same (the launcher passes it on).
            let unset =
                e.value.is_none() && var(&e.name).is_none() && std::env::var_os(&e.name).is_none();
            if unset {
                warnings.push(format!(
                    "gsmrun: warning: -x {0}: {0} is not set in gsmrun's environment, so the \
                     ranks do not get it (write -x {0}=VALUE to give it a value)",
                    e.name
                ));
            }
            !unset
        })
        .collect();
    let wrapper = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "gsmrun".to_string());
    let spec = JobSpec {
        placement: placement.clone(),
        map_by: cli.map_by.into(),
        oversubscribe: cli.oversubscribe,
        exports,
        launch_agent: cli.launch_agent.clone(),
        wrapper,
        keep_aslr: cli.keep_aslr,
        program: cli.program.clone(),
        args: cli.args.clone(),
        hostfile_path: tmpdir.join("hostfile"),
        job_vars,
        in_srun_step: in_srun_step(var),
    };
    let plan = launch::build_plan(&backend, &spec);
    check_string_lengths(&plan, job_env.iter().chain(&plan.env).chain(&mpi_env))?;
    Ok(Prepared {
        placement,
        source,
        spec,
        plan,
        job_env,
        mpi_env,
        job_id,
        tmpdir,
        warnings,
    })
}

/// Whether gsmrun runs as a task of a Slurm job step (`srun -n1 gsmrun …` in an allocation):
/// `SLURM_STEP_ID` names a step, not the batch script's (`4294967294`, or unset) nor the
/// extern step's. Its own `srun` then waits for ever for the CPUs that step holds ("step creation
/// temporarily disabled … Requested nodes are busy") unless it may share them (`--overlap`).
fn in_srun_step(var: &dyn Fn(&str) -> Option<String>) -> bool {
    var("SLURM_STEP_ID")
        .or_else(|| var("SLURM_STEPID"))
        .and_then(|s| s.trim().parse::<u64>().ok())
        .is_some_and(|id| id < 0xffff_fff0)
}

/// `GSM_HOSTS` and `GSM_RANK_HOSTS` of `placement`: the names of the hosts that got ranks, in
/// host order, and for each rank the index of its host among them. Hosts without a rank are left
/// out: listed, a hostfile of 15 000 hosts made `GSM_HOSTS` too long for a job of two ranks.
fn rank_hosts(placement: &Placement) -> (Vec<&str>, Vec<String>) {
    let mut used = vec![false; placement.hosts.len()];
    for &h in &placement.rank_host {
        used[h] = true;
    }
    let mut names = Vec::new();
    let mut at = vec![0usize; placement.hosts.len()];
    for (h, host) in placement.hosts.iter().enumerate() {
        if used[h] {
            at[h] = names.len();
            names.push(host.name.as_str());
        }
    }
    let idx = (placement.rank_host.iter())
        .map(|&h| at[h].to_string())
        .collect();
    (names, idx)
}

/// Refuse a launch whose argv or environment has a string over [`env::MAX_STRING`]: the kernel
/// would refuse to start the launcher (`GSM_RANK_HOSTS` grows with the ranks, `-x` values and
/// program arguments with the user).
fn check_string_lengths<'a>(
    plan: &Plan,
    vars: impl Iterator<Item = &'a (String, String)>,
) -> Result<(), Error> {
    let too_long = |what: String, len: usize| {
        Err(Error::Usage(format!(
            "{what} would be {len} bytes, over the {} bytes Linux allows in one argument or \
             environment string (MAX_ARG_STRLEN), so the launcher could not start; use fewer \
             ranks or hosts, or shorter values",
            env::MAX_STRING
        )))
    };
    for (k, v) in vars {
        let len = k.len() + 1 + v.len() + 1;
        if len > env::MAX_STRING {
            return too_long(format!("the variable {k}"), len);
        }
    }
    for a in &plan.argv {
        if a.len() + 1 > env::MAX_STRING {
            let head: String = a.to_string_lossy().chars().take(20).collect();
            return too_long(format!("the argument `{head}…`"), a.len() + 1);
        }
    }
    Ok(())
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

/// Run `gsmrun` with these options; returns its exit status.
pub fn run(cli: &Cli) -> Result<i32, Error> {
    let var = |k: &str| std::env::var(k).ok();
    let prepared = prepare(cli, &var)?;
    for w in &prepared.warnings {
        eprintln!("{w}");
    }
    if cli.dry_run {
        print!("{}", describe(&prepared));
        let _ = std::io::stdout().flush();
        return Ok(0);
    }
    if cli.verbose {
        eprint!("{}", describe(&prepared));
    }
    if prepared
        .mpi_env
        .iter()
        .any(|(k, _)| k == "OMPI_ALLOW_RUN_AS_ROOT")
    {
        eprintln!(
            "gsmrun: warning: running as root; allowing Open MPI to run as root \
             (OMPI_ALLOW_RUN_AS_ROOT=1)"
        );
    }
    let io = |what: &str| {
        let what = what.to_string();
        move |source| LaunchError::Io { what, source }
    };
    // control_ip may wait for DNS; done before the job's directory exists, a Ctrl-C there leaves
    // nothing behind.
    let ip = control_ip(&prepared.placement);
    let listener = TcpListener::bind(SocketAddr::new(ip, 0))
        .map_err(io(&format!("cannot listen on {ip} for the ranks' reports")))?;
    let addr = listener
        .local_addr()
        .map_err(io("cannot read the control address"))?;
    // The control key authenticates the wrappers' reports, so it must be random: no fallback.
    let key = random_hex(20).map_err(io("cannot read /dev/urandom for the job's control key"))?;
    // From here on a signal is caught, not fatal, so the directory below is always removed.
    let signals = supervise::catch_signals()?;
    // What killed gsmruns left on this host goes first (only theirs: see `jobdir`).
    if let Some(parent) = prepared.tmpdir.parent() {
        let cleaned = jobdir::remove_dead_jobs(parent);
        if !cleaned.is_empty() {
            tracing::debug!(?cleaned, "removed what killed gsmruns left behind");
        }
    }
    // Always created, also without a hostfile: its lock tells later gsmruns this job lives.
    let _dir = jobdir::JobDir::create(&prepared.tmpdir)
        .map_err(io(&format!("cannot create {}", prepared.tmpdir.display())))?;
    if let Some(h) = &prepared.plan.hostfile {
        std::fs::write(&h.path, &h.contents)
            .map_err(io(&format!("cannot write {}", h.path.display())))?;
    }
    let mut env: Vec<(String, String)> = prepared.job_env.clone();
    env.push((env::job::CONTROL.to_string(), addr.to_string()));
    env.push((env::job::CONTROL_KEY.to_string(), key.clone()));
    env.extend(prepared.plan.env.iter().cloned());
    env.extend(prepared.mpi_env.iter().cloned());
    tracing::debug!(%addr, argv = ?prepared.plan.argv, "launching");
    let opts = supervise::Options {
        np: prepared.placement.rank_host.len(),
        key,
        tag_output: cli.tag_output,
        timeout: cli.timeout,
        start_timeout: cli.start_timeout.or(match prepared.plan.backend {
            launch::Backend::Srun => None,
            _ => Some(supervise::START_TIMEOUT),
        }),
        rank_hosts: (prepared.placement.rank_host.iter())
            .map(|&h| prepared.placement.hosts[h].name.clone())
            .collect(),
        wrapper: prepared.spec.wrapper.clone(),
        slurm_job_with_hosts: hosts::slurm::job_id(&|k| std::env::var(k).ok()).filter(|_| {
            (cli.hostfile.is_some() || cli.host.is_some())
                && matches!(prepared.plan.backend, launch::Backend::OpenMpi { .. })
        }),
    };
    let result = supervise::run(&prepared.plan, &env, listener, &opts, signals);
    // Whatever happened, no segment of this job stays in this host's /dev/shm (ranks on other
    // hosts are cleaned by their wrappers).
    let removed = segments::remove_job_segments(&prepared.job_id)
        + segments::remove_mpi_dir(&prepared.job_id);
    if removed > 0 {
        tracing::debug!(removed, job_id = %prepared.job_id, "removed leftover segments");
    }
    Ok(result?)
}

/// Turn on `tracing` output on stderr when `GSM_LOG` is set, coloured only when stderr is a
/// terminal (a log sent to a file or a pipe gets no escape sequences) and `NO_COLOR` is unset.
pub fn init_logging() {
    if let Ok(filter) = std::env::var(env::input::LOG) {
        use std::io::IsTerminal as _;
        let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .with_ansi(colour)
            .try_init();
    }
}
