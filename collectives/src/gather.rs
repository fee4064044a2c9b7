//! Gathers and scatters: `gather(v)` (everyone's part to the root), `scatter(v)` (the root's
//! parts to everyone), `allgather(v)` (everyone's part to everyone).
//!
//! Hierarchical: a group's parts travel between a member and its leader by pointer; across
//! groups a leader sends its whole group's parts in one message (a *bundle*).
//! - `gather`/`scatter`: the root exchanges one bundle with each other group's leader directly
//!   (G − 1 messages at the root; the root's own group goes by pointer). A binomial tree would
//!   take ⌈log₂ G⌉ rounds instead, which pays for small parts across many ranks; not done here.
//! - `allgather`: the leaders run *Bruck's algorithm* (Bruck, Ho, Kipnis, Upfal & Weathersby,
//!   "Efficient algorithms for all-to-all communications in multiport message-passing systems",
//!   IEEE TPDS 1997): in round k each leader sends the bundles it has (up to 2^k) to the leader
//!   2^k before it and receives as many from the one 2^k after it, ⌈log₂ G⌉ rounds for any G
//!   and every bundle sent G − 1 times in all (as with a ring). Bundles are shared `Arc`s, so
//!   forwarding within a rank copies nothing. Each leader then hands all bundles to its group
//!   by pointer and every member copies them into its result once.
//!
//! This module does not check `v` counts against anything but the data that arrives.

use std::sync::Arc;

use crate::call::{Call, Kind};
use crate::pod::{Parts, Plain, PodVec, assert_sized};
use crate::{Error, Team};

/// One group's parts, in group order.
type Bundle<T> = Vec<PodVec<T>>;

impl Team {
    /// Every member's `send` (all of one length), concatenated in member order in the root's
    /// `recv` (`size() × send.len()` elements; other members may pass an empty `recv`).
    ///
    /// # Errors
    /// [`Error::BadRoot`]; [`Error::Length`] if the root's `recv` has the wrong length.
    ///
    /// # Panics
    /// If members' `send` lengths differ.
    pub fn gather<T: Plain>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<(), Error> {
        assert_sized::<T>();
        self.check_root("gather", root)?;
        let k = send.len();
        if self.me == root && recv.len() != k * self.size() {
            return Err(Error::Length {
                op: "gather",
                buffer: "recv",
                got: recv.len(),
                want: k * self.size(),
                why: "the root's recv holds every member's send, size() × send.len()",
            });
        }
        let c = self.begin(Kind::Gather).rooted(root);
        if let Some(parts) = self.gather_parts(&c, send, root) {
            for (i, p) in parts.iter().enumerate() {
                if p.0.len() != k {
                    self.mismatch(&c, i, p.0.len(), k);
                }
                recv[i * k..(i + 1) * k].copy_from_slice(&p.0);
            }
        }
        Ok(())
    }

    /// Every member's `send` (any lengths) at the root, as [`Parts`] in member order; `None`
    /// on the other members.
    ///
    /// # Errors
    /// [`Error::BadRoot`].
    pub fn gatherv<T: Plain>(&self, send: &[T], root: usize) -> Result<Option<Parts<T>>, Error> {
        assert_sized::<T>();
        self.check_root("gatherv", root)?;
        let c = self.begin(Kind::Gatherv).rooted(root);
        Ok(self
            .gather_parts(&c, send, root)
            .map(|parts| Parts::concat(parts.iter().map(|p| &p.0[..]))))
    }

    /// The gather protocol: every member's part, by team index, at the root.
    fn gather_parts<T: Plain>(&self, c: &Call, send: &[T], root: usize) -> Option<Vec<PodVec<T>>> {
        let shape = &self.shape;
        let g = shape.group_of[self.me] as usize;
        let leader = shape.leader(g, Some(root));
        if self.me != leader {
            self.put(c, leader, 0, PodVec(send.to_vec()));
            return None;
        }
        // The group's parts in group order (own part included).
        let mut bundle: Bundle<T> = Vec::with_capacity(shape.groups[g].len());
        for &m in &shape.groups[g] {
            bundle.push(if m == self.me {
                PodVec(send.to_vec())
            } else {
                self.get(c, m, 0)
            });
        }
        if self.me != root {
            self.put(c, root, 1, bundle);
            return None;
        }
        let mut by_group: Vec<Option<Bundle<T>>> = (0..shape.groups.len()).map(|_| None).collect();
        by_group[g] = Some(bundle);
        for (h, slot) in by_group.iter_mut().enumerate() {
            if h != g {
                let b: Bundle<T> = self.get(c, shape.leader(h, Some(root)), 1);
                if b.len() != shape.groups[h].len() {
                    self.mismatch(c, shape.groups[h][0], b.len(), shape.groups[h].len());
                }
                *slot = Some(b);
            }
        }
        let mut by_group: Vec<std::vec::IntoIter<PodVec<T>>> = by_group
            .into_iter()
            .map(|b| b.unwrap_or_default().into_iter())
            .collect();
        // Members of a group appear in team order, so taking each group's next part in team
        // order puts every part in place.
        Some(
            (0..self.size())
                .map(|i| {
                    by_group[shape.group_of[i] as usize]
                        .next()
                        .expect("a bundle holds a part per member of its group")
                })
                .collect(),
        )
    }

    /// The root's `send` (`size() × recv.len()` elements) cut in member-order parts of
    /// `recv.len()`; member i receives part i in `recv`. Other members' `send` is not read.
    ///
    /// # Errors
    /// [`Error::BadRoot`]; [`Error::Length`] if the root's `send` has the wrong length.
    ///
    /// # Panics
    /// If a member's `recv` length differs from the root's.
    pub fn scatter<T: Plain>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<(), Error> {
        assert_sized::<T>();
        self.check_root("scatter", root)?;
        let k = recv.len();
        if self.me == root && send.len() != k * self.size() {
            return Err(Error::Length {
                op: "scatter",
                buffer: "send",
                got: send.len(),
                want: k * self.size(),
                why: "the root's send holds a part of recv.len() for every member",
            });
        }
        let c = self.begin(Kind::Scatter).rooted(root);
        let parts = (self.me == root).then(|| send.chunks(k.max(1)).take(self.size()));
        let parts = parts.map(|p| {
            if k == 0 {
                (0..self.size()).map(|_| PodVec(Vec::new())).collect()
            } else {
                p.map(|s| PodVec(s.to_vec())).collect()
            }
        });
        let mine = self.scatter_parts(&c, parts, root);
        if mine.0.len() != k {
            self.mismatch(&c, root, mine.0.len(), k);
        }
        recv.copy_from_slice(&mine.0);
        Ok(())
    }

    /// The root's `send` cut into parts of `counts` (one per member, summing to `send.len()`);
    /// returns this member's part. Only the root's `send` and `counts` are read.
    ///
    /// # Errors
    /// [`Error::BadRoot`]; [`Error::Length`] if, at the root, `counts` does not have one entry
    /// per member or does not sum to `send.len()` (a sum beyond `usize::MAX` included).
    pub fn scatterv<T: Plain>(
        &self,
        send: &[T],
        counts: &[usize],
        root: usize,
    ) -> Result<Vec<T>, Error> {
        assert_sized::<T>();
        self.check_root("scatterv", root)?;
        if self.me == root {
            check_counts("scatterv", send, counts, self.size())?;
        }
        let c = self.begin(Kind::Scatterv).rooted(root);
        let parts = (self.me == root).then(|| {
            let mut at = 0;
            counts
                .iter()
                .map(|&n| {
                    at += n;
                    PodVec(send[at - n..at].to_vec())
                })
                .collect()
        });
        Ok(self.scatter_parts(&c, parts, root).0)
    }

    /// The scatter protocol: `parts` (at the root, by team index) to their members.
    fn scatter_parts<T: Plain>(
        &self,
        c: &Call,
        parts: Option<Vec<PodVec<T>>>,
        root: usize,
    ) -> PodVec<T> {
        let shape = &self.shape;
        let g = shape.group_of[self.me] as usize;
        let leader = shape.leader(g, Some(root));
        if self.me != leader {
            return self.get(c, leader, 0);
        }
        let bundle: Bundle<T> = if self.me == root {
            let parts = parts.expect("the root passes its parts");
            let mut bundles: Vec<Bundle<T>> = shape.groups.iter().map(|_| Vec::new()).collect();
            for (i, p) in parts.into_iter().enumerate() {
                bundles[shape.group_of[i] as usize].push(p);
            }
            let mut own = Vec::new();
            for (h, b) in bundles.into_iter().enumerate() {
                if h == g {
                    own = b;
                } else {
                    self.put(c, shape.leader(h, Some(root)), 1, b);
                }
            }
            own
        } else {
            self.get(c, root, 1)
        };
        if bundle.len() != shape.groups[g].len() {
            self.mismatch(c, root, bundle.len(), shape.groups[g].len());
        }
        let mut mine = PodVec(Vec::new());
        for (p, &m) in bundle.into_iter().zip(&shape.groups[g]) {
            if m == self.me {
                mine = p;
            } else {
                self.put(c, m, 0, p);
            }
        }
        mine
    }

    /// Every member's `send` (all of one length) concatenated in member order, in every
    /// member's `recv` (`size() × send.len()` elements).
    ///
    /// # Errors
    /// [`Error::Length`] if `recv` has the wrong length.
    ///
    /// # Panics
    /// If members' `send` lengths differ.
    pub fn allgather<T: Plain>(&self, send: &[T], recv: &mut [T]) -> Result<(), Error> {
        assert_sized::<T>();
        let k = send.len();
        if recv.len() != k * self.size() {
            return Err(Error::Length {
                op: "allgather",
                buffer: "recv",
                got: recv.len(),
                want: k * self.size(),
                why: "recv holds every member's send, size() × send.len()",
            });
        }
        let c = self.begin(Kind::Allgather);
        if let Some(hb) = self.board_for::<T>().filter(|_| self.singletons()) {
            self.board_allgather(hb, &c, send, recv);
            return Ok(());
        }
        let (all, base) = self.allgather_bundles(&c, send);
        let shape = &self.shape;
        let n = shape.groups.len();
        for i in 0..self.size() {
            let b = &all[(shape.group_of[i] as usize + n - base) % n];
            let p = &b[shape.slot_of[i] as usize].0;
            if p.len() != k {
                self.mismatch(&c, i, p.len(), k);
            }
            recv[i * k..(i + 1) * k].copy_from_slice(p);
        }
        Ok(())
    }

    /// Every member's `send` (any lengths), as [`Parts`] in member order, on every member.
    pub fn allgatherv<T: Plain>(&self, send: &[T]) -> Parts<T> {
        assert_sized::<T>();
        let c = self.begin(Kind::Allgatherv);
        let (all, base) = self.allgather_bundles(&c, send);
        let shape = &self.shape;
        let n = shape.groups.len();
        let part = |i: usize| -> &[T] {
            let b = &all[(shape.group_of[i] as usize + n - base) % n];
            &b[shape.slot_of[i] as usize].0
        };
        Parts::concat((0..self.size()).map(part))
    }

    /// The allgather protocol: every group's bundle, starting with group `base` (the returned
    /// index): entry j is group `(base + j) % G`.
    fn allgather_bundles<T: Plain>(
        &self,
        c: &Call,
        send: &[T],
    ) -> (Arc<Vec<Arc<Bundle<T>>>>, usize) {
        let shape = &self.shape;
        let g = shape.group_of[self.me] as usize;
        let group = &shape.groups[g];
        let leader = group[0];
        if self.me != leader {
            self.put(c, leader, 0, PodVec(send.to_vec()));
            return (self.get(c, leader, 1), g);
        }
        let mut bundle: Bundle<T> = Vec::with_capacity(group.len());
        for &m in group {
            bundle.push(if m == self.me {
                PodVec(send.to_vec())
            } else {
                let p: PodVec<T> = self.get(c, m, 0);
                p
            });
        }
        let n = shape.groups.len();
        let mut have: Vec<Arc<Bundle<T>>> = Vec::with_capacity(n);
        have.push(Arc::new(bundle));
        let mut d = 1;
        let mut round = 0u16;
        while d < n {
            let cnt = d.min(n - d);
            let to = shape.groups[(g + n - d) % n][0];
            let from = shape.groups[(g + d) % n][0];
            self.put(c, to, 2 + round, have[..cnt].to_vec());
            let got: Vec<Arc<Bundle<T>>> = self.get(c, from, 2 + round);
            if got.len() != cnt {
                self.mismatch(c, from, got.len(), cnt);
            }
            have.extend(got);
            d <<= 1;
            round += 1;
        }
        for (j, b) in have.iter().enumerate() {
            let h = (g + j) % n;
            if b.len() != shape.groups[h].len() {
                self.mismatch(c, shape.groups[h][0], b.len(), shape.groups[h].len());
            }
        }
        let all = Arc::new(have);
        for &m in &group[1..] {
            self.put(c, m, 1, all.clone());
        }
        (all, g)
    }
}

/// Checks `v` counts: one per member, summing to the buffer's length.
pub(crate) fn check_counts<T>(
    op: &'static str,
    buf: &[T],
    counts: &[usize],
    size: usize,
) -> Result<(), Error> {
    if counts.len() != size {
        return Err(Error::Length {
            op,
            buffer: "counts",
            got: counts.len(),
            want: size,
            why: "one count per member",
        });
    }
    // Checked: counts that wrap around (`[usize::MAX, 2]` sums to 1 in release builds) would
    // pass and then cut the buffer out of range in the middle of the protocol.
    let Some(total) = counts.iter().try_fold(0usize, |a, &n| a.checked_add(n)) else {
        return Err(Error::Length {
            op,
            buffer: "send",
            got: buf.len(),
            want: usize::MAX,
            why: "the sum of counts, which overflows usize",
        });
    };
    if total != buf.len() {
        return Err(Error::Length {
            op,
            buffer: "send",
            got: buf.len(),
            want: total,
            why: "the sum of counts",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_whose_sum_overflows_are_a_length_error() {
        // [usize::MAX, 2] wraps to 1 = send.len() without the overflow check.
        let r = check_counts("alltoallv", &[0u8], &[usize::MAX, 2], 2);
        assert!(
            matches!(
                r,
                Err(Error::Length {
                    buffer: "send",
                    got: 1,
                    ..
                })
            ),
            "{r:?}"
        );
        assert_eq!(check_counts("alltoallv", &[0u8], &[1, 0], 2), Ok(()));
    }
}
