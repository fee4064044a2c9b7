//! The leaders' step on one host: flags and copies on the runtime's host board instead of
//! messages.
//!
//! When every group of a team is one rank and all those ranks share a host (and reach each other
//! over `shm`), the group leaders meet on the **host board** (`gossamer::host_board`: a region
//! of shared memory per rank that every rank of the host maps) instead of sending messages. A
//! message between ranks costs a slot record, a poll, a mailbox lookup and a fiber switch on
//! each side; a board step costs one cache line written by one side and read by the other.
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
//! their messages, whose tags they share: `Team::dup` gives a second team its own id). Long vectors go in steps of
//! [`CAP`] bytes.
//!
//! **Algorithms** (G leaders, every one reads the others' buffers: fine for the few ranks of a
//! host, O(G) reads per step):
//! - barrier: every leader takes a step and waits for every other's;
//! - allreduce: every leader writes its vector and combines all of them in leader order
//!   (0, 1, …, G − 1), so every leader computes the same bits even for floating point;
//! - reduce: the same, but only the root's leader reads and combines;
//! - broadcast: the root's leader writes, the others copy out;
//! - allgather and all-to-all (only when every group is one worker): every leader writes its
//!   part(s) and reads its part from every other.
//!
//! Every header carries the writer's operation, sequence number, element type, total length and
//! root, and a reader checks them in every build: a member in another collective, with another
//! element type, length or root makes the reader end the job with both members named (the root
//! of a broadcast in steps reads the others' last headers for this), where the message path
//! checks operation, type and root in debug builds only (but see `Team::agree`).
//!
//! **Waiting** spins on the peer's header for a few microseconds (not at all when the host has
//! more workers than CPUs), then suspends the fiber in `gossamer::wait_for`: its worker tests
//! the header between its other fibers and trustees, yields the thread when it has nothing else
//! to do (so that, with more workers than cores, the peer gets the core), and sleeps 20 µs
//! between looks after a while. It never times out; a peer that dies ends the job through the
//! runtime, and members that wait for each other for ever (one never calls) are seen by the
//! runtime as a deadlock, as on the message path.
//!
//! This module does not carry gathers, scatters or scans, nor groups of several ranks on
//! several hosts: those use messages.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gossamer::Board;

use crate::op::Op;
use crate::pod::Plain;
use crate::team::{Call, Shape, Team};

/// Channels per host.
pub(crate) const CHANNELS: usize = 30;
/// Payload bytes of one step.
pub(crate) const CAP: usize = 64 << 10;
/// Header bytes before each buffer's payload: step @0, total length in bytes @8, operation and
/// sequence number @16, element type (the high 32 bits of its hash) and root (a team index,
/// `u32::MAX` for none) @24. The root shares a word so that a small payload stays on the
/// header's cache line: a 64-byte header with the root in a word of its own made an 8 B allreduce
/// of 2 ranks 0.21 -> 0.26–0.30 µs (`gsm-bench collectives`).
const HDR: usize = 32;
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
    board: Arc<Board>,
    channel: usize,
    /// The rank of each group, in group order.
    ranks: Vec<usize>,
    /// This member's group.
    me: usize,
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
struct Meta {
    /// The writer's total length in bytes for this collective.
    len: u64,
    /// Operation and sequence number of the collective.
    call: u64,
    /// Element type: the high 32 bits of its name's hash (the low ones are zero).
    ty: u64,
    /// The root of a rooted operation (team index), `u32::MAX` for none.
    root: u32,
    /// Its name and size (for messages; not on the board).
    ty_name: &'static str,
    size: usize,
}

fn meta_of<T>(c: &Call, len: usize) -> Meta {
    Meta {
        len: len as u64,
        call: (c.kind as u64) << 56 | (c.seq & ((1 << 56) - 1)),
        ty: crate::team::hash_str(std::any::type_name::<T>()) & !u64::from(u32::MAX),
        root: c.root.map_or(u32::MAX, |r| r as u32),
        ty_name: std::any::type_name::<T>(),
        size: size_of::<T>(),
    }
}

/// Whether `T` can go through the board at all: at most one step per element, and no
/// alignment beyond the payload's.
fn fits<T>() -> bool {
    size_of::<T>() <= CAP && align_of::<T>() <= HDR
}

impl HostBoard {
    /// The channel of team `id` for this member, if the team qualifies (see the module docs):
    /// at least two groups, each one rank, all on this host's board, and a free channel.
    pub(crate) fn for_team(id: u64, shape: &Shape, me: usize) -> Option<HostBoard> {
        let n = shape.groups.len();
        if n < 2 {
            return None;
        }
        let ranks: Vec<usize> = shape
            .groups
            .iter()
            .map(|g| shape.rank_of[g[0]] as usize)
            .collect();
        let mut sorted = ranks.clone();
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
        let start = (crate::team::mix(key) % CHANNELS as u64) as usize;
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
            ranks,
            me: shape.group_of[me] as usize,
            last: Cell::new(None),
            single_copy,
        })
    }

    /// Whether every leader can read and write every other's memory with single copies.
    fn single_copy(&self) -> bool {
        self.single_copy
    }

    /// Publishes a step whose payload is this leader's buffer address and length, and returns
    /// the step.
    fn publish_addr(&self, meta: Meta, addr: usize) -> u64 {
        self.publish(meta, |dst| {
            // SAFETY: the payload is ours to write until we publish it, CAP ≥ 8 bytes.
            unsafe { dst.cast::<u64>().write_unaligned(addr as u64) }
        })
    }

    /// The buffer address group `g` published at step `s` (after `read_ready`).
    fn addr_of(&self, g: usize, s: u64) -> usize {
        // SAFETY: group g published step s with an address (read_ready checked it is there).
        unsafe { self.payload(g, s, 0, 8).cast::<u64>().read_unaligned() as usize }
    }

    /// The number of leaders.
    fn leaders(&self) -> usize {
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
    fn payload(&self, g: usize, s: u64, at: usize, len: usize) -> *mut u8 {
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
    fn publish(&self, meta: Meta, write: impl FnOnce(*mut u8)) -> u64 {
        // The step counter is the board itself (two words this leader alone writes), read once
        // per team value, so a team built again with the same id continues where the last one
        // stopped; afterwards a copy here (reading the board's words every step made a barrier
        // of 2 ranks 0.08 -> 0.12 µs: the peer is spinning on one of those lines).
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
    fn read_ready(&self, team: &Team, c: &Call, g: usize, s: u64, want: Meta) {
        self.wait(g, s);
        let member = team.shape.groups[g][0];
        let now = self.step_word(g, s).load(Ordering::Acquire);
        if now != s {
            // Step s + 2 needs this leader's step s + 1, which comes after this read.
            gossamer::fail_job(format!(
                "gsm-collectives: team {:#x}, {} #{}: member {member} wrote board step {now} \
                 while step {s} was being read: two team values with the same id are in use at \
                 once (use Team::dup for a second one)",
                team.id,
                c.kind.name(),
                c.seq
            ));
        }
        // The header is on the line just read, so these checks cost nothing measurable and run
        // in every build (the message path checks operation and type in debug builds only).
        let got = self.meta(g, s);
        if got.call != want.call {
            team.out_of_step(
                c,
                member,
                (got.call >> 56) as u8,
                got.call & ((1 << 56) - 1),
            );
        }
        if got.ty != want.ty {
            team.other_type(c, member, want.ty_name);
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
            team.other_root(c, member, word(got.root), word(want.root));
        }
        if got.len != want.len {
            let elements = |bytes: u64| (bytes / want.size.max(1) as u64) as usize;
            team.mismatch(c, member, elements(got.len), elements(want.len));
        }
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
unsafe fn copy_out(src: *const u8, dst: &mut [u8]) {
    // SAFETY: the caller's; `dst` is ours and does not overlap shared memory.
    unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) }
}

/// The bytes of a slice of plain data.
fn bytes<T: Plain>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

fn bytes_mut<T: Plain>(v: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}

impl Team {
    /// The board channel for the leaders' step of collective `c`, if this team has one and
    /// `T` can use it.
    pub(crate) fn board_for<T>(&self) -> Option<&HostBoard> {
        self.board.as_ref().filter(|_| fits::<T>())
    }

    /// The leaders' barrier on the board.
    pub(crate) fn board_barrier(&self, hb: &HostBoard, c: &Call) {
        let meta = meta_of::<()>(c, 0);
        let s = hb.publish(meta, |_| {});
        for g in (0..hb.leaders()).filter(|&g| g != hb.me) {
            hb.read_ready(self, c, g, s, meta);
        }
    }

    /// The leaders' allreduce (`root` None) or reduce to group `root` of `buf` on the board:
    /// the result, combined in leader order, ends in `buf` of every leader (of the root's
    /// leader only, for a reduce).
    pub(crate) fn board_reduce<T: Plain, O: Op<T>>(
        &self,
        hb: &HostBoard,
        c: &Call,
        buf: &mut [T],
        op: &O,
        root: Option<usize>,
    ) {
        let n = hb.leaders();
        let meta = meta_of::<T>(c, size_of_val(buf));
        if root.is_none() && size_of_val(buf) >= self.tuning().copy_min && hb.single_copy() {
            return self.copy_allreduce(hb, c, meta, None, buf, op);
        }
        let per = (CAP / size_of::<T>()).max(1);
        let combine = root.is_none_or(|r| r == hb.me);
        let mut scratch: Vec<T> = Vec::new();
        let mut at = 0;
        loop {
            let end = (at + per).min(buf.len());
            let chunk = &mut buf[at..end];
            let src = bytes(chunk);
            // SAFETY: the payload is ours to write until we publish it (module docs), CAP bytes
            // long, and `src` is at most CAP bytes.
            let s = hb.publish(meta, |dst| unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len())
            });
            if combine {
                let (len, size) = (chunk.len(), size_of_val(chunk));
                let peer = |g: usize| -> &[T] {
                    // SAFETY: group g published step s (read_ready), its payload holds
                    // `chunk.len()` elements of T (lengths checked), aligned (board buffers are
                    // 32-aligned, T's alignment at most 32), and nobody writes it before every
                    // leader has gone past step s + 1.
                    unsafe {
                        std::slice::from_raw_parts(hb.payload(g, s, 0, size).cast::<T>(), len)
                    }
                };
                for g in (0..n).filter(|&g| g != hb.me) {
                    hb.read_ready(self, c, g, s, meta);
                }
                if hb.me == 0 || n == 2 {
                    // In place: leader 0 folds 1, 2, … in order; with two leaders a ⊕ b is the
                    // same either way round for the commutative operators this crate assumes.
                    for g in (0..n).filter(|&g| g != hb.me) {
                        op.fold(chunk, peer(g), g < hb.me);
                    }
                } else {
                    scratch.clear();
                    scratch.extend_from_slice(peer(0));
                    for g in 1..n {
                        if g == hb.me {
                            op.fold(&mut scratch, chunk, false);
                        } else {
                            op.fold(&mut scratch, peer(g), false);
                        }
                    }
                    chunk.copy_from_slice(&scratch);
                }
            }
            at = end;
            if at >= buf.len() {
                return;
            }
        }
    }

    /// The leaders' broadcast of `buf` from group `root` on the board.
    pub(crate) fn board_broadcast<T: Plain>(
        &self,
        hb: &HostBoard,
        c: &Call,
        buf: &mut [T],
        root: usize,
    ) {
        let meta = meta_of::<T>(c, size_of_val(buf));
        let all = bytes_mut(buf);
        if all.len() >= self.tuning().copy_min && hb.single_copy() {
            return self.copy_broadcast(hb, c, meta, all, root);
        }
        let mut at = 0;
        loop {
            let end = (at + CAP).min(all.len());
            if hb.me == root {
                let src = &all[at..end];
                // SAFETY: as in `board_reduce`.
                let s = hb.publish(meta, |dst| unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len())
                });
                if end >= all.len() {
                    // The root reads no one's data, so it checks the others' last headers: two
                    // leaders that both took themselves for the root would otherwise each
                    // return its own buffer. (Its next step would wait for them anyway.)
                    for g in (0..hb.leaders()).filter(|&g| g != root) {
                        hb.read_ready(self, c, g, s, meta);
                    }
                }
            } else {
                let s = hb.publish(meta, |_| {});
                hb.read_ready(self, c, root, s, meta);
                // SAFETY: the root published step s with this chunk (lengths checked).
                unsafe { copy_out(hb.payload(root, s, 0, end - at), &mut all[at..end]) };
            }
            at = end;
            if at >= all.len() {
                return;
            }
        }
    }

    /// The broadcast of a large buffer by single copies between the leaders' buffers: every
    /// leader publishes its buffer's address; the buffer is cut into G shares, the root writes
    /// share `(h − root) mod G` into leader h, and leader h reads every other share from the
    /// root, so that the root and the readers copy at the same time (with two ranks, half each);
    /// a last step tells everyone the copies are done (the root's buffer must not change before,
    /// nor may a reader return before the root's write into it is complete).
    fn copy_broadcast(&self, hb: &HostBoard, c: &Call, meta: Meta, all: &mut [u8], root: usize) {
        let n = hb.leaders();
        let len = all.len();
        let share = |i: usize| (i * len / n)..((i + 1) * len / n);
        let s = hb.publish_addr(meta, all.as_mut_ptr() as usize);
        let rank_of = |g: usize| hb.ranks[g];
        if hb.me == root {
            for h in (0..n).filter(|&h| h != root) {
                hb.read_ready(self, c, h, s, meta);
                let at = hb.addr_of(h, s);
                let r = share((h + n - root) % n);
                // SAFETY: leader h published its buffer of `len` bytes for this broadcast and
                // does not touch share r of it until our last step (below) says we are done.
                unsafe { hb.board.write_to(rank_of(h), at + r.start, &all[r]) }
                    .unwrap_or_else(|e| self.copy_failed(c, e));
            }
        } else {
            hb.read_ready(self, c, root, s, meta);
            let from = hb.addr_of(root, s);
            let mine = (hb.me + n - root) % n;
            for i in (0..n).filter(|&i| i != mine) {
                let r = share(i);
                hb.board
                    .read_from(rank_of(root), from + r.start, &mut all[r])
                    .unwrap_or_else(|e| self.copy_failed(c, e));
            }
        }
        let done = hb.publish(meta, |_| {});
        for g in (0..n).filter(|&g| g != hb.me) {
            hb.read_ready(self, c, g, done, meta);
        }
    }

    /// The allreduce of a large vector by single copies (`send` None: `buf` is both input and
    /// result). Every leader publishes the addresses of its input and its result; leader i
    /// combines share i of every leader's input (reading the others' shares in pieces,
    /// combining in leader order) into its result, and writes each finished piece straight into
    /// every other leader's result; a last step lets everyone return once every copy from and
    /// into it is done. Nobody reads share i of its own result but leader i, which writes it,
    /// so the writes race with nothing.
    fn copy_allreduce<T: Plain, O: Op<T>>(
        &self,
        hb: &HostBoard,
        c: &Call,
        meta: Meta,
        send: Option<&[T]>,
        buf: &mut [T],
        op: &O,
    ) {
        let n = hb.leaders();
        let len = buf.len();
        let share = |i: usize| (i * len / n)..((i + 1) * len / n);
        let src_addr = send.map_or(buf.as_ptr(), <[T]>::as_ptr) as u64;
        let dst_addr = buf.as_mut_ptr() as u64;
        let s = hb.publish(meta, |dst| {
            // SAFETY: the payload is ours to write until we publish it, CAP ≥ 16 bytes.
            unsafe {
                dst.cast::<u64>().write_unaligned(src_addr);
                dst.add(8).cast::<u64>().write_unaligned(dst_addr);
            }
        });
        let mut srcs = vec![0usize; n];
        let mut dsts = vec![0usize; n];
        for g in (0..n).filter(|&g| g != hb.me) {
            hb.read_ready(self, c, g, s, meta);
            // SAFETY: group g published step s with two addresses (read_ready checked it).
            unsafe {
                let p = hb.payload(g, s, 0, 16);
                srcs[g] = p.cast::<u64>().read_unaligned() as usize;
                dsts[g] = p.add(8).cast::<u64>().read_unaligned() as usize;
            }
        }
        let mine = share(hb.me);
        let per = (self.tuning().copy_piece / size_of::<T>()).max(1);
        let mut piece: Vec<T> = vec![T::zeroed(); per.min(mine.len())];
        let read = |g: usize, at: usize, dst: &mut [T]| {
            hb.board
                .read_from(hb.ranks[g], srcs[g] + at * size_of::<T>(), bytes_mut(dst))
                .unwrap_or_else(|e| self.copy_failed(c, e));
        };
        let mut at = mine.start;
        while at < mine.end {
            let end = (at + per).min(mine.end);
            let m = end - at;
            if let Some(send) = send {
                buf[at..end].copy_from_slice(&send[at..end]);
            }
            if hb.me == 0 || n == 2 {
                for g in (0..n).filter(|&g| g != hb.me) {
                    read(g, at, &mut piece[..m]);
                    op.fold(&mut buf[at..end], &piece[..m], g < hb.me);
                }
            } else {
                let mut acc = vec![T::zeroed(); m];
                read(0, at, &mut acc);
                for g in 1..n {
                    if g == hb.me {
                        op.fold(&mut acc, &buf[at..end], false);
                    } else {
                        read(g, at, &mut piece[..m]);
                        op.fold(&mut acc, &piece[..m], false);
                    }
                }
                buf[at..end].copy_from_slice(&acc);
            }
            for g in (0..n).filter(|&g| g != hb.me) {
                // SAFETY: leader g published its result buffer for this allreduce and, by the
                // protocol, neither reads nor writes share `mine` of it before our last step.
                unsafe {
                    hb.board.write_to(
                        hb.ranks[g],
                        dsts[g] + at * size_of::<T>(),
                        bytes(&buf[at..end]),
                    )
                }
                .unwrap_or_else(|e| self.copy_failed(c, e));
            }
            at = end;
        }
        let done = hb.publish(meta, |_| {});
        for g in (0..n).filter(|&g| g != hb.me) {
            hb.read_ready(self, c, g, done, meta);
        }
    }

    /// `allreduce` of `send` into `recv` by single copies, when every member is alone in its
    /// rank, the ranks share the host board and the vector is large; false (nothing done,
    /// nothing begun) otherwise.
    pub(crate) fn board_allreduce_from<T: Plain, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &O,
    ) -> bool {
        let Some(hb) = self.board_for::<T>() else {
            return false;
        };
        if !self.singletons() || size_of_val(send) < self.tuning().copy_min || !hb.single_copy() {
            return false;
        }
        let c = self.begin(crate::team::Kind::Allreduce);
        let meta = meta_of::<T>(&c, size_of_val(send));
        self.copy_allreduce(hb, &c, meta, Some(send), recv, op);
        true
    }

    /// Ends the job because a single copy failed after the runtime found it possible.
    fn copy_failed(&self, c: &Call, e: std::io::Error) -> ! {
        gossamer::fail_job(format!(
            "gsm-collectives: team {:#x}, {} #{}: a single copy between ranks failed although it \
             worked when the run started: {e}",
            self.id,
            c.kind.name(),
            c.seq
        ))
    }

    /// The allgather on the board when every group is one member: `recv[g·k..]` gets member
    /// g's `send` (k elements each).
    pub(crate) fn board_allgather<T: Plain>(
        &self,
        hb: &HostBoard,
        c: &Call,
        send: &[T],
        recv: &mut [T],
    ) {
        let k = size_of_val(send);
        let meta = meta_of::<T>(c, k);
        let mine = bytes(send);
        let out = bytes_mut(recv);
        out[hb.me * k..(hb.me + 1) * k].copy_from_slice(mine);
        let mut at = 0;
        loop {
            let end = (at + CAP).min(k);
            let src = &mine[at..end];
            // SAFETY: as in `board_reduce`.
            let s = hb.publish(meta, |dst| unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len())
            });
            for g in (0..hb.leaders()).filter(|&g| g != hb.me) {
                hb.read_ready(self, c, g, s, meta);
                // SAFETY: group g published step s with this chunk (lengths checked).
                unsafe {
                    copy_out(
                        hb.payload(g, s, 0, end - at),
                        &mut out[g * k + at..g * k + end],
                    )
                };
            }
            at = end;
            if at >= k {
                return;
            }
        }
    }

    /// The all-to-all on the board when every group is one member: `send` and `recv` hold one
    /// part of `k` elements per member.
    pub(crate) fn board_alltoall<T: Plain>(
        &self,
        hb: &HostBoard,
        c: &Call,
        send: &[T],
        recv: &mut [T],
        k: usize,
    ) -> bool {
        let n = hb.leaders();
        // Each step carries up to `lane` bytes of every part, part j at j × lane.
        let lane = CAP / n / HDR * HDR;
        let part = k * size_of::<T>();
        if lane < size_of::<T>().max(1) {
            return false;
        }
        let per = if part == 0 {
            1
        } else {
            lane / size_of::<T>() * size_of::<T>()
        };
        let meta = meta_of::<T>(c, part);
        let mine = bytes(send);
        let out = bytes_mut(recv);
        out[hb.me * part..(hb.me + 1) * part]
            .copy_from_slice(&mine[hb.me * part..(hb.me + 1) * part]);
        let mut at = 0;
        loop {
            let end = (at + per).min(part);
            let s = hb.publish(meta, |dst| {
                for j in (0..n).filter(|&j| j != hb.me) {
                    let src = &mine[j * part + at..j * part + end];
                    // SAFETY: as in `board_reduce`; lane j lies inside the CAP bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(src.as_ptr(), dst.add(j * lane), src.len())
                    }
                }
            });
            for g in (0..n).filter(|&g| g != hb.me) {
                hb.read_ready(self, c, g, s, meta);
                // SAFETY: group g published step s with its parts (lengths checked).
                unsafe {
                    copy_out(
                        hb.payload(g, s, hb.me * lane, end - at),
                        &mut out[g * part + at..g * part + end],
                    )
                };
            }
            at = end;
            if at >= part {
                return true;
            }
        }
    }
}
