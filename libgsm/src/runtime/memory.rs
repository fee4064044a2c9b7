//! The memory a ring geometry asks for, checked before anything is allocated: this rank's own
//! rings against this machine's memory, then (once the job is known) the rings every host must
//! hold for the whole job. It does not allocate rings (`mesh.rs` does).

use crate::config::Config;
use crate::error::Error;
use crate::wire::ring::RingLayout;

/// The ring geometry of `config`.
pub(crate) fn layout_of(config: &Config) -> Result<RingLayout, Error> {
    // Both are 32-bit in a ring's layout: larger values are refused, not wrapped.
    let (Ok(slots), Ok(slot_size)) = (
        u32::try_from(config.slots_per_ring),
        u32::try_from(config.slot_size),
    ) else {
        return Err(Error::Config(format!(
            "slots_per_ring = {}, slot_size = {} bytes (each must be below 2^32)",
            config.slots_per_ring, config.slot_size
        )));
    };
    let layout = RingLayout::new(slots, slot_size).map_err(|e| {
        Error::Config(format!(
            "{e} (slots_per_ring must be a power of two, slot_size a multiple of 64)"
        ))
    })?;
    rings_fit_in_memory(config, physical_memory())?;
    Ok(layout)
}

/// Bytes of RAM this machine has, if the system says.
pub(crate) fn physical_memory() -> Option<u128> {
    crate::sys::mem::physical_memory()
}

/// What each worker keeps at start for every worker of its rank, an upper bound of the pair term
/// `gsm-bench scale` fits (its queues and ring-end places; the rings themselves come on first use).
const PAIR_BYTES: u128 = 2048;

/// Refuses a geometry whose start alone would not fit in `memory` bytes: `workers² ×
/// PAIR_BYTES` of bookkeeping and one pair of rings (the rings between this rank's workers are
/// made on first use; those to other ranks' workers come on top, checked by [`job_rings_fit`] once
/// the job is known). A geometry past the machine's memory aborted the process on a failed
/// allocation (`slots_per_ring(1 << 30)`), or ran it out of memory for minutes.
pub(crate) fn rings_fit_in_memory(config: &Config, memory: Option<u128>) -> Result<(), Error> {
    let Some(memory) = memory else {
        return Ok(());
    };
    let w = config.workers as u128;
    let rings = 2 * config.slots_per_ring as u128 * config.slot_size as u128;
    let need = w * w * PAIR_BYTES + rings;
    if need > memory {
        return Err(Error::Config(format!(
            "{} workers with {} slots of {} bytes per ring need {} GiB at start ({} GiB for the \
             first pair of rings), more than this machine's {} GiB of memory; lower workers, \
             slots_per_ring or slot_size (GSM_THREADS, GSM_SLOT_SIZE)",
            config.workers,
            config.slots_per_ring,
            config.slot_size,
            need >> 30,
            rings >> 30,
            memory >> 30
        )));
    }
    Ok(())
}

/// Refuses a job whose rings on host `host` would not fit in its `memory` bytes, once every
/// rank's worker count is known (`workers[r]` for rank `r` on `hosts[r]`).
///
/// Every worker consumes a request ring and a response ring from every other worker of the job,
/// and the rings a worker consumes live on its host, whatever the fabric (heap, a shared
/// segment, or a tcp fabric's receiving side). So the workers of `host` need at least
/// `2 × their number × (job's workers − 1) × slots × slot size` bytes. That grows with the
/// whole job, which [`rings_fit_in_memory`] (this rank's workers alone) cannot see: two ranks
/// of three workers with 64 MiB slots passed it and were killed by the kernel's OOM killer,
/// with nothing said.
pub(crate) fn job_rings_fit(
    workers: &[u32],
    hosts: &[String],
    host: &str,
    layout: RingLayout,
    memory: Option<u128>,
) -> Result<(), Error> {
    let Some(memory) = memory else {
        return Ok(());
    };
    let total: u128 = workers.iter().map(|&w| u128::from(w)).sum();
    let (ranks, here) = workers
        .iter()
        .zip(hosts)
        .filter(|(_, h)| h.as_str() == host)
        .fold((0u32, 0u128), |(n, w), (&x, _)| (n + 1, w + u128::from(x)));
    let ring = u128::from(layout.slots) * u128::from(layout.slot_size);
    let need = 2 * here * total.saturating_sub(1) * ring;
    if need > memory {
        return Err(Error::Config(format!(
            "the job's {total} workers with {} slots of {} bytes per ring need at least {} GiB of \
             rings on host {host} ({ranks} rank(s), {here} workers there), more than its {} GiB \
             of memory; lower the workers per rank, slots_per_ring or slot_size (gsmrun -t, \
             GSM_THREADS, GSM_SLOT_SIZE), or spread the ranks over more hosts",
            layout.slots,
            layout.slot_size,
            need >> 30,
            memory >> 30
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
