//! The runtime's handle on the `ofi` fabric's rendezvous (`Links::rendezvous`): parks bodies
//! and reads peers' parked bodies through the rank's progress state, driving the rank's progress
//! itself while a read is in flight (as a polling worker does).
//!
//! The bookkeeping of reads and registrations is `rendezvous.rs`'s. See `README.md` beside this file (the
//! rendezvous for large records).

use std::mem::MaybeUninit;
use std::sync::Arc;

use super::rendezvous::Ended;
use super::transport::OfiTransport;
use crate::fabric::rdma::drive::Engine;
use crate::fabric::{Parked, Rendezvous};

/// The rendezvous the runtime holds (`Links::rendezvous`): parks and reads through the rank's
/// progress state.
pub(super) struct Handle {
    engine: Arc<Engine<OfiTransport>>,
    /// Rank of each peer (peer index order).
    ranks: Vec<u32>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ofi::Handle")
            .field("ranks", &self.ranks)
            .finish()
    }
}

impl Handle {
    pub(super) fn new(engine: Arc<Engine<OfiTransport>>, ranks: Vec<u32>) -> Handle {
        Handle { engine, ranks }
    }
}

impl Rendezvous for Handle {
    fn reaches(&self, rank: u32) -> bool {
        self.ranks.contains(&rank)
    }

    unsafe fn park(&self, ptr: *const u8, len: usize) -> Result<Parked, String> {
        // SAFETY: the caller's.
        unsafe { self.engine.lock().transport().park(ptr, len) }
    }

    fn unpark(&self, id: u64) {
        self.engine.lock().transport().unpark(id);
    }

    fn read(
        &self,
        rank: u32,
        addr: u64,
        key: u64,
        len: u64,
    ) -> Result<Box<[MaybeUninit<u8>]>, String> {
        let Some(peer) = self.ranks.iter().position(|&r| r == rank) else {
            return Err(format!("rank {rank} is not reached over ofi"));
        };
        let mut buf = crate::wire::far::alloc(len)?;
        let (dst, n) = (buf.as_mut_ptr().cast::<u8>(), buf.len());
        // SAFETY: `buf` is left alone until the read ends, and leaked if it ends with pieces
        // in flight.
        let read = unsafe {
            self.engine
                .lock()
                .transport()
                .start_read(peer, addr, key, dst, n)
        }?;
        let (mut idle, start) = (0u32, std::time::Instant::now());
        loop {
            let turned = self.engine.drive().is_some_and(|t| t.work);
            let ended = {
                let mut st = self.engine.lock();
                let ending = st.ending();
                st.transport().read_ended(read, ending)
            };
            match ended {
                None => {}
                Some(Ended::Done) => {
                    tracing::debug!(
                        target: "gossamer::fabric",
                        rank,
                        len,
                        micros = start.elapsed().as_micros() as u64,
                        "ofi rendezvous read"
                    );
                    return Ok(buf);
                }
                Some(Ended::Failed { why, in_flight }) => {
                    if in_flight {
                        Box::leak(buf);
                    }
                    return Err(why);
                }
            }
            // Give the CPU away now and then: on a busy host the peer that serves the read
            // may need it.
            idle = if turned { 0 } else { idle + 1 };
            if idle % 4 == 3 {
                std::thread::yield_now();
            }
        }
    }
}
