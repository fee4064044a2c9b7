//! One-sided segments: memory a rank exports with rights, that other ranks read, write and
//! update atomically at offsets (typed atomics: [`SegmentRef::atomic`]) without running any code of the owner's program (Thekkath et
//! al.'s separation of data transfer from control transfer). A notification ([`SegmentRef::put_notify`])
//! is the one control transfer: it reaches the owner's queue after its data, where the owner reads
//! it ([`Segment::next_notification`]) or a handler fiber takes it ([`Segment::on_notification`]).
//!
//! ```
//! use gossamer::segment::{self, Access, Rights};
//! gossamer::run(gossamer::Config::default().workers(2), || {
//!     let seg = segment::export(4096, Rights::ALL, Access::All).unwrap();
//!     let h = seg.handle(); // plain data: travels in closures, messages, arguments
//!     h.put(8, b"hello").unwrap();
//!     assert_eq!(h.fetch_add(0, 5).unwrap(), 0);
//!     let mut b = [0u8; 5];
//!     h.get(8, &mut b).unwrap();
//!     assert_eq!(&b, b"hello");
//!     assert!(h.get(4095, &mut b).is_err()); // out of bounds: refused, nothing read
//! })
//! .unwrap();
//! ```
//!
//! **Memory.** A segment is an anonymous memory file (`memfd`) of its owner: a header page (magic,
//! generation, length, owner, one rights byte per rank; `layout.rs`) and the data. Nothing is named
//! in `/dev/shm`, so a crash leaves nothing behind.
//!
//! **Paths.** An operation on a segment of this rank touches the memory directly. On a segment of
//! another rank of the same host it maps the owner's file (through `/proc/<pid>/fd`, once per
//! worker thread and segment) and works on the shared memory: copies for `get`/`put`, hardware
//! atomics for `compare_exchange`/`fetch_add`/`swap` and the typed atomics; no fiber runs on the owner. On a segment of
//! a rank on another host (or with `GSM_FABRIC=tcp` or `ofi`, which makes every peer such a rank) the
//! operation is a delegated request to a worker of the owner rank, served by this module's own
//! handler (`remote.rs`: runtime code, never the user's), which applies it to the owner's memory
//! and answers; it rides whatever fabric carries requests to that rank.
//!
//! **Checks.** Every operation is checked against the owner's header, not the caller's handle:
//! the generation (a revoked or freed segment refuses old handles), the caller rank's rights,
//! bounds, and alignment to their width for atomics. On the delegated path the owner's handler checks;
//! within a host the caller's runtime checks the owner-written header before it touches the data
//! (as with the shm rings, a process of the same user could bypass that; see
//! `libgsm/TRUST_BOUNDARY.md`). A refusal is a [`SegmentError`] naming the segment, offset and right, and
//! the data is untouched. An operation that passed its check just before a revocation may still
//! complete, as with RDMA memory windows.
//!
//! **Ordering.** Blocking operations are complete when they return: a `put` is visible to every
//! later operation from anywhere. Non-blocking ones (`*_nb`) complete by their [`Pending`] or by
//! [`wait_all`]. Atomics are sequentially consistent among themselves on one word; a `get`
//! concurrent with a `put` of the same bytes may see a mix of both.
//!
//! This module does not allocate over teams of workers (that is [`alloc_symmetric`] over a set of
//! ranks, one fiber per rank), does not order operations on different segments, and does not
//! run user code on the target except by the owner's own reading of its notifications.

mod atomic;
mod collective;
pub(crate) mod copy;
mod error;
mod keys;
pub(crate) mod layout;
pub(crate) mod memfile;
mod pending;
mod remote;
mod rma;

use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::fabric::rma::Atomic;
use serde::{Deserialize, Serialize};

pub use atomic::{AtomicInt, AtomicRef, AtomicValue};
pub use collective::{Symmetric, alloc_symmetric};
pub use error::{Right, SegmentError, SegmentName};
pub use pending::{Pending, wait_all};
pub(crate) use remote::raw_arg;

use memfile::MemFile;

/// The rights an export grants: any union of [`READ`](Rights::READ), [`WRITE`](Rights::WRITE)
/// and [`ATOMIC`](Rights::ATOMIC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rights(u8);

impl Rights {
    /// Nothing.
    pub const NONE: Rights = Rights(0);
    /// `get`.
    pub const READ: Rights = Rights(1);
    /// `put` and `put_notify`.
    pub const WRITE: Rights = Rights(2);
    /// `compare_exchange`, `fetch_add`, `swap`.
    pub const ATOMIC: Rights = Rights(4);
    /// All three.
    pub const ALL: Rights = Rights(7);

    /// Whether `r` is granted.
    pub fn allows(self, r: Right) -> bool {
        self.0 & r.bit() != 0
    }
}

impl std::ops::BitOr for Rights {
    type Output = Rights;
    fn bitor(self, o: Rights) -> Rights {
        Rights(self.0 | o.0)
    }
}

/// Who an export grants its rights to. The owner rank always has every right.
#[derive(Debug, Clone, Copy)]
pub enum Access<'a> {
    /// Every rank of the job.
    All,
    /// These ranks only (others get no right).
    Ranks(&'a [usize]),
}

/// A segment as anyone may name it: (owner rank, segment, generation), with what a peer of the
/// owner's host needs to map it. Plain data: copy it into closures, messages and arguments.
/// Nothing in it is trusted: every operation is checked against the owner's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SegmentRef {
    rank: u32,
    pid: u32,
    fd: u32,
    id: u64,
    generation: u64,
    len: u64,
}

/// A notification: `len` bytes at `offset` were put by rank `source`, with the writer's `word`.
/// Delivered after its data is in the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    /// The rank that put the data.
    pub source: usize,
    /// Where the data starts.
    pub offset: u64,
    /// How many bytes.
    pub len: u64,
    /// The writer's word.
    pub word: u64,
}

/// A segment this rank exports. Dropping it frees it: its generation becomes 0 (every handle is
/// refused from then on) and its memory goes once the last peer has unmapped it.
#[derive(Debug)]
pub struct Segment {
    own: Arc<Owned>,
}

/// What the owner process keeps of a segment; the delegated handler finds it by id.
#[derive(Debug)]
pub(crate) struct Owned {
    file: MemFile,
    id: u64,
    data_at: usize,
    len: u64,
    notes: Mutex<VecDeque<Notification>>,
    noted: AtomicU64,
    /// Set when the `Segment` is dropped: a handler fiber ends once it has drained the queue.
    closed: std::sync::atomic::AtomicBool,
    /// Its regions on an RMA fabric, and who holds their keys.
    rma: keys::OwnerRma,
}

/// This process's exported segments by id.
static EXPORTED: Mutex<Option<HashMap<u64, Arc<Owned>>>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn exported(id: u64) -> Option<Arc<Owned>> {
    EXPORTED.lock().ok()?.as_ref()?.get(&id).cloned()
}

/// Exports a new segment of `len` bytes (zeroed), granting `rights` to the ranks of `to`.
/// Call it on a worker; the handle it gives ([`Segment::handle`]) may go anywhere.
pub fn export(len: usize, rights: Rights, to: Access<'_>) -> Result<Segment, SegmentError> {
    let (me, ranks) = (crate::rank(), crate::rank_count());
    let mut table = vec![0u8; ranks];
    match to {
        Access::All => table.fill(rights.0),
        Access::Ranks(rs) => {
            for &r in rs {
                let slot = table.get_mut(r).ok_or_else(|| {
                    SegmentError::Alloc(format!("rank {r} is not in this job of {ranks} ranks"))
                })?;
                *slot = rights.0;
            }
        }
    }
    table[me] = Rights::ALL.0;
    let data_at = layout::data_at(ranks);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let name = CString::new(format!("gsm-seg-{id}")).expect("no NUL in the name");
    let file = MemFile::create(&name, data_at + len).map_err(|e| {
        SegmentError::Alloc(format!("a memory file of {} bytes: {e}", data_at + len))
    })?;
    layout::init(&file, len as u64, me as u32, std::process::id(), id, &table);
    let own = Arc::new(Owned {
        file,
        id,
        data_at,
        len: len as u64,
        notes: Mutex::new(VecDeque::new()),
        noted: AtomicU64::new(0),
        closed: std::sync::atomic::AtomicBool::new(false),
        rma: keys::OwnerRma::default(),
    });
    rma::expose(&own, &table);
    EXPORTED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(id, own.clone());
    Ok(Segment { own })
}

impl Segment {
    /// The handle of the current generation.
    pub fn handle(&self) -> SegmentRef {
        SegmentRef {
            rank: crate::rank() as u32,
            pid: std::process::id(),
            fd: self.own.file.raw_fd(),
            id: self.own.id,
            generation: layout::generation(&self.own.file),
            len: self.own.len,
        }
    }

    /// The data's length in bytes.
    pub fn len(&self) -> usize {
        self.own.len as usize
    }

    /// Whether the segment has no data bytes.
    pub fn is_empty(&self) -> bool {
        self.own.len == 0
    }

    /// Revokes every handle given so far (they are refused as stale) and returns the handle of
    /// the new generation. The data stays. On an RMA fabric it waits (this fiber) until every
    /// rank that held the old keys has forgotten them (see [`rma_operations`]).
    pub fn revoke(&self) -> SegmentRef {
        let g = layout::generation(&self.own.file);
        layout::set_generation(&self.own.file, g + 1);
        rma::retire(&self.own, true);
        self.handle()
    }

    /// The next notification, waiting (this fiber only) until one arrives.
    ///
    /// # Panics
    /// Outside a fiber.
    pub fn next_notification(&self) -> Notification {
        loop {
            if let Some(n) = self.try_notification() {
                return n;
            }
            crate::wait_for(|| self.own.noted.load(Ordering::Acquire) > 0);
        }
    }

    /// The next notification if one has arrived.
    pub fn try_notification(&self) -> Option<Notification> {
        self.own.pop()
    }

    /// Runs `handler` on each notification, in order, in a fiber of this worker (the handler
    /// form of the queue; use one form or the other). The fiber ends when the segment is dropped,
    /// after the notifications that had arrived.
    ///
    /// # Panics
    /// Outside a gossamer worker.
    pub fn on_notification(
        &self,
        mut handler: impl FnMut(Notification) + 'static,
    ) -> crate::JoinHandle<()> {
        let own = self.own.clone();
        crate::spawn(move || {
            loop {
                crate::wait_for(|| {
                    own.noted.load(Ordering::Acquire) > 0 || own.closed.load(Ordering::Acquire)
                });
                match own.pop() {
                    Some(n) => handler(n),
                    None if own.closed.load(Ordering::Acquire) => break,
                    None => {}
                }
            }
        })
    }

    /// Reads the owner's own bytes at `offset` (no rights check: the owner has them all).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), SegmentError> {
        self.handle().get(offset, buf)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        layout::set_generation(&self.own.file, 0);
        rma::retire(&self.own, false);
        self.own.closed.store(true, Ordering::Release);
        if let Ok(mut m) = EXPORTED.lock() {
            if let Some(m) = m.as_mut() {
                m.remove(&self.own.id);
            }
        }
    }
}

impl Owned {
    /// Takes the first queued notification.
    fn pop(&self) -> Option<Notification> {
        let mut q = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        let n = q.pop_front();
        self.noted.store(q.len() as u64, Ordering::Release);
        n
    }

    /// Queues a notification (after its data was written) for the owner.
    pub(crate) fn notify(&self, n: Notification) {
        let mut q = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(n);
        self.noted.store(q.len() as u64, Ordering::Release);
    }

    fn view(&self, name: SegmentName) -> View<'_> {
        View {
            file: &self.file,
            name,
            data_at: self.data_at,
            data_len: self.len,
        }
    }
}

/// A segment's memory as an operation sees it.
pub(crate) struct View<'a> {
    file: &'a MemFile,
    name: SegmentName,
    data_at: usize,
    data_len: u64,
}

/// One operation on a segment's memory.
pub(crate) enum Op<'a> {
    Get(&'a mut [u8]),
    Put(&'a [u8]),
    /// A typed atomic with its operands' bits (`atomic.rs`).
    Atomic(Atomic, u64, u64),
}

impl Op<'_> {
    fn right(&self) -> Right {
        match self {
            Op::Get(_) => Right::Read,
            Op::Put(_) => Right::Write,
            _ => Right::Atomic,
        }
    }

    fn len(&self) -> u64 {
        match self {
            Op::Get(b) => b.len() as u64,
            Op::Put(b) => b.len() as u64,
            Op::Atomic(k, ..) => k.ty.width(),
        }
    }

    /// The alignment the target requires: an atomic's width, else none.
    fn align(&self) -> u64 {
        match self {
            Op::Atomic(k, ..) => k.ty.width(),
            _ => 1,
        }
    }
}

impl View<'_> {
    /// Checks `op` by rank `from` at `offset`, then performs it; the old word for atomics.
    pub(crate) fn perform(
        &self,
        from: usize,
        offset: u64,
        op: Op<'_>,
    ) -> Result<u64, SegmentError> {
        layout::check(
            self.file,
            &self.name,
            self.data_at,
            self.data_len,
            from,
            offset,
            op.len(),
            op.right(),
            op.align(),
        )?;
        // SAFETY: the check put `[offset, offset + len)` inside the data, which is inside the
        // mapping (`validate`, or the owner's own sizing).
        let p = unsafe {
            self.file
                .base()
                .as_ptr()
                .add(self.data_at + offset as usize)
        };
        Ok(match op {
            Op::Get(b) => {
                // SAFETY: in bounds (above); `b` is ours. Concurrent writers may race these bytes
                // (documented: a get concurrent with a put may see a mix), never our buffer.
                unsafe { copy::copy(p, b.as_mut_ptr(), b.len()) };
                0
            }
            Op::Put(b) => {
                // SAFETY: as for Get, the other way.
                unsafe { copy::copy(b.as_ptr(), p, b.len()) };
                std::sync::atomic::fence(Ordering::Release);
                0
            }
            // SAFETY: aligned to its width (checked) and in bounds; shared words are only
            // touched atomically by atomic operations.
            Op::Atomic(kind, a, b) => unsafe { atomic::apply(p, kind, a, b) },
        })
    }
}

/// A peer's segment mapped into this process.
#[derive(Debug)]
struct Peer {
    file: MemFile,
    data_at: usize,
    data_len: u64,
}

thread_local! {
    /// Peers' segments this thread has mapped, by (rank, id): until the thread ends, or until an
    /// operation finds the segment freed.
    static PEERS: std::cell::RefCell<HashMap<(u32, u64), Rc<Peer>>> = std::cell::RefCell::new(HashMap::new());
    /// Peers' segments of this host that this thread could not map: reached by requests.
    static UNMAPPED: std::cell::RefCell<std::collections::HashSet<(u32, u64)>> =
        std::cell::RefCell::new(std::collections::HashSet::new());
}

/// How an operation reaches a segment.
enum Route {
    Here(Arc<Owned>),
    Mapped(Rc<Peer>),
    /// By RMA on the fabric's registered regions (`rma.rs`).
    Rma,
    Delegate,
}

/// How many segment operations this process has performed by RMA (libfabric reads, writes and
/// atomics on the owner's registered memory, with `GSM_FABRIC=ofi`): a way to see that the
/// one-sided path, not the delegated one, served them.
pub fn rma_operations() -> u64 {
    rma::operations()
}

/// Whether every peer is reached by requests: the job names a fabric other than shared memory
/// (`GSM_FABRIC=tcp` or `ofi`), which then carries all traffic between ranks, this too. A user
/// who picks a fabric gets it (and the conformance runs test each operation over each fabric);
/// `auto` and `shm` keep the mapping within a host.
pub(crate) fn forced_remote() -> bool {
    static FORCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| {
        let fabric = gsm_contract::value::<&str>(&gsm_contract::table::FABRIC);
        matches!(fabric, "tcp" | "ofi")
    })
}

impl SegmentRef {
    /// The owner rank.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// The data's length the handle was made with (the owner's header is what is checked).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the segment has no data.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How errors name this segment.
    pub fn name(&self) -> SegmentName {
        SegmentName {
            rank: self.rank,
            id: self.id,
            generation: self.generation,
        }
    }

    fn route(&self, right: Right, offset: u64) -> Result<Route, SegmentError> {
        let me = crate::rank();
        if self.rank as usize == me {
            return match exported(self.id) {
                Some(o) if self.pid == std::process::id() => Ok(Route::Here(o)),
                _ => Err(SegmentError::Stale {
                    seg: self.name(),
                    offset,
                    right,
                    current: 0,
                }),
            };
        }
        let key = (self.rank, self.id);
        if let Some(p) = PEERS.with(|m| m.borrow().get(&key).cloned()) {
            return Ok(Route::Mapped(p));
        }
        if forced_remote() || crate::host_of_rank(self.rank as usize) != crate::host_of_rank(me) {
            return Ok(if rma::serves(self.rank as usize) {
                Route::Rma
            } else {
                Route::Delegate
            });
        }
        if UNMAPPED.with(|u| u.borrow().contains(&key)) {
            return Ok(Route::Delegate);
        }
        // A file this process cannot open or that is not (or no longer) this segment: the
        // owner's handler answers instead (another pid namespace, a freed segment whose
        // descriptor number was reused), and it is the authority on what is refused.
        let ranks = crate::rank_count();
        let mapped = MemFile::open(self.pid, self.fd, layout::data_at(ranks))
            .ok()
            .and_then(|file| {
                let (data_at, data_len) =
                    layout::validate(&file, &self.name(), self.pid, ranks).ok()?;
                Some(Peer {
                    file,
                    data_at,
                    data_len,
                })
            });
        let Some(p) = mapped.map(Rc::new) else {
            UNMAPPED.with(|u| u.borrow_mut().insert(key));
            return Ok(Route::Delegate);
        };
        PEERS.with(|m| m.borrow_mut().insert(key, p.clone()));
        Ok(Route::Mapped(p))
    }

    /// Performs `op` wherever the segment is; `notify` queues a notification after a put.
    fn run(&self, offset: u64, op: Op<'_>, notify: Option<u64>) -> Result<u64, SegmentError> {
        let me = crate::rank();
        let note = |len: u64, word: u64| Notification {
            source: me,
            offset,
            len,
            word,
        };
        match self.route(op.right(), offset)? {
            Route::Here(o) => {
                let len = op.len();
                let r = o.view(self.name()).perform(me, offset, op)?;
                if let Some(word) = notify {
                    o.notify(note(len, word));
                }
                Ok(r)
            }
            Route::Mapped(p) => {
                let len = op.len();
                let view = View {
                    file: &p.file,
                    name: self.name(),
                    data_at: p.data_at,
                    data_len: p.data_len,
                };
                let r = match view.perform(me, offset, op) {
                    Ok(r) => r,
                    Err(e) => {
                        if matches!(e, SegmentError::Stale { current: 0, .. }) {
                            // Freed: let go of the mapping, which alone would keep its memory.
                            PEERS.with(|m| m.borrow_mut().remove(&(self.rank, self.id)));
                        }
                        return Err(e);
                    }
                };
                if let Some(word) = notify {
                    remote::notify(self, note(len, word))?;
                }
                Ok(r)
            }
            Route::Rma if notify.is_none() => rma::run(self, offset, op),
            Route::Rma | Route::Delegate => remote::run(self, offset, op, notify),
        }
    }

    /// Copies `buf.len()` bytes at `offset` into `buf` (right: read).
    pub fn get(&self, offset: u64, buf: &mut [u8]) -> Result<(), SegmentError> {
        self.run(offset, Op::Get(buf), None).map(drop)
    }

    /// Copies `data` to `offset` (right: write).
    pub fn put(&self, offset: u64, data: &[u8]) -> Result<(), SegmentError> {
        self.run(offset, Op::Put(data), None).map(drop)
    }

    /// [`get`](Self::get) into a slice of plain data.
    pub fn get_slice<T: bytemuck::Pod>(
        &self,
        offset: u64,
        out: &mut [T],
    ) -> Result<(), SegmentError> {
        self.get(offset, bytemuck::cast_slice_mut(out))
    }

    /// [`put`](Self::put) of a slice of plain data.
    pub fn put_slice<T: bytemuck::Pod>(&self, offset: u64, data: &[T]) -> Result<(), SegmentError> {
        self.put(offset, bytemuck::cast_slice(data))
    }

    /// Puts `data` at `offset`, then delivers a [`Notification`] carrying `word` to the owner's
    /// queue ([`Segment::next_notification`]); it is there only once the data is.
    pub fn put_notify(&self, offset: u64, data: &[u8], word: u64) -> Result<(), SegmentError> {
        self.run(offset, Op::Put(data), Some(word)).map(drop)
    }

    /// Atomically replaces the word at `offset` (8-aligned) with `new` if it holds `current`:
    /// `Ok(current)` then, `Err(actual)` otherwise (right: atomic). The `u64` form of
    /// [`atomic`](Self::atomic), which has the other types and operations.
    pub fn compare_exchange(
        &self,
        offset: u64,
        current: u64,
        new: u64,
    ) -> Result<Result<u64, u64>, SegmentError> {
        self.atomic::<u64>(offset).compare_exchange(current, new)
    }

    /// Atomically adds `v` (wrapping) to the word at `offset`; the old value (right: atomic).
    pub fn fetch_add(&self, offset: u64, v: u64) -> Result<u64, SegmentError> {
        self.atomic::<u64>(offset).fetch_add(v)
    }

    /// Atomically stores `v` in the word at `offset`; the old value (right: atomic).
    pub fn swap(&self, offset: u64, v: u64) -> Result<u64, SegmentError> {
        self.atomic::<u64>(offset).swap(v)
    }
}

#[cfg(test)]
mod tests;
