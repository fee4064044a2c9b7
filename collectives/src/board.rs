//! The leaders' step on one host: flags and copies on the runtime's host board instead of
//! messages.
//!
//! When every group of a team is one rank and all those ranks share a host (and reach each other
//! over `shm`), the group leaders meet on the **host board** (`gossamer::host_board`: a region
//! of shared memory per rank that every rank of the host maps) instead of sending messages. A
//! message between ranks costs a slot record, a poll, a mailbox lookup and a fiber switch on
//! each side; a board step costs one cache line written by one side and read by the other. The
//! team's channel, its steps and their headers are in `channel`; long vectors go in steps of
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
//! A reader that finds another collective, element type, length or root in a peer's header
//! ends the job with both members named (the root of a broadcast in steps reads the others' last
//! headers for this).
//!
//! This module does not carry gathers, scatters or scans, nor groups of several ranks on
//! several hosts: those use messages.

use crate::call::{Call, Kind};
use crate::channel::{
    CAP, Disagreement, HDR, HostBoard, Meta, bytes, bytes_mut, copy_out, fits, meta_of,
};
use crate::op::Op;
use crate::pod::Plain;
use crate::team::Team;

impl Team {
    /// The board channel for the leaders' step of collective `c`, if this team has one and
    /// `T` can use it.
    pub(crate) fn board_for<T>(&self) -> Option<&HostBoard> {
        self.board.as_ref().filter(|_| fits::<T>())
    }

    /// Waits for group `g`'s step `s` of call `c` and checks its header (see
    /// [`HostBoard::read_ready`]); a disagreement ends the job naming both members.
    fn board_read(&self, hb: &HostBoard, c: &Call, g: usize, s: u64, want: Meta) {
        let member = self.shape.groups[g][0];
        match hb.read_ready(g, s, want) {
            Ok(()) => {}
            Err(Disagreement::Overtaken { now }) => gossamer::fail_job(format!(
                "gsm-collectives: team {:#x}, {} #{}: member {member} wrote board step {now} \
                 while step {s} was being read: two team values with the same id are in use at \
                 once (use Team::dup for a second one)",
                self.id,
                c.kind.name(),
                c.seq
            )),
            Err(Disagreement::Call { kind, seq }) => self.out_of_step(c, member, kind, seq),
            Err(Disagreement::Type) => self.other_type(c, member, want.ty_name),
            Err(Disagreement::Root { theirs, mine }) => self.other_root(c, member, theirs, mine),
            Err(Disagreement::Len { theirs, mine }) => self.mismatch(c, member, theirs, mine),
        }
    }

    /// The leaders' barrier on the board.
    pub(crate) fn board_barrier(&self, hb: &HostBoard, c: &Call) {
        let meta = meta_of::<()>(c, 0);
        let s = hb.publish(meta, |_| {});
        for g in (0..hb.leaders()).filter(|&g| g != hb.me) {
            self.board_read(hb, c, g, s, meta);
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
                    self.board_read(hb, c, g, s, meta);
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
                        self.board_read(hb, c, g, s, meta);
                    }
                }
            } else {
                let s = hb.publish(meta, |_| {});
                self.board_read(hb, c, root, s, meta);
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
                self.board_read(hb, c, h, s, meta);
                let at = hb.addr_of(h, s);
                let r = share((h + n - root) % n);
                // SAFETY: leader h published its buffer of `len` bytes for this broadcast and
                // does not touch share r of it until our last step (below) says we are done.
                unsafe { hb.board.write_to(rank_of(h), at + r.start, &all[r]) }
                    .unwrap_or_else(|e| self.copy_failed(c, e));
            }
        } else {
            self.board_read(hb, c, root, s, meta);
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
            self.board_read(hb, c, g, done, meta);
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
            self.board_read(hb, c, g, s, meta);
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
            self.board_read(hb, c, g, done, meta);
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
        let c = self.begin(Kind::Allreduce);
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
                self.board_read(hb, c, g, s, meta);
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
                self.board_read(hb, c, g, s, meta);
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
