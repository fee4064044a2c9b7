//! `broadcast`: the root's buffer copied into every member's.
//!
//! Hierarchical: the root leads its own group; across the group leaders the data goes down a
//! *binomial tree* (the leader at distance v from the root's group receives from v − 2^⌊log₂ v⌋
//! and forwards to v + 2^j for the smaller j: ⌈log₂ G⌉ rounds), or, for at least
//! [`Tuning::bcast_pipeline_min`](crate::Tuning) bytes across at least 3 groups, along a
//! *pipelined chain* in chunks of `bcast_chunk` bytes (each leader forwards a chunk as soon as
//! it has it; time ≈ (G − 2 + chunks) × chunk time instead of log₂ G × whole message; see
//! e.g. Träff & Ripke, "Optimal broadcast for fully connected processor-node networks", 2008,
//! for the family). From [`Tuning::rendezvous_min`](crate::Tuning) bytes on, every leader
//! acknowledges the whole message to the one it came from, and a leader returns only when its
//! children have acknowledged: a root that ran ahead would flood the rings and the receivers'
//! mailboxes, which the runtime handles several times slower. Each leader then hands the data
//! to its group by pointer (one shared `Arc`), and every member copies it into its buffer once. Leaders of ranks on one host use the host
//! board instead of the tree or chain (see `board`: the root's leader writes the data in steps
//! of 64 KiB, double-buffered, and the others copy each step out). This module does not overlap the group
//! phase with the chain.

use std::sync::Arc;

use crate::call::{Call, Kind};
use crate::pod::{Plain, PodVec, assert_sized};
use crate::{Error, Team};

impl Team {
    /// Copies the root's `buf` into `buf` of every member. Every member's `buf` must have the
    /// root's length.
    ///
    /// # Errors
    /// [`Error::BadRoot`] if `root` is not a team index (nothing was sent).
    ///
    /// # Panics
    /// If this member's `buf` length differs from the root's (the message names both).
    pub fn broadcast<T: Plain>(&self, buf: &mut [T], root: usize) -> Result<(), Error> {
        assert_sized::<T>();
        self.check_root("broadcast", root)?;
        let c = self.begin(Kind::Broadcast).rooted(root);
        let shape = &self.shape;
        let g = shape.group_of[self.me] as usize;
        let leader = shape.leader(g, Some(root));
        if self.me != leader {
            let data: Arc<PodVec<T>> = self.get(&c, leader, 0);
            if data.0.len() != buf.len() {
                self.mismatch(&c, root, data.0.len(), buf.len());
            }
            buf.copy_from_slice(&data.0);
            return Ok(());
        }
        let n = shape.groups.len();
        let rg = shape.group_of[root] as usize;
        let v = (g + n - rg) % n;
        let member_at = |v: usize| shape.leader((v + rg) % n, Some(root));
        let bytes = std::mem::size_of_val(buf);
        let ack = bytes > 0 && bytes >= self.tuning().rendezvous_min;
        // The board only while the first member of each group leads it (see `board`).
        if let Some(hb) = self.board_for::<T>().filter(|_| shape.slot_of[root] == 0) {
            self.board_broadcast(hb, &c, buf, rg);
        } else if n > 1 {
            // Leaders that disagree on the length would choose different algorithms (`agree`):
            // a chain from the root, which waits for nobody.
            let next = (v + 1 < n).then(|| member_at(v + 1));
            let prev = (v > 0).then(|| member_at(v - 1));
            let chain = n >= 3 && bytes >= self.tuning().bcast_pipeline_min && bytes > 0;
            self.agree::<T>(&c, (next, prev), buf.len(), u8::from(chain));
            if chain {
                self.chain(&c, buf, v, n, &member_at, root, ack);
            } else {
                self.binomial(&c, buf, v, n, &member_at, ack);
            }
            self.agreed(&c);
        }
        if shape.groups[g].len() > 1 {
            let data = Arc::new(PodVec(buf.to_vec()));
            for &m in &shape.groups[g] {
                if m != self.me {
                    self.put(&c, m, 0, data.clone());
                }
            }
        }
        Ok(())
    }

    /// Binomial tree over the leaders (virtual index `v`, root at 0), pipelined by pieces: a
    /// leader forwards each piece to its children as soon as it has copied it into `buf`.
    fn binomial<T: Plain>(
        &self,
        c: &Call,
        buf: &mut [T],
        v: usize,
        n: usize,
        member_at: &dyn Fn(usize) -> usize,
        ack: bool,
    ) {
        let mut mask = 1;
        if v == 0 {
            while mask < n {
                mask <<= 1;
            }
        } else {
            while v & mask == 0 {
                mask <<= 1;
            }
        }
        let parent = mask;
        let mut children = Vec::new();
        mask >>= 1;
        while mask > 0 {
            if v + mask < n {
                children.push(member_at(v + mask));
            }
            mask >>= 1;
        }
        if v == 0 {
            for &ch in &children {
                self.put_slice(c, ch, 1, buf);
            }
        } else {
            let total = buf.len() as u64;
            let len = buf.len();
            self.get_slice(c, member_at(v - parent), 1, len, |at, x: PodVec<T>| {
                buf[at..at + x.0.len()].copy_from_slice(&x.0);
                if let Some((&last, rest)) = children.split_last() {
                    for &ch in rest {
                        self.put(c, ch, 1, (total, x.clone()));
                    }
                    self.put(c, last, 1, (total, x));
                }
            });
            if ack {
                self.put(c, member_at(v - parent), 3, ());
            }
        }
        if ack {
            for &ch in &children {
                self.get::<()>(c, ch, 3);
            }
        }
    }

    /// Pipelined chain over the leaders (virtual index `v`, root at 0).
    #[allow(clippy::too_many_arguments, reason = "the chain's place, spelt out")]
    fn chain<T: Plain>(
        &self,
        c: &Call,
        buf: &mut [T],
        v: usize,
        n: usize,
        member_at: &dyn Fn(usize) -> usize,
        root: usize,
        ack: bool,
    ) {
        let per = (self.tuning().bcast_chunk / size_of::<T>()).max(1);
        let next = (v + 1 < n).then(|| member_at(v + 1));
        let total = buf.len() as u64;
        if v == 0 {
            for chunk in buf.chunks(per) {
                if let Some(to) = next {
                    self.put(c, to, 2, (total, PodVec(chunk.to_vec())));
                }
            }
        } else {
            let prev = member_at(v - 1);
            let mut at = 0;
            while at < buf.len() {
                let (root_len, piece): (u64, PodVec<T>) = self.get(c, prev, 2);
                let end = at + piece.0.len();
                if root_len != total || end > buf.len() || piece.0.is_empty() {
                    self.mismatch(c, root, root_len as usize, buf.len());
                }
                buf[at..end].copy_from_slice(&piece.0);
                at = end;
                if let Some(to) = next {
                    self.put(c, to, 2, (root_len, piece));
                }
            }
            if ack {
                self.put(c, prev, 3, ());
            }
        }
        if let (true, Some(to)) = (ack, next) {
            self.get::<()>(c, to, 3);
        }
    }
}
