//! Places kept by one worker for the other workers of the job, by global worker id, made on
//! first use: what a worker keeps for a peer (its outgoing queues, say) costs memory only once it
//! talks to that peer.
//!
//! A job may have a hundred thousand workers, of which one worker talks to a few. A vector with
//! an entry per worker of the job cost every worker a kilobyte and a half per worker of the job
//! (gigabytes per rank at a thousand hosts), whether or not they ever talked. Here:
//! - this rank's workers get a dense array of pointer-sized slots (`L` of them), the entry made
//!   on first use: one index, one load and a branch on the busy path;
//! - other ranks' workers are grouped in blocks of [`BLOCK`] consecutive global ids, one
//!   pointer-sized slot per block (at most one per remote host while hosts have `BLOCK` workers
//!   or fewer), the block's slots made with the first entry in it, the entry on first use. No
//!   hashing: two indexes, two loads and two branches.
//!
//! An untouched remote worker thus costs `8 / BLOCK` bytes of the top table, and an entry costs
//! its `T` plus, in a block first touched, `8 · BLOCK` bytes. Entries are never removed.

use std::cell::OnceCell;

/// Global ids per block of the table of other ranks' workers: the 128 cores of a large host
/// (a block per host at 128 workers per host, fewer with smaller hosts).
pub(crate) const BLOCK: usize = 128;

/// A slot: empty, or the entry made on first use (pointer-sized: `Box` gives `Option` a niche).
type Slot<T> = OnceCell<Box<T>>;

/// The slots of one block (behind a thin pointer, so that a block's slot is pointer-sized too).
type Block<T> = [Slot<T>; BLOCK];

/// One worker's places for the workers of the job, by global id.
pub(crate) struct Places<T> {
    /// Global id of this rank's first worker.
    base: usize,
    /// This rank's workers, by local index.
    local: Box<[Slot<T>]>,
    /// Other ranks' workers, by `global / BLOCK`, then `global % BLOCK`.
    blocks: Box<[OnceCell<Box<Block<T>>>]>,
    /// Workers in the job.
    total: usize,
}

impl<T> Places<T> {
    /// Empty places for a job of `total` workers whose rank's workers are `base..base + local`.
    pub(crate) fn new(base: usize, local: usize, total: usize) -> Self {
        debug_assert!(base + local <= total);
        Places {
            base,
            local: (0..local).map(|_| OnceCell::new()).collect(),
            blocks: (0..total.div_ceil(BLOCK))
                .map(|_| OnceCell::new())
                .collect(),
            total,
        }
    }

    /// Whether global worker `g` is one of this rank's.
    #[inline(always)]
    pub(crate) fn is_local(&self, g: usize) -> bool {
        g.wrapping_sub(self.base) < self.local.len()
    }

    /// The entry of worker `g`, if it was made.
    #[inline(always)]
    pub(crate) fn get(&self, g: usize) -> Option<&T> {
        let i = g.wrapping_sub(self.base);
        match self.local.get(i) {
            Some(s) => s.get().map(|b| &**b),
            None => self.get_remote(g),
        }
    }

    #[inline]
    fn get_remote(&self, g: usize) -> Option<&T> {
        let block = self.blocks.get(g / BLOCK)?.get()?;
        block[g % BLOCK].get().map(|b| &**b)
    }

    /// The entry of worker `g`, made by `make` if this is its first use. Panics if `g` is not a
    /// worker of the job (callers check ids from users and peers first).
    #[inline(always)]
    pub(crate) fn get_or(&self, g: usize, make: impl FnOnce() -> T) -> &T {
        match self.get(g) {
            Some(t) => t,
            None => self.make(g, make),
        }
    }

    #[cold]
    #[inline(never)]
    fn make(&self, g: usize, make: impl FnOnce() -> T) -> &T {
        assert!(g < self.total, "worker {g} of a job of {}", self.total);
        let slot = match self.local.get(g.wrapping_sub(self.base)) {
            Some(s) => s,
            None => {
                let block = self.blocks[g / BLOCK]
                    .get_or_init(|| Box::new(std::array::from_fn(|_| OnceCell::new())));
                &block[g % BLOCK]
            }
        };
        // `make` cannot reach this table (it is private to its owner), so the slot is still
        // empty here and `get_or_init` does not re-enter.
        slot.get_or_init(|| Box::new(make()))
    }

    /// Entries made so far.
    pub(crate) fn made(&self) -> usize {
        let remote: usize = self
            .blocks
            .iter()
            .filter_map(|b| b.get())
            .map(|b| b.iter().filter(|s| s.get().is_some()).count())
            .sum();
        remote + self.local.iter().filter(|s| s.get().is_some()).count()
    }

    /// Bytes these places hold on the heap, the entries' own `T`s included (not what a `T`
    /// holds behind its own pointers).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        let slot = std::mem::size_of::<Slot<T>>();
        let blocks = self.blocks.iter().filter(|b| b.get().is_some()).count();
        self.local.len() * slot
            + self.blocks.len() * std::mem::size_of::<OnceCell<Box<Block<T>>>>()
            + blocks * BLOCK * slot
            + self.made() * std::mem::size_of::<T>()
    }
}

impl<T> std::fmt::Debug for Places<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Places")
            .field("base", &self.base)
            .field("total", &self.total)
            .field("made", &self.made())
            .finish_non_exhaustive()
    }
}
