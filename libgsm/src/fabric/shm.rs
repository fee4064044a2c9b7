//! The `shm` fabric: slot rings between ranks on one host, in POSIX shared memory.
//!
//! **What it abstracts.** Each rank creates exactly one segment, `/dev/shm/{job_id}-r{rank}`
//! ([`segment_name`]), mode 0600, created with `O_EXCL` (a leftover of an earlier job with the
//! same id is an error, never reused). The segment holds the rings this rank's workers *consume*
//! from the workers of its shm peers, and this rank's workers' doorbells. A peer maps the segment
//! and produces into those rings directly and rings those doorbells: after set-up there is no
//! thread, no system call on the data path (except a futex wake for a sleeping consumer) and no
//! copy beyond the slot itself. The mapping is held by an `Arc` that every ring end and doorbell
//! keeps, so it stays mapped as long as anything made from it lives.
//!
//! **Layout** (native endianness: every mapper is on this host; offsets in bytes):
//!
//! ```text
//! 0      header, 128 bytes: magic u64 @0, version u32 @8, rank u32 @12, slots u32 @16,
//!        slot_size u32 @20, local workers L u32 @24, ring count R u32 @28, bells offset u64 @32,
//!        table offset u64 @40, table length in bytes u64 @48, segment bytes u64 @56,
//!        ready u32 @64 (stored last, with Release, once all else is written), board offset
//!        u64 @72, board bytes u64 @80
//! 128    L doorbells, one per 64-byte line: futex word u32 @0, gate u64 @8 (`wire::doorbell`)
//! T      ring table (T = 128 + 64·L rounded up to 64): R entries of 32 bytes:
//!        consumer local worker u32, producer global worker u32, lane u32 (0 request,
//!        1 response), zero u32, ring offset u64, ring bytes u64
//! G      rings (G = T + 32·R rounded up to 128), each RingLayout::bytes() long, one after the
//!        other, each aligned to RingLayout::align(): for every local worker l, for every shm
//!        peer p in rank order, for every worker g of p, the request ring (g's requests to
//!        trustee l), then the response ring (g's answers to client l)
//! B      the rank's host board (B = end of the rings rounded up to 4096), BOARD_BYTES long:
//!        zero at creation, never touched by the runtime (see `crate::board`)
//! ```
//!
//! **Memory.** With `B = 128 + slots × (slot_size + 64)` bytes per ring (a multiple of 128) and
//! `Wₚ` workers on shm peer `p`, a rank with `L` workers holds `R = 2·L·ΣWₚ` rings, so its segment
//! is `align4096(align128(align64(128 + 64·L) + 32·R) + R·B) + 4 MiB` bytes (the last term is
//! the board), dominated by `R·B`. Every rank's segment is reserved in full at creation (`posix_fallocate`), so a `/dev/shm` that is too small
//! is a clear error at set-up rather than a `SIGBUS` in the middle of the job. With the default
//! 16 slots of 4 KiB (`B` = 66 688 bytes): 2 ranks × 16 workers on one host, `R` = 512 rings and
//! ~37 MiB per rank; 8 ranks × 16 workers, `R` = 3 584 and ~232 MiB per rank (~1.8 GiB for the
//! host): lower the slot size or count for many ranks per host.
//!
//! **Life cycle** (the phases of [`super::Fabric`]): [`Shm::create`](super::Fabric::create)
//! creates, sizes, maps and initialises the segment and sets the ready word last;
//! [`attach`](super::Fabric::attach) opens every peer's segment, checks its owner, permissions
//! and size, and validates everything it will use before touching a ring (magic, version, ready
//! word, rank, worker count, ring geometry, that the table has exactly the expected layout, and
//! that every ring lies inside the mapping, aligned, with one ring per (peer worker, our worker,
//! lane)); [`sealed`](super::Fabric::sealed) unlinks this rank's segment name (every peer has
//! mapped it by then, so a crash later leaves nothing in `/dev/shm`); dropping a fabric that
//! never reached `sealed` unlinks it too. Only this rank's own segment is ever unlinked; `gsmrun`
//! removes the segments of a rank that died between `create` and `sealed`.
//!
//! **What it does not do.** It does not notice a peer dying (the runtime watches the peers'
//! processes); a dead peer's rings simply stop moving. It never trusts a peer's bytes with memory
//! safety: header and table are read once, validated and then only the validated copy is used;
//! ring headers and release counters are checked by the ring itself. A peer process of the same
//! user that shrinks its segment after we mapped it can still make this process fault (`SIGBUS`);
//! the segment's 0600 mode keeps other users out.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::{
    Bell, Doorbell, Fabric, FabricError, FabricKind, Hooks, InLink, Lane, Links, OutLink, Peer,
    Settings, Topology,
};
use crate::board::{BOARD_BYTES, Region};
use crate::sys;
use crate::sys::shm::SharedMapping;
use crate::wire::doorbell::GATE_OFFSET;
use crate::wire::ring::{RingLayout, RingMemory};

/// "GSM_SHM1" as a little-endian word: the first 8 bytes of every segment.
const MAGIC: u64 = u64::from_le_bytes(*b"GSM_SHM1");
/// Format version; any change of the layout above changes it.
const VERSION: u32 = 3;
/// The value of the ready word once the segment is complete ("REDY").
const READY: u32 = u32::from_le_bytes(*b"REDY");

/// Bytes of the header.
const HEADER_BYTES: usize = 128;
/// Distance between two doorbell words.
const BELL_STRIDE: usize = 64;
/// Bytes of one ring-table entry.
const ENTRY_BYTES: usize = 32;

// Header field offsets.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_RANK: usize = 12;
const H_SLOTS: usize = 16;
const H_SLOT_SIZE: usize = 20;
const H_WORKERS: usize = 24;
const H_RINGS: usize = 28;
const H_BELLS: usize = 32;
const H_TABLE: usize = 40;
const H_TABLE_LEN: usize = 48;
const H_TOTAL: usize = 56;
const H_READY: usize = 64;
const H_BOARD: usize = 72;
const H_BOARD_LEN: usize = 80;

// Table entry field offsets.
const E_CONSUMER: usize = 0;
const E_PRODUCER: usize = 4;
const E_LANE: usize = 8;
const E_ZERO: usize = 12;
const E_OFFSET: usize = 16;
const E_BYTES: usize = 24;

/// The longest job id accepted: the segment name must fit `NAME_MAX` (255) with `-r{rank}`.
const MAX_JOB_ID: usize = 240;

/// The name of `rank`'s segment in job `job_id`, without the leading slash: the file name under
/// `/dev/shm`. `gsmrun` removes `/dev/shm/{job_id}-r*` after a job, so the two must agree.
pub fn segment_name(job_id: &str, rank: u32) -> String {
    format!("{job_id}-r{rank}")
}

/// Where the segment appears in the file system (for messages).
fn segment_path(name: &str) -> String {
    format!("/dev/shm/{name}")
}

fn lane_code(lane: Lane) -> u32 {
    match lane {
        Lane::Request => 0,
        Lane::Response => 1,
    }
}

fn lane_of(code: u32) -> Option<Lane> {
    match code {
        0 => Some(Lane::Request),
        1 => Some(Lane::Response),
        _ => None,
    }
}

const fn align_up(x: usize, a: usize) -> Option<usize> {
    match x.checked_add(a - 1) {
        Some(y) => Some(y / a * a),
        None => None,
    }
}

/// Where everything sits in a segment of `workers` doorbells and `rings` rings of `layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Geometry {
    bells: usize,
    table: usize,
    table_len: usize,
    rings: usize,
    stride: usize,
    board: usize,
    total: usize,
}

impl Geometry {
    /// `None` if the sizes overflow.
    fn new(layout: RingLayout, workers: u32, rings: u32) -> Option<Geometry> {
        let bells = HEADER_BYTES;
        let table = align_up(
            bells.checked_add((workers as usize).checked_mul(BELL_STRIDE)?)?,
            64,
        )?;
        let table_len = (rings as usize).checked_mul(ENTRY_BYTES)?;
        let first = align_up(table.checked_add(table_len)?, RingLayout::align())?;
        let stride = align_up(layout.bytes(), RingLayout::align())?;
        let end = first.checked_add((rings as usize).checked_mul(stride)?)?;
        let board = align_up(end, 4096)?;
        let total = board.checked_add(BOARD_BYTES)?;
        if total > isize::MAX as usize {
            return None;
        }
        Some(Geometry {
            bells,
            table,
            table_len,
            rings: first,
            stride,
            board,
            total,
        })
    }

    fn bell(&self, local: u32) -> usize {
        self.bells + local as usize * BELL_STRIDE
    }

    fn entry(&self, i: usize) -> usize {
        self.table + i * ENTRY_BYTES
    }

    fn ring(&self, i: usize) -> usize {
        self.rings + i * self.stride
    }
}

/// One ring of a segment, as its table describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Consuming worker, index within the segment's rank.
    consumer: u32,
    /// Producing worker, global id.
    producer: u32,
    lane: Lane,
    /// Offset of the ring in the segment.
    offset: usize,
}

/// A shared mapping of a whole segment; unmapped when the last ring end or doorbell using it is
/// dropped.
struct Mapping {
    /// Owns the pages (unmapped when it drops); `base` and `len` are its.
    _pages: SharedMapping,
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory that stays mapped until `Drop`; every access to it
// goes through atomics (header, table, doorbells, ring control words) or through ring payload
// pointers whose exclusive use the ring protocol hands over with Release/Acquire pairs.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: all shared access is atomic or ordered by the ring protocol.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("base", &self.base)
            .field("len", &self.len)
            .finish()
    }
}

impl Mapping {
    /// Maps the first `len` bytes of `fd` shared, readable and writable.
    fn map(fd: &OwnedFd, len: usize) -> std::io::Result<Mapping> {
        let map = SharedMapping::new(fd.as_fd(), len)?;
        Ok(Mapping {
            base: map.base(),
            len: map.len(),
            _pages: map,
        })
    }

    /// Whether `len` bytes at `off` lie inside the mapping.
    fn contains(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// The 32-bit word at `off`, if it lies inside the mapping and is aligned.
    fn u32_at(&self, off: usize) -> Option<&AtomicU32> {
        if off % 4 != 0 || !self.contains(off, 4) {
            return None;
        }
        // SAFETY: in bounds (checked), aligned (the base is page-aligned, `off` a multiple of 4),
        // mapped for as long as `&self`; every process uses these words only atomically.
        Some(unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast::<u32>()) })
    }

    /// The 64-bit word at `off`, if it lies inside the mapping and is aligned.
    fn u64_at(&self, off: usize) -> Option<&AtomicU64> {
        if off % 8 != 0 || !self.contains(off, 8) {
            return None;
        }
        // SAFETY: as in `u32_at`, for 8 bytes aligned to 8.
        Some(unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off).cast::<u64>()) })
    }

    fn load32(&self, off: usize) -> Option<u32> {
        self.u32_at(off).map(|w| w.load(Ordering::Relaxed))
    }

    fn load64(&self, off: usize) -> Option<u64> {
        self.u64_at(off).map(|w| w.load(Ordering::Relaxed))
    }

    fn store32(&self, off: usize, v: u32) {
        self.u32_at(off)
            .expect("shm: a header word outside our own segment")
            .store(v, Ordering::Relaxed);
    }

    fn store64(&self, off: usize, v: u64) {
        self.u64_at(off)
            .expect("shm: a header word outside our own segment")
            .store(v, Ordering::Relaxed);
    }
}

/// A ring made from `map` at `offset`.
///
/// # Safety
/// `offset` is aligned to [`RingLayout::align`], `offset + layout.bytes() <= map.len`, the ring's
/// memory was zeroed before any end of it was used, and over the whole life of the segment at most
/// one producer (in the producing rank) and one consumer (in the segment's rank) are taken from
/// rings at this offset.
unsafe fn ring_at(map: &Arc<Mapping>, offset: usize, layout: RingLayout) -> Arc<RingMemory> {
    debug_assert!(map.contains(offset, layout.bytes()));
    // SAFETY: in bounds (caller), so `add` stays inside the mapping.
    let ptr = unsafe { map.base.as_ptr().add(offset) };
    let keep: Arc<dyn std::any::Any + Send + Sync> = map.clone();
    // SAFETY: the caller guarantees bounds, alignment, zeroed start and one end per role; `keep`
    // keeps the memory mapped for as long as the ring.
    Arc::new(unsafe { RingMemory::in_mapping(ptr, layout, keep) })
}

/// The host board at `off` in `map` (an offset that `Geometry` computed or `validate` checked:
/// 4096-aligned, with `BOARD_BYTES` inside the mapping).
fn board_at(map: &Arc<Mapping>, off: usize) -> Region {
    assert!(
        off % 4096 == 0 && map.contains(off, BOARD_BYTES),
        "shm: a board outside its segment"
    );
    // SAFETY: in bounds (checked), so `add` stays inside the mapping, which is page-aligned.
    let ptr = unsafe { NonNull::new_unchecked(map.base.as_ptr().add(off)) };
    let keep: Arc<dyn std::any::Any + Send + Sync> = map.clone();
    // SAFETY: aligned and in bounds (checked), kept mapped by `keep`; the runtime itself never
    // touches the board, so all access is through the `Board` API.
    unsafe { Region::new(ptr, BOARD_BYTES, keep) }
}

/// The doorbell whose word is at `off` in `map`.
fn bell_at(map: &Arc<Mapping>, off: usize) -> Option<Doorbell> {
    let word: *const AtomicU32 = map.u32_at(off)?;
    if off % 8 != 0 {
        return None;
    }
    map.u64_at(off + GATE_OFFSET)?;
    let keep: Arc<dyn std::any::Any + Send + Sync> = map.clone();
    // SAFETY: `u32_at` and `u64_at` checked bounds and alignment of the futex word and the gate
    // after it; `keep` keeps them mapped; they are a doorbell by the segment format and every
    // process uses them only through `Doorbell`.
    Some(unsafe { Doorbell::in_mapping(word, keep) })
}

fn os(what: String, e: std::io::Error) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Shm,
        what,
        detail: e.to_string(),
    }
}

/// This rank's segment, once created.
#[derive(Debug)]
struct Own {
    topo: Topology,
    /// Peer ranks, ascending.
    peers: Vec<u32>,
    map: Arc<Mapping>,
    geometry: Geometry,
    entries: Vec<Entry>,
}

/// The `shm` fabric of one rank (see the module docs).
#[derive(Debug, Default)]
pub struct Shm {
    /// The segment's name while it exists in `/dev/shm` and is ours to unlink.
    linked: Option<String>,
    own: Option<Own>,
    attached: bool,
    closing: bool,
}

impl Shm {
    /// Removes this rank's segment name, if it still exists.
    fn unlink(&mut self) {
        let Some(name) = self.linked.take() else {
            return;
        };
        let Ok(c) = CString::new(format!("/{name}")) else {
            return;
        };
        if let Err(e) = sys::shm::unlink(&c) {
            if e.kind() != std::io::ErrorKind::NotFound {
                // Try again on drop.
                self.linked = Some(name);
            }
        }
    }

    /// Whether [`Fabric::closing`] was called.
    pub fn is_closing(&self) -> bool {
        self.closing
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // Set-up failed before `sealed`: do not leave our segment behind. Never a peer's.
        self.unlink();
    }
}

fn check_job_id(job_id: &str) -> Result<(), FabricError> {
    if job_id.is_empty()
        || job_id.len() > MAX_JOB_ID
        || job_id.contains('/')
        || job_id.contains('\0')
    {
        return Err(FabricError::Choice {
            value: job_id.to_string(),
            reason: "the job id names shared-memory segments, so it must be 1 to 240 bytes \
                     without '/' or NUL (gsmrun sets GSM_JOB_ID to gsm-<pid>-<hex>)",
        });
    }
    Ok(())
}

/// The rings of `rank`'s segment, in table order, given its shm peers (ascending).
fn ring_plan(topo: &Topology, rank: u32, peers: &[u32]) -> Vec<(u32, u32, Lane)> {
    let mut v = Vec::new();
    for l in 0..topo.workers[rank as usize] {
        for &p in peers {
            for g in topo.workers_of(p) {
                v.push((l, g, Lane::Request));
                v.push((l, g, Lane::Response));
            }
        }
    }
    v
}

/// What this rank expects of peer `p`'s segment.
struct Expect<'a> {
    topo: &'a Topology,
    peer: u32,
}

/// A peer segment's validated contents.
struct PeerSegment {
    geometry: Geometry,
    workers: u32,
    /// Rings produced by our workers: (index of our worker, consumer local index in p, lane,
    /// offset).
    ours: Vec<Entry>,
}

/// Reads and validates a peer's segment header and table; every value used later comes from the
/// returned copy, never from the shared memory again. Errors are a description for the message.
fn validate(map: &Mapping, ex: &Expect<'_>) -> Result<PeerSegment, String> {
    let t = ex.topo;
    let short = || "the segment ends inside its header or table".to_string();
    if map.len < HEADER_BYTES {
        return Err(format!(
            "the segment is {} bytes, shorter than its {HEADER_BYTES}-byte header",
            map.len
        ));
    }
    let ready = map
        .u32_at(H_READY)
        .ok_or_else(short)?
        .load(Ordering::Acquire);
    let magic = map.load64(H_MAGIC).ok_or_else(short)?;
    if magic != MAGIC {
        return Err(format!(
            "it is not a Gossamer shm segment (magic {magic:#018x}, expected {MAGIC:#018x})"
        ));
    }
    let version = map.load32(H_VERSION).ok_or_else(short)?;
    if version != VERSION {
        return Err(format!(
            "its format version is {version}, this build reads version {VERSION} (are all ranks \
             the same build?)"
        ));
    }
    if ready != READY {
        return Err("its ready word is not set: the rank had not finished creating it".to_string());
    }
    let rank = map.load32(H_RANK).ok_or_else(short)?;
    if rank != ex.peer {
        return Err(format!("it says it belongs to rank {rank}"));
    }
    let (slots, slot_size) = (
        map.load32(H_SLOTS).ok_or_else(short)?,
        map.load32(H_SLOT_SIZE).ok_or_else(short)?,
    );
    if (slots, slot_size) != (t.layout.slots, t.layout.slot_size) {
        return Err(format!(
            "its rings have {slots} slots of {slot_size} bytes, ours {} of {}",
            t.layout.slots, t.layout.slot_size
        ));
    }
    let workers = map.load32(H_WORKERS).ok_or_else(short)?;
    let expected_workers = t.workers[ex.peer as usize];
    if workers != expected_workers {
        return Err(format!(
            "it has doorbells for {workers} workers, the job gives rank {} {expected_workers}",
            ex.peer
        ));
    }
    let rings = map.load32(H_RINGS).ok_or_else(short)?;
    // Each of the rank's workers has two rings per worker of each shm peer.
    let per_peer_worker = 2 * u64::from(workers);
    let max = per_peer_worker * u64::from(t.total_workers() - workers);
    if per_peer_worker == 0 || u64::from(rings) % per_peer_worker != 0 || u64::from(rings) > max {
        return Err(format!(
            "its ring count {rings} is not 2 × {workers} × (workers of its peers), at most {max}"
        ));
    }
    let g = Geometry::new(t.layout, workers, rings)
        .ok_or_else(|| format!("its {rings} rings do not fit the address space"))?;
    let declared = (
        map.load64(H_BELLS).ok_or_else(short)?,
        map.load64(H_TABLE).ok_or_else(short)?,
        map.load64(H_TABLE_LEN).ok_or_else(short)?,
        map.load64(H_TOTAL).ok_or_else(short)?,
        map.load64(H_BOARD).ok_or_else(short)?,
        map.load64(H_BOARD_LEN).ok_or_else(short)?,
    );
    let computed = (
        g.bells as u64,
        g.table as u64,
        g.table_len as u64,
        g.total as u64,
        g.board as u64,
        BOARD_BYTES as u64,
    );
    if declared != computed {
        return Err(format!(
            "its header places (doorbells, table, table bytes, total, board, board bytes) at \
             {declared:?}, the format gives {computed:?}"
        ));
    }
    if g.total != map.len {
        return Err(format!(
            "it is {} bytes long, its header says {}",
            map.len, g.total
        ));
    }
    if !map.contains(g.bell(workers), 0) || !map.contains(g.table, g.table_len) {
        return Err(short());
    }

    let mine = t.workers_of(t.rank);
    let theirs = t.workers_of(ex.peer);
    let ring_bytes = t.layout.bytes();
    // One flag per (their consumer, our producer, lane): each must appear exactly once.
    let mut seen = vec![false; (workers as usize) * (mine.len()) * 2];
    let mut ours = Vec::new();
    for i in 0..rings as usize {
        let e = g.entry(i);
        let field = |o: usize| format!("ring table entry {i} (field at byte {o}) is outside");
        let consumer = map.load32(e + E_CONSUMER).ok_or_else(|| field(e))?;
        let producer = map.load32(e + E_PRODUCER).ok_or_else(|| field(e))?;
        let lane = map.load32(e + E_LANE).ok_or_else(|| field(e))?;
        let zero = map.load32(e + E_ZERO).ok_or_else(|| field(e))?;
        let offset = map.load64(e + E_OFFSET).ok_or_else(|| field(e))?;
        let bytes = map.load64(e + E_BYTES).ok_or_else(|| field(e))?;
        let bad = |what: String| format!("ring table entry {i}: {what}");
        let Some(lane) = lane_of(lane) else {
            return Err(bad(format!("lane {lane} is neither 0 nor 1")));
        };
        if zero != 0 {
            return Err(bad(format!("reserved word is {zero:#x}, not 0")));
        }
        if consumer >= workers {
            return Err(bad(format!(
                "consumer worker {consumer}, the rank has {workers}"
            )));
        }
        if producer >= t.total_workers() || theirs.contains(&producer) {
            return Err(bad(format!(
                "producer worker {producer} is not a worker of another rank"
            )));
        }
        let Ok(offset) = usize::try_from(offset) else {
            return Err(bad(format!("offset {offset} does not fit")));
        };
        if bytes != ring_bytes as u64 {
            return Err(bad(format!("ring of {bytes} bytes, expected {ring_bytes}")));
        }
        if offset != g.ring(i)
            || offset % RingLayout::align() != 0
            || !map.contains(offset, ring_bytes)
        {
            return Err(bad(format!(
                "ring at offset {offset}, expected {} (aligned to {}, inside the {} bytes of the \
                 segment)",
                g.ring(i),
                RingLayout::align(),
                map.len
            )));
        }
        if mine.contains(&producer) {
            let ours_idx = producer - mine.start;
            let k = ((consumer as usize * mine.len()) + ours_idx as usize) * 2
                + lane_code(lane) as usize;
            if std::mem::replace(&mut seen[k], true) {
                return Err(bad(format!(
                    "a second {lane:?} ring from worker {producer} to its worker {consumer}"
                )));
            }
            ours.push(Entry {
                consumer,
                producer,
                lane,
                offset,
            });
        }
    }
    if let Some(k) = seen.iter().position(|s| !s) {
        let lane = if k % 2 == 0 { "request" } else { "response" };
        let ours_idx = (k / 2) % mine.len();
        let consumer = k / 2 / mine.len();
        return Err(format!(
            "it has no {lane} ring from our worker {} to its worker {consumer}: did that rank \
             treat this one as an shm peer?",
            mine.start as usize + ours_idx
        ));
    }
    Ok(PeerSegment {
        geometry: g,
        workers,
        ours,
    })
}

impl Shm {
    /// Opens, checks and maps peer `p`'s segment.
    fn open_peer(topo: &Topology, p: u32) -> Result<(Arc<Mapping>, PeerSegment), FabricError> {
        let name = segment_name(&topo.job_id, p);
        let path = segment_path(&name);
        let host = topo.hosts.get(p as usize).cloned().unwrap_or_default();
        let protocol = |detail: String| FabricError::Protocol {
            fabric: FabricKind::Shm,
            peer: p,
            host: host.clone(),
            detail: format!("segment {path}: {detail}"),
        };
        let c = CString::new(format!("/{name}")).map_err(|_| protocol("bad name".into()))?;
        let fd = sys::shm::open_read_write(&c).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "; that rank did not create it (did its set-up fail?) or it does not share this \
                 host's /dev/shm (use --fabric tcp between hosts)"
            } else {
                ""
            };
            FabricError::Os {
                fabric: FabricKind::Shm,
                what: format!("opening rank {p}'s segment {path} (host {host})"),
                detail: format!("{e}{hint}"),
            }
        })?;
        let st = sys::shm::status(fd.as_fd()).map_err(|e| {
            os(
                format!("fstat of rank {p}'s segment {path} (host {host})"),
                e,
            )
        })?;
        let me = sys::shm::effective_uid();
        if st.uid != me || st.mode & 0o077 != 0 {
            return Err(protocol(format!(
                "owned by uid {} with mode {:o}; a job's segments belong to its user (uid {me}) \
                 with mode 600",
                st.uid,
                st.mode & 0o7777
            )));
        }
        let len = usize::try_from(st.size)
            .ok()
            .filter(|&l| l >= HEADER_BYTES && l <= isize::MAX as usize)
            .ok_or_else(|| {
                protocol(format!(
                    "its size is {} bytes, less than a {HEADER_BYTES}-byte header",
                    st.size
                ))
            })?;
        let map = Mapping::map(&fd, len).map_err(|e| {
            os(
                format!("mapping rank {p}'s segment {path} (host {host})"),
                e,
            )
        })?;
        let seg = validate(&map, &Expect { topo, peer: p }).map_err(protocol)?;
        Ok((Arc::new(map), seg))
    }
}

impl Fabric for Shm {
    const KIND: FabricKind = FabricKind::Shm;

    fn prepare(_settings: &Settings) -> Result<(Self, Vec<u8>), FabricError> {
        // Peers find the segment by name; nothing to publish.
        Ok((Shm::default(), Vec::new()))
    }

    fn create(
        &mut self,
        topo: &Topology,
        peers: &[Peer],
        _hooks: Hooks,
    ) -> Result<(), FabricError> {
        if self.own.is_some() || self.linked.is_some() {
            return Err(FabricError::Os {
                fabric: FabricKind::Shm,
                what: format!("creating rank {}'s segment", topo.rank),
                detail: "create was called twice on one fabric".into(),
            });
        }
        check_job_id(&topo.job_id)?;
        let mut ranks: Vec<u32> = peers.iter().map(|p| p.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        if ranks.len() != peers.len() || ranks.iter().any(|&p| p == topo.rank || p >= topo.ranks())
        {
            return Err(FabricError::Os {
                fabric: FabricKind::Shm,
                what: format!("creating rank {}'s segment", topo.rank),
                detail: format!(
                    "peer list {:?} repeats a rank, names this rank or a rank beyond {}",
                    peers.iter().map(|p| p.rank).collect::<Vec<_>>(),
                    topo.ranks()
                ),
            });
        }
        let plan = ring_plan(topo, topo.rank, &ranks);
        let local = topo.local_workers();
        let name = segment_name(&topo.job_id, topo.rank);
        let path = segment_path(&name);
        let too_big = || FabricError::Os {
            fabric: FabricKind::Shm,
            what: format!("sizing segment {path}"),
            detail: format!(
                "{} rings of {} bytes do not fit this address space; lower the slot size or \
                 the slots per ring",
                plan.len(),
                topo.layout.bytes()
            ),
        };
        let rings = u32::try_from(plan.len()).map_err(|_| too_big())?;
        let g = Geometry::new(topo.layout, local, rings).ok_or_else(too_big)?;

        let c = CString::new(format!("/{name}")).map_err(|_| FabricError::Choice {
            value: topo.job_id.clone(),
            reason: "the job id contains a NUL byte",
        })?;
        let fd = sys::shm::create_exclusive(&c, 0o600).map_err(|e| {
            let detail = if e.kind() == std::io::ErrorKind::AlreadyExists {
                format!(
                    "{path} already exists: a previous job with id {} left it behind (or two \
                     ranks claim rank {}); remove it with `rm {path}` if no such job is running",
                    topo.job_id, topo.rank
                )
            } else {
                e.to_string()
            };
            FabricError::Os {
                fabric: FabricKind::Shm,
                what: format!("creating rank {}'s segment {path}", topo.rank),
                detail,
            }
        })?;
        // From here on the name is ours: drop unlinks it if set-up fails.
        self.linked = Some(name);
        // The umask may have narrowed the mode; make it exactly 0600.
        sys::shm::set_mode(fd.as_fd(), 0o600)
            .map_err(|e| os(format!("setting mode 600 on {path}"), e))?;
        let size = i64::try_from(g.total).map_err(|_| too_big())?;
        sys::shm::set_len(fd.as_fd(), size as u64)
            .map_err(|e| os(format!("sizing {path} to {} bytes", g.total), e))?;
        // Reserve every page now: a full /dev/shm fails here, not with SIGBUS later.
        if let Err(e) = sys::shm::reserve(fd.as_fd(), size) {
            return Err(FabricError::Os {
                fabric: FabricKind::Shm,
                what: format!("reserving {} bytes for {path}", g.total),
                detail: format!(
                    "{}; is /dev/shm large enough for {} rings of {} bytes? (lower the slot size \
                     or the slots per ring)",
                    e,
                    rings,
                    topo.layout.bytes()
                ),
            });
        }
        let map =
            Arc::new(Mapping::map(&fd, g.total).map_err(|e| os(format!("mapping {path}"), e))?);
        drop(fd);

        // The file is fresh (O_EXCL) and ftruncate/fallocate zero-fill it: every ring and
        // doorbell starts at zero. Write the table, then the header, then the ready word.
        let mut entries = Vec::with_capacity(plan.len());
        for (i, &(consumer, producer, lane)) in plan.iter().enumerate() {
            let e = g.entry(i);
            let offset = g.ring(i);
            map.store32(e + E_CONSUMER, consumer);
            map.store32(e + E_PRODUCER, producer);
            map.store32(e + E_LANE, lane_code(lane));
            map.store32(e + E_ZERO, 0);
            map.store64(e + E_OFFSET, offset as u64);
            map.store64(e + E_BYTES, topo.layout.bytes() as u64);
            entries.push(Entry {
                consumer,
                producer,
                lane,
                offset,
            });
        }
        map.store64(H_MAGIC, MAGIC);
        map.store32(H_VERSION, VERSION);
        map.store32(H_RANK, topo.rank);
        map.store32(H_SLOTS, topo.layout.slots);
        map.store32(H_SLOT_SIZE, topo.layout.slot_size);
        map.store32(H_WORKERS, local);
        map.store32(H_RINGS, rings);
        map.store64(H_BELLS, g.bells as u64);
        map.store64(H_TABLE, g.table as u64);
        map.store64(H_TABLE_LEN, g.table_len as u64);
        map.store64(H_TOTAL, g.total as u64);
        map.store64(H_BOARD, g.board as u64);
        map.store64(H_BOARD_LEN, BOARD_BYTES as u64);
        map.u32_at(H_READY)
            .expect("the header is inside the segment")
            .store(READY, Ordering::Release);

        self.own = Some(Own {
            topo: topo.clone(),
            peers: ranks,
            map,
            geometry: g,
            entries,
        });
        Ok(())
    }

    fn attach(&mut self) -> Result<Links, FabricError> {
        let Some(own) = &self.own else {
            return Err(FabricError::Os {
                fabric: FabricKind::Shm,
                what: "attaching to peers' segments".into(),
                detail: "attach was called before a successful create".into(),
            });
        };
        if self.attached {
            return Err(FabricError::Os {
                fabric: FabricKind::Shm,
                what: "attaching to peers' segments".into(),
                detail: "attach was called twice (each ring has exactly one end per side)".into(),
            });
        }
        let topo = &own.topo;
        let layout = topo.layout;
        let first = topo.first_worker(topo.rank);
        let mut links = Links::default();
        // Validate every peer before taking any ring end, so a failure leaves nothing taken.
        let mut opened = Vec::with_capacity(own.peers.len());
        for &p in &own.peers {
            opened.push((p, Shm::open_peer(topo, p)?));
        }
        self.attached = true;
        let ring_err = |p: u32, e: crate::wire::ring::RingError| FabricError::Protocol {
            fabric: FabricKind::Shm,
            peer: p,
            host: topo.hosts.get(p as usize).cloned().unwrap_or_default(),
            detail: e.to_string(),
        };
        let mut boards = vec![(topo.rank as usize, board_at(&own.map, own.geometry.board))];
        for (p, (map, seg)) in opened {
            boards.push((p as usize, board_at(&map, seg.geometry.board)));
            let base = topo.first_worker(p);
            for e in &seg.ours {
                // SAFETY: `validate` checked that the ring lies inside the mapping, aligned, at
                // the offset the format gives (so rings do not overlap); the segment's creator
                // zeroed it; we take only the producer, of exactly one ring per (our worker,
                // their worker, lane), once (`attached`), and only its rank takes consumers.
                let ring = unsafe { ring_at(&map, e.offset, layout) };
                links.outgoing.push(OutLink {
                    local: e.producer - first,
                    remote: base + e.consumer,
                    lane: e.lane,
                    producer: ring.producer().map_err(|err| ring_err(p, err))?,
                });
            }
            for l in 0..seg.workers {
                let bell =
                    bell_at(&map, seg.geometry.bell(l)).ok_or_else(|| FabricError::Protocol {
                        fabric: FabricKind::Shm,
                        peer: p,
                        host: topo.hosts.get(p as usize).cloned().unwrap_or_default(),
                        detail: format!("doorbell {l} lies outside its segment"),
                    })?;
                links.bells.push((base + l, Bell::Door(bell)));
            }
        }
        for e in &own.entries {
            // SAFETY: our own table, computed by `Geometry` (aligned, in bounds, disjoint) and
            // zeroed by ftruncate; we take only the consumer, once (`attached`).
            let ring = unsafe { ring_at(&own.map, e.offset, layout) };
            let p = topo.rank_of(e.producer);
            links.incoming.push(InLink {
                local: e.consumer,
                remote: e.producer,
                lane: e.lane,
                consumer: ring.consumer().map_err(|err| ring_err(p, err))?,
            });
        }
        let mut bells = Vec::with_capacity(topo.local_workers() as usize);
        for l in 0..topo.local_workers() {
            bells.push(
                bell_at(&own.map, own.geometry.bell(l))
                    .expect("our own doorbells lie inside our segment"),
            );
        }
        links.local_bells = Some(bells);
        links.boards = boards;
        Ok(links)
    }

    fn sealed(&mut self) {
        // Every peer has mapped our segment: the name is no longer needed.
        self.unlink();
    }

    fn closing(&mut self) {
        // Nothing to stop: there is no thread, and a peer that ends only stops writing.
        self.closing = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    static N: AtomicU64 = AtomicU64::new(0);

    fn job_id() -> String {
        format!(
            "gsm-test-shm-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn path(job: &str, rank: u32) -> PathBuf {
        PathBuf::from(format!("/dev/shm/{}", segment_name(job, rank)))
    }

    fn topo(job: &str, rank: u32, workers: &[u32]) -> Topology {
        Topology {
            rank,
            workers: workers.to_vec(),
            hosts: vec!["localhost".into(); workers.len()],
            layout: RingLayout::new(4, 128).unwrap(),
            job_id: job.to_string(),
            key: [0; crate::bootstrap::KEY_LEN],
        }
    }

    fn hooks() -> Hooks {
        Hooks {
            wake: Arc::new(|_| {}),
            fail: Arc::new(|_| {}),
        }
    }

    fn peers(rank: u32, n: u32) -> Vec<Peer> {
        (0..n)
            .filter(|&r| r != rank)
            .map(|r| Peer {
                rank: r,
                endpoint: Vec::new(),
            })
            .collect()
    }

    /// Creates every rank's segment (create never waits, so one thread does), without attaching.
    fn created(job: &str, workers: &[u32]) -> Vec<Shm> {
        let n = workers.len() as u32;
        (0..n)
            .map(|r| {
                let (mut s, _) = Shm::prepare(&Settings::default()).unwrap();
                s.create(&topo(job, r, workers), &peers(r, n), hooks())
                    .unwrap();
                s
            })
            .collect()
    }

    #[test]
    fn segment_is_private_while_set_up_and_gone_after_sealed() {
        let job = job_id();
        let mut ranks = created(&job, &[2, 1]);
        for r in 0..2 {
            let meta = std::fs::metadata(path(&job, r)).expect("segment exists after create");
            assert_eq!(meta.permissions().mode() & 0o7777, 0o600, "rank {r}");
            assert!(meta.len() > 0);
        }
        let links: Vec<Links> = ranks.iter_mut().map(|s| s.attach().unwrap()).collect();
        assert!(path(&job, 0).exists() && path(&job, 1).exists());
        for s in &mut ranks {
            s.sealed();
        }
        assert!(!path(&job, 0).exists() && !path(&job, 1).exists());
        // The rings still work after the names are gone: one slot from rank 1 to rank 0.
        let mut links = links;
        let (a, b) = links.split_at_mut(1);
        let i = b[0]
            .outgoing
            .iter()
            .position(|l| l.remote == 1 && l.lane == Lane::Request)
            .unwrap();
        let mut w = b[0].outgoing[i].producer.try_reserve().unwrap();
        w.buf()[..3].copy_from_slice(b"abc");
        w.publish(3);
        let j = a[0]
            .incoming
            .iter()
            .position(|l| l.local == 1 && l.remote == 2 && l.lane == Lane::Request)
            .unwrap();
        let r = a[0].incoming[j].consumer.try_poll().unwrap().unwrap();
        assert_eq!(r.bytes(), b"abc");
    }

    #[test]
    fn a_second_create_with_the_same_id_fails_and_leaves_the_first_alone() {
        let job = job_id();
        let t = topo(&job, 0, &[1, 1]);
        let (mut first, _) = Shm::prepare(&Settings::default()).unwrap();
        first.create(&t, &peers(0, 2), hooks()).unwrap();
        let (mut second, _) = Shm::prepare(&Settings::default()).unwrap();
        let err = second.create(&t, &peers(0, 2), hooks()).unwrap_err();
        let msg = err.to_string();
        let p = path(&job, 0);
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert!(msg.contains("already exists"), "{msg}");
        assert!(msg.contains("previous job"), "{msg}");
        drop(second);
        assert!(p.exists(), "the failed create removed the first's segment");
        drop(first);
        assert!(!p.exists());
    }

    #[test]
    fn dropping_without_sealing_removes_the_segment() {
        let job = job_id();
        let ranks = created(&job, &[1, 2, 1]);
        for r in 0..3 {
            assert!(path(&job, r).exists());
        }
        drop(ranks);
        for r in 0..3 {
            assert!(!path(&job, r).exists(), "rank {r}'s segment is left");
        }
    }

    /// Corrupts rank 1's segment with `damage`, then rank 0 attaches: it must get an error
    /// naming rank 1, and not crash.
    fn refused(what: &str, damage: impl FnOnce(&mut std::fs::File)) -> String {
        let job = job_id();
        let mut ranks = created(&job, &[2, 2]);
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path(&job, 1))
            .unwrap();
        damage(&mut f);
        drop(f);
        let err = ranks[0]
            .attach()
            .expect_err(&format!("{what}: attach succeeded"));
        let msg = err.to_string();
        assert!(msg.contains("rank 1"), "{what}: {msg}");
        assert!(
            msg.contains(&path(&job, 1).display().to_string()),
            "{what}: {msg}"
        );
        drop(ranks);
        assert!(!path(&job, 0).exists() && !path(&job, 1).exists());
        msg
    }

    fn write_at(f: &mut std::fs::File, off: u64, bytes: &[u8]) {
        f.seek(SeekFrom::Start(off)).unwrap();
        f.write_all(bytes).unwrap();
    }

    #[test]
    fn a_corrupt_peer_segment_is_refused() {
        let m = refused("garbage header", |f| {
            write_at(f, 0, &[0xA5; HEADER_BYTES]);
        });
        assert!(m.contains("not a Gossamer shm segment"), "{m}");
        let m = refused("wrong version", |f| {
            write_at(f, H_VERSION as u64, &99u32.to_ne_bytes())
        });
        assert!(m.contains("version"), "{m}");
        let m = refused("not ready", |f| write_at(f, H_READY as u64, &[0; 4]));
        assert!(m.contains("ready"), "{m}");
        let m = refused("wrong rank", |f| {
            write_at(f, H_RANK as u64, &7u32.to_ne_bytes())
        });
        assert!(m.contains("rank 7"), "{m}");
        let m = refused("huge ring count", |f| {
            write_at(f, H_RINGS as u64, &u32::MAX.to_ne_bytes())
        });
        assert!(m.contains("ring count"), "{m}");
        let m = refused("table elsewhere", |f| {
            write_at(f, H_TABLE as u64, &(1u64 << 40).to_ne_bytes())
        });
        assert!(m.contains("header places"), "{m}");
        let m = refused("board elsewhere", |f| {
            write_at(f, H_BOARD as u64, &8u64.to_ne_bytes())
        });
        assert!(m.contains("header places"), "{m}");
        let m = refused("smaller board", |f| {
            write_at(f, H_BOARD_LEN as u64, &4096u64.to_ne_bytes())
        });
        assert!(m.contains("header places"), "{m}");
        let m = refused("truncated", |f| f.set_len(4096).unwrap());
        assert!(m.contains("bytes long"), "{m}");
        let m = refused("tiny", |f| f.set_len(16).unwrap());
        assert!(m.contains("header"), "{m}");
        // First table entry: 128 + 2 doorbells × 64 = 256.
        let table = (HEADER_BYTES + 2 * BELL_STRIDE) as u64;
        let m = refused("ring outside", |f| {
            write_at(f, table + E_OFFSET as u64, &(u64::MAX - 8).to_ne_bytes())
        });
        assert!(m.contains("ring table entry 0"), "{m}");
        let m = refused("misaligned ring", |f| {
            let mut b = [0u8; 8];
            use std::io::Read;
            f.seek(SeekFrom::Start(table + E_OFFSET as u64)).unwrap();
            f.read_exact(&mut b).unwrap();
            let off = u64::from_ne_bytes(b) + 8;
            write_at(f, table + E_OFFSET as u64, &off.to_ne_bytes())
        });
        assert!(m.contains("ring table entry 0"), "{m}");
        let m = refused("bad lane", |f| {
            write_at(f, table + E_LANE as u64, &5u32.to_ne_bytes())
        });
        assert!(m.contains("lane 5"), "{m}");
        let m = refused("duplicate ring", |f| {
            // Entry 1 (the response ring of the same pair) claims to be a request ring too.
            write_at(
                f,
                table + (ENTRY_BYTES + E_LANE) as u64,
                &0u32.to_ne_bytes(),
            )
        });
        assert!(m.contains("second"), "{m}");
        let m = refused("bad producer", |f| {
            write_at(f, table + E_PRODUCER as u64, &3u32.to_ne_bytes())
        });
        assert!(m.contains("producer worker 3"), "{m}");
        let m = refused("loose permissions", |f| {
            f.set_permissions(std::fs::Permissions::from_mode(0o644))
                .unwrap()
        });
        assert!(m.contains("mode 600"), "{m}");
    }

    #[test]
    fn a_missing_peer_segment_is_a_clear_error() {
        let job = job_id();
        let mut ranks = created(&job, &[1, 1]);
        std::fs::remove_file(path(&job, 1)).unwrap();
        let msg = ranks[0].attach().unwrap_err().to_string();
        assert!(
            msg.contains("rank 1") && msg.contains("did not create it"),
            "{msg}"
        );
    }

    #[test]
    fn bad_job_ids_are_refused_before_touching_dev_shm() {
        for bad in ["", "a/b", &"x".repeat(300)] {
            let (mut s, _) = Shm::prepare(&Settings::default()).unwrap();
            let err = s.create(&topo(bad, 0, &[1, 1]), &peers(0, 2), hooks());
            assert!(matches!(err, Err(FabricError::Choice { .. })), "{bad:?}");
        }
    }

    #[test]
    fn the_segment_size_follows_the_documented_formula() {
        let job = job_id();
        let workers = [3, 2, 1];
        let ranks = created(&job, &workers);
        let b = RingLayout::new(4, 128).unwrap().bytes();
        assert_eq!(b, 128 + 4 * (128 + 64));
        for (r, &l) in workers.iter().enumerate() {
            let others: usize = workers.iter().map(|&w| w as usize).sum::<usize>() - l as usize;
            let rings = 2 * l as usize * others;
            let head = (128 + 64 * l as usize).div_ceil(64) * 64 + 32 * rings;
            let expected = (head.div_ceil(128) * 128 + rings * b).div_ceil(4096) * 4096 + (4 << 20);
            let len = std::fs::metadata(path(&job, r as u32)).unwrap().len();
            assert_eq!(len as usize, expected, "rank {r}");
        }
        drop(ranks);
    }

    #[test]
    fn every_rank_maps_every_host_board_and_sees_the_same_bytes() {
        let job = job_id();
        let mut ranks = created(&job, &[2, 1, 1]);
        let links: Vec<Links> = ranks.iter_mut().map(|s| s.attach().unwrap()).collect();
        let boards: Vec<crate::board::Board> = links
            .into_iter()
            .enumerate()
            .map(|(r, l)| {
                let mut seen: Vec<usize> = l.boards.iter().map(|b| b.0).collect();
                seen.sort_unstable();
                assert_eq!(seen, vec![0, 1, 2], "rank {r} maps every board");
                crate::board::Board::new(r, vec![1, 2, 3], l.boards, vec![vec![false; 3]; 3])
            })
            .collect();
        // Each rank writes a word of its own board; every rank reads every rank's word.
        for (r, b) in boards.iter().enumerate() {
            let own = b.region(r).unwrap();
            assert_eq!(own.len(), BOARD_BYTES);
            assert_eq!(
                own.word(BOARD_BYTES - 8).load(Ordering::Relaxed),
                0,
                "zeroed"
            );
            own.word(BOARD_BYTES - 8)
                .store(0x100 + r as u64, Ordering::Release);
        }
        for b in &boards {
            for r in 0..3 {
                let word = b.region(r).unwrap().word(BOARD_BYTES - 8);
                assert_eq!(word.load(Ordering::Acquire), 0x100 + r as u64);
            }
            assert!(!b.can_copy(0, 1), "nothing was probed");
            assert!(
                b.read_from(b.rank(), 0, &mut [0u8; 1]).is_err(),
                "not oneself"
            );
        }
        for s in &mut ranks {
            s.sealed();
        }
    }

    #[test]
    fn a_board_word_outside_the_board_is_refused() {
        let job = job_id();
        let mut ranks = created(&job, &[1, 1]);
        let mut links: Vec<Links> = ranks.iter_mut().map(|s| s.attach().unwrap()).collect();
        let b =
            crate::board::Board::new(0, vec![1, 2], std::mem::take(&mut links[0].boards), vec![]);
        let region = b.region(1).unwrap();
        assert!(
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| region.word(BOARD_BYTES)))
                .is_err()
        );
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| region.word(4))).is_err());
        assert!(
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                || region.ptr(BOARD_BYTES - 4, 8)
            ))
            .is_err()
        );
        assert!(b.region(2).is_none());
        for s in &mut ranks {
            s.sealed();
        }
    }

    #[test]
    fn segment_names_match_gsmrun_s_contract() {
        assert_eq!(segment_name("gsm-12-ab", 3), "gsm-12-ab-r3");
    }
}
