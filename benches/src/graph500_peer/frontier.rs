//! The shared frontiers of the peer's kernels: a queue that threads append to in batches
//! (GAPBS's `SlidingQueue` with per-thread `QueueBuffer`s), and a bitmap of vertices.
//!
//! Both are arrays of atomics used with `Relaxed` loads and stores, which compile to plain moves:
//! the barriers between the phases that write them and the phases that read them give the
//! ordering, so no `unsafe` is needed for threads to share them.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ::graph500::kronecker::Vertex;

/// A bounded array of vertices that threads append to concurrently.
#[derive(Debug)]
pub struct Queue {
    slots: Vec<AtomicU32>,
    len: AtomicUsize,
}

impl Queue {
    /// An empty queue of room for `capacity` vertices.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            slots: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
            len: AtomicUsize::new(0),
        }
    }

    /// Number of vertices appended since the last [`Queue::clear`].
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Empties the queue (in a serial section).
    pub fn clear(&self) {
        self.len.store(0, Ordering::Relaxed);
    }

    /// The `i`th vertex.
    #[inline]
    pub fn get(&self, i: usize) -> Vertex {
        self.slots[i].load(Ordering::Relaxed)
    }

    /// Appends `batch` at once and empties it.
    ///
    /// # Panics
    /// If the queue would overflow its capacity (a kernel's bound was wrong).
    pub fn append(&self, batch: &mut Vec<Vertex>) {
        if batch.is_empty() {
            return;
        }
        let start = self.len.fetch_add(batch.len(), Ordering::Relaxed);
        self.put(start, batch);
    }

    /// Writes `batch` from slot `start` on and empties it, for a caller that reserves slots with
    /// its own counter.
    ///
    /// # Panics
    /// If the slots run past the capacity (a kernel's bound was wrong).
    pub fn put(&self, start: usize, batch: &mut Vec<Vertex>) {
        let Some(slots) = self.slots.get(start..start + batch.len()) else {
            panic!(
                "frontier overflow: {} vertices from slot {start} of {}",
                batch.len(),
                self.slots.len()
            );
        };
        for (slot, &v) in slots.iter().zip(batch.iter()) {
            slot.store(v, Ordering::Relaxed);
        }
        batch.clear();
    }
}

/// A batch is appended to the shared queue once it holds this many vertices.
pub const BATCH: usize = 1 << 10;

/// A set of vertices, one bit each.
#[derive(Debug)]
pub struct Bitmap {
    words: Vec<AtomicU64>,
}

impl Bitmap {
    /// An empty set over `n` vertices.
    pub fn new(n: usize) -> Self {
        Self {
            words: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Number of 64-bit words.
    pub fn num_words(&self) -> usize {
        self.words.len()
    }

    /// Whether `v` is in the set.
    #[inline]
    pub fn contains(&self, v: Vertex) -> bool {
        self.words[v as usize / 64].load(Ordering::Relaxed) >> (v % 64) & 1 == 1
    }

    /// Adds `v` (any thread, any word).
    #[inline]
    pub fn insert(&self, v: Vertex) {
        self.words[v as usize / 64].fetch_or(1 << (v % 64), Ordering::Relaxed);
    }

    /// Word `i`.
    #[inline]
    pub fn word(&self, i: usize) -> u64 {
        self.words[i].load(Ordering::Relaxed)
    }

    /// Overwrites word `i` (its only writer in this phase).
    #[inline]
    pub fn set_word(&self, i: usize, bits: u64) {
        self.words[i].store(bits, Ordering::Relaxed);
    }
}
