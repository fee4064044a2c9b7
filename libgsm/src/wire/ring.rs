//! The slot ring: a single-producer single-consumer ring of fixed-size slots that carries batches
//! from one worker to another.
//!
//! A ring lives in a caller-provided region (the heap, a shared-memory segment, or memory a
//! one-sided fabric registered), so it is position-independent: the region holds only offsets'
//! worth of structure, never a pointer, and every word both sides touch is an atomic at a fixed
//! offset. The ring moves opaque bytes; it does not encode records, pick destinations, wake
//! sleeping workers, or move bytes between hosts (the fabrics do that, see below).
//!
//! # Layout
//!
//! ```text
//! offset 0                 control block, 128 bytes: the release word `released: u64` at 0,
//!                          alone in its cache-line pair (written only by the consumer)
//! 128 + i*(S+64)           slot i header `header: u64` (written only by the producer),
//!                          then slot i payload, S = slot_size bytes (a multiple of 64),
//!                          then 56 bytes of padding
//! ```
//!
//! Total: [`RingLayout::bytes`] = `128 + slots × (slot_size + 64)`. The header shares its cache
//! line with the first 56 payload bytes, so a short batch (a request or two, a few responses)
//! crosses between cores as one cache line: the consumer's header load brings the payload with
//! it. Ordering comes from the Release store of the header after the payload writes, not from
//! addresses; an RDMA fabric, which orders by address within one WRITE, must send such a slot as
//! two WRITEs on one queue pair, the payload first and the 8-byte header second.
//!
//! # Protocol: who owns which bytes when
//!
//! Positions `p = 0, 1, 2, …` map to slot `p mod slots`. The producer keeps `tail` (next position
//! to publish), the consumer keeps `head` (next position to consume); neither is shared. The only
//! shared words are the headers and `released`:
//!
//! 1. The producer owns slot `p mod slots`'s payload once `p < released + slots`, i.e. once it
//!    has read `released` with **Acquire** and seen that the consumer has given back position
//!    `p - slots`. That Acquire pairs with the consumer's **Release** store of `released` in step 4,
//!    so every read the consumer made of the old payload happens before the producer's new writes.
//!    The producer caches `released` and only re-reads it when its cache says the ring is full.
//! 2. The producer writes the payload (plain stores), then stores the header
//!    `(lap + 1) << 32 | len` with **Release** — the header is always the last write of a slot.
//!    From then on the payload belongs to the consumer.
//! 3. The consumer loads the header of slot `head mod slots` with **Acquire**. If the tag is
//!    `lap + 1` the payload is published and the Acquire makes every payload byte visible; if it
//!    is `lap` the slot still holds the previous lap (nothing new). Any other tag, or a `len`
//!    greater than `slot_size`, is corruption: the header may come from another process, so it is
//!    reported as [`RingError::Corrupt`] and the consumer is poisoned; a bad length is never used
//!    to index memory.
//! 4. When the consumer is done with the bytes ([`SlotReader::release`] or drop), it stores
//!    `released = head + 1` with **Release**. Slots are released in order (one reader at a
//!    time), so a single monotonic counter describes every free slot.
//!
//! There are no read-modify-write atomics: each shared word has exactly one writer, which uses a
//! plain Release store. Producer-written and consumer-written words never share a cache line.
//!
//! # Fabrics
//!
//! The design is *credit by monotonic counter*: data flows producer → consumer as slot writes
//! (payload, then header), credit flows consumer → producer as the single `released` counter.
//! Both directions are one-way writes, so every fabric carries the same ring:
//!
//! - `shm`: the region is one mapped segment; both sides use it directly, as on the heap.
//! - `tcp`: the producer's ring is a shadow ring in its own process, drained into frames; on the
//!   other side whoever reads the connection applies a frame exactly as a producer would
//!   (payload, then the header with Release). The credit is the incoming ring's own `released`:
//!   a full ring stops the reader, and TCP's window carries the back-pressure to the sender.
//! - `ofi` and `verbs`: the producer's ring is a shadow ring in registered memory; the fabric
//!   writes the payload into the peer's ring, and the peer's fabric stores the header (Release)
//!   only once it knows every payload byte is in place, in ring order. Credit: the consumer's
//!   fabric writes its `released` back into the producer's credit word. Because the counter is
//!   monotonic, such writes may be coalesced (every half ring): a later value subsumes all
//!   earlier ones, and a stale value only delays the producer.
//!
//! So in every fabric the producer reads its local `released` word and the consumer polls its
//! local headers; only the transport between the two copies differs (`wire/README.md`).
//!
//! # Memory cost
//!
//! One ring costs `128 + slots × (slot_size + 64)` bytes; e.g. 8 slots of 4 KiB cost 33 408 bytes.
//! With one request ring and one response ring per ordered pair of workers, a worker's memory for
//! rings is `2 × W × bytes()` for `W` peer workers, O(W × slot size).
//!
//! # Model test
//!
//! The publish/consume protocol is checked with loom on a 2-slot ring (see `loom_model` below):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p gossamer --release --lib wire::ring::loom_model
//! ```
//!
//! See ARCHITECTURE.md for where the ring sits in a request's path.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU8;

use super::region::{Ordering, PayloadMut, PayloadRef, Shape};

/// The ring's memory.
type Region = super::region::Region<RingLayout>;

/// Bytes before the first slot: the release word, alone in a 128-byte block so that the
/// producer's spatial prefetcher does not pair it with a header line.
const CONTROL_BYTES: usize = 128;
/// Offset of the consumer's release counter inside the control block.
#[cfg(not(loom))] // the loom model keeps the word in a field
const RELEASED_OFFSET: usize = 0;
/// Bytes a slot adds to its payload: the 8-byte header word before it and padding after it, so
/// that every slot starts on a cache line.
const HEADER_BYTES: usize = 64;

/// Errors of ring construction and of a peer that broke the ring protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RingError {
    /// The geometry cannot form a ring.
    #[error(
        "invalid slot ring layout ({slots} slots of {slot_size} bytes): {reason}; use a power-of-two \
         slot count of at least 2 and a slot size that is a non-zero multiple of 64"
    )]
    Layout {
        /// The slot count asked for.
        slots: u32,
        /// The slot size asked for.
        slot_size: u32,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A second producer or consumer was asked of one ring.
    #[error(
        "the slot ring's {role} was already taken: a ring has exactly one producer and one consumer"
    )]
    RoleTaken {
        /// `"producer"` or `"consumer"`.
        role: &'static str,
    },
    /// A slot header that no correct producer writes.
    #[error(
        "corrupt slot ring: {what} at position {position} (slot {slot}, header {header:#018x}); \
         the peer broke the ring protocol, so drop this ring and its connection"
    )]
    Corrupt {
        /// The position the consumer expected next.
        position: u64,
        /// The slot that position maps to.
        slot: u32,
        /// The raw header word read.
        header: u64,
        /// What is wrong with it.
        what: &'static str,
    },
    /// A release counter that no correct consumer writes.
    #[error(
        "corrupt slot ring: the consumer's release counter reads {released} while the producer has \
         published {published} slots (it must lie between {previous} and {published}); drop this \
         ring and its connection"
    )]
    CorruptRelease {
        /// The counter read.
        released: u64,
        /// The last value the producer had seen.
        previous: u64,
        /// How many slots the producer has published.
        published: u64,
    },
}

/// Geometry of one ring: `slots` slots of `slot_size` bytes of payload each (`slot_size` a
/// non-zero multiple of 64, `slots` a power of two ≥ 2).
///
/// The fields are public for convenience; every constructor of a ring re-checks them with
/// [`RingLayout::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RingLayout {
    /// Number of slots, a power of two ≥ 2.
    pub slots: u32,
    /// Payload bytes per slot, a non-zero multiple of 64.
    pub slot_size: u32,
}

impl RingLayout {
    /// A checked layout.
    pub fn new(slots: u32, slot_size: u32) -> Result<Self, RingError> {
        let layout = RingLayout { slots, slot_size };
        layout.validate()?;
        Ok(layout)
    }

    /// Checks the geometry (see [`RingLayout::new`]) and that the whole ring fits the address
    /// space.
    pub fn validate(&self) -> Result<(), RingError> {
        let fail = |reason| {
            Err(RingError::Layout {
                slots: self.slots,
                slot_size: self.slot_size,
                reason,
            })
        };
        if self.slots < 2 || !self.slots.is_power_of_two() {
            return fail("the slot count is not a power of two of at least 2");
        }
        if self.slot_size == 0 || self.slot_size % 64 != 0 {
            return fail("the slot size is not a non-zero multiple of 64");
        }
        let total = (self.slots as u128) * (self.slot_size as u128 + HEADER_BYTES as u128)
            + CONTROL_BYTES as u128;
        if total > isize::MAX as u128 {
            return fail("the ring does not fit in this address space");
        }
        Ok(())
    }

    /// Total bytes of the ring region, control block and headers included.
    pub const fn bytes(&self) -> usize {
        (self.slots as usize)
            .saturating_mul((self.slot_size as usize).saturating_add(HEADER_BYTES))
            .saturating_add(CONTROL_BYTES)
    }

    /// Alignment the region needs (a multiple of the cache line).
    pub const fn align() -> usize {
        128
    }

    /// Distance from one slot's payload to the next.
    #[cfg(not(loom))] // offsets of the real region; the loom model has fields
    const fn stride(&self) -> usize {
        self.slot_size as usize + HEADER_BYTES
    }

    /// Offset of `slot`'s payload from the region's start (just after its header word).
    #[cfg(not(loom))] // offsets of the real region; the loom model has fields
    const fn payload_offset(&self, slot: usize) -> usize {
        self.header_offset(slot) + 8
    }

    /// Offset of `slot`'s header word from the region's start (the start of its cache line).
    #[cfg(not(loom))] // offsets of the real region; the loom model has fields
    const fn header_offset(&self, slot: usize) -> usize {
        CONTROL_BYTES + slot * self.stride()
    }
}

impl Shape for RingLayout {
    #[cfg(not(loom))]
    const OWNER: &'static str = "RingMemory";
    #[cfg(not(loom))]
    const RELEASED: usize = RELEASED_OFFSET;
    const TAIL: Option<usize> = None;
    const SLOT_WORDS: usize = 1;
    #[cfg(not(loom))]
    fn bytes(&self) -> usize {
        RingLayout::bytes(self)
    }
    #[cfg(not(loom))]
    fn align() -> usize {
        RingLayout::align()
    }
    fn slots(&self) -> usize {
        self.slots as usize
    }
    fn slot_size(&self) -> usize {
        self.slot_size as usize
    }
    #[cfg(not(loom))]
    fn header_offset(&self, slot: usize) -> usize {
        RingLayout::header_offset(self, slot)
    }
    #[cfg(not(loom))]
    fn payload_offset(&self, slot: usize) -> usize {
        RingLayout::payload_offset(self, slot)
    }
}

/// Role bits of [`RingMemory::claimed`].
const PRODUCER_TAKEN: u8 = 1;
const CONSUMER_TAKEN: u8 = 2;

/// The memory of one ring, owned (heap) or borrowed (caller region), from which exactly one
/// [`Producer`] and one [`Consumer`] are made.
pub struct RingMemory {
    region: Region,
    layout: RingLayout,
    /// Which roles this handle has handed out (local bookkeeping, not part of the region).
    claimed: AtomicU8,
    /// What keeps a borrowed region's memory mapped (a shared-memory segment), if anything.
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl fmt::Debug for RingMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingMemory")
            .field("region", &self.region)
            .field("claimed", &self.claimed)
            .finish()
    }
}

impl RingMemory {
    /// A ring in a fresh zeroed heap allocation.
    ///
    /// # Panics
    /// If `layout` fails [`RingLayout::validate`] (only possible for a layout built from its
    /// public fields instead of [`RingLayout::new`]).
    pub fn new_heap(layout: RingLayout) -> Self {
        if let Err(e) = layout.validate() {
            panic!("RingMemory::new_heap: {e}");
        }
        RingMemory {
            region: Region::heap(layout),
            layout,
            claimed: AtomicU8::new(0),
            _keep: None,
        }
    }

    /// A ring in caller-provided memory (a shared-memory segment, a registered RDMA region).
    ///
    /// # Safety
    /// - `ptr` is valid for reads and writes of `layout.bytes()` bytes, aligned to
    ///   [`RingLayout::align`], and stays so for as long as the returned value (and every
    ///   `Producer`/`Consumer` made from it) lives.
    /// - Before the first `Producer` or `Consumer` of the ring is used, the release word and
    ///   every slot header are zero (zeroing the whole region is the simple way).
    /// - Over the whole life of the region, across every process that maps it, at most one
    ///   `Producer` and one `Consumer` exist, and nothing else writes the region except a fabric
    ///   that follows the protocol in the module docs (payload first, header last with Release;
    ///   release word with Release). Bytes a misbehaving peer writes are detected where they are
    ///   read (headers, release word) and never make this process read out of bounds.
    ///
    /// # Panics
    /// If `ptr` is null or misaligned, or `layout` fails [`RingLayout::validate`].
    #[cfg(not(loom))]
    pub unsafe fn from_raw(ptr: *mut u8, layout: RingLayout) -> Self {
        if let Err(e) = layout.validate() {
            panic!("RingMemory::from_raw: {e}");
        }
        RingMemory {
            // SAFETY: forwarded from this function's contract.
            region: unsafe { Region::from_raw(ptr, layout) },
            layout,
            claimed: AtomicU8::new(0),
            _keep: None,
        }
    }

    /// A ring in memory that `keep` keeps valid (a mapped segment): as [`RingMemory::from_raw`],
    /// but the ring holds `keep` alive, so the mapping outlives every end made from it.
    ///
    /// # Safety
    /// As [`RingMemory::from_raw`], with "for as long as the returned value lives" satisfied by
    /// `keep`: the memory stays valid while `keep` is alive.
    ///
    /// # Panics
    /// As [`RingMemory::from_raw`].
    #[cfg(not(loom))]
    pub unsafe fn in_mapping(
        ptr: *mut u8,
        layout: RingLayout,
        keep: Arc<dyn std::any::Any + Send + Sync>,
    ) -> Self {
        // SAFETY: forwarded from this function's contract.
        let mut m = unsafe { Self::from_raw(ptr, layout) };
        m._keep = Some(keep);
        m
    }

    /// Under the loom model only heap rings exist: the model tracks the ring's memory itself, so
    /// it cannot take a mapped segment. The fabrics that call this are compiled but never run
    /// under loom (only `wire::ring::loom_model` is).
    ///
    /// # Safety
    /// None needed: it always panics.
    #[cfg(loom)]
    pub unsafe fn in_mapping(
        _ptr: *mut u8,
        _layout: RingLayout,
        _keep: Arc<dyn std::any::Any + Send + Sync>,
    ) -> Self {
        panic!("RingMemory::in_mapping: mapped rings are not modelled under loom")
    }

    /// The ring's geometry.
    pub fn layout(&self) -> RingLayout {
        self.layout
    }

    /// Both ends of the ring.
    ///
    /// # Panics
    /// If this ring already handed out its producer or its consumer.
    pub fn split(self: Arc<Self>) -> (Producer, Consumer) {
        match (self.producer(), self.consumer()) {
            (Ok(p), Ok(c)) => (p, c),
            (Err(e), _) | (_, Err(e)) => panic!("RingMemory::split: {e}"),
        }
    }

    /// The producing end alone (for a ring whose consumer is in another process).
    pub fn producer(self: &Arc<Self>) -> Result<Producer, RingError> {
        self.claim(PRODUCER_TAKEN, "producer")?;
        Ok(Producer {
            shift: self.layout.slots.trailing_zeros(),
            mask: self.layout.slots as u64 - 1,
            slot_size: self.layout.slot_size,
            tail: 0,
            released: 0,
            poison: None,
            mem: Arc::clone(self),
        })
    }

    /// The consuming end alone (for a ring whose producer is in another process).
    pub fn consumer(self: &Arc<Self>) -> Result<Consumer, RingError> {
        self.claim(CONSUMER_TAKEN, "consumer")?;
        Ok(Consumer {
            shift: self.layout.slots.trailing_zeros(),
            mask: self.layout.slots as u64 - 1,
            slot_size: self.layout.slot_size,
            head: 0,
            poison: None,
            mem: Arc::clone(self),
        })
    }

    fn claim(&self, bit: u8, role: &'static str) -> Result<(), RingError> {
        // Not the hot path: a one-time fetch_or keeps two threads from both taking a role.
        let before = self
            .claimed
            .fetch_or(bit, std::sync::atomic::Ordering::AcqRel);
        if before & bit != 0 {
            Err(RingError::RoleTaken { role })
        } else {
            Ok(())
        }
    }
}

/// Encodes a header word.
#[inline]
const fn header_word(tag: u32, len: u32) -> u64 {
    ((tag as u64) << 32) | len as u64
}

/// The producing end of a ring. Not `Clone`: one per ring.
#[repr(align(128))]
pub struct Producer {
    /// Next position to publish.
    tail: u64,
    /// Last value of the consumer's release counter seen (positions `< released + slots` are
    /// free to fill).
    released: u64,
    mask: u64,
    shift: u32,
    slot_size: u32,
    poison: Option<RingError>,
    mem: Arc<RingMemory>,
}

impl fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("tail", &self.tail)
            .field("released", &self.released)
            .field("layout", &self.mem.layout)
            .field("poison", &self.poison)
            .finish()
    }
}

impl Producer {
    /// The consumer's release word, for tests that play a consumer breaking the protocol.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn release_word(&self) -> &std::sync::atomic::AtomicU64 {
        self.mem.region.released()
    }

    /// A slot to fill, or `None` if the consumer has not yet released it (back-pressure) or the
    /// ring is poisoned (see [`Producer::poisoned`]).
    #[inline]
    pub fn try_reserve(&mut self) -> Option<SlotWriter<'_>> {
        let slots = self.mask + 1;
        if self.tail.wrapping_sub(self.released) >= slots && !self.refresh() {
            return None;
        }
        let slot = (self.tail & self.mask) as usize;
        // SAFETY: `tail < released + slots`, and `released` was read with Acquire (now or
        // earlier), so the consumer has released position `tail - slots` and finished reading
        // this slot; no later position maps here until we publish. `slot < slots` by the mask.
        let payload = unsafe { self.mem.region.payload_mut(slot) };
        Some(SlotWriter {
            producer: self,
            slot,
            payload,
        })
    }

    /// Re-reads the consumer's release counter; `true` if a slot is free now.
    #[cold]
    fn refresh(&mut self) -> bool {
        if self.poison.is_some() {
            return false;
        }
        let released = self.mem.region.released().load(Ordering::Acquire);
        if released < self.released || released > self.tail {
            self.poison = Some(RingError::CorruptRelease {
                released,
                previous: self.released,
                published: self.tail,
            });
            return false;
        }
        self.released = released;
        self.tail - released < self.mask + 1
    }

    /// Free slots as of the last look at the consumer's counter, refreshed if that shows none.
    pub fn free_slots(&mut self) -> u32 {
        let slots = self.mask + 1;
        if self.tail - self.released >= slots {
            self.refresh();
        }
        (slots - (self.tail - self.released).min(slots)) as u32
    }

    /// Why this producer stopped, if the consumer's counter was found corrupt.
    pub fn poisoned(&self) -> Option<&RingError> {
        self.poison.as_ref()
    }

    /// Number of slots published so far.
    pub fn published(&self) -> u64 {
        self.tail
    }

    /// The ring's geometry.
    pub fn layout(&self) -> RingLayout {
        self.mem.layout
    }
}

/// A reserved slot being filled. Dropping it without [`SlotWriter::publish`] publishes nothing;
/// the next reservation returns the same slot.
pub struct SlotWriter<'a> {
    producer: &'a mut Producer,
    slot: usize,
    payload: PayloadMut,
}

impl fmt::Debug for SlotWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotWriter")
            .field("position", &self.producer.tail)
            .field("slot", &self.slot)
            .finish()
    }
}

impl SlotWriter<'_> {
    /// The slot's payload area, `slot_size` bytes (contents left from earlier laps).
    ///
    /// This view assumes every byte of the ring is initialised; a ring written through
    /// [`SlotWriter::buf_uninit`] must be used only through the `*_uninit` views.
    #[inline]
    pub fn buf(&mut self) -> &mut [u8] {
        self.payload.as_mut_slice()
    }

    /// The slot's payload area as possibly uninitialised bytes, for writers that copy values with
    /// padding (moved by bytes) into the slot.
    ///
    /// # Safety
    /// If any byte written through this view is uninitialised, the ring's consumer must read only
    /// with [`SlotReader::bytes_uninit`] and its producer must write only with this method from
    /// then on: [`SlotWriter::buf`] and [`SlotReader::bytes`] would view those bytes as `u8`.
    #[inline]
    pub unsafe fn buf_uninit(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        self.payload.as_mut_uninit()
    }

    /// Publishes the first `len` bytes of [`SlotWriter::buf`]: the header, carrying `len` and the
    /// slot's lap, is stored last, with Release.
    ///
    /// # Panics
    /// If `len` exceeds the slot size (a batch that does not fit takes the large-message path).
    #[inline]
    pub fn publish(self, len: u32) {
        let SlotWriter {
            producer,
            slot,
            payload,
        } = self;
        assert!(
            len <= producer.slot_size,
            "SlotWriter::publish: length {len} exceeds the slot size {}; send larger batches by \
             the large-message path",
            producer.slot_size
        );
        // End the payload access before the header hands the bytes over.
        #[allow(
            clippy::drop_non_drop,
            reason = "under loom the guard's drop ends the tracked access"
        )]
        drop(payload);
        let tag = ((producer.tail >> producer.shift) as u32).wrapping_add(1);
        producer
            .mem
            .region
            .header(slot)
            .store(header_word(tag, len), Ordering::Release);
        producer.tail += 1;
    }
}

/// The consuming end of a ring. Not `Clone`: one per ring.
#[repr(align(128))]
pub struct Consumer {
    /// Next position to consume.
    head: u64,
    mask: u64,
    shift: u32,
    slot_size: u32,
    poison: Option<RingError>,
    mem: Arc<RingMemory>,
}

impl fmt::Debug for Consumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("head", &self.head)
            .field("layout", &self.mem.layout)
            .field("poison", &self.poison)
            .finish()
    }
}

impl Consumer {
    /// The next published slot in order, or `None` (nothing new, or the ring is poisoned: use
    /// [`Consumer::try_poll`] where corruption must be seen, as a fabric's poller must).
    #[inline]
    pub fn poll(&mut self) -> Option<SlotReader<'_>> {
        self.try_poll().ok().flatten()
    }

    /// The next published slot in order, `Ok(None)` if there is none yet, or the corruption that
    /// poisoned this consumer (reported again on every later call).
    #[inline]
    pub fn try_poll(&mut self) -> Result<Option<SlotReader<'_>>, RingError> {
        if let Some(e) = &self.poison {
            return Err(e.clone());
        }
        let slot = (self.head & self.mask) as usize;
        let lap = (self.head >> self.shift) as u32;
        self.mem.region.prefetch_payload(slot);
        let header = self.mem.region.header(slot).load(Ordering::Acquire);
        let tag = (header >> 32) as u32;
        let len = header as u32;
        if tag == lap.wrapping_add(1) && len <= self.slot_size {
            // SAFETY: the Acquire load saw this lap's header, which the producer stored with
            // Release after its last payload write, and the producer will not touch the slot
            // again until we store a release counter past `head`. `len <= slot_size` was just
            // checked and `slot < slots` by the mask.
            let payload = unsafe { self.mem.region.payload(slot, len as usize) };
            return Ok(Some(SlotReader {
                consumer: self,
                payload: Some(payload),
            }));
        }
        if tag == lap {
            return Ok(None);
        }
        Err(self.corrupt(slot, header))
    }

    #[cold]
    fn corrupt(&mut self, slot: usize, header: u64) -> RingError {
        let lap = (self.head >> self.shift) as u32;
        let tag = (header >> 32) as u32;
        let what = if tag == lap.wrapping_add(1) {
            "a payload length larger than the slot size"
        } else {
            "a lap number that is neither the current nor the previous lap"
        };
        let e = RingError::Corrupt {
            position: self.head,
            slot: slot as u32,
            header,
            what,
        };
        self.poison = Some(e.clone());
        e
    }

    /// Whether the next slot's header has changed since the last consumed lap (a published slot
    /// or a corrupt header, which [`Consumer::try_poll`] then reports), without consuming.
    /// `false` once poisoned.
    #[inline]
    pub fn has_data(&self) -> bool {
        if self.poison.is_some() {
            return false;
        }
        let slot = (self.head & self.mask) as usize;
        let lap = (self.head >> self.shift) as u32;
        let header = self.mem.region.header(slot).load(Ordering::Acquire);
        (header >> 32) as u32 != lap
    }

    /// Why this consumer stopped, if a corrupt header was read.
    pub fn poisoned(&self) -> Option<&RingError> {
        self.poison.as_ref()
    }

    /// Number of slots consumed (and released) so far.
    pub fn consumed(&self) -> u64 {
        self.head
    }

    /// The ring's geometry.
    pub fn layout(&self) -> RingLayout {
        self.mem.layout
    }
}

/// A published slot being read. [`SlotReader::release`] or drop hands it back to the producer.
pub struct SlotReader<'a> {
    consumer: &'a mut Consumer,
    /// `Some` until the drop, which ends the read access before publishing the release.
    payload: Option<PayloadRef>,
}

impl fmt::Debug for SlotReader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotReader")
            .field("position", &self.consumer.head)
            .field("len", &self.bytes_uninit().len())
            .finish()
    }
}

impl SlotReader<'_> {
    /// Exactly the published bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match &self.payload {
            Some(p) => p.as_slice(),
            None => &[],
        }
    }

    /// Exactly the published bytes, as possibly uninitialised bytes (see
    /// [`SlotWriter::buf_uninit`]).
    #[inline]
    pub fn bytes_uninit(&self) -> &[std::mem::MaybeUninit<u8>] {
        match &self.payload {
            Some(p) => p.as_uninit(),
            None => &[],
        }
    }

    /// The position of this slot in the ring's sequence (0 for the first slot ever published).
    pub fn position(&self) -> u64 {
        self.consumer.head
    }

    /// Hands the slot back to the producer (a Release store of the consumer's counter).
    #[inline]
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for SlotReader<'_> {
    #[inline]
    fn drop(&mut self) {
        // End the read access before the counter hands the bytes back.
        #[allow(
            clippy::drop_non_drop,
            reason = "under loom the guard's drop ends the tracked access"
        )]
        drop(self.payload.take());
        let c = &mut *self.consumer;
        c.head += 1;
        c.mem.region.released().store(c.head, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_model;
