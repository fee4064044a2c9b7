//! All-to-all exchanges: `alltoall` (every member sends a part of one length to every member)
//! and `alltoallv` (parts of any lengths).
//!
//! Hierarchical: each member hands its whole send buffer to its group's leader by pointer; the
//! leader cuts it into one bundle per destination group (its members' parts for that group's
//! members) and the leaders run a *pairwise exchange* (as in Thakur, Rabenseifner & Gropp 2005,
//! §4.4: in step s leader i sends to i + s and receives from i − s, G − 1 steps, one message
//! per pair of groups, each at most once in flight per sender); each leader then hands all
//! bundles that arrived to its group by pointer, and every member copies its parts out once.
//! The bundling is what makes small parts cheap across ranks: with L workers per rank a pair of
//! ranks exchanges one message instead of L².
//!
//! When every member is alone in its rank and the ranks share a host, `alltoall` goes over the
//! host board instead (see `board`: every member writes its parts, a slice of each step per
//! destination, and reads its own from every other).
//!
//! Bruck's logarithmic all-to-all (which forwards parts through ⌈log₂ G⌉ rounds) is not
//! implemented: with the bundling above the number of messages per leader is already G − 1,
//! and it only pays for tiny parts across many ranks.

use std::sync::Arc;

use crate::call::{Call, Kind};
use crate::gather::check_counts;
use crate::pod::{Parts, Plain, PodVec, assert_sized};
use crate::{Error, Team};

/// Parts from one group to another: entry `src_slot × |dst| + dst_slot`.
type Bundle<T> = Vec<PodVec<T>>;

impl Team {
    /// Member i's `send` holds `size()` parts of `k = send.len() / size()` elements, part j for
    /// member j; afterwards member j's `recv` holds, in member order, the parts for it
    /// (`recv[i·k..(i+1)·k]` from member i).
    ///
    /// # Errors
    /// [`Error::Length`] if `send.len()` is not a multiple of `size()` or `recv.len()` differs
    /// from `send.len()`.
    ///
    /// # Panics
    /// If members' part lengths differ.
    pub fn alltoall<T: Plain>(&self, send: &[T], recv: &mut [T]) -> Result<(), Error> {
        assert_sized::<T>();
        let n = self.size();
        if send.len() % n != 0 {
            return Err(Error::Length {
                op: "alltoall",
                buffer: "send",
                got: send.len(),
                want: send.len().div_ceil(n).max(1) * n,
                why: "one part of equal length per member: a multiple of size()",
            });
        }
        if recv.len() != send.len() {
            return Err(Error::Length {
                op: "alltoall",
                buffer: "recv",
                got: recv.len(),
                want: send.len(),
                why: "recv holds a part from every member, as long as send",
            });
        }
        let k = send.len() / n;
        let c = self.begin(Kind::Alltoall);
        if let Some(hb) = self.board_for::<T>().filter(|_| self.singletons()) {
            if self.board_alltoall(hb, &c, send, recv, k) {
                return Ok(());
            }
        }
        let counts = vec![k; n];
        let (inbound, mine) = self.exchange(&c, send, &counts);
        let shape = &self.shape;
        for i in 0..n {
            let p = part(&inbound, shape, i, mine);
            if p.len() != k {
                self.mismatch(&c, i, p.len(), k);
            }
            recv[i * k..(i + 1) * k].copy_from_slice(p);
        }
        Ok(())
    }

    /// Member i sends `send[offset_j..offset_j + counts[j]]` to member j (parts in member order);
    /// returns the parts this member received, in member order.
    ///
    /// # Errors
    /// [`Error::Length`] if `counts` does not have one entry per member or does not sum to
    /// `send.len()` (a sum beyond `usize::MAX` included).
    pub fn alltoallv<T: Plain>(&self, send: &[T], counts: &[usize]) -> Result<Parts<T>, Error> {
        assert_sized::<T>();
        check_counts("alltoallv", send, counts, self.size())?;
        let c = self.begin(Kind::Alltoallv);
        let (inbound, mine) = self.exchange(&c, send, counts);
        Ok(Parts::concat(
            (0..self.size()).map(|i| part(&inbound, &self.shape, i, mine)),
        ))
    }

    /// The exchange protocol; returns the bundles that reached this member's group (indexed by
    /// source group) and this member's slot in its group.
    fn exchange<T: Plain>(
        &self,
        c: &Call,
        send: &[T],
        counts: &[usize],
    ) -> (Arc<Vec<Bundle<T>>>, usize) {
        let shape = &self.shape;
        let g = shape.group_of[self.me] as usize;
        let group = &shape.groups[g];
        let leader = group[0];
        let slot = shape.slot_of[self.me] as usize;
        if self.me != leader {
            let msg: (PodVec<T>, Vec<usize>) = (PodVec(send.to_vec()), counts.to_vec());
            self.put(c, leader, 0, msg);
            return (self.get(c, leader, 1), slot);
        }
        // Every group member's send buffer and offsets, in group order.
        let mut bufs: Vec<(PodVec<T>, Vec<usize>)> = Vec::with_capacity(group.len());
        for &m in group {
            let (b, cnt) = if m == self.me {
                (PodVec(send.to_vec()), counts.to_vec())
            } else {
                self.get::<(PodVec<T>, Vec<usize>)>(c, m, 0)
            };
            if cnt.len() != self.size() || cnt.iter().sum::<usize>() != b.0.len() {
                self.mismatch(c, m, cnt.len(), self.size());
            }
            let mut offs = Vec::with_capacity(cnt.len() + 1);
            offs.push(0);
            let mut at = 0;
            for x in cnt {
                at += x;
                offs.push(at);
            }
            bufs.push((b, offs));
        }
        let bundle_for = |h: usize| -> Bundle<T> {
            let dst = &shape.groups[h];
            let mut out = Vec::with_capacity(bufs.len() * dst.len());
            for (b, offs) in &bufs {
                for &j in dst {
                    out.push(PodVec(b.0[offs[j]..offs[j + 1]].to_vec()));
                }
            }
            out
        };
        let n = shape.groups.len();
        let mut inbound: Vec<Bundle<T>> = (0..n).map(|_| Vec::new()).collect();
        inbound[g] = bundle_for(g);
        for s in 1..n {
            let to = (g + s) % n;
            let from = (g + n - s) % n;
            self.put(c, shape.groups[to][0], 2, bundle_for(to));
            let b: Bundle<T> = self.get(c, shape.groups[from][0], 2);
            let want = shape.groups[from].len() * group.len();
            if b.len() != want {
                self.mismatch(c, shape.groups[from][0], b.len(), want);
            }
            inbound[from] = b;
        }
        let all = Arc::new(inbound);
        for &m in &group[1..] {
            self.put(c, m, 1, all.clone());
        }
        (all, slot)
    }
}

/// The part from member `i` to the member in slot `mine` of its group, in `inbound`.
fn part<'a, T>(
    inbound: &'a [Bundle<T>],
    shape: &crate::team::Shape,
    i: usize,
    mine: usize,
) -> &'a [T] {
    let b = &inbound[shape.group_of[i] as usize];
    let width = b.len() / shape.groups[shape.group_of[i] as usize].len().max(1);
    &b[shape.slot_of[i] as usize * width + mine].0
}
