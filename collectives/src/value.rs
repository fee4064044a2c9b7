//! Collectives on values of any serialisable type (`gossamer::Wire`: `String`s, `Vec`s of
//! structs, maps…): `broadcast_value`, `gather_value`, `allgather_value`, `scatter_values`,
//! `alltoall_values`, `allreduce_value`.
//!
//! A value moves by pointer to a worker of the same rank and is serialised (`postcard`) for
//! another rank. These run over all members without the rank hierarchy, with the same
//! algorithms as their plain-data counterparts where it matters: binomial tree (broadcast),
//! Bruck (allgather), pairwise exchange (alltoall), binomial reduction then broadcast
//! (allreduce); gather and scatter talk to the root directly. Use the plain-data operations for
//! numbers: they are faster (no per-element serialisation, hierarchy).
//!
//! This module does not check that members pass "the same shape" of value: values are free.

use gossamer::Wire;

use crate::call::{Call, Kind};
use crate::{Error, Team};

impl Team {
    /// The root's value on every member (`value` is read at the root only, where it must be
    /// `Some`).
    ///
    /// # Errors
    /// [`Error::BadRoot`]; [`Error::MissingRootValue`] at a root passing `None`.
    pub fn broadcast_value<V: Wire + Clone>(
        &self,
        value: Option<V>,
        root: usize,
    ) -> Result<V, Error> {
        self.check_root("broadcast_value", root)?;
        if self.me == root && value.is_none() {
            return Err(Error::MissingRootValue {
                op: "broadcast_value",
                root,
            });
        }
        let c = self.begin(Kind::BroadcastValue).rooted(root);
        Ok(self.bcast_value_in(&c, value, root, 0))
    }

    fn bcast_value_in<V: Wire + Clone>(
        &self,
        c: &Call,
        value: Option<V>,
        root: usize,
        step: u16,
    ) -> V {
        let n = self.size();
        let v = (self.me + n - root) % n;
        let real = |v: usize| (v + root) % n;
        let mut mask = 1;
        let value = if v == 0 {
            while mask < n {
                mask <<= 1;
            }
            value.expect("the root passes a value")
        } else {
            while v & mask == 0 {
                mask <<= 1;
            }
            self.get(c, real(v - mask), step)
        };
        mask >>= 1;
        while mask > 0 {
            if v + mask < n {
                self.put(c, real(v + mask), step, value.clone());
            }
            mask >>= 1;
        }
        value
    }

    /// Every member's value at the root, in member order (`None` elsewhere).
    ///
    /// # Errors
    /// [`Error::BadRoot`].
    pub fn gather_value<V: Wire>(&self, value: V, root: usize) -> Result<Option<Vec<V>>, Error> {
        self.check_root("gather_value", root)?;
        let c = self.begin(Kind::GatherValue).rooted(root);
        if self.me != root {
            self.put(&c, root, 0, value);
            return Ok(None);
        }
        let mut mine = Some(value);
        Ok(Some(
            (0..self.size())
                .map(|i| {
                    if i == self.me {
                        mine.take().expect("taken once")
                    } else {
                        self.get(&c, i, 0)
                    }
                })
                .collect(),
        ))
    }

    /// Every member's value on every member, in member order.
    pub fn allgather_value<V: Wire + Clone>(&self, value: V) -> Vec<V> {
        let c = self.begin(Kind::AllgatherValue);
        self.allgather_value_in(&c, value)
    }

    /// Bruck's allgather over all members (see `gather.rs`).
    pub(crate) fn allgather_value_in<V: Wire + Clone>(&self, c: &Call, value: V) -> Vec<V> {
        let n = self.size();
        let me = self.me;
        let mut have = Vec::with_capacity(n);
        have.push(value);
        let mut d = 1;
        let mut round = 0u16;
        while d < n {
            let cnt = d.min(n - d);
            self.put(c, (me + n - d) % n, round, have[..cnt].to_vec());
            let from = (me + d) % n;
            let got: Vec<V> = self.get(c, from, round);
            if got.len() != cnt {
                self.mismatch(c, from, got.len(), cnt);
            }
            have.extend(got);
            d <<= 1;
            round += 1;
        }
        // have[j] is member (me + j) % n's value.
        have.rotate_right(me);
        have
    }

    /// The root's `values` (one per member, in member order; read at the root only) scattered:
    /// member i gets `values[i]`.
    ///
    /// # Errors
    /// [`Error::BadRoot`]; [`Error::MissingRootValue`] at a root passing `None`;
    /// [`Error::Length`] at a root passing another number of values than members.
    pub fn scatter_values<V: Wire>(&self, values: Option<Vec<V>>, root: usize) -> Result<V, Error> {
        self.check_root("scatter_values", root)?;
        if self.me == root {
            match &values {
                None => {
                    return Err(Error::MissingRootValue {
                        op: "scatter_values",
                        root,
                    });
                }
                Some(v) if v.len() != self.size() => {
                    return Err(Error::Length {
                        op: "scatter_values",
                        buffer: "values",
                        got: v.len(),
                        want: self.size(),
                        why: "one value per member",
                    });
                }
                Some(_) => {}
            }
        }
        let c = self.begin(Kind::ScatterValues).rooted(root);
        if self.me != root {
            return Ok(self.get(&c, root, 0));
        }
        let mut mine = None;
        for (i, v) in values.into_iter().flatten().enumerate() {
            if i == self.me {
                mine = Some(v);
            } else {
                self.put(&c, i, 0, v);
            }
        }
        Ok(mine.expect("the root keeps its own value"))
    }

    /// Member i's `values[j]` goes to member j; returns the values this member received, in
    /// member order.
    ///
    /// # Errors
    /// [`Error::Length`] if `values` does not have one entry per member.
    pub fn alltoall_values<V: Wire>(&self, values: Vec<V>) -> Result<Vec<V>, Error> {
        let n = self.size();
        if values.len() != n {
            return Err(Error::Length {
                op: "alltoall_values",
                buffer: "values",
                got: values.len(),
                want: n,
                why: "one value per member",
            });
        }
        let c = self.begin(Kind::AlltoallValues);
        let me = self.me;
        let mut out: Vec<Option<V>> = (0..n).map(|_| None).collect();
        let mut values: Vec<Option<V>> = values.into_iter().map(Some).collect();
        out[me] = values[me].take();
        for s in 1..n {
            let to = (me + s) % n;
            let from = (me + n - s) % n;
            self.put(&c, to, 0, values[to].take().expect("sent once"));
            out[from] = Some(self.get(&c, from, 0));
        }
        Ok(out
            .into_iter()
            .map(|v| v.expect("one value from every member"))
            .collect())
    }

    /// Every member's value combined with `f` (associative and commutative), on every member.
    pub fn allreduce_value<V: Wire + Clone>(&self, value: V, f: impl Fn(V, V) -> V) -> V {
        let c = self.begin(Kind::AllreduceValue);
        let n = self.size();
        let me = self.me;
        let mut acc = Some(value);
        let mut mask = 1;
        while mask < n {
            if me & mask != 0 {
                self.put(&c, me - mask, 0, acc.take().expect("sent once"));
                break;
            }
            if me + mask < n {
                let x: V = self.get(&c, me + mask, 0);
                acc = acc.map(|a| f(a, x));
            }
            mask <<= 1;
        }
        self.bcast_value_in(&c, acc, 0, 1)
    }
}
