//! One-sided operations a fabric offers the runtime's segments (`segment/rma.rs`): the [`Port`]
//! a fabric with RMA installs for the process (the `ofi` fabric does, at attach), the operations
//! it posts and their completions. It knows nothing of segments, rights or generations.
//! See `segment/README.md`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// A fetching atomic on a 64-bit word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Word {
    /// Fetch and add `words[0]`.
    Add,
    /// Store `words[1]` if the word is `words[0]`.
    Cas,
    /// Fetch and store `words[0]`.
    Swap,
}

/// One operation handed to the port.
#[derive(Debug)]
#[cfg_attr(
    not(feature = "ofi"),
    allow(dead_code, reason = "read by the ofi fabric's port")
)]
pub(crate) enum Posted {
    /// Read `len` bytes.
    Read { len: usize },
    /// Write these bytes.
    Write { data: Vec<u8> },
    /// A word atomic; the old word comes back.
    Word { kind: Word, words: [u64; 3] },
}

/// Why a post did not happen.
#[derive(Debug)]
pub(crate) enum NotPosted {
    /// The provider's queue is full: try again after a turn.
    Busy,
    /// Anything else, worded for the user.
    Failed(String),
}

/// What a completed operation gives: the bytes read and the old word, or the provider's error.
pub(crate) type Outcome = Result<(Vec<u8>, u64), String>;

/// A posted operation's completion.
#[derive(Debug, Default)]
pub(crate) struct Done {
    finished: AtomicBool,
    out: Mutex<Option<Outcome>>,
}

impl Done {
    /// Called once, by whoever reads the completion.
    pub(crate) fn finish(&self, r: Outcome) {
        *self.out.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        self.finished.store(true, Ordering::Release);
    }

    /// Whether the operation is complete.
    pub(crate) fn finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Its outcome (once).
    pub(crate) fn take(&self) -> Outcome {
        let mut o = self.out.lock().unwrap_or_else(|p| p.into_inner());
        o.take().unwrap_or_else(|| Err("completed twice".into()))
    }
}

/// A region registered for remote access.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    /// For [`Port::unexpose`].
    pub handle: usize,
    /// The address peers name its first byte by (0 when the provider takes offsets).
    pub base: u64,
    /// Its key.
    pub key: u64,
}

/// What a fabric with one-sided operations offers segments.
pub(crate) trait Port: Send + Sync {
    /// Whether this port reaches `rank`.
    fn serves(&self, rank: usize) -> bool;
    /// Whether 64-bit fetching atomics are available.
    fn word_atomics(&self) -> bool;
    /// Registers `len` bytes at `ptr` for remote reads and/or writes (atomics need both) under
    /// a key no other process can guess.
    ///
    /// # Safety
    /// The bytes stay mapped until [`unexpose`](Port::unexpose) (or the port's end).
    unsafe fn expose(
        &self,
        ptr: *mut u8,
        len: usize,
        read: bool,
        write: bool,
    ) -> Result<Region, String>;
    /// Closes a region: the provider refuses its key from now on.
    fn unexpose(&self, handle: usize);
    /// Posts `op` on the memory at `addr` (key `key`) of `rank`.
    fn post(&self, rank: usize, addr: u64, key: u64, op: Posted) -> Result<Arc<Done>, NotPosted>;
}

static PORT: RwLock<Option<Arc<dyn Port>>> = RwLock::new(None);

/// Installs (or, with `None`, removes) this process's port.
pub(crate) fn install(p: Option<Arc<dyn Port>>) {
    *PORT.write().unwrap_or_else(|e| e.into_inner()) = p;
}

/// This process's port, if a fabric with one-sided operations installed one.
pub(crate) fn port() -> Option<Arc<dyn Port>> {
    PORT.read().ok()?.clone()
}
