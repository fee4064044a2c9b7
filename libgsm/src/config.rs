//! Runtime configuration: how many workers, how big fiber stacks and request slots are, and
//! whether workers are pinned. It reads the environment on request ([`Config::from_env`]); it does
//! not start anything.
//!
//! Slot memory: every ordered pair of workers (c, t) has a request ring (c → t) and a response
//! ring (t → c), each of `slots_per_ring × slot_size` bytes, so a worker's rings cost
//! `2 × W × slots_per_ring × slot_size` bytes, W being the number of workers in the job. With the
//! defaults (16 slots of 4 KiB = 64 KiB per ring): W = 2 → 256 KiB per worker, W = 16 → 2 MiB,
//! W = 64 × 16 = 1024 → 128 MiB (lower `slot_size`/`slots_per_ring` for jobs that large).

use crate::error::Error;

/// How the runtime is laid out. Build with [`Config::default`] or [`Config::from_env`] and adjust
/// with the builder-style setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Worker threads in this process (each runs a fiber scheduler). Default: the CPUs this
    /// process may use, shared with the other ranks of its host ([`default_workers`]).
    pub workers: usize,
    /// Usable stack size of one fiber in bytes (a guard page is added below it). Default 256 KiB;
    /// 64 KiB to 1 GiB. A worker thread's own stack, where an idle worker serves delegated
    /// closures and callbacks, is this plus 64 KiB, and at least 2 MiB (or `RUST_MIN_STACK`).
    pub stack_size: usize,
    /// Bytes of one request/response slot (one batch). Default 4096; 256 bytes to 64 MiB, a
    /// multiple of 64.
    pub slot_size: usize,
    /// Slots per ring: a power of two, at least 2. Default 16.
    pub slots_per_ring: usize,
    /// Pin worker i to the i-th allowed CPU. Ignored (off) when there are more workers than
    /// allowed CPUs, since pinning then only makes workers fight over cores.
    pub pin: bool,
}

/// CPUs this process may run on (its affinity mask), at least 1.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Variables in which launchers give the number of ranks on this rank's host: `gsmrun`'s, Open
/// MPI's `mpirun`'s, MPICH's Hydra's.
const LOCAL_SIZE_VARS: [&str; 3] = [
    "GSM_LOCAL_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
];

/// The default worker count of this process: the CPUs it may use, divided among the ranks of its
/// host when a launcher says how many there are and left each of them the whole machine.
///
/// Why: ranks of one host that each took every CPU ran more workers than cores, and ran slower
/// (docs/performance-log.md, "Default worker count"). A launcher that binds each rank to its
/// own CPUs has already narrowed the affinity mask, and that mask is taken as it is. At least one
/// worker; `GSM_THREADS` or `gsmrun -t` still choose freely.
pub fn default_workers() -> usize {
    let local = LOCAL_SIZE_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse::<usize>().ok())
        .filter(|n| *n > 0);
    let online = crate::sys::proc::cpus_online();
    share_of_host(available_cpus(), online, local)
}

/// The workers a rank allowed `cpus` of a host's `online` CPUs runs when `local` ranks share
/// the host (see [`default_workers`]).
fn share_of_host(cpus: usize, online: usize, local: Option<usize>) -> usize {
    match local {
        Some(n) if n > 1 && cpus >= online => (cpus / n).max(1),
        _ => cpus.max(1),
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workers: default_workers(),
            stack_size: 256 * 1024,
            slot_size: 4096,
            slots_per_ring: 16,
            pin: false,
        }
    }
}

/// Most workers one process may run.
const MAX_WORKERS: usize = gsm_contract::contract::MAX_WORKERS as usize;
/// Smallest fiber stack: what a panic needs to be reported from a fiber with its backtrace
/// (`RUST_BACKTRACE=1` or `full`: 20-30 KiB to capture and print it, measured in release
/// builds), with room left for the code that panicked. With 16 KiB, once the minimum, such a
/// panic overflowed the stack and the process died of SIGSEGV instead of reporting it.
const MIN_STACK: usize = 64 << 10;
/// Largest fiber stack: a fiber that needs more should not be a fiber, and a larger value is
/// more likely a typo (`GSM_STACK_SIZE=256M` for `256K`) than a need.
const MAX_STACK: usize = 1 << 30;
/// Largest slot: records larger than a slot take the large-record path anyway, so bigger slots
/// only cost memory (every ordered pair of workers has two rings of them).
const MAX_SLOT: usize = 64 << 20;

/// The value of variable `name`, if set. A value that is not UTF-8 is an error, not "unset".
fn env_var(name: &'static str) -> Result<Option<String>, Error> {
    var_value(name, std::env::var(name))
}

fn var_value(
    name: &'static str,
    v: Result<String, std::env::VarError>,
) -> Result<Option<String>, Error> {
    match v {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::Env {
            name,
            value: v.to_string_lossy().into_owned(),
            reason: "not valid UTF-8",
        }),
    }
}

/// `name` read with `parse`, and checked with `problem` (why the value cannot be, if it
/// cannot), the variable named in every error; `None` when unset or empty, as for
/// [`env_switch`] (`export GSM_THREADS=` keeps the default).
fn env_number(
    name: &'static str,
    parse: fn(&str) -> Option<usize>,
    syntax: &'static str,
    problem: fn(usize) -> Option<&'static str>,
) -> Result<Option<usize>, Error> {
    number_value(name, env_var(name)?, parse, syntax, problem)
}

/// [`env_number`] of the value `v` of `name`.
fn number_value(
    name: &'static str,
    v: Option<String>,
    parse: fn(&str) -> Option<usize>,
    syntax: &'static str,
    problem: fn(usize) -> Option<&'static str>,
) -> Result<Option<usize>, Error> {
    let Some(v) = v.filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let err = |reason| Error::Env {
        name,
        value: v.clone(),
        reason,
    };
    let n = parse(&v).ok_or_else(|| err(syntax))?;
    match problem(n) {
        Some(reason) => Err(err(reason)),
        None => Ok(Some(n)),
    }
}

/// On/off variable `name` (`1`/`true`/`on`/`yes` or `0`/`false`/`off`/`no`, any case), `default`
/// when unset or empty (`export GSM_X=` keeps the default); anything else is an error naming it.
pub(crate) fn env_switch(name: &'static str, default: bool) -> Result<bool, Error> {
    let Some(v) = env_var(name)? else {
        return Ok(default);
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "" => Ok(default),
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(Error::Env {
            name,
            value: v,
            reason: "expected 1/true/on or 0/false/off",
        }),
    }
}

/// A whole number written in decimal digits; one too large for a `usize` is `usize::MAX`, and
/// 0 is 0, so that the range check names the range (`GSM_THREADS=0` or a 30-digit count are
/// out of range, not "not a positive integer").
fn digits(v: &str) -> Option<usize> {
    (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .then(|| v.parse::<usize>().unwrap_or(usize::MAX))
}

/// A count: a whole number, no suffix (`GSM_THREADS=1k` is a slip, not 1024 threads).
fn parse_count(v: &str) -> Option<usize> {
    digits(v.trim())
}

fn workers_problem(n: usize) -> Option<&'static str> {
    (n == 0 || n > MAX_WORKERS).then_some("expected 1 to 4096 workers")
}

fn stack_problem(n: usize) -> Option<&'static str> {
    (!(MIN_STACK..=MAX_STACK).contains(&n)).then_some("expected 64 KiB to 1 GiB")
}

fn slot_problem(n: usize) -> Option<&'static str> {
    if !(256..=MAX_SLOT).contains(&n) {
        Some("expected 256 bytes to 64 MiB")
    } else if n % 64 != 0 {
        Some("expected a multiple of 64 bytes")
    } else {
        None
    }
}

fn parse_size(v: &str) -> Option<usize> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1usize << 10),
        'm' | 'M' => (&v[..v.len() - 1], 1 << 20),
        'g' | 'G' => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    Some(digits(num)?.saturating_mul(mult))
}

impl Config {
    /// The defaults, overridden by `GSM_THREADS`, `GSM_STACK_SIZE`, `GSM_SLOT_SIZE` (sizes accept
    /// K/M/G suffixes) and `GSM_PIN` (`1`/`true`/`on` or `0`/`false`/`off`).
    ///
    /// Each variable is checked as it is read, and an error names it with its value: junk, a
    /// value out of range, or one that is not UTF-8 (never taken for "unset").
    pub fn from_env() -> Result<Config, Error> {
        const SIZE: &str = "expected a whole number of bytes, optionally with a K/M/G suffix";
        let mut c = Config::default();
        if let Some(n) = env_number(
            "GSM_THREADS",
            parse_count,
            "expected a whole number of workers",
            workers_problem,
        )? {
            c.workers = n;
        }
        if let Some(n) = env_number("GSM_STACK_SIZE", parse_size, SIZE, stack_problem)? {
            c.stack_size = n;
        }
        if let Some(n) = env_number("GSM_SLOT_SIZE", parse_size, SIZE, slot_problem)? {
            c.slot_size = n;
        }
        c.pin = env_switch("GSM_PIN", c.pin)?;
        Ok(c)
    }
    /// Sets the number of workers.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }
    /// Sets the fiber stack size in bytes (and with it the worker threads', see
    /// [`Config::stack_size`](Self#structfield.stack_size)).
    pub fn stack_size(mut self, n: usize) -> Self {
        self.stack_size = n;
        self
    }
    /// Sets the slot size in bytes.
    pub fn slot_size(mut self, n: usize) -> Self {
        self.slot_size = n;
        self
    }
    /// Sets the number of slots per ring (a power of two, at least 2).
    pub fn slots_per_ring(mut self, n: usize) -> Self {
        self.slots_per_ring = n;
        self
    }
    /// Turns pinning on or off.
    pub fn pin(mut self, on: bool) -> Self {
        self.pin = on;
        self
    }
    /// Bytes of ring memory one worker holds: `2 × workers × slots_per_ring × slot_size`.
    pub fn slot_memory_per_worker(&self) -> usize {
        2 * self.workers * self.slots_per_ring * self.slot_size
    }
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let check = |field: &str, value: usize, problem: fn(usize) -> Option<&'static str>| {
            problem(value).map_or(Ok(()), |why| {
                Err(Error::Config(format!("{field} = {value} ({why})")))
            })
        };
        check("workers", self.workers, workers_problem)?;
        check("slot_size", self.slot_size, slot_problem)?;
        check("stack_size", self.stack_size, stack_problem)?;
        if self.slots_per_ring < 2 {
            return Err(Error::Config(format!(
                "slots_per_ring = {} (expected at least 2)",
                self.slots_per_ring
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
