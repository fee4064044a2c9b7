//! A socket to incoming rings: the receiving side, run by whichever thread holds the link (a
//! polling worker, or the I/O thread while every worker sleeps). For each authenticated
//! connection it reads frames into a buffer and applies each to the ring it names as a
//! producer would (payload, then the header with Release), then wakes the consuming worker.
//! When that ring is full the frame waits and reading stops: TCP's window closes and the
//! sender's shadow ring fills, so back-pressure reaches the remote producer and nothing is
//! dropped. A frame no correct peer sends (a worker not on this rank, longer than a slot) is a
//! protocol error. It does not read hellos (`io::accept`). See `fabric/tcp/README.md`.

use std::io::Read;
use std::net::TcpStream;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::{Fate, LinkState, Rx, Side};
use crate::fabric::Bell;
use crate::fabric::tcp::connect::delay_acks;
use crate::fabric::tcp::groups::{Groups, NONE};
use crate::fabric::tcp::handshake::word;
use crate::fabric::tcp::{FRAME_HEADER, LANE_BIT};
use crate::wire::ring::Producer;

/// Where the frames this rank reads may go: the workers of its group (its own, and with
/// per-host connections those of the other ranks of its host), and, from `attach` on, the
/// other ranks' rings (in their tcp segments) and doorbells (in their shm segments).
pub(in crate::fabric::tcp) struct Dests {
    me: u32,
    /// Each global worker's index in this rank's group, or [`NONE`].
    index: Vec<u32>,
    /// (rank, local worker) of each group index.
    owner: Vec<(u32, u32)>,
    /// "rank 3", or "this host (ranks 2, 3)", for messages.
    name: String,
    /// Set once by `attach` when the group has other ranks.
    pub(in crate::fabric::tcp) others: OnceLock<Others>,
}

/// The other ranks' side of a group, for the connections this rank reads.
pub(in crate::fabric::tcp) struct Others {
    /// By remote source worker: (group index * 2 + lane, producer), taken by its connection.
    pub(in crate::fabric::tcp) rings: Mutex<Vec<Vec<(usize, Producer)>>>,
    /// By group index: the doorbell of another rank's worker (`None` for this rank's).
    pub(in crate::fabric::tcp) bells: Vec<Option<Bell>>,
}

impl Dests {
    pub(in crate::fabric::tcp) fn new(groups: &Groups) -> Dests {
        let mine = groups.members(groups.mine());
        let mut index = vec![NONE; groups.total()];
        let mut owner = Vec::with_capacity(mine.len());
        for (i, &g) in mine.iter().enumerate() {
            index[g as usize] = i as u32;
            owner.push((groups.rank(g), groups.local(g)));
        }
        let ranks = groups.ranks_of(groups.mine());
        let name = if ranks.len() == 1 {
            format!("rank {}", groups.me)
        } else {
            let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
            format!("this host (ranks {})", list.join(", "))
        };
        Dests {
            me: groups.me,
            index,
            owner,
            name,
            others: OnceLock::new(),
        }
    }

    /// Workers in the group.
    pub(in crate::fabric::tcp) fn len(&self) -> usize {
        self.owner.len()
    }

    /// (rank, local worker) of group index `i`.
    pub(in crate::fabric::tcp) fn owner(&self, i: usize) -> (u32, u32) {
        self.owner[i]
    }

    /// The group index of global worker `g`, or [`NONE`].
    pub(in crate::fabric::tcp) fn index(&self, g: u32) -> u32 {
        self.index.get(g as usize).copied().unwrap_or(NONE)
    }
}

/// The receiving side of one authenticated connection: from worker `local` of rank `rank`.
pub(in crate::fabric::tcp) struct Incoming {
    pub(in crate::fabric::tcp) rank: u32,
    pub(super) local: u32,
    /// The source's global id.
    src: u32,
    /// This rank's worker the connection targets (reads it first, see `link`).
    pub(super) home: u32,
    /// Index `group index * 2 + lane`; another rank's are `None` until `attach` maps them.
    pub(super) producers: Vec<Option<Producer>>,
    dests: std::sync::Arc<Dests>,
    /// The other ranks' producers were taken from `Dests::others`.
    claimed: bool,
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
        (rank, local, src, home): (u32, u32, u32, u32),
        producers: Vec<Option<Producer>>,
        dests: std::sync::Arc<Dests>,
        slot_size: u32,
    ) -> Incoming {
        let cap = (256 * 1024).max(2 * (FRAME_HEADER + slot_size as usize));
        let mut inc = Incoming {
            rank,
            local,
            src,
            home,
            producers,
            dests,
            claimed: false,
            rbuf: vec![0; cap],
            rstart: 0,
            rend: 0,
            stalled: false,
            acks_delayed: Instant::now(),
        };
        inc.claim();
        inc
    }

    /// Takes this connection's producers into the other ranks' rings once `attach` has mapped
    /// them; whether it has (or the group has no other rank).
    fn claim(&mut self) -> bool {
        if self.claimed {
            return true;
        }
        if self.dests.owner.iter().all(|o| o.0 == self.dests.me) {
            self.claimed = true;
            return true;
        }
        let Some(o) = self.dests.others.get() else {
            return false;
        };
        let mut rings = o.rings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = rings.get_mut(self.src as usize) {
            for (k, p) in v.drain(..) {
                self.producers[k] = Some(p);
            }
        }
        self.claimed = true;
        true
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
        let i = inc.dests.index(dst);
        if i == NONE {
            return Err(format!(
                "its worker {} sent a frame for worker {dst}, which is not on {}",
                inc.local, inc.dests.name
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
        let k = i as usize * 2 + lane;
        if inc.producers[k].is_none() && !inc.claim() {
            // Another rank's ring, not mapped before `attach`: held like a full ring's frame.
            return Ok(false);
        }
        let Some(p) = inc.producers[k].as_mut() else {
            return Err(format!(
                "its worker {} sent a frame for worker {dst}, which this rank does not read for",
                inc.local
            ));
        };
        let Some(mut slot) = p.try_reserve() else {
            return Ok(false);
        };
        slot.buf()[..len as usize].copy_from_slice(&inc.rbuf[inc.rstart + FRAME_HEADER..end]);
        slot.publish(len);
        inc.rstart = end;
        *progress = true;
        if i != last {
            last = i;
            let (r, l) = inc.dests.owner[i as usize];
            if r == inc.dests.me {
                woke(l);
            } else if let Some(Some(b)) = inc.dests.others.get().map(|o| &o.bells[i as usize]) {
                b.ring();
            }
        }
    }
    Ok(true)
}
