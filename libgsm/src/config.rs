//! Runtime configuration: how many workers, how big fiber stacks and request slots are, and
//! whether workers are pinned. It reads the environment on request ([`Config::from_env`]); it does
//! not start anything.
//!
//! Slot memory: every ordered pair of workers (c, t) has a request ring (c → t) and a response
//! ring (t → c), each of `slots_per_ring × slot_size` bytes, so a worker's rings cost
//! `2 × W × slots_per_ring × slot_size` bytes, W being the number of workers in the job. With the
//! defaults (16 slots of 4 KiB = 64 KiB per ring): W = 2 → 256 KiB per worker, W = 16 → 2 MiB,
//! W = 64 × 16 = 1024 → 128 MiB (lower `slot_size`/`slots_per_ring` for jobs that large).

use std::ffi::OsString;

use gsm_contract::{Setting, table};

use crate::error::Error;

/// How the runtime is laid out. Build with [`Config::default`] or [`Config::from_env`] and adjust
/// with the builder-style setters. The defaults and allowed ranges are the settings table's
/// (`gsm_contract::table`, `docs/settings.md`).
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

/// Variables in which Open MPI's `mpirun` and MPICH's Hydra give the number of ranks on this
/// rank's host (`gsmrun`'s is the setting `GSM_LOCAL_SIZE`).
const LOCAL_SIZE_VARS: [&str; 2] = ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"];

/// The default worker count of this process: the CPUs it may use, divided among the ranks of its
/// host when a launcher says how many there are and left each of them the whole machine.
///
/// Why: ranks of one host that each took every CPU ran more workers than cores, and ran slower
/// (docs/performance-log.md, "Default worker count"). A launcher that binds each rank to its
/// own CPUs has already narrowed the affinity mask, and that mask is taken as it is. At least one
/// worker; `GSM_THREADS` or `gsmrun -t` still choose freely.
pub fn default_workers() -> usize {
    let local = gsm_contract::get::<Option<usize>>(&table::LOCAL_SIZE)
        .ok()
        .flatten()
        .or_else(|| {
            LOCAL_SIZE_VARS
                .iter()
                .find_map(|v| std::env::var(v).ok()?.trim().parse::<usize>().ok())
        })
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
            stack_size: gsm_contract::default(&table::STACK_SIZE),
            slot_size: gsm_contract::default(&table::SLOT_SIZE),
            slots_per_ring: 16,
            pin: gsm_contract::default(&table::PIN),
        }
    }
}

/// A variable as the environment gives it: `None` unset, `Err` not UTF-8.
type Raw = Option<Result<String, OsString>>;

impl Config {
    /// The defaults, overridden by `GSM_THREADS`, `GSM_STACK_SIZE`, `GSM_SLOT_SIZE` (sizes accept
    /// K/M/G suffixes) and `GSM_PIN` (`1`/`true`/`on` or `0`/`false`/`off`).
    ///
    /// Each variable is checked as it is read, and an error names it with its value and what is
    /// allowed: junk, a value out of range, or one that is not UTF-8 (never taken for "unset").
    pub fn from_env() -> Result<Config, Error> {
        Config::from_vars(|name| std::env::var_os(name).map(OsString::into_string))
    }

    /// [`Config::from_env`] with the variables read by `var` (tests pass their own, so they do
    /// not change the process environment).
    fn from_vars(var: impl Fn(&str) -> Raw) -> Result<Config, Error> {
        let read = |s: &Setting| var(s.name);
        let mut c = Config::default();
        if let Some(n) = gsm_contract::get_from(&table::THREADS, read(&table::THREADS))? {
            c.workers = n;
        }
        c.stack_size = gsm_contract::get_from(&table::STACK_SIZE, read(&table::STACK_SIZE))?;
        c.slot_size = gsm_contract::get_from(&table::SLOT_SIZE, read(&table::SLOT_SIZE))?;
        c.pin = gsm_contract::get_from(&table::PIN, read(&table::PIN))?;
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
        let check = |field: &str, value: usize, setting: &Setting| {
            setting
                .check_number(value as u64)
                .map_err(|why| Error::Config(format!("{field} = {value} ({why})")))
        };
        check("workers", self.workers, &table::THREADS)?;
        check("slot_size", self.slot_size, &table::SLOT_SIZE)?;
        check("stack_size", self.stack_size, &table::STACK_SIZE)?;
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
