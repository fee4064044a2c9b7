//! The inbox: a multi-producer single-consumer ring of fixed-size slots, one per consuming
//! worker, that every producer of its host may publish into.
//!
//! Where the slot ring (`ring.rs`) needs one ring per ordered pair of workers, an inbox is one
//! ring per consumer: a producer reserves a run of consecutive slots with one atomic
//! compare-and-swap per batch (not per record), fills and publishes them, and the consumer reads
//! every slot in position order, each carrying the producer's source number. Like the slot ring
//! it is position-independent (offsets and atomics at fixed places, no pointer), so it works on
//! the heap and in a shared-memory segment mapped by several processes; and it treats every word
//! another process may write as untrusted: a header, source or counter no correct peer writes is
//! an [`InboxError`], never an index into memory. It moves opaque bytes: it does not encode
//! records, wake sleeping consumers (a doorbell does), or say who has work (see `summary.rs`).
//!
//! # Layout
//!
//! ```text
//! offset 0            reservation block, 128 bytes: `tail: u64` at 0 (every producer's CAS)
//! offset 128          release block, 128 bytes: `released: u64` at 128 (the consumer's store)
//! 256 + i*(S+64)      slot i: `header: u64`, `source: u64`, then S payload bytes (S = slot
//!                     size, a multiple of 64), then 48 bytes of padding
//! ```
//!
//! Total: [`InboxLayout::bytes`] = `256 + slots × (slot_size + 64)`.
//!
//! # Protocol
//!
//! Positions `p = 0, 1, 2, …` map to slot `p mod slots` in lap `p / slots`. The shared words are
//! `tail` (the next position to reserve; producers only, by compare-and-swap), `released` (the
//! consumer's count of positions given back; one writer, plain Release stores), and each slot's
//! `header` and `source` (written by the producer that reserved the slot's current position).
//!
//! 1. **Reserve.** A producer wanting `n` slots reads `tail = t` and checks `t + n <= released +
//!    slots` against its cached copy of `released`; when that fails it loads `released` with
//!    **Acquire** (pairing with the consumer's Release in step 4, so the consumer's reads of the
//!    old payloads happen before our writes) and checks again. It then moves `tail` from `t` to
//!    `t + n` with one compare-and-swap; if another producer moved it first, it retries with the
//!    new value. Positions `t .. t + n` are now this producer's alone.
//! 2. **Publish.** For each reserved position, in order, the producer writes the payload (plain
//!    stores) and the source word, then stores the header `(lap + 1) << 32 | len` with
//!    **Release**. A run dropped before all its slots were filled publishes the rest as skips
//!    (`len` = [`SKIP`]), so the consumer never waits for a position nobody will fill.
//! 3. **Consume.** The consumer loads the header of slot `head mod slots` with **Acquire**. A tag
//!    of `lap + 1` means published: the Acquire makes the payload and source visible. A tag of
//!    `lap` means not yet (the previous lap's header, or a reserved slot still being written: runs
//!    of different producers may be published out of order, the consumer still reads in order).
//!    Any other tag, a length above the slot size, or a source at or above the layout's
//!    `sources` is [`InboxError::Corrupt`]: the consumer poisons itself and never uses the value.
//! 4. **Release.** When done with a slot (drop of [`InboxRecord`]), and at once for a skip, the
//!    consumer stores `released = head + 1` with **Release**. Slots are consumed in order, so one
//!    monotonic counter describes every free slot, as in the slot ring.
//!
//! A producer also checks what it reads: `released` must never go backwards nor pass `tail`, and
//! `tail` never backwards; either is [`InboxError::CorruptCounter`] and poisons the producer. A
//! peer that rewinds `tail` past what this producer saw cannot be caught in every case: two
//! producers may then fill one slot, and the consumer still refuses any header, length or source
//! that does not hold; it never reads out of bounds. A producer that reserves and never publishes
//! (a process that died) stops the inbox at that position: its owner must drop the inbox, as it
//! drops a ring whose peer died.
//!
//! # Cost
//!
//! One reservation CAS per run of slots, uncontended in the common case; a Release store per
//! published slot and per released slot, as in the slot ring. A consumer polls one header per
//! inbox instead of one per producer.
//!
//! # Model test
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p gossamer --release --lib wire::inbox::loom_model
//! ```
//!
//! `wire/README.md` puts this protocol beside the slot ring's.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::region::{Ordering, PayloadMut, PayloadRef, Shape};

/// The inbox's memory.
type Region = super::region::Region<InboxLayout>;

/// Offset of the reservation counter, alone in the first 128-byte block.
const TAIL_OFFSET: usize = 0;
/// Offset of the consumer's release counter, alone in the second 128-byte block.
const RELEASED_OFFSET: usize = 128;
// The producers' word and the consumer's never share a cache-line pair.
const _: () = assert!(TAIL_OFFSET / 128 != RELEASED_OFFSET / 128);
/// Bytes before the first slot.
const CONTROL_BYTES: usize = 256;
/// Bytes a slot adds to its payload: the header and source words before it, padding after it,
/// so that every slot starts on a cache line.
const SLOT_EXTRA: usize = 64;
/// The header length of a skipped slot (a run dropped before it was filled). No payload length
/// can take this value: slots are smaller than 2 GiB.
pub const SKIP: u32 = 1 << 31;
/// Most consumed skips one [`InboxConsumer::try_poll`] goes past before it returns.
const SKIPS_PER_POLL: u32 = 64;

/// Errors of inbox construction and of a peer that broke the inbox protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The geometry cannot form an inbox.
    #[error(
        "invalid inbox layout ({slots} slots of {slot_size} bytes, {sources} sources): {reason}; \
         use a power-of-two slot count of at least 2, a slot size that is a non-zero multiple of \
         64 below 2 GiB, and at least one source"
    )]
    Layout {
        slots: u32,
        slot_size: u32,
        sources: u32,
        reason: &'static str,
    },
    /// A second consumer was asked of one inbox.
    #[error("the inbox's consumer was already taken: an inbox has exactly one consumer")]
    ConsumerTaken,
    /// A producer was asked for a source number the layout does not have.
    #[error("inbox source {asked} does not exist: this inbox has sources 0..{sources}")]
    Source { asked: u32, sources: u32 },
    /// A run longer than the inbox.
    #[error("a run of {n} slots cannot be reserved in an inbox of {slots} slots; use 1..={slots}")]
    RunLength { n: u32, slots: u32 },
    /// A slot header or source word that no correct producer writes.
    #[error(
        "corrupt inbox: {what} at position {position} (slot {slot}, header {header:#018x}, source \
         word {source_word:#018x}); a producer broke the inbox protocol, so drop this inbox"
    )]
    Corrupt {
        position: u64,
        slot: u32,
        header: u64,
        source_word: u64,
        what: &'static str,
    },
    /// A reservation or release counter that no correct peer writes.
    #[error(
        "corrupt inbox: {what} (read {value}, expected {expected}); a peer broke the inbox \
         protocol, so drop this inbox"
    )]
    CorruptCounter {
        what: &'static str,
        value: u64,
        expected: String,
    },
}

/// Geometry of one inbox: `slots` slots of `slot_size` payload bytes, written by producers
/// numbered `0..sources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InboxLayout {
    /// Number of slots, a power of two ≥ 2.
    pub slots: u32,
    /// Payload bytes per slot, a non-zero multiple of 64, below [`SKIP`].
    pub slot_size: u32,
    /// How many producers may publish (their source numbers are `0..sources`), at least 1.
    pub sources: u32,
}

impl InboxLayout {
    /// A checked layout.
    pub fn new(slots: u32, slot_size: u32, sources: u32) -> Result<Self, InboxError> {
        let layout = InboxLayout {
            slots,
            slot_size,
            sources,
        };
        layout.validate()?;
        Ok(layout)
    }

    /// Checks the geometry (see [`InboxLayout::new`]) and that the inbox fits the address space.
    pub fn validate(&self) -> Result<(), InboxError> {
        let fail = |reason| {
            Err(InboxError::Layout {
                slots: self.slots,
                slot_size: self.slot_size,
                sources: self.sources,
                reason,
            })
        };
        if self.slots < 2 || !self.slots.is_power_of_two() {
            return fail("the slot count is not a power of two of at least 2");
        }
        if self.slot_size == 0 || self.slot_size % 64 != 0 || self.slot_size >= SKIP {
            return fail("the slot size is not a non-zero multiple of 64 below 2 GiB");
        }
        if self.sources == 0 {
            return fail("there is no source");
        }
        let total = (self.slots as u128) * (self.slot_size as u128 + SLOT_EXTRA as u128)
            + CONTROL_BYTES as u128;
        if total > isize::MAX as u128 {
            return fail("the inbox does not fit in this address space");
        }
        Ok(())
    }

    /// Total bytes of the inbox region.
    pub const fn bytes(&self) -> usize {
        (self.slots as usize)
            .saturating_mul((self.slot_size as usize).saturating_add(SLOT_EXTRA))
            .saturating_add(CONTROL_BYTES)
    }

    /// Alignment the region needs.
    pub const fn align() -> usize {
        128
    }

    /// Offset of `slot`'s header word (the start of its cache line).
    #[cfg(not(loom))]
    const fn header_offset(&self, slot: usize) -> usize {
        CONTROL_BYTES + slot * (self.slot_size as usize + SLOT_EXTRA)
    }

    /// Offset of `slot`'s payload, after its header and source words.
    #[cfg(not(loom))]
    const fn payload_offset(&self, slot: usize) -> usize {
        self.header_offset(slot) + 16
    }
}

impl Shape for InboxLayout {
    #[cfg(not(loom))]
    const OWNER: &'static str = "InboxMemory";
    #[cfg(not(loom))]
    const RELEASED: usize = RELEASED_OFFSET;
    const TAIL: Option<usize> = Some(TAIL_OFFSET);
    const SLOT_WORDS: usize = 2;
    #[cfg(not(loom))]
    fn bytes(&self) -> usize {
        InboxLayout::bytes(self)
    }
    #[cfg(not(loom))]
    fn align() -> usize {
        InboxLayout::align()
    }
    fn slots(&self) -> usize {
        self.slots as usize
    }
    fn slot_size(&self) -> usize {
        self.slot_size as usize
    }
    #[cfg(not(loom))]
    fn header_offset(&self, slot: usize) -> usize {
        InboxLayout::header_offset(self, slot)
    }
    #[cfg(not(loom))]
    fn payload_offset(&self, slot: usize) -> usize {
        InboxLayout::payload_offset(self, slot)
    }
}

/// The memory of one inbox, owned (heap) or borrowed (a mapping), from which any number of
/// [`InboxProducer`]s and exactly one [`InboxConsumer`] are made.
pub struct InboxMemory {
    region: Region,
    layout: InboxLayout,
    /// Whether this handle handed out its consumer (local bookkeeping, not in the region).
    consumer_taken: AtomicBool,
    /// What keeps a borrowed region mapped, if anything.
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl fmt::Debug for InboxMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxMemory")
            .field("region", &self.region)
            .field("consumer_taken", &self.consumer_taken)
            .finish()
    }
}

impl InboxMemory {
    /// An inbox in a fresh zeroed heap allocation.
    ///
    /// # Panics
    /// If `layout` fails [`InboxLayout::validate`] (only for a layout built from its fields).
    pub fn new_heap(layout: InboxLayout) -> Self {
        if let Err(e) = layout.validate() {
            panic!("InboxMemory::new_heap: {e}");
        }
        InboxMemory {
            region: Region::heap(layout),
            layout,
            consumer_taken: AtomicBool::new(false),
            _keep: None,
        }
    }

    /// An inbox in caller-provided memory (a shared-memory segment), kept mapped by `keep`.
    ///
    /// # Safety
    /// - `ptr` is valid for reads and writes of `layout.bytes()` bytes, aligned to
    ///   [`InboxLayout::align`], and stays so while `keep` (or, without it, the returned value
    ///   and every end made from it) lives.
    /// - Before the first end of the inbox is used, `tail`, `released` and every slot header are
    ///   zero (zeroing the whole region is the simple way).
    /// - Across every process that maps it, at most one [`InboxConsumer`] exists, and nothing
    ///   but producers and that consumer write the region. What a misbehaving peer writes is
    ///   detected where it is read, and never makes this process read out of bounds.
    ///
    /// # Panics
    /// If `ptr` is null or misaligned, or `layout` fails [`InboxLayout::validate`].
    #[cfg(not(loom))]
    pub unsafe fn from_raw(
        ptr: *mut u8,
        layout: InboxLayout,
        keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
    ) -> Self {
        if let Err(e) = layout.validate() {
            panic!("InboxMemory::from_raw: {e}");
        }
        InboxMemory {
            // SAFETY: forwarded from this function's contract.
            region: unsafe { Region::from_raw(ptr, layout) },
            layout,
            consumer_taken: AtomicBool::new(false),
            _keep: keep,
        }
    }

    /// The inbox's geometry.
    pub fn layout(&self) -> InboxLayout {
        self.layout
    }

    /// A producer publishing as `source`.
    pub fn producer(self: &Arc<Self>, source: u32) -> Result<InboxProducer, InboxError> {
        if source >= self.layout.sources {
            return Err(InboxError::Source {
                asked: source,
                sources: self.layout.sources,
            });
        }
        Ok(InboxProducer {
            source,
            released: 0,
            tail_seen: 0,
            poison: None,
            mem: Arc::clone(self),
        })
    }

    /// The consuming end.
    pub fn consumer(self: &Arc<Self>) -> Result<InboxConsumer, InboxError> {
        if self
            .consumer_taken
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return Err(InboxError::ConsumerTaken);
        }
        Ok(InboxConsumer {
            head: 0,
            mask: self.layout.slots as u64 - 1,
            shift: self.layout.slots.trailing_zeros(),
            poison: None,
            mem: Arc::clone(self),
        })
    }
}

/// Encodes a header word.
#[inline]
const fn header_word(tag: u32, len: u32) -> u64 {
    ((tag as u64) << 32) | len as u64
}

/// One producer of an inbox. Not `Clone`: make one per producing thread with
/// [`InboxMemory::producer`].
pub struct InboxProducer {
    source: u32,
    /// Last value of the consumer's release counter seen.
    released: u64,
    /// Largest value of `tail` seen (it never goes backwards).
    tail_seen: u64,
    poison: Option<InboxError>,
    mem: Arc<InboxMemory>,
}

impl fmt::Debug for InboxProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxProducer")
            .field("source", &self.source)
            .field("released", &self.released)
            .field("poison", &self.poison)
            .finish()
    }
}

impl InboxProducer {
    /// A run of `n` consecutive slots, reserved with one compare-and-swap; `Ok(None)` when the
    /// inbox has fewer than `n` free slots (back-pressure: try again later).
    ///
    /// Errors: `n` outside `1..=slots`, or a counter found corrupt now or earlier (the producer
    /// is then poisoned and reports it again on every call).
    pub fn try_reserve(&mut self, n: u32) -> Result<Option<Run<'_>>, InboxError> {
        if let Some(e) = &self.poison {
            return Err(e.clone());
        }
        let slots = self.mem.layout.slots;
        if n == 0 || n > slots {
            return Err(InboxError::RunLength { n, slots });
        }
        let mut t = self.mem.region.tail().load(Ordering::Relaxed);
        loop {
            self.check_tail(t)?;
            if t + n as u64 > self.released + slots as u64 {
                let r = self.refresh()?;
                if t + n as u64 > r + slots as u64 {
                    return Ok(None);
                }
            }
            let reserved = self.mem.region.tail().compare_exchange_weak(
                t,
                t + n as u64,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            match reserved {
                Ok(_) => break,
                Err(now) => t = now,
            }
        }
        self.tail_seen = t + n as u64;
        Ok(Some(Run {
            producer: self,
            start: t,
            n,
            done: 0,
        }))
    }

    /// Refuses a `tail` below one seen before.
    fn check_tail(&mut self, t: u64) -> Result<(), InboxError> {
        if t < self.tail_seen {
            return Err(self.poisoned_by(InboxError::CorruptCounter {
                what: "the reservation counter went backwards",
                value: t,
                expected: format!("at least {}", self.tail_seen),
            }));
        }
        Ok(())
    }

    /// Loads the consumer's release counter (Acquire) and checks it against what was seen.
    #[cold]
    fn refresh(&mut self) -> Result<u64, InboxError> {
        let r = self.mem.region.released().load(Ordering::Acquire);
        // Loaded after `r`: a correct consumer released only published positions, each reserved
        // (tail moved past it) before it was published, so this load sees `tail >= r`.
        let t = self.mem.region.tail().load(Ordering::Relaxed);
        if r < self.released || r > t {
            return Err(self.poisoned_by(InboxError::CorruptCounter {
                what: "the consumer's release counter went backwards or past the reservations",
                value: r,
                expected: format!("{} ..= {t}", self.released),
            }));
        }
        self.released = r;
        Ok(r)
    }

    fn poisoned_by(&mut self, e: InboxError) -> InboxError {
        self.poison = Some(e.clone());
        e
    }

    /// Why this producer stopped, if a counter was found corrupt.
    pub fn poisoned(&self) -> Option<&InboxError> {
        self.poison.as_ref()
    }

    /// The source number this producer publishes as.
    pub fn source(&self) -> u32 {
        self.source
    }

    /// The inbox's geometry.
    pub fn layout(&self) -> InboxLayout {
        self.mem.layout
    }

    /// Publishes position `p` as `len` bytes (already written) or, with `len` = [`SKIP`], as a
    /// skip: the source word, then the header with Release.
    fn publish_at(&self, p: u64, len: u32) {
        let layout = self.mem.layout;
        let slot = (p & (layout.slots as u64 - 1)) as usize;
        let tag = ((p >> layout.slots.trailing_zeros()) as u32).wrapping_add(1);
        let region = &self.mem.region;
        region
            .source(slot)
            .store(self.source as u64, Ordering::Relaxed);
        region
            .header(slot)
            .store(header_word(tag, len), Ordering::Release);
    }
}

/// A reserved run of consecutive slots, filled in order with [`Run::next_slot`]. Dropping it
/// publishes every slot not yet published as a skip.
pub struct Run<'a> {
    producer: &'a mut InboxProducer,
    /// The run's first position.
    start: u64,
    n: u32,
    /// Slots of the run published so far.
    done: u32,
}

impl fmt::Debug for Run<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("start", &self.start)
            .field("n", &self.n)
            .field("done", &self.done)
            .finish()
    }
}

impl<'a> Run<'a> {
    /// Slots of the run not yet published.
    pub fn remaining(&self) -> u32 {
        self.n - self.done
    }

    /// The run's first position in the inbox's sequence.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The next slot of the run to fill, `None` once every slot was published.
    pub fn next_slot(&mut self) -> Option<InboxSlot<'_, 'a>> {
        if self.done == self.n {
            return None;
        }
        let p = self.start + self.done as u64;
        let slot = (p & (self.producer.mem.layout.slots as u64 - 1)) as usize;
        // SAFETY: `p` lies in this run, reserved by our compare-and-swap after an Acquire load
        // of `released` showed `p - slots` released, so the consumer is done with the slot and no
        // other producer holds position `p`; `slot < slots` by the mask.
        let payload = unsafe { self.producer.mem.region.payload_mut(slot) };
        Some(InboxSlot { run: self, payload })
    }

    /// Copies `bytes` into the next slot and publishes it; `false` if the run is used up.
    ///
    /// # Panics
    /// If `bytes` is longer than a slot.
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        match self.next_slot() {
            Some(mut s) => {
                s.buf()[..bytes.len()].copy_from_slice(bytes);
                s.publish(bytes.len() as u32);
                true
            }
            None => false,
        }
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        while self.done < self.n {
            self.producer
                .publish_at(self.start + self.done as u64, SKIP);
            self.done += 1;
        }
    }
}

/// One slot of a [`Run`] being filled. Dropping it without [`InboxSlot::publish`] publishes
/// nothing: the run's next call returns the same slot.
pub struct InboxSlot<'r, 'a> {
    run: &'r mut Run<'a>,
    payload: PayloadMut,
}

impl fmt::Debug for InboxSlot<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxSlot")
            .field("position", &(self.run.start + self.run.done as u64))
            .finish()
    }
}

impl InboxSlot<'_, '_> {
    /// The slot's payload area, `slot_size` bytes (contents left from earlier laps).
    pub fn buf(&mut self) -> &mut [u8] {
        self.payload.as_mut_slice()
    }

    /// Publishes the first `len` bytes of [`InboxSlot::buf`] with this producer's source.
    ///
    /// # Panics
    /// If `len` exceeds the slot size.
    pub fn publish(self, len: u32) {
        let InboxSlot { run, payload } = self;
        let slot_size = run.producer.mem.layout.slot_size;
        assert!(
            len <= slot_size,
            "InboxSlot::publish: length {len} exceeds the slot size {slot_size}"
        );
        // End the payload access before the header hands the bytes over.
        #[allow(
            clippy::drop_non_drop,
            reason = "under loom the guard's drop ends the tracked access"
        )]
        drop(payload);
        run.producer.publish_at(run.start + run.done as u64, len);
        run.done += 1;
    }
}

/// The consuming end of an inbox. Not `Clone`: one per inbox.
pub struct InboxConsumer {
    /// Next position to consume.
    head: u64,
    mask: u64,
    shift: u32,
    poison: Option<InboxError>,
    mem: Arc<InboxMemory>,
}

impl fmt::Debug for InboxConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxConsumer")
            .field("head", &self.head)
            .field("layout", &self.mem.layout)
            .field("poison", &self.poison)
            .finish()
    }
}

impl InboxConsumer {
    /// The next published record in position order, `Ok(None)` if there is none yet, or the
    /// corruption that poisoned this consumer (reported again on every later call). Skipped
    /// slots are consumed on the way.
    pub fn try_poll(&mut self) -> Result<Option<InboxRecord<'_>>, InboxError> {
        if let Some(e) = &self.poison {
            return Err(e.clone());
        }
        let layout = self.mem.layout;
        for _ in 0..SKIPS_PER_POLL {
            let slot = (self.head & self.mask) as usize;
            let lap = (self.head >> self.shift) as u32;
            let header = self.mem.region.header(slot).load(Ordering::Acquire);
            let (tag, len) = ((header >> 32) as u32, header as u32);
            if tag == lap {
                return Ok(None);
            }
            if tag != lap.wrapping_add(1) {
                return Err(self.corrupt(
                    slot,
                    header,
                    "a lap number that is neither this lap's nor the last's",
                ));
            }
            if len == SKIP {
                self.release_head();
                continue;
            }
            if len > layout.slot_size {
                return Err(self.corrupt(
                    slot,
                    header,
                    "a payload length larger than the slot size",
                ));
            }
            let source = self.mem.region.source(slot).load(Ordering::Relaxed);
            if source >= layout.sources as u64 {
                return Err(self.corrupt(slot, header, "a source number the inbox does not have"));
            }
            // SAFETY: the Acquire load saw this lap's header, stored with Release after the
            // producer's last payload write; no producer writes the slot again until we release
            // its position. `len <= slot_size` was checked and `slot < slots` by the mask.
            let payload = unsafe { self.mem.region.payload(slot, len as usize) };
            return Ok(Some(InboxRecord {
                consumer: self,
                source: source as u32,
                payload: Some(payload),
            }));
        }
        Ok(None)
    }

    /// [`InboxConsumer::try_poll`] with corruption read as "nothing" (see [`Self::poisoned`]).
    pub fn poll(&mut self) -> Option<InboxRecord<'_>> {
        self.try_poll().ok().flatten()
    }

    /// Whether the next slot's header changed since the last consumed lap (a record, a skip, or
    /// corruption that [`Self::try_poll`] then reports), without consuming. `false` once
    /// poisoned.
    pub fn has_data(&self) -> bool {
        if self.poison.is_some() {
            return false;
        }
        let slot = (self.head & self.mask) as usize;
        let lap = (self.head >> self.shift) as u32;
        let header = self.mem.region.header(slot).load(Ordering::Acquire);
        (header >> 32) as u32 != lap
    }

    #[cold]
    fn corrupt(&mut self, slot: usize, header: u64, what: &'static str) -> InboxError {
        let e = InboxError::Corrupt {
            position: self.head,
            slot: slot as u32,
            header,
            source_word: self.mem.region.source(slot).load(Ordering::Relaxed),
            what,
        };
        self.poison = Some(e.clone());
        e
    }

    /// Gives the slot at `head` back to the producers.
    fn release_head(&mut self) {
        self.head += 1;
        self.mem
            .region
            .released()
            .store(self.head, Ordering::Release);
    }

    /// Why this consumer stopped, if a corrupt slot was read.
    pub fn poisoned(&self) -> Option<&InboxError> {
        self.poison.as_ref()
    }

    /// Positions consumed (records and skips) so far.
    pub fn consumed(&self) -> u64 {
        self.head
    }

    /// The inbox's geometry.
    pub fn layout(&self) -> InboxLayout {
        self.mem.layout
    }
}

/// A published record being read; drop gives its slot back.
pub struct InboxRecord<'a> {
    consumer: &'a mut InboxConsumer,
    source: u32,
    /// `Some` until the drop, which ends the read access before the release.
    payload: Option<PayloadRef>,
}

impl fmt::Debug for InboxRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxRecord")
            .field("position", &self.consumer.head)
            .field("source", &self.source)
            .field("len", &self.bytes().len())
            .finish()
    }
}

impl InboxRecord<'_> {
    /// Exactly the published bytes.
    pub fn bytes(&self) -> &[u8] {
        self.payload.as_ref().map_or(&[], |p| p.as_slice())
    }

    /// The source number of the producer that published it (checked below the layout's
    /// `sources`).
    pub fn source(&self) -> u32 {
        self.source
    }

    /// Its position in the inbox's sequence.
    pub fn position(&self) -> u64 {
        self.consumer.head
    }

    /// Gives the slot back (a Release store of the release counter).
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for InboxRecord<'_> {
    fn drop(&mut self) {
        #[allow(
            clippy::drop_non_drop,
            reason = "under loom the guard's drop ends the tracked access"
        )]
        drop(self.payload.take());
        self.consumer.release_head();
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_model;
