//! Shadow rings to a socket: the sending side, run by whichever thread holds the link (the
//! publishing worker from its bell, or the I/O thread when the socket becomes writable again).
//! For each outgoing connection it drains the shadow rings the runtime publishes into, round
//! robin, into a write buffer of frames (an 8-byte header, destination worker and
//! `lane << 31 | length`, then the payload) and writes it with as few `send`s as it can. It does
//! not decide when a connection is looked at (the bells and `Io::pump` do) and never blocks: a
//! full socket waits for the next writable event, and the shadow rings fill behind it, which is
//! the producer's back-pressure. See `fabric/tcp/README.md`.

use std::io::Read;
use std::mem::MaybeUninit;
use std::net::TcpStream;
use std::os::fd::AsFd;

use super::{Fate, LinkState, Side};
use crate::fabric::Lane;
use crate::fabric::tcp::{FRAME_HEADER, LANE_BIT, WRITE_LIMIT};
use crate::sys::net;
use crate::wire::ring::Consumer;

/// One shadow ring of a connection: the runtime publishes into its producer, the I/O thread
/// consumes it here.
pub(in crate::fabric::tcp) struct OutRing {
    /// The frame header's second half without the length, and the destination: `g | lane bit`.
    pub(super) head: u32,
    pub(super) consumer: Consumer,
}

impl OutRing {
    /// The shadow ring whose slots go to global worker `g` on `lane`.
    pub(in crate::fabric::tcp) fn new(g: u32, lane: Lane, consumer: Consumer) -> OutRing {
        OutRing {
            head: g | if lane == Lane::Response { LANE_BIT } else { 0 },
            consumer,
        }
    }
}

/// The sending side of one connection: local worker `local`'s shadow rings to every worker of
/// rank `rank`, and the bytes on their way to the socket.
pub(in crate::fabric::tcp) struct Outgoing {
    pub(in crate::fabric::tcp) rank: u32,
    pub(in crate::fabric::tcp) local: u32,
    pub(in crate::fabric::tcp) rings: Vec<OutRing>,
    /// Round-robin position in `rings`.
    pub(in crate::fabric::tcp) next: usize,
    /// Frames waiting to be written, from `wstart`. Possibly uninitialised bytes: a producer may
    /// have written padding into a slot (`SlotWriter::buf_uninit`); they only go to `send`.
    pub(in crate::fabric::tcp) wbuf: Vec<MaybeUninit<u8>>,
    pub(in crate::fabric::tcp) wstart: usize,
    /// Some ring may hold a published slot.
    pub(in crate::fabric::tcp) pending: bool,
    /// The connection also carries the peer's frames the other way, which its incoming half
    /// (another link, on a `dup` of the socket) reads: this half never reads it.
    pub(in crate::fabric::tcp) two_way: bool,
}

impl Outgoing {
    /// Local worker `local`'s connection to rank `rank`, over `rings`.
    pub(in crate::fabric::tcp) fn new(
        rank: u32,
        local: u32,
        rings: Vec<OutRing>,
        two_way: bool,
    ) -> Outgoing {
        Outgoing {
            rank,
            local,
            rings,
            next: 0,
            wbuf: Vec::with_capacity(WRITE_LIMIT + 64 * 1024),
            wstart: 0,
            // A bell rung before the I/O thread took the connection found no connection to mark.
            pending: true,
            two_way,
        }
    }
}

/// One pass over an outgoing link: notices EOF or an error, fills the write buffer from the
/// shadow rings and writes it.
pub(super) fn pump_out(sock: &TcpStream, st: &mut LinkState, progress: &mut bool) -> Fate {
    let Side::Out(o) = &mut st.side else {
        unreachable!("pump_out on a link that is not outgoing")
    };
    // Nothing ever arrives on a one-way outgoing connection: readable means EOF or an error. A
    // two-way one's bytes and its end are its incoming half's to read.
    if st.readable && o.two_way {
        st.readable = false;
    }
    if st.readable {
        let mut scratch = [0u8; 64];
        match (&*sock).read(&mut scratch) {
            Ok(0) => {
                return Fate::Lost(
                    o.rank,
                    format!("it closed the connection of worker {} to it", o.local),
                );
            }
            Ok(_) => {
                return Fate::Broke(
                    o.rank,
                    format!(
                        "it sent bytes on the connection of worker {} to it, which only \
                         carries data towards it",
                        o.local
                    ),
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => st.readable = false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Fate::Lost(
                    o.rank,
                    format!("the connection of worker {} to it failed: {e}", o.local),
                );
            }
        }
    }
    for _ in 0..4 {
        // Refill only once half the buffer is out, so that moving the unsent rest to the
        // front costs at most as much as the bytes sent.
        if o.pending && o.wbuf.len() - o.wstart < WRITE_LIMIT / 2 {
            if o.wstart > 0 {
                o.wbuf.drain(..o.wstart);
                o.wstart = 0;
            }
            o.pending = fill(o);
        }
        if o.wstart == o.wbuf.len() || !st.writable {
            break;
        }
        // Possibly uninitialised padding bytes, which the kernel only copies. MSG_NOSIGNAL
        // turns a broken pipe into EPIPE.
        let n = match net::send_nosignal(sock.as_fd(), &o.wbuf[o.wstart..]) {
            Ok(n) => n,
            Err(e) => match e.kind() {
                std::io::ErrorKind::WouldBlock => {
                    st.writable = false;
                    break;
                }
                std::io::ErrorKind::Interrupted => continue,
                _ => {
                    return Fate::Lost(
                        o.rank,
                        format!("sending to it from worker {} failed: {e}", o.local),
                    );
                }
            },
        };
        *progress = true;
        o.wstart += n;
        if o.wstart == o.wbuf.len() {
            o.wbuf.clear();
            o.wstart = 0;
        }
    }
    Fate::Keep
}

/// Copies published slots of `o`'s rings into its write buffer, round robin, until the buffer
/// holds [`WRITE_LIMIT`] bytes; returns whether a ring may still hold slots.
fn fill(o: &mut Outgoing) -> bool {
    let n = o.rings.len();
    if n == 0 {
        return false;
    }
    let mut empty_in_a_row = 0;
    let mut i = o.next % n;
    while empty_in_a_row < n {
        if o.wbuf.len() >= WRITE_LIMIT {
            o.next = i;
            return true;
        }
        let ring = &mut o.rings[i];
        let mut got = false;
        while o.wbuf.len() < WRITE_LIMIT {
            // A corrupt header cannot come from this process's own producer; a poisoned ring
            // just stops.
            let Ok(Some(r)) = ring.consumer.try_poll() else {
                break;
            };
            let bytes = r.bytes_uninit();
            let dst = ring.head & !LANE_BIT;
            let second = (ring.head & LANE_BIT) | bytes.len() as u32;
            let mut h = [0u8; FRAME_HEADER];
            h[..4].copy_from_slice(&dst.to_le_bytes());
            h[4..].copy_from_slice(&second.to_le_bytes());
            o.wbuf.extend(h.map(MaybeUninit::new));
            o.wbuf.extend_from_slice(bytes);
            got = true;
            // Dropping `r` releases the slot to the producer.
        }
        if got {
            empty_in_a_row = 0;
        } else {
            empty_in_a_row += 1;
        }
        i = (i + 1) % n;
    }
    o.next = i;
    false
}
