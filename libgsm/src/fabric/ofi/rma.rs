//! The `ofi` fabric's side of segment RMA (`segment/rma.rs` decides what to post and when it is
//! allowed): a [`Port`] that registers segment regions on the rank's domain and posts reads,
//! writes and fetching atomics on its endpoint under the turn's lock, and the [`Table`] of
//! operations in flight, which the turn completes (context kind [`RMA_CTX`]).
//!
//! Each operation owns its buffer (the bytes written, the room for the bytes read, the three
//! words of an atomic) until its completion is read, so a caller that stops waiting (a job that
//! ends) leaves nothing the provider could still touch. Keys are random 64-bit numbers unless
//! the provider picks them (`FI_MR_PROV_KEY`). Not installed when the provider wants local
//! buffers registered (`FI_MR_LOCAL`): segments then delegate every operation.
//!
//! It does not check rights, bounds or generations (the segment's side does, and the owner
//! hands out keys). See ARCHITECTURE.md, section 10.

use std::collections::HashMap;
use std::sync::Arc;

use super::drive::Engine;
use crate::segment::Right;
use crate::segment::rma::{self as seg, Done, NotPosted, Port, Posted, Region, Word};
use crate::sys::ofi::{self as fi, Stack, WordAtomic};

/// The context kind of segment operations (the other kinds are `progress.rs`'s).
pub(super) const RMA_CTX: usize = 3 << 62;

/// Segment operations in flight, by the index their context carries.
#[derive(Default)]
pub(super) struct Table {
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
}

struct InFlight {
    buf: Vec<u8>,
    words: Box<[u64; 3]>,
    read: bool,
    done: Arc<Done>,
}

impl Table {
    /// Posts `op` to `dest`'s memory at `addr` (key `key`).
    fn post(
        &mut self,
        stack: &mut Stack,
        dest: u64,
        addr: u64,
        key: u64,
        op: Posted,
    ) -> Result<Arc<Done>, NotPosted> {
        let n = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let ctx = RMA_CTX | n;
        let done = Arc::new(Done::default());
        let mut f = InFlight {
            buf: Vec::new(),
            words: Box::new([0; 3]),
            read: false,
            done: done.clone(),
        };
        // SAFETY: the buffers are heap memory owned by `f`, which the table keeps (moving `f`
        // does not move them) until `finish` reads this context's completion.
        let r = unsafe {
            match op {
                Posted::Read { len } => {
                    f.buf = vec![0; len];
                    f.read = true;
                    stack.read(f.buf.as_mut_ptr(), len, dest, addr, key, ctx)
                }
                Posted::Write { data } => {
                    f.buf = data;
                    stack.write_unregistered(f.buf.as_ptr(), f.buf.len(), dest, addr, key, ctx)
                }
                Posted::Word { kind, words } => {
                    *f.words = words;
                    let kind = match kind {
                        Word::Add => WordAtomic::Add,
                        Word::Cas => WordAtomic::Cas,
                        Word::Swap => WordAtomic::Swap,
                    };
                    let w: *mut [u64; 3] = &mut *f.words;
                    stack.word_atomic(kind, w, dest, addr, key, ctx)
                }
            }
        };
        match r {
            Ok(()) => {
                self.slots[n] = Some(f);
                Ok(done)
            }
            Err(e) => {
                self.free.push(n);
                Err(if e.code == fi::EAGAIN {
                    NotPosted::Busy
                } else {
                    NotPosted::Failed(e.to_string())
                })
            }
        }
    }

    /// Operation `n` completed (or failed with the provider's words).
    pub(super) fn finish(&mut self, n: usize, r: Result<(), String>) {
        let Some(f) = self.slots.get_mut(n).and_then(Option::take) else {
            return;
        };
        self.free.push(n);
        let bytes = if f.read { f.buf } else { Vec::new() };
        f.done.finish(r.map(|()| (bytes, f.words[2])));
    }
}

/// The port segments use (see the module docs).
struct OfiPort {
    engine: Arc<Engine>,
    /// Peer rank → its address in the AV.
    peers: HashMap<usize, u64>,
    atomics: bool,
    prov_key: bool,
}

impl Port for OfiPort {
    fn serves(&self, rank: usize) -> bool {
        self.peers.contains_key(&rank)
    }

    fn word_atomics(&self) -> bool {
        self.atomics
    }

    unsafe fn expose(&self, ptr: *mut u8, len: usize, right: Right) -> Result<Region, String> {
        // A key is a capability: random, so that a rank cannot name a region it was not given.
        let key = if self.prov_key { 0 } else { unguessable() };
        let (read, write) = match right {
            Right::Read => (true, false),
            Right::Write => (false, true),
            Right::Atomic => (true, true),
        };
        let mut st = self.engine.lock();
        let (stack, _) = st.rma_parts();
        // SAFETY: the caller keeps the bytes mapped until `unexpose` (this trait's contract).
        let (handle, reg) =
            unsafe { stack.expose(ptr, len, read, write, key) }.map_err(|e| e.to_string())?;
        Ok(Region {
            handle,
            base: reg.base,
            key: reg.key,
        })
    }

    fn unexpose(&self, handle: usize) {
        self.engine.lock().rma_parts().0.unexpose(handle);
    }

    fn post(&self, rank: usize, addr: u64, key: u64, op: Posted) -> Result<Arc<Done>, NotPosted> {
        let dest = *self
            .peers
            .get(&rank)
            .ok_or_else(|| NotPosted::Failed(format!("rank {rank} is not an ofi peer")))?;
        let mut st = self.engine.lock();
        let (stack, table) = st.rma_parts();
        table.post(stack, dest, addr, key, op)
    }
}

/// A 64-bit number no other process can predict: SipHash, under the keys std draws from the OS
/// for each process, of a counter and the clock.
fn unguessable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u64(N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Installs the port for this process's segments, unless the provider needs local buffers
/// registered.
pub(super) fn install(engine: &Arc<Engine>) {
    let (peers, local_mr, atomics, prov_key) = {
        let mut st = engine.lock();
        let (peers, local_mr) = st.peer_addresses();
        let (stack, _) = st.rma_parts();
        let prov_key = stack.offer.mr_mode & fi::bits::MR_PROV_KEY != 0;
        (peers, local_mr, stack.has_word_atomics(), prov_key)
    };
    if local_mr {
        tracing::info!(
            target: "gossamer::fabric",
            "the ofi provider wants local buffers registered (FI_MR_LOCAL): segment operations are delegated, not RMA"
        );
        return;
    }
    seg::install(Some(Arc::new(OfiPort {
        engine: engine.clone(),
        peers: peers.into_iter().collect(),
        atomics,
        prov_key,
    })));
}

/// Removes the port (the fabric ends).
pub(super) fn uninstall() {
    seg::install(None);
}
