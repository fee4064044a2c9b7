//! Names of workers: the public [`WorkerId`] and the `home` word a trust carries.

/// The index of a worker in the job.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct WorkerId(u32);

impl WorkerId {
    /// Worker number `i`.
    ///
    /// # Panics
    /// If `i` does not fit the 32 bits of a worker id (no job has that many workers). Cut to 32
    /// bits it named another worker: `send` to worker 2^32 + 1 reached worker 1.
    pub fn new(i: usize) -> Self {
        match u32::try_from(i) {
            Ok(i) => WorkerId(i),
            Err(_) => worker_id_too_large(i),
        }
    }
    /// Its number.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[cold]
#[inline(never)]
fn worker_id_too_large(i: usize) -> ! {
    panic!("gossamer: worker {i} does not exist (a worker id has 32 bits)")
}

impl From<usize> for WorkerId {
    fn from(i: usize) -> Self {
        WorkerId::new(i)
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "worker {}", self.0)
    }
}

/// A trust's `home` word: trustee `worker` of runtime `epoch` (see `Trust`'s `home` field).
#[inline(always)]
pub(crate) fn home(worker: usize, epoch: u32) -> u64 {
    worker as u32 as u64 | u64::from(epoch) << 32
}
