//! A socket to incoming rings: the receiving side, run by whichever thread holds the link (a
//! polling worker, or the I/O thread while every worker sleeps). For each authenticated
//! connection it reads frames into a buffer and applies each to the ring it names as a
//! producer would (payload, then the header with Release), then wakes the consuming worker.
//! When that ring is full the frame waits and reading stops: TCP's window closes and the
//! sender's shadow ring fills, so back-pressure reaches the remote producer and nothing is
//! dropped. A frame no correct peer sends (a worker not on this rank, longer than a slot) is a
//! protocol error. It does not read hellos (`io::accept`). See ARCHITECTURE.md.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::{Fate, LinkState, Rx, Side};
use crate::fabric::tcp::connect::delay_acks;
use crate::fabric::tcp::handshake::word;
use crate::fabric::tcp::{FRAME_HEADER, LANE_BIT};
use crate::wire::ring::Producer;

/// The receiving side of one authenticated connection: from worker `local` of rank `rank`.
pub(in crate::fabric::tcp) struct Incoming {
    pub(in crate::fabric::tcp) rank: u32,
    pub(super) local: u32,
    /// Index `local worker * 2 + lane`.
    pub(super) producers: Vec<Producer>,
    pub(super) rbuf: Vec<u8>,
    pub(super) rstart: usize,
    pub(super) rend: usize,
    /// A frame waits for room in a full ring; reading stops until it is delivered.
    pub(super) stalled: bool,
    /// When `TCP_QUICKACK` was last turned off on the socket (see [`ACKS_AGAIN`]).
    pub(super) acks_delayed: Instant,
}

impl Incoming {
    /// The connection from rank `rank`'s worker `local`, whose frames go to `producers` (index
    /// `local worker * 2 + lane`), for slots of `slot_size` bytes.
    pub(in crate::fabric::tcp) fn new(
        rank: u32,
        local: u32,
        producers: Vec<Producer>,
        slot_size: u32,
    ) -> Incoming {
        let cap = (256 * 1024).max(2 * (FRAME_HEADER + slot_size as usize));
        Incoming {
            rank,
            local,
            producers,
            rbuf: vec![0; cap],
            rstart: 0,
            rend: 0,
            stalled: false,
            acks_delayed: Instant::now(),
        }
    }

    /// Keeps the socket's ACKs delayed (see [`delay_acks`]) after a read that came at
    /// least [`ACKS_AGAIN`] after the last time it said so: the kernel turns delayed ACKs off
    /// whenever its delayed-ACK timer fires (an idle moment with data unacknowledged), and
    /// saying it on every read would cost a system call per delivery.
    fn keep_acks_delayed(&mut self, sock: &TcpStream) {
        let now = Instant::now();
        if now.duration_since(self.acks_delayed) >= ACKS_AGAIN {
            self.acks_delayed = now;
            delay_acks(sock);
        }
    }
}

/// How often, at most, a reader turns its socket's delayed ACKs on again: well under the
/// kernel's shortest delayed-ACK timeout (40 ms), so that after an idle spell only the first
/// frame read is answered by its own ACK.
const ACKS_AGAIN: Duration = Duration::from_millis(10);

/// One pass over an incoming link: delivers what is buffered, then reads, until the socket is
/// drained, a ring is full or the pass's budget is spent. `woke(l)` is called for each local
/// worker a frame was delivered to; `progress` is set when anything was read or delivered.
pub(super) fn pump_in(
    sock: &TcpStream,
    st: &mut LinkState,
    rx: &Rx,
    progress: &mut bool,
    woke: &mut dyn FnMut(u32),
) -> Fate {
    let Side::In(inc) = &mut st.side else {
        unreachable!("pump_in on a link that is not incoming")
    };
    let max_frame = FRAME_HEADER + rx.slot_size as usize;
    let mut budget = 4 * inc.rbuf.len();
    loop {
        match deliver(inc, rx, progress, woke) {
            Ok(true) => {}
            Ok(false) => {
                inc.stalled = true;
                return Fate::Keep;
            }
            Err(detail) => return Fate::Broke(inc.rank, detail),
        }
        inc.stalled = false;
        if !st.readable || budget == 0 {
            return Fate::Keep;
        }
        if inc.rstart == inc.rend {
            inc.rstart = 0;
            inc.rend = 0;
        } else if inc.rbuf.len() - inc.rend < max_frame {
            inc.rbuf.copy_within(inc.rstart..inc.rend, 0);
            inc.rend -= inc.rstart;
            inc.rstart = 0;
        }
        match (&*sock).read(&mut inc.rbuf[inc.rend..]) {
            Ok(0) => {
                return Fate::Lost(
                    inc.rank,
                    format!("it closed the connection from its worker {}", inc.local),
                );
            }
            Ok(n) => {
                // A read that did not fill the buffer found the socket empty: another `recv`
                // would only say so (a syscall on every delivery's path, so on every round
                // trip). The next poll, or the I/O thread's level-triggered arming, reads on.
                if inc.rend + n < inc.rbuf.len() {
                    st.readable = false;
                }
                inc.keep_acks_delayed(sock);
                inc.rend += n;
                budget = budget.saturating_sub(n);
                *progress = true;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => st.readable = false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Fate::Lost(
                    inc.rank,
                    format!("the connection from its worker {} failed: {e}", inc.local),
                );
            }
        }
    }
}

/// Delivers the complete frames in `inc`'s buffer: `Ok(true)` when none is left whole,
/// `Ok(false)` when one waits for a full ring, `Err` for a frame no correct peer sends.
fn deliver(
    inc: &mut Incoming,
    rx: &Rx,
    progress: &mut bool,
    woke: &mut dyn FnMut(u32),
) -> Result<bool, String> {
    let slot_size = rx.slot_size;
    let mut last = u32::MAX;
    while inc.rend - inc.rstart >= FRAME_HEADER {
        let h = &inc.rbuf[inc.rstart..inc.rstart + FRAME_HEADER];
        let (dst, w) = (word(h, 0), word(h, 4));
        let (lane, len) = ((w >> 31) as usize, w & !LANE_BIT);
        let local = dst.wrapping_sub(rx.first_local);
        if local >= rx.nlocal {
            return Err(format!(
                "its worker {} sent a frame for worker {dst}, which is not on rank {}",
                inc.local, rx.rank
            ));
        }
        if len > slot_size {
            return Err(format!(
                "its worker {} sent a frame of {len} bytes for slots of {slot_size}",
                inc.local
            ));
        }
        let end = inc.rstart + FRAME_HEADER + len as usize;
        if end > inc.rend {
            return Ok(true);
        }
        let p = &mut inc.producers[local as usize * 2 + lane];
        let Some(mut slot) = p.try_reserve() else {
            return Ok(false);
        };
        slot.buf()[..len as usize].copy_from_slice(&inc.rbuf[inc.rstart + FRAME_HEADER..end]);
        slot.publish(len);
        inc.rstart = end;
        *progress = true;
        if local != last {
            last = local;
            woke(local);
        }
    }
    Ok(true)
}
