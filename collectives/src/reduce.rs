//! Reductions: `reduce` (to a root), `allreduce` (to everyone), `scan` and `exscan` (prefixes
//! in member order).
//!
//! Hierarchical `reduce`/`allreduce`: each group's leader combines its group's contributions
//! (they arrive by pointer), then the leaders run
//! - `reduce`: a *binomial tree* towards the root's group (⌈log₂ G⌉ rounds), acknowledged
//!   from [`Tuning::rendezvous_min`](crate::Tuning) bytes on (see `broadcast`);
//! - `allreduce`, below [`Tuning::allreduce_ring_min`](crate::Tuning) bytes: *recursive
//!   doubling* (Thakur, Rabenseifner & Gropp, "Optimization of collective communication
//!   operations in MPICH", IJHPCA 2005): with G leaders and p the largest power of two ≤ G, the
//!   first 2(G − p) fold pairwise so that p remain, those exchange whole vectors with partners at
//!   distance 1, 2, 4, … (log₂ p rounds), and the folded ones get the result back;
//! - `allreduce`, from that size on: the *ring* (Patarasuk & Yuan, "Bandwidth optimal
//!   all-reduce algorithms for clusters of workstations", JPDC 2009; the reduce-scatter +
//!   allgather split is Rabenseifner's): G − 1 steps in which every leader passes one G-th of
//!   the vector to its right neighbour and combines the one from its left, then G − 1 steps that
//!   circulate the finished parts. Every leader sends 2(G − 1)/G of the vector in all, and does
//!   1/G of the arithmetic each step;
//!
//! or, for ranks on one host, combine on the host board (see `board`: every leader reads every
//! other's vector and combines them in leader order), then hand the result to their groups by
//! pointer (one shared `Arc`). The exchanges of both
//! allreduce algorithms go piece by piece, in lockstep between the two sides (`Team::swap`).
//!
//! `scan`/`exscan` respect member order, which the groups need not follow, so they run over
//! all members at once: Hillis & Steele's doubling ("Data parallel algorithms", CACM 1986), in
//! round k member i sends its partial prefix to i + 2^k and folds the one from i − 2^k in front
//! of its own: ⌈log₂ n⌉ rounds.
//!
//! This module does not reorder contributions to make non-commutative operators work in
//! `reduce`/`allreduce` (see [`crate::op`]).

use std::sync::Arc;

use crate::call::{Call, Kind};
use crate::op::Op;
use crate::pod::{Plain, PodVec, assert_sized};
use crate::{Error, Team};

fn prev_pow2(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        1 << (usize::BITS - 1 - n.leading_zeros())
    }
}

impl Team {
    /// Combines every member's `send` element-wise with `op` into the root's `recv` (`recv` is
    /// not touched elsewhere; other members may pass an empty one).
    ///
    /// # Errors
    /// [`Error::BadRoot`]; [`Error::Length`] if, at the root, `recv.len() != send.len()`.
    ///
    /// # Panics
    /// If members' `send` lengths differ.
    pub fn reduce<T: Plain, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
        root: usize,
    ) -> Result<(), Error> {
        assert_sized::<T>();
        self.check_root("reduce", root)?;
        if self.me == root && recv.len() != send.len() {
            return Err(Error::Length {
                op: "reduce",
                buffer: "recv",
                got: recv.len(),
                want: send.len(),
                why: "the root's recv holds the result, as long as send",
            });
        }
        let c = self.begin(Kind::Reduce).rooted(root);
        let shape = &self.shape;
        let g = shape.group_of[self.me] as usize;
        let leader = shape.leader(g, Some(root));
        let Some(mut acc) = self.group_reduce(&c, send, leader, &op) else {
            return Ok(());
        };
        let n = shape.groups.len();
        let rg = shape.group_of[root] as usize;
        // The board only while the first member of each group leads it (see `board`).
        if let Some(hb) = self.board_for::<T>().filter(|_| shape.slot_of[root] == 0) {
            self.board_reduce(hb, &c, &mut acc, &op, Some(rg));
            if self.me == root {
                recv.copy_from_slice(&acc);
            }
            return Ok(());
        }
        let v = (g + n - rg) % n;
        let member_at = |v: usize| shape.leader((v + rg) % n, Some(root));
        // Acknowledged from `rendezvous_min` bytes on, so that successive reduces do not flood
        // the parent (see `broadcast`).
        let ack = std::mem::size_of_val(send) >= self.tuning().rendezvous_min && !send.is_empty();
        let mut mask = 1;
        while mask < n {
            if v & mask != 0 {
                let parent = member_at(v - mask);
                self.put_slice(&c, parent, 1, &acc);
                if ack {
                    self.get::<()>(&c, parent, 2);
                }
                return Ok(());
            }
            if v + mask < n {
                let len = acc.len();
                let child = member_at(v + mask);
                self.get_slice(&c, child, 1, len, |at, x: PodVec<T>| {
                    op.fold(&mut acc[at..at + x.0.len()], &x.0, false);
                });
                if ack {
                    self.put(&c, child, 2, ());
                }
            }
            mask <<= 1;
        }
        recv.copy_from_slice(&acc);
        Ok(())
    }

    /// Every member's `send` combined element-wise with `op`, in every member's `recv`.
    ///
    /// # Errors
    /// [`Error::Length`] if `recv.len() != send.len()`.
    ///
    /// # Panics
    /// If members' lengths differ.
    pub fn allreduce<T: Plain, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) -> Result<(), Error> {
        if recv.len() != send.len() {
            return Err(Error::Length {
                op: "allreduce",
                buffer: "recv",
                got: recv.len(),
                want: send.len(),
                why: "recv holds the result, as long as send",
            });
        }
        assert_sized::<T>();
        if !self.board_allreduce_from(send, recv, &op) {
            recv.copy_from_slice(send);
            self.allreduce_in_place(recv, op);
        }
        Ok(())
    }

    /// [`allreduce`](Team::allreduce) with `buf` as both contribution and result.
    ///
    /// # Panics
    /// If members' lengths differ.
    pub fn allreduce_in_place<T: Plain, O: Op<T>>(&self, buf: &mut [T], op: O) {
        assert_sized::<T>();
        let c = self.begin(Kind::Allreduce);
        let shape = &self.shape;
        let g = shape.group_of[self.me] as usize;
        let group = &shape.groups[g];
        let leader = group[0];
        if self.me != leader {
            self.put(&c, leader, 0, PodVec(buf.to_vec()));
            let r: Arc<PodVec<T>> = self.get(&c, leader, 1);
            if r.0.len() != buf.len() {
                self.mismatch(&c, leader, r.0.len(), buf.len());
            }
            buf.copy_from_slice(&r.0);
            return;
        }
        for &m in &group[1..] {
            let x: PodVec<T> = self.get(&c, m, 0);
            if x.0.len() != buf.len() {
                self.mismatch(&c, m, x.0.len(), buf.len());
            }
            op.fold(buf, &x.0, false);
        }
        let leaders: Vec<usize> = shape.groups.iter().map(|m| m[0]).collect();
        if let Some(hb) = self.board_for::<T>() {
            self.board_reduce(hb, &c, buf, &op, None);
        } else if leaders.len() > 1 {
            let n = leaders.len();
            let bytes = std::mem::size_of_val(buf);
            let ring = bytes >= self.tuning().allreduce_ring_min && buf.len() >= leaders.len();
            self.agree::<T>(
                &c,
                (Some(leaders[(g + 1) % n]), Some(leaders[(g + n - 1) % n])),
                buf.len(),
                u8::from(ring),
            );
            if ring {
                self.ring_allreduce(&c, &leaders, g, buf, &op);
            } else {
                self.rd_allreduce(&c, &leaders, g, buf, &op);
            }
            self.agreed(&c);
        }
        if group.len() > 1 {
            let shared = Arc::new(PodVec(buf.to_vec()));
            for &m in &group[1..] {
                self.put(&c, m, 1, shared.clone());
            }
        }
    }

    /// Combines the group's contributions at `leader`: `Some(sum)` there, `None` elsewhere
    /// (after sending `send` to the leader).
    fn group_reduce<T: Plain, O: Op<T>>(
        &self,
        c: &Call,
        send: &[T],
        leader: usize,
        op: &O,
    ) -> Option<Vec<T>> {
        if self.me != leader {
            self.put(c, leader, 0, PodVec(send.to_vec()));
            return None;
        }
        let g = self.shape.group_of[self.me] as usize;
        let mut acc = send.to_vec();
        for &m in &self.shape.groups[g] {
            if m == self.me {
                continue;
            }
            let x: PodVec<T> = self.get(c, m, 0);
            if x.0.len() != acc.len() {
                self.mismatch(c, m, x.0.len(), acc.len());
            }
            op.fold(&mut acc, &x.0, false);
        }
        Some(acc)
    }

    /// Recursive doubling over `ranks` (team indices); this member is `ranks[pos]`.
    fn rd_allreduce<T: Plain, O: Op<T>>(
        &self,
        c: &Call,
        ranks: &[usize],
        pos: usize,
        acc: &mut [T],
        op: &O,
    ) {
        let n = ranks.len();
        let p = prev_pow2(n);
        let rem = n - p;
        let receive = |from: usize, step: u16, acc: &mut [T], x_first: bool| {
            let len = acc.len();
            self.get_slice(c, from, step, len, |at, x: PodVec<T>| {
                op.fold(&mut acc[at..at + x.0.len()], &x.0, x_first);
            });
        };
        let newpos = if pos < 2 * rem {
            if pos % 2 == 0 {
                self.put_slice(c, ranks[pos + 1], 2, acc);
                None
            } else {
                receive(ranks[pos - 1], 2, acc, true);
                Some(pos / 2)
            }
        } else {
            Some(pos - rem)
        };
        if let Some(np) = newpos {
            let real = |q: usize| if q < rem { 2 * q + 1 } else { q + rem };
            let mut d = 1;
            let mut round = 0u16;
            let all = 0..acc.len();
            while d < p {
                let partner = ranks[real(np ^ d)];
                let x_first = np ^ d < np;
                self.swap(
                    c,
                    partner,
                    partner,
                    3 + round,
                    acc,
                    all.clone(),
                    all.clone(),
                    |dst, x| op.fold(dst, x, x_first),
                );
                d <<= 1;
                round += 1;
            }
        }
        if pos < 2 * rem {
            if pos % 2 == 0 {
                let len = acc.len();
                self.get_slice(c, ranks[pos + 1], 100, len, |at, x: PodVec<T>| {
                    acc[at..at + x.0.len()].copy_from_slice(&x.0);
                });
            } else {
                self.put_slice(c, ranks[pos - 1], 100, acc);
            }
        }
    }

    /// The ring allreduce over `ranks`; this member is `ranks[pos]`; `acc.len() >= n`.
    fn ring_allreduce<T: Plain, O: Op<T>>(
        &self,
        c: &Call,
        ranks: &[usize],
        pos: usize,
        acc: &mut [T],
        op: &O,
    ) {
        let n = ranks.len();
        let len = acc.len();
        let seg = |i: usize| (i * len / n)..((i + 1) * len / n);
        let right = ranks[(pos + 1) % n];
        let left = ranks[(pos + n - 1) % n];
        for s in 0..n - 1 {
            let send_i = (pos + n - s) % n;
            let recv_i = (pos + 2 * n - s - 1) % n;
            self.swap(
                c,
                right,
                left,
                101,
                acc,
                seg(send_i),
                seg(recv_i),
                |dst, x| op.fold(dst, x, false),
            );
        }
        for s in 0..n - 1 {
            let send_i = (pos + 1 + n - s) % n;
            let recv_i = (pos + n - s) % n;
            self.swap(
                c,
                right,
                left,
                102,
                acc,
                seg(send_i),
                seg(recv_i),
                |dst, x| dst.copy_from_slice(x),
            );
        }
    }

    /// Inclusive prefix: member i's `recv` = `send₀ ⊕ send₁ ⊕ … ⊕ sendᵢ` (member order).
    ///
    /// # Errors
    /// [`Error::Length`] if `recv.len() != send.len()`.
    ///
    /// # Panics
    /// If members' lengths differ.
    pub fn scan<T: Plain, O: Op<T>>(&self, send: &[T], recv: &mut [T], op: O) -> Result<(), Error> {
        self.prefix(Kind::Scan, send, recv, op).map(|_| ())
    }

    /// Exclusive prefix: member i's `recv` = `send₀ ⊕ … ⊕ sendᵢ₋₁`; member 0's `recv` is not
    /// touched. Returns whether `recv` was written (false on member 0).
    ///
    /// # Errors
    /// [`Error::Length`] if `recv.len() != send.len()`.
    ///
    /// # Panics
    /// If members' lengths differ.
    pub fn exscan<T: Plain, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) -> Result<bool, Error> {
        self.prefix(Kind::Exscan, send, recv, op)
    }

    fn prefix<T: Plain, O: Op<T>>(
        &self,
        kind: Kind,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) -> Result<bool, Error> {
        assert_sized::<T>();
        if recv.len() != send.len() {
            return Err(Error::Length {
                op: kind.name(),
                buffer: "recv",
                got: recv.len(),
                want: send.len(),
                why: "recv holds the prefix, as long as send",
            });
        }
        let c = self.begin(kind);
        let (n, i) = (self.size(), self.me);
        let mut partial = send.to_vec();
        let mut excl: Option<Vec<T>> = None;
        let mut d = 1;
        let mut round = 0u16;
        while d < n {
            if i + d < n {
                self.put(&c, i + d, round, PodVec(partial.clone()));
            }
            if i >= d {
                let x: PodVec<T> = self.get(&c, i - d, round);
                if x.0.len() != partial.len() {
                    self.mismatch(&c, i - d, x.0.len(), partial.len());
                }
                op.fold(&mut partial, &x.0, true);
                match &mut excl {
                    None => excl = Some(x.0),
                    Some(e) => op.fold(e, &x.0, true),
                }
            }
            d <<= 1;
            round += 1;
        }
        match kind {
            Kind::Scan => {
                recv.copy_from_slice(&partial);
                Ok(true)
            }
            _ => match excl {
                Some(e) => {
                    recv.copy_from_slice(&e);
                    Ok(true)
                }
                None => Ok(false),
            },
        }
    }
}
