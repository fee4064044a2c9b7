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
    /// process may use.
    pub workers: usize,
    /// Usable stack size of one fiber in bytes (a guard page is added below it). Default 256 KiB.
    pub stack_size: usize,
    /// Bytes of one request/response slot (one batch). Default 4096.
    pub slot_size: usize,
    /// Slots per ring. Default 16.
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

impl Default for Config {
    fn default() -> Self {
        Config {
            workers: available_cpus(),
            stack_size: 256 * 1024,
            slot_size: 4096,
            slots_per_ring: 16,
            pin: false,
        }
    }
}

fn env_usize(name: &'static str) -> Result<Option<usize>, Error> {
    match std::env::var(name) {
        Ok(v) => parse_size(&v).map(Some).ok_or(Error::Env {
            name,
            value: v,
            reason: "expected a positive integer, optionally with a K/M/G suffix",
        }),
        Err(_) => Ok(None),
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
    num.parse::<usize>()
        .ok()
        .filter(|n| *n > 0)?
        .checked_mul(mult)
}

impl Config {
    /// The defaults, overridden by `GSM_THREADS`, `GSM_STACK_SIZE`, `GSM_SLOT_SIZE` (sizes accept
    /// K/M/G suffixes) and `GSM_PIN` (`1`/`true`/`on` or `0`/`false`/`off`).
    pub fn from_env() -> Result<Config, Error> {
        let mut c = Config::default();
        if let Some(n) = env_usize("GSM_THREADS")? {
            c.workers = n;
        }
        if let Some(n) = env_usize("GSM_STACK_SIZE")? {
            c.stack_size = n;
        }
        if let Some(n) = env_usize("GSM_SLOT_SIZE")? {
            c.slot_size = n;
        }
        if let Ok(v) = std::env::var("GSM_PIN") {
            c.pin = match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "on" | "yes" => true,
                "0" | "false" | "off" | "no" | "" => false,
                _ => {
                    return Err(Error::Env {
                        name: "GSM_PIN",
                        value: v,
                        reason: "expected 1/true/on or 0/false/off",
                    });
                }
            };
        }
        Ok(c)
    }
    /// Sets the number of workers.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }
    /// Sets the fiber stack size in bytes.
    pub fn stack_size(mut self, n: usize) -> Self {
        self.stack_size = n;
        self
    }
    /// Sets the slot size in bytes.
    pub fn slot_size(mut self, n: usize) -> Self {
        self.slot_size = n;
        self
    }
    /// Sets the number of slots per ring.
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
        if self.workers == 0 || self.workers > 4096 {
            return Err(Error::Config(format!(
                "workers = {} (expected 1..=4096)",
                self.workers
            )));
        }
        if self.slot_size < 256 {
            return Err(Error::Config(format!(
                "slot_size = {} bytes (expected at least 256)",
                self.slot_size
            )));
        }
        if self.slots_per_ring < 2 {
            return Err(Error::Config(format!(
                "slots_per_ring = {} (expected at least 2)",
                self.slots_per_ring
            )));
        }
        if self.stack_size < 16 * 1024 {
            return Err(Error::Config(format!(
                "stack_size = {} bytes (expected at least 16 KiB)",
                self.stack_size
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64k"), Some(65536));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("x"), None);
    }
    #[test]
    fn memory_formula_matches_docs() {
        let c = Config::default().workers(16);
        assert_eq!(c.slot_memory_per_worker(), 2 << 20);
        assert_eq!(
            Config::default().workers(2).slot_memory_per_worker(),
            256 << 10
        );
    }
}
