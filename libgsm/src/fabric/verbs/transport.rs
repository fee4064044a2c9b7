//! The `verbs` fabric's [`Transport`]: the ring protocol's writes as RDMA WRITE WITH IMMEDIATE
//! on the peer's RC queue pair (an RC queue pair places every byte of a write before its
//! immediate completes at the peer), its completions read from the one completion queue, which
//! a sleeping thread waits on through the completion channel. Each arrived immediate consumed a
//! receive, posted again here; a send queue's depth is counted here, so that a full queue is
//! "try again", as on ofi.
//!
//! It does not know rings; `fabric/rdma` does.

use std::os::fd::BorrowedFd;

use crate::fabric::FabricKind;
use crate::fabric::rdma::{Event, Transport};
use crate::sys::verbs::{Completion, Stack, Write};

/// The bit of a work request id that marks a write (a receive's id is its peer).
const SEND_WR: u64 = 1 << 62;

/// One rank's device, queue pairs and peers.
pub(super) struct VerbsTransport {
    stack: Stack,
    /// Each peer's rkey (plan order; queue pair `p` is peer `p`'s).
    rkeys: Vec<u32>,
    /// (queue pair number, peer), sorted by number.
    qps: Vec<(u32, usize)>,
    /// Send-queue entries in use, and each send queue's depth, per peer.
    sq_used: Vec<u32>,
    sq_depth: Vec<u32>,
    /// Completions read while arming the queue, for the next poll.
    stash: Vec<Completion>,
    /// Scratch for completions.
    done: Vec<Completion>,
}

impl VerbsTransport {
    /// `qps`: each peer's queue pair number; `sq_depth`: its send queue's depth (plan order).
    pub(super) fn new(stack: Stack, rkeys: Vec<u32>, qps: &[u32], sq_depth: Vec<u32>) -> Self {
        let mut by_number: Vec<(u32, usize)> =
            qps.iter().enumerate().map(|(p, &n)| (n, p)).collect();
        by_number.sort_unstable();
        VerbsTransport {
            stack,
            rkeys,
            qps: by_number,
            sq_used: vec![0; sq_depth.len()],
            sq_depth,
            stash: Vec::new(),
            done: Vec::with_capacity(32),
        }
    }

    /// The device, for the log.
    pub(super) fn device(&self) -> &str {
        &self.stack.port.device
    }

    fn peer_of(&self, qp_num: u32) -> Option<usize> {
        let i = self.qps.binary_search_by_key(&qp_num, |&(n, _)| n).ok()?;
        Some(self.qps[i].1)
    }

    /// One completion, as the ring protocol sees it.
    fn event(&mut self, c: &Completion) -> Event {
        let Some(p) = self.peer_of(c.qp_num) else {
            return Event::Unknown(format!("a completion on unknown queue pair {}", c.qp_num));
        };
        // After the first error the queue pair flushes every outstanding request.
        let failure = c.failed.map(|s| {
            if c.flushed {
                "flushed".to_string()
            } else {
                format!("RDMA write failed: {s}")
            }
        });
        if c.wr_id & SEND_WR != 0 {
            self.sq_used[p] = self.sq_used[p].saturating_sub(1);
            let token = c.wr_id & !SEND_WR;
            return match failure {
                Some(why) => Event::Failed(token, why),
                None => Event::Done(token),
            };
        }
        if let Some(why) = failure {
            return Event::Trouble(p, why);
        }
        let Some(imm) = c.imm else {
            return Event::Unknown("a receive completed without an immediate".into());
        };
        match self.stack.post_recvs(p, 1, p as u64) {
            Ok(()) => Event::Arrived { imm, peer: Some(p) },
            Err(e) => Event::Trouble(p, e.to_string()),
        }
    }
}

impl Transport for VerbsTransport {
    const KIND: FabricKind = FabricKind::Verbs;
    const RETRIES: u32 = 0;

    unsafe fn write(
        &mut self,
        peer: usize,
        src: *const u8,
        len: usize,
        dst: u64,
        imm: u32,
        token: u64,
    ) -> Result<bool, String> {
        if self.sq_used[peer] >= self.sq_depth[peer] {
            return Ok(false);
        }
        let w = Write {
            local: src,
            len: len as u32,
            remote: dst,
            rkey: self.rkeys[peer],
            imm: Some(imm),
            signaled: true,
            wr_id: SEND_WR | token,
        };
        // SAFETY: the caller's (the source lies in the registered region, unchanged until this
        // request's completion).
        unsafe { self.stack.write(peer, &[w]) }.map_err(|e| e.to_string())?;
        self.sq_used[peer] += 1;
        Ok(true)
    }

    fn poll(&mut self, out: &mut Vec<Event>) -> bool {
        let mut done = std::mem::take(&mut self.done);
        let more = if self.stash.is_empty() {
            match self.stack.poll(&mut done) {
                Ok(n) => n >= 32,
                Err(e) => {
                    out.push(Event::Unknown(e.to_string()));
                    false
                }
            }
        } else {
            done.clear();
            done.append(&mut self.stash);
            true
        };
        for c in &done {
            let e = self.event(c);
            out.push(e);
        }
        self.done = done;
        more
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.stack.channel_fd())
    }

    fn may_sleep(&mut self) -> bool {
        // Arm, then look once more: a completion between the last poll and the arming would
        // otherwise not make the channel readable. What that look finds is the next poll's.
        if self.stack.arm().is_err() {
            return false;
        }
        let mut stash = std::mem::take(&mut self.stash);
        let _ = self.stack.poll(&mut stash);
        self.stash = stash;
        self.stash.is_empty()
    }

    fn woke(&mut self) {
        while self.stack.take_event() {}
    }

    fn describe(&self) -> String {
        format!("verbs queue pair on {}", self.stack.port.device)
    }
}
