//! The rings between the workers of one rank, made on first use, and the summaries that say
//! which of them have work.
//!
//! A rank of `w` workers could talk over `w × (w − 1)` ordered pairs, each with a request and a
//! response ring, but a program uses few of them: the README's counter uses two. So no ring is
//! made at start. A worker that first publishes to another makes the pair's ring, keeps the
//! producing end and leaves the consuming end with the consumer ([`Lanes::make`]); after every
//! publish it sets its bit in the consumer's summary of that lane ([`Lanes::mark`]). The consumer
//! takes its summaries in a poll and visits only the rings whose bits were set, picking up the
//! ends left for it on the way ([`Lanes::arrivals`]). Memory and poll work then follow the pairs
//! that talk, not the size of the rank.
//!
//! Ordering: the producer leaves the end (a mutex) before it publishes and marks; the consumer
//! takes the bit (Acquire) before it looks for ends, so a bit always finds its ring (see
//! `wire/summary.rs` for why no bit's work is missed).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::wire::ring::{Consumer, Producer, RingLayout, RingMemory};
use crate::wire::summary::Summary;

/// A consuming end left for a worker: `(request lane, the producer's global id, the end)`.
pub(crate) type Arrival = (bool, usize, Consumer);

/// What one worker consumes from the other workers of its rank.
#[derive(Debug)]
struct Door {
    requests: Summary,
    responses: Summary,
    /// Consuming ends made by producers and not yet taken by this worker.
    arrived: Mutex<Vec<Arrival>>,
    /// Whether `arrived` may hold something (a cheap look before the lock).
    fresh: AtomicBool,
}

/// The rank's lazily made rings and its workers' summaries.
#[derive(Debug)]
pub(crate) struct Lanes {
    layout: RingLayout,
    /// Global id of the rank's first worker.
    base: usize,
    doors: Vec<Door>,
}

impl Lanes {
    /// Lanes for `local` workers whose first global id is `base`, with rings of `layout`.
    pub(crate) fn new(local: usize, base: usize, layout: RingLayout) -> Self {
        let bits = u32::try_from(local).expect("a rank's worker count fits 32 bits");
        Lanes {
            layout,
            base,
            doors: (0..local)
                .map(|_| Door {
                    requests: Summary::new_heap(bits),
                    responses: Summary::new_heap(bits),
                    arrived: Mutex::new(Vec::new()),
                    fresh: AtomicBool::new(false),
                })
                .collect(),
        }
    }

    /// Makes the ring from global worker `from` to global worker `to` (both of this rank) on the
    /// request lane (`request`) or the response lane, leaves its consuming end for `to`, and
    /// returns the producing end.
    pub(crate) fn make(&self, from: usize, to: usize, request: bool) -> Producer {
        let (p, c) = std::sync::Arc::new(RingMemory::new_heap(self.layout)).split();
        let door = &self.doors[to - self.base];
        door.arrived
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((request, from, c));
        door.fresh.store(true, Ordering::Release);
        p
    }

    /// Says that `from` published to `to` on a lane (after the publish).
    #[inline]
    pub(crate) fn mark(&self, from: usize, to: usize, request: bool) {
        let door = &self.doors[to - self.base];
        let bit = (from - self.base) as u32;
        if request {
            door.requests.mark(bit);
        } else {
            door.responses.mark(bit);
        }
    }

    /// Whether a producer marked a lane of local worker `me` since its last take (a cheap look).
    #[inline]
    pub(crate) fn any(&self, me: usize) -> bool {
        let door = &self.doors[me];
        door.requests.any() || door.responses.any()
    }

    /// Takes local worker `me`'s marks on a lane: calls `visit` with each producer's global id.
    #[inline]
    pub(crate) fn take(&self, me: usize, request: bool, mut visit: impl FnMut(usize)) {
        let door = &self.doors[me];
        let summary = if request {
            &door.requests
        } else {
            &door.responses
        };
        // Bits past the rank's workers are never set: the summary is on this process's heap.
        summary.take(|b| visit(self.base + b as usize));
    }

    /// The consuming ends left for local worker `me` since it last asked.
    pub(crate) fn arrivals(&self, me: usize) -> Vec<Arrival> {
        let door = &self.doors[me];
        if !door.fresh.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *door.arrived.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
