//! Non-blocking collectives (MPI's `MPI_Ibarrier`, `MPI_Iallreduce` and friends): each call
//! returns a [`gossamer::Promise`] at once, and several may be outstanding on one team. Each
//! takes the team's next sequence number, as a blocking call does, and runs on a team of its own
//! (the same members, an id drawn from that number, as [`Team::dup`] makes one) in a fiber of its
//! own on this worker: so collectives outstanding at once never share tags, complete in any
//! order, and the calling fiber computes meanwhile. Every member must issue the same
//! collectives on the team in the same order, blocking and non-blocking alike.
//!
//! These teams take the message path, never the host board: a board channel, once claimed by a
//! team id, stays claimed for the run, and one id per call would use them all up. Buffers move
//! into the call and come back in the promise. This module runs no algorithm of its own.

use gossamer::{Promise, spawn_async};

use crate::call::{Kind, chain};
use crate::{Error, Op, Plain, Team, Tuning};

impl Team {
    /// The team of one non-blocking collective: collective without communication, like
    /// [`dup`](Team::dup).
    fn detached(&self) -> Team {
        let c = self.begin(Kind::Split);
        let id = chain(chain(self.id, c.seq), 0xa5_c011);
        let tuning = Tuning {
            board: false,
            ..self.tuning()
        };
        Team::build(id, self.members.clone(), self.me, tuning)
    }

    /// [`barrier`](Team::barrier) without waiting: the promise is ready once every member has
    /// called it.
    #[doc(alias = "ibarrier")]
    pub fn barrier_async(&self) -> Promise<()> {
        let team = self.detached();
        spawn_async(move || team.barrier())
    }

    /// [`broadcast`](Team::broadcast) without waiting: `buf` moves in, and comes back holding
    /// the root's data.
    #[doc(alias = "ibcast")]
    pub fn broadcast_async<T: Plain>(
        &self,
        mut buf: Vec<T>,
        root: usize,
    ) -> Promise<Result<Vec<T>, Error>> {
        let team = self.detached();
        spawn_async(move || team.broadcast(&mut buf, root).map(|()| buf))
    }

    /// [`reduce`](Team::reduce) without waiting: the promise holds the result at the root and an
    /// empty vector elsewhere.
    #[doc(alias = "ireduce")]
    pub fn reduce_async<T: Plain, O: Op<T> + 'static>(
        &self,
        send: Vec<T>,
        op: O,
        root: usize,
    ) -> Promise<Result<Vec<T>, Error>> {
        let team = self.detached();
        let at_root = self.me == root;
        spawn_async(move || {
            let mut recv = if at_root {
                vec![T::zeroed(); send.len()]
            } else {
                Vec::new()
            };
            team.reduce(&send, &mut recv, op, root).map(|()| recv)
        })
    }

    /// [`allreduce`](Team::allreduce) without waiting: the promise holds the result on every
    /// member.
    ///
    /// ```
    /// use gsm_collectives::{Team, op::Sum};
    ///
    /// let out = gossamer::spmd(gossamer::Config::default().workers(2), |w| {
    ///     let team = Team::world();
    ///     let a = team.allreduce_async(vec![w.id() as u64 + 1], Sum);
    ///     let b = team.allreduce_async(vec![10u64], Sum);
    ///     // Both are under way: wait for the second first.
    ///     let b = b.wait().unwrap();
    ///     let a = a.wait().unwrap();
    ///     (a[0], b[0])
    /// })
    /// .unwrap();
    /// assert_eq!(out, vec![(3, 20), (3, 20)]);
    /// ```
    #[doc(alias = "iallreduce")]
    pub fn allreduce_async<T: Plain, O: Op<T> + 'static>(
        &self,
        send: Vec<T>,
        op: O,
    ) -> Promise<Result<Vec<T>, Error>> {
        let team = self.detached();
        spawn_async(move || {
            let mut buf = send;
            team.allreduce_in_place(&mut buf, op);
            Ok(buf)
        })
    }

    /// [`allgather`](Team::allgather) without waiting: every member's `send` in member order.
    #[doc(alias = "iallgather")]
    pub fn allgather_async<T: Plain>(&self, send: Vec<T>) -> Promise<Result<Vec<T>, Error>> {
        let team = self.detached();
        let n = self.size();
        spawn_async(move || {
            let mut recv = vec![T::zeroed(); send.len() * n];
            team.allgather(&send, &mut recv).map(|()| recv)
        })
    }
}
