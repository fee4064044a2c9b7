//! A team's channel on its host's board: the claim, the double-buffered steps and their
//! headers, and the wait for a peer's step. What the leaders do with it is in `board`.
//!
//! **Channels.** Each team that qualifies claims one of [`CHANNELS`] channels when it is built:
//! the claim table is the first words of the board of the host's lowest rank, and a team takes
//! the first free entry (compare-and-swap of its id into an empty word, probing from a hash of
//! the id) or the one that already holds its id, so every member of the team finds the same
//! channel. Entries are never freed: claims only ever fill the table, so every member sees the
//! same answer, and when it is full the later teams simply use messages. A program that makes
//! teams in a loop gets the board for its first ones only.
//!
//! **Steps.** A channel is, in every rank's board, two buffers of a 32-byte header and
//! [`CAP`] payload bytes. A collective is one or more *steps*; step `s` of a leader writes its
//! payload into its buffer `s % 2` and then stores `s` in that buffer's header (Release). A
//! reader waits until the header it needs says at least `s` (Acquire) and reads the payload.
//! Before writing buffer `s % 2` again, at step `s`, a leader waits until every other leader
//! has reached step `s − 1`, which each does only after it finished reading step `s − 2`: so
//! nobody overwrites what another still reads, and the double buffer lets a writer run one step
//! ahead. The step counter is the board itself (the larger of a leader's two headers, read when a
//! team value first uses the channel and then kept), so a team built again with the same id
//! continues where the last one stopped; two values of one id used by turns would not (nor would
//! their messages, whose tags they share: `Team::dup` gives a second team its own id).
//!
//! Every header carries the writer's operation, sequence number, element type, total length and
//! root, and a reader checks them in every build ([`HostBoard::read_ready`]), where the message
//! path checks operation, type and root in debug builds only (but see `Team::agree`).
//!
//! **Waiting** spins on the peer's header for a few microseconds (not at all when the host has
//! more workers than CPUs), then suspends the fiber in `gossamer::wait_for`: its worker tests
//! the header between its other fibers and trustees, yields the thread when it has nothing else
//! to do (so that, with more workers than cores, the peer gets the core), and sleeps between
//! looks after a while. It never times out; a peer that dies ends the job through the runtime,
//! and members that wait for each other for ever (one never calls) are seen by the runtime as a
//! deadlock, as on the message path.
//!
//! This module knows no team and reports nothing: a reader that finds a disagreement returns it
//! to `board`, which ends the job naming both members.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gossamer::Board;

use crate::call::{Call, hash_str, mix};
use crate::pod::Plain;

/// Channels per host.
pub(crate) const CHANNELS: usize = 30;
/// Payload bytes of one step.
pub(crate) const CAP: usize = 64 << 10;
/// Header bytes before each buffer's payload: step @0, total length in bytes @8, operation and
/// sequence number @16, element type (the high 32 bits of its hash) and root (a team index,
/// `u32::MAX` for none) @24. The root shares a word so that a small payload stays on the
/// header's cache line (a header of 64 bytes made small allreduces slower).
pub(crate) const HDR: usize = 32;
/// Bytes between the two buffers of a channel.
const BUF: usize = (HDR + CAP).div_ceil(128) * 128;
/// Bytes of one channel in each rank's board.
const CHANNEL_BYTES: usize = 2 * BUF;
/// Where the channels start (the claim table is before them, in the lowest rank's board only).
const FIRST: usize = 4096;

const _: () = assert!(CHANNELS * 8 <= FIRST);
const _: () = assert!(FIRST + CHANNELS * CHANNEL_BYTES <= gossamer::BOARD_BYTES);

/// A team's channel on its host's board, held by each of its leaders.
pub(crate) struct HostBoard {
    pub(crate) board: Arc<Board>,
    channel: usize,
    /// The rank of each group, in group order.
    pub(crate) ranks: Vec<usize>,
    /// This member's group.
    pub(crate) me: usize,
    /// The step of this leader's last write, once read from the board (see `publish`).
    last: Cell<Option<u64>>,
    /// Whether every leader can copy from and to every other's memory.
    single_copy: bool,
}

impl std::fmt::Debug for HostBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBoard")
            .field("channel", &self.channel)
            .field("ranks", &self.ranks)
            .field("me", &self.me)
            .finish()
    }
}

/// What a header says besides its step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta {
    /// The writer's total length in bytes for this collective.
    len: u64,
    /// Operation and sequence number of the collective.
    call: u64,
    /// Element type: the high 32 bits of its name's hash (the low ones are zero).
    ty: u64,
    /// The root of a rooted operation (team index), `u32::MAX` for none.
    root: u32,
    /// Its name and size (for messages; not on the board).
    pub(crate) ty_name: &'static str,
    size: usize,
}

pub(crate) fn meta_of<T>(c: &Call, len: usize) -> Meta {
    Meta {
        len: len as u64,
        call: (c.kind as u64) << 56 | (c.seq & ((1 << 56) - 1)),
        ty: hash_str(std::any::type_name::<T>()) & !u64::from(u32::MAX),
        root: c.root.map_or(u32::MAX, |r| r as u32),
        ty_name: std::any::type_name::<T>(),
        size: size_of::<T>(),
    }
}

/// Whether `T` can go through the board at all: at most one step per element, and no
/// alignment beyond the payload's.
pub(crate) fn fits<T>() -> bool {
    size_of::<T>() <= CAP && align_of::<T>() <= HDR
}

impl HostBoard {
    /// The channel of team `id` for the member of group `me`, given the rank of each group, if
    /// the team qualifies (see the `board` module): at least two groups, each one rank, all on
    /// this host's board, and a free channel.
    pub(crate) fn for_team(id: u64, ranks: &[usize], me: usize) -> Option<HostBoard> {
        let n = ranks.len();
        if n < 2 {
            return None;
        }
        let mut sorted = ranks.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != n {
            return None;
        }
        let board = gossamer::host_board()?;
        if ranks.iter().any(|&r| board.region(r).is_none()) {
            return None;
        }
        let lowest = board.ranks().next()?;
        let table = board.region(lowest)?;
        let key = id.max(1);
        let start = (mix(key) % CHANNELS as u64) as usize;
        let channel = (0..CHANNELS).map(|i| (start + i) % CHANNELS).find(|&c| {
            let w = table.word(8 * c);
            match w.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => true,
                Err(v) => v == key,
            }
        })?;
        let single_copy = ranks
            .iter()
            .all(|&a| ranks.iter().all(|&b| a == b || board.can_copy(a, b)));
        Some(HostBoard {
            board,
            channel,
            ranks: ranks.to_vec(),
            me,
            last: Cell::new(None),
            single_copy,
        })
    }

    /// Whether every leader can read and write every other's memory with single copies.
    pub(crate) fn single_copy(&self) -> bool {
        self.single_copy
    }

    /// Publishes a step whose payload is this leader's buffer address and length, and returns
    /// the step.
    pub(crate) fn publish_addr(&self, meta: Meta, addr: usize) -> u64 {
        self.publish(meta, |dst| {
            // SAFETY: the payload is ours to write until we publish it, CAP ≥ 8 bytes.
            unsafe { dst.cast::<u64>().write_unaligned(addr as u64) }
        })
    }

    /// The buffer address group `g` published at step `s` (after `read_ready`).
    pub(crate) fn addr_of(&self, g: usize, s: u64) -> usize {
        // SAFETY: group g published step s with an address (read_ready checked it is there).
        unsafe { self.payload(g, s, 0, 8).cast::<u64>().read_unaligned() as usize }
    }

    /// The number of leaders.
    pub(crate) fn leaders(&self) -> usize {
        self.ranks.len()
    }

    /// Offset of buffer `b` of this channel in a board.
    fn buffer(&self, b: u64) -> usize {
        FIRST + self.channel * CHANNEL_BYTES + (b % 2) as usize * BUF
    }

    /// The step word of group `g`'s buffer `b`.
    fn step_word(&self, g: usize, b: u64) -> &AtomicU64 {
        self.board
            .region(self.ranks[g])
            .expect("checked when the team was built")
            .word(self.buffer(b))
    }

    /// The payload of group `g`'s buffer for step `s`, `len` bytes from `at`.
    pub(crate) fn payload(&self, g: usize, s: u64, at: usize, len: usize) -> *mut u8 {
        debug_assert!(at + len <= CAP);
        self.board
            .region(self.ranks[g])
            .expect("checked when the team was built")
            .ptr(self.buffer(s) + HDR + at, len)
    }

    fn meta(&self, g: usize, s: u64) -> Meta {
        let region = self
            .board
            .region(self.ranks[g])
            .expect("checked when the team was built");
        let at = self.buffer(s);
        let ty_root = region.word(at + 24).load(Ordering::Relaxed);
        Meta {
            len: region.word(at + 8).load(Ordering::Relaxed),
            call: region.word(at + 16).load(Ordering::Relaxed),
            ty: ty_root & !u64::from(u32::MAX),
            root: ty_root as u32,
            ty_name: "",
            size: 0,
        }
    }

    /// Waits until group `g` has reached step `s`: spins a little (a partner on another core
    /// is usually a few hundred nanoseconds away), then waits in `gossamer::wait_for`, where
    /// the worker tests the word between its other work, sleeps in short spells when it has none,
    /// and sees a job whose members wait for each other for ever as deadlocked.
    fn wait(&self, g: usize, s: u64) {
        let word = self.step_word(g, s);
        let reached = || word.load(Ordering::Acquire) >= s;
        if reached() {
            return;
        }
        for _ in 1..spin_limit() {
            std::hint::spin_loop();
            if reached() {
                return;
            }
        }
        gossamer::wait_for(reached);
    }

    /// Takes the next step: waits until the buffer is free, lets `write` fill the payload, then
    /// publishes `meta` and the step. Returns the step.
    pub(crate) fn publish(&self, meta: Meta, write: impl FnOnce(*mut u8)) -> u64 {
        // The step counter is the board itself (two words this leader alone writes), read once
        // per team value, so a team built again with the same id continues where the last one
        // stopped; afterwards a copy here, since the peer is spinning on those lines.
        let last = self.last.get().unwrap_or_else(|| {
            let mine = |b| self.step_word(self.me, b).load(Ordering::Relaxed);
            mine(0).max(mine(1))
        });
        let s = last + 1;
        for g in (0..self.leaders()).filter(|&g| g != self.me) {
            self.wait(g, s - 1);
        }
        write(self.payload(self.me, s, 0, CAP));
        let region = self
            .board
            .region(self.ranks[self.me])
            .expect("checked when the team was built");
        let at = self.buffer(s);
        region.word(at + 8).store(meta.len, Ordering::Relaxed);
        region.word(at + 16).store(meta.call, Ordering::Relaxed);
        region
            .word(at + 24)
            .store(meta.ty | u64::from(meta.root), Ordering::Relaxed);
        region.word(at).store(s, Ordering::Release);
        self.last.set(Some(s));
        s
    }

    /// Waits for group `g`'s step `s` and checks that it is in the same collective with the
    /// same length (`want` bytes), element type and root.
    pub(crate) fn read_ready(&self, g: usize, s: u64, want: Meta) -> Result<(), Disagreement> {
        self.wait(g, s);
        let now = self.step_word(g, s).load(Ordering::Acquire);
        if now != s {
            // Step s + 2 needs this leader's step s + 1, which comes after this read.
            return Err(Disagreement::Overtaken { now });
        }
        // The header is on the line just read, so these checks run in every build (the message
        // path checks operation and type in debug builds only).
        let got = self.meta(g, s);
        if got.call != want.call {
            return Err(Disagreement::Call {
                kind: (got.call >> 56) as u8,
                seq: got.call & ((1 << 56) - 1),
            });
        }
        if got.ty != want.ty {
            return Err(Disagreement::Type);
        }
        // Before anything is copied: two leaders that both think they are a broadcast's root
        // would each write into the other's buffer while reading it (`copy_broadcast`).
        if got.root != want.root {
            let word = |r: u32| {
                if r == u32::MAX {
                    u64::MAX
                } else {
                    u64::from(r)
                }
            };
            return Err(Disagreement::Root {
                theirs: word(got.root),
                mine: word(want.root),
            });
        }
        if got.len != want.len {
            let elements = |bytes: u64| (bytes / want.size.max(1) as u64) as usize;
            return Err(Disagreement::Len {
                theirs: elements(got.len),
                mine: elements(want.len),
            });
        }
        Ok(())
    }
}

/// Looks at a peer's header this many times before suspending: a few microseconds, or once when
/// the host has more workers than CPUs (the peer may need this CPU).
fn spin_limit() -> u32 {
    if gossamer::oversubscribed() { 1 } else { 1024 }
}

/// Copies `len` bytes from the board.
///
/// # Safety
/// `src` is a payload the protocol of the module docs gives this reader.
pub(crate) unsafe fn copy_out(src: *const u8, dst: &mut [u8]) {
    // SAFETY: the caller's; `dst` is ours and does not overlap shared memory.
    unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) }
}

/// The bytes of a slice of plain data.
pub(crate) fn bytes<T: Plain>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

pub(crate) fn bytes_mut<T: Plain>(v: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}

/// What a reader found in a peer's header instead of the step it waited for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Disagreement {
    /// The peer wrote step `now` while this one was being read: two team values of one id.
    Overtaken { now: u64 },
    /// The peer is in another collective (operation `kind`, sequence number `seq`).
    Call { kind: u8, seq: u64 },
    /// Another element type.
    Type,
    /// Another root (`u64::MAX`: none).
    Root { theirs: u64, mine: u64 },
    /// Another length, in elements.
    Len { theirs: usize, mine: usize },
}
