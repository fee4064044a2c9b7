//! One RMA ring protocol for every fabric with one-sided writes: the slot rings between ranks
//! carried by RMA writes with 32 bits of immediate data, written once over a small
//! [`Transport`] trait. The `ofi` fabric (libfabric) and the `verbs` fabric (rdma-core's RC
//! queue pairs) are adapters: each opens its endpoint, registers the region, reaches its peers
//! and exchanges [`card::Card`]s in its own way, then implements [`Transport`] (post a write,
//! read completions, sleep on them); everything below is theirs in common, so the logic verbs
//! runs on RDMA hardware is the one the ofi tests run here.
//!
//! # What lives where
//!
//! Each rank registers one region ([`plan`]) holding the rings its workers *consume* from every
//! peer worker (the trustee's request rings, the client's response rings), a shadow ring for
//! every ring its workers *produce* into, and one credit word per ring. The runtime gets
//! ordinary ring ends in that region (`rings.rs` makes them): it publishes into shadow rings and
//! polls incoming rings, exactly as on `shm`.
//!
//! # Publish, credit, wake (the ring protocol of `wire::ring`, over RMA)
//!
//! A *turn* (`rings.rs`) does what follows; who turns, and when, is `drive.rs`'s.
//!
//! 1. **Publish.** A turn sees a slot published in a shadow ring (its header, Acquire). It
//!    stores into that header word the *previous* lap's tag with the slot's length (the
//!    producer does not look at the word again before the slot is released, which waits for
//!    this write), and posts one write of the header word and the payload into the same slot
//!    of the peer's incoming ring, with the ring's number and the slot as immediate data. The
//!    header lands with the tag the peer's slot already holds, so however the write's bytes
//!    land, the consumer sees "the previous lap, nothing new" (`wire::ring`'s rule). When the
//!    peer's turn reads the write's completion, every byte is in place: it takes the length
//!    from the landed header, checks it ([`plan::Arrivals`]), and stores the real header
//!    (Release) in ring order (a completion that arrives early waits), then wakes the consumer
//!    through `Hooks::wake`.
//! 2. **Credit.** The peer's turn watches the `released` word of an incoming ring that has half
//!    a ring or more uncredited, and writes it into this rank's credit word for the shadow
//!    ring, with an immediate naming the ring. Coalesced: only when half a ring is free, never
//!    merely because the consumer caught up, so a round trip of one request at a time costs no
//!    credit write (one per half ring). The shadow ring's own `released` becomes the smaller of
//!    that credit and the slots whose writes completed here, so the producer reuses a slot only
//!    when the peer has consumed it and the transport is done reading it. A producer is thus
//!    never more than a ring ahead of the consumer, as on `shm`.
//!
//! # Failure
//!
//! A failed write is posted again up to [`Transport::RETRIES`] times (a provider may fail one
//! while it makes a connection), then the peer is reported lost through `Hooks::fail`; a
//! completion that breaks the protocol (a ring that does not exist, a write past the credit, a
//! landed header that lies) ends the job as a protocol error naming the peer. After the
//! fabric's `closing` failures are expected and not reported. Registered memory is process
//! memory: a crash leaves nothing behind.

pub(crate) mod card;
pub(crate) mod drive;
pub(crate) mod plan;
pub(crate) mod region;
pub(crate) mod rings;

#[cfg(test)]
mod tests;

use std::os::fd::BorrowedFd;

use crate::fabric::FabricKind;

/// What the ring protocol needs of one rank's RMA endpoint, once the adapter has registered the
/// region and reached every peer (peer `p` is the plan's `peers[p]`). Statically dispatched:
/// the turns are generic over it.
pub(crate) trait Transport: Send + 'static {
    /// The fabric it carries (for errors).
    const KIND: FabricKind;
    /// Failed operations towards one peer posted again before the peer is reported lost (a
    /// provider may fail a write while it makes a connection); 0 where a failure is final.
    const RETRIES: u32;

    /// Posts a write of `len` bytes at `src` to address `dst` of peer `peer`'s region, with
    /// immediate `imm`: the peer's [`Event::Arrived`] once every byte is placed there, and
    /// here [`Event::Done`] with `token` (`token < 2^32`). `Ok(false)` when the send queue is
    /// full: poll, then try again.
    ///
    /// # Safety
    /// `src..src + len` lies in the registered region and stays unchanged until the
    /// completion with `token`.
    unsafe fn write(
        &mut self,
        peer: usize,
        src: *const u8,
        len: usize,
        dst: u64,
        imm: u32,
        token: u64,
    ) -> Result<bool, String>;

    /// Reads completions, appending them to `out`; `true` when it read a full batch (the
    /// queue may hold more). Reading also drives a provider's progress.
    fn poll(&mut self, out: &mut Vec<Event>) -> bool;

    /// The adapter's own work at each turn (ofi posts its rendezvous reads); whether it did
    /// any, or the peer lost.
    fn turn(&mut self) -> Result<bool, (usize, String)> {
        Ok(false)
    }

    /// The descriptor a thread sleeps on to hear of a completion, if the transport has one.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Just before sleeping on [`wait_fd`](Transport::wait_fd): whether the thread may (ofi:
    /// `fi_trywait`; verbs arms the queue and says no when a completion came meanwhile).
    fn may_sleep(&mut self) -> bool {
        true
    }

    /// After a sleep on [`wait_fd`](Transport::wait_fd) (verbs takes the channel's events).
    fn woke(&mut self) {}

    /// Whether a sleeping thread must nap briefly even with a descriptor (ofi's `shm`
    /// provider's descriptor does not wake on a peer's write).
    fn naps_short(&self) -> bool {
        false
    }

    /// Whether the thread must keep turning rather than nap (ofi: a body parked for peers to
    /// read moves only in this rank's turns when it cannot sleep on completions).
    fn serving(&self) -> bool {
        false
    }

    /// Peer `peer` is lost: fail what the adapter holds for it (ofi: its reads).
    fn lost(&mut self, peer: usize, why: &str) {
        let _ = (peer, why);
    }

    /// What a lost peer's message names: the provider, or the device.
    fn describe(&self) -> String;
}

/// A completion, as the ring protocol sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// This side's write `token` completed.
    Done(u64),
    /// This side's write `token` failed, in the transport's words.
    Failed(u64, String),
    /// A peer's write with immediate `imm` landed (every byte placed); `peer` when the
    /// transport knows who wrote.
    Arrived { imm: u32, peer: Option<usize> },
    /// An operation of the adapter's own towards `peer` failed (counted as a write's).
    Trouble(usize, String),
    /// The adapter's own work, done (a repeated hello answered, a read's piece).
    #[cfg_attr(
        not(feature = "ofi"),
        allow(dead_code, reason = "ofi's own operations")
    )]
    Other,
    /// A completion nobody posted, in the transport's words.
    Unknown(String),
}
