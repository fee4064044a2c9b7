//! Teams: who takes part in a collective, how they are grouped by rank, and the messages
//! between members.
//!
//! A [`Team`] is an ordered list of workers (members are numbered 0..size by their *team
//! index*), an id, and this member's sequence number. Every collective takes the next sequence
//! number, which with the team's id makes the tags of its messages (see `call`).
//!
//! For the hierarchical algorithms a team knows its *groups*: the members of each rank, in team
//! order, and the groups in the order of their first member. The first member of a group leads
//! it (the root leads its own group in rooted operations).
//!
//! Before the leaders of an allreduce or a broadcast choose their algorithm across ranks by
//! their own length, each sends the next leader one small message with its operation, length,
//! element type and root, in every build, and compares the previous leader's before its first
//! receive (`Team::agree`): leaders on either side of a switch point would otherwise wait for
//! each other for ever. It costs one small message per leader, which `gsm-bench collectives`
//! shows on shm with the board off; the host board (the default on one host) has no such
//! message: its headers carry the same fields.
//!
//! In debug builds every message is preceded by a small check message (operation, sequence
//! number, payload type, root), so a member that called another collective than its peers (or
//! passed another root) is reported by name instead of receiving bytes it cannot read.
//!
//! This module does not implement the operations themselves (see the other modules), nor make
//! teams out of a team (`split`).

use std::cell::Cell;
use std::sync::Arc;

use gossamer::{Wire, WorkerId};

use crate::call::{Call, Kind, RANKS, WORLD, describe_tag, hash_str};
use crate::channel::HostBoard;
use crate::pod::{Plain, PodVec};
use crate::tuning::Tuning;

/// The debug-build check that precedes every message.
#[cfg(debug_assertions)]
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Check {
    kind: u8,
    seq: u64,
    ty: u64,
    root: u64,
}

/// What the leaders of a collective on the message path tell a neighbour before they choose an
/// algorithm by their own buffer's length (see [`Team::agree`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Agree {
    kind: u8,
    /// Elements.
    len: u64,
    /// Element type (hash of its name).
    ty: u64,
    /// The root's team index, `u64::MAX` for none.
    root: u64,
    /// The algorithm this leader chose for that length with its tuning (an index the operation
    /// defines): leaders whose `GSM_COLL_*` tuning differs may choose differently for equal
    /// lengths, and would wait for each other as for unequal ones.
    alg: u8,
}

/// The step of the leaders' [`Agree`] message (no algorithm uses it).
const AGREE_STEP: u16 = u16::MAX;

/// How a team's members are grouped by rank.
#[derive(Debug)]
pub(crate) struct Shape {
    /// Per member: its group.
    pub(crate) group_of: Vec<u32>,
    /// Per member: its position in its group.
    pub(crate) slot_of: Vec<u32>,
    /// Per group: its members' team indices, in team order.
    pub(crate) groups: Vec<Vec<usize>>,
    /// Per member: its rank.
    pub(crate) rank_of: Vec<u32>,
}

impl Shape {
    fn new(ranks: &[usize], hierarchical: bool) -> Shape {
        let n = ranks.len();
        let mut group_of = vec![0u32; n];
        let mut slot_of = vec![0u32; n];
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut rank_group: std::collections::HashMap<usize, usize> = Default::default();
        for (i, &r) in ranks.iter().enumerate() {
            let g = if hierarchical {
                *rank_group.entry(r).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                })
            } else {
                groups.push(Vec::new());
                groups.len() - 1
            };
            group_of[i] = g as u32;
            slot_of[i] = groups[g].len() as u32;
            groups[g].push(i);
        }
        Shape {
            group_of,
            slot_of,
            groups,
            rank_of: ranks.iter().map(|&r| r as u32).collect(),
        }
    }

    /// The leader of group `g`: `root` if it belongs to `g`, else the group's first member.
    /// The rank of each group, in group order.
    pub(crate) fn group_ranks(&self) -> Vec<usize> {
        self.groups
            .iter()
            .map(|g| self.rank_of[g[0]] as usize)
            .collect()
    }

    pub(crate) fn leader(&self, g: usize, root: Option<usize>) -> usize {
        match root {
            Some(r) if self.group_of[r] as usize == g => r,
            _ => self.groups[g][0],
        }
    }
}

/// An ordered set of workers that run collectives together.
///
/// Every member holds its own `Team` value (made by [`Team::world`] or by splitting another
/// team, on every member) and calls the same collectives on it in the same order; a call blocks
/// the calling fiber (not its worker) until this member's part is done. **One fiber per worker
/// at a time** may use a team value: two fibers of one worker calling collectives on the same
/// team concurrently would draw interleaved sequence numbers. Use [`Team::dup`] to give a
/// second fiber a team of its own; collectives of different teams may run at the same time.
///
/// ```
/// use gsm_collectives::{Team, op::Sum};
///
/// let sums = gossamer::spmd(gossamer::Config::default().workers(3), |w| {
///     let team = Team::world();
///     let mut total = [0u64];
///     team.allreduce(&[w.id() as u64 + 1], &mut total, Sum).unwrap();
///     total[0]
/// })
/// .unwrap();
/// assert_eq!(sums, vec![6, 6, 6]);
/// ```
#[derive(Debug)]
pub struct Team {
    pub(crate) id: u64,
    pub(crate) members: Arc<[WorkerId]>,
    pub(crate) me: usize,
    seq: Cell<u64>,
    tuning: Tuning,
    pub(crate) shape: Arc<Shape>,
    /// The leaders' channel on the host board, if the team qualifies (`crate::board`).
    pub(crate) board: Option<HostBoard>,
    /// The [`Agree`] this leader sent in the current collective and the member whose one it has
    /// still to receive (see [`Team::agree`]).
    agreeing: Cell<Option<(usize, Agree, &'static str)>>,
}

impl Team {
    /// Every worker of every rank, in worker-id order (team index = worker id), with the tuning
    /// of the `GSM_COLL_*` environment variables.
    ///
    /// Call it on every worker (for example at the start of a `gossamer::spmd` body): every
    /// member must take part in each collective. From `gossamer::run`'s main, which runs on one
    /// worker per rank, use [`Team::ranks`]. It communicates with no one. Every world team has
    /// the same id: create it once per worker and use [`Team::dup`] for a second, independent
    /// one.
    ///
    /// # Panics
    /// Outside a gossamer worker, and in `gossamer::run`'s main itself at any number of workers
    /// (the message says to use [`Team::ranks`] there, or `spmd`): with one worker per rank it
    /// would work, and with two it would wait for workers that never call, so it is refused
    /// alike everywhere. A malformed `GSM_COLL_*` variable ends the job with a message naming it
    /// ([`gossamer::fail_job`]); check [`Tuning::from_env`] before the run to report it your own
    /// way.
    #[track_caller]
    pub fn world() -> Team {
        assert!(
            !gossamer::in_run_main(),
            "gsm-collectives: Team::world was called in gossamer::run's main, which runs on one \
             worker per rank while the others only serve: a collective over every worker would \
             wait for them for ever. Use Team::ranks() there (one member per rank), or call \
             Team::world in a gossamer::spmd body (or in a fiber spawned on every worker)"
        );
        let me = gossamer::current_worker().index();
        let members: Arc<[WorkerId]> = (0..gossamer::worker_count()).map(WorkerId::new).collect();
        Team::build(WORLD, members, me, Tuning::cached())
    }

    /// One member per rank: each rank's first worker, in rank order (team index = rank), with
    /// the tuning of the `GSM_COLL_*` environment variables.
    ///
    /// This is the team of a program whose main runs once per rank: `gossamer::run` runs its
    /// main on the rank's first worker, and the other workers serve but call nothing, so a
    /// collective over [`Team::world`] from there would wait for them for ever (the run ends
    /// as deadlocked). Call it on each rank's first worker; it communicates with no one. Every
    /// team of ranks has the same id: create it once per rank and use [`Team::dup`] for a
    /// second, independent one.
    ///
    /// # Panics
    /// Outside a gossamer worker, or on a worker that is not its rank's first (the panic names
    /// the worker to call it on). A malformed `GSM_COLL_*` variable ends the job, as for
    /// [`Team::world`].
    pub fn ranks() -> Team {
        let here = gossamer::current_worker();
        let rank = gossamer::rank();
        let first = gossamer::workers_of_rank(rank).start;
        assert!(
            here.index() == first,
            "gsm-collectives: Team::ranks was called on worker {} of rank {rank}; its members \
             are each rank's first worker (here worker {first}, where gossamer::run's main runs): \
             call it there, or use Team::world in a gossamer::spmd body",
            here.index()
        );
        let members: Arc<[WorkerId]> = (0..gossamer::rank_count())
            .map(|r| WorkerId::new(gossamer::workers_of_rank(r).start))
            .collect();
        Team::build(RANKS, members, rank, Tuning::cached())
    }

    /// The team of `members` (this member at index `me`) under `id`, with its groups by rank and
    /// its host-board channel; every constructor (`world`, `ranks`, `split`'s) ends here.
    pub(crate) fn build(id: u64, members: Arc<[WorkerId]>, me: usize, tuning: Tuning) -> Team {
        gossamer::name_tags(describe_tag);
        let ranks: Vec<usize> = members.iter().map(|&w| gossamer::rank_of(w)).collect();
        let shape = Arc::new(Shape::new(&ranks, tuning.hierarchical));
        let board = tuning
            .board
            .then(|| HostBoard::for_team(id, &shape.group_ranks(), shape.group_of[me] as usize))
            .flatten();
        Team {
            id,
            members,
            me,
            seq: Cell::new(0),
            tuning,
            shape,
            board,
            agreeing: Cell::new(None),
        }
    }

    /// The same team with other switch points (local: every member must pass the same tuning).
    pub fn with_tuning(self, tuning: Tuning) -> Team {
        let hier_changed = tuning.hierarchical != self.tuning.hierarchical;
        let mut t = self;
        t.tuning = tuning;
        if hier_changed {
            let ranks: Vec<usize> = t.members.iter().map(|&w| gossamer::rank_of(w)).collect();
            t.shape = Arc::new(Shape::new(&ranks, tuning.hierarchical));
        }
        t.board = tuning
            .board
            .then(|| {
                HostBoard::for_team(
                    t.id,
                    &t.shape.group_ranks(),
                    t.shape.group_of[t.me] as usize,
                )
            })
            .flatten();
        t
    }

    /// The tuning this team uses.
    pub fn tuning(&self) -> Tuning {
        self.tuning
    }

    /// The team's id (equal on every member).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// This member's team index.
    pub fn index(&self) -> usize {
        self.me
    }

    /// The worker of team index `i`.
    ///
    /// # Panics
    /// If `i >= self.size()`.
    pub fn member(&self, i: usize) -> WorkerId {
        self.members[i]
    }

    /// Every member's worker, in team order.
    pub fn members(&self) -> &[WorkerId] {
        &self.members
    }

    /// Whether the leaders of this team's ranks meet on the host board (shared memory) rather
    /// than by messages: every member's rank is on one host, reached over `shm`, the tuning
    /// allows it and a board channel was free (see the crate docs). The same on every member.
    pub fn on_host_board(&self) -> bool {
        self.board.is_some()
    }

    /// The number of collectives this member has started on this team.
    pub fn sequence(&self) -> u64 {
        self.seq.get()
    }

    /// Whether every group is one member (then group index = team index).
    pub(crate) fn singletons(&self) -> bool {
        self.shape.groups.len() == self.size()
    }

    /// Starts a collective: takes the next sequence number.
    pub(crate) fn begin(&self, kind: Kind) -> Call {
        let seq = self.seq.get();
        self.seq.set(seq + 1);
        Call::begin(self.id, self.size(), seq, kind)
    }

    /// Checks a root argument.
    pub(crate) fn check_root(&self, op: &'static str, root: usize) -> Result<(), crate::Error> {
        if root < self.size() {
            Ok(())
        } else {
            Err(crate::Error::BadRoot {
                op,
                root,
                size: self.size(),
            })
        }
    }

    /// Sends `body` to member `to` under `step` of collective `c`.
    pub(crate) fn put<P: Wire>(&self, c: &Call, to: usize, step: u16, body: P) {
        let w = self.members[to];
        #[cfg(debug_assertions)]
        gossamer::send(
            w,
            c.tag(step),
            Check {
                kind: c.kind as u8,
                seq: c.seq,
                ty: hash_str(std::any::type_name::<P>()),
                root: c.root_word(),
            },
        );
        gossamer::send(w, c.tag(step), body);
    }

    /// Tells member `to` (the next leader of a ring or chain of leaders), if any, what this
    /// leader passes to collective `c`: its operation, `len` elements of `T` and `c`'s root; the
    /// same from member `from` (the previous one), if any, is received and compared before this
    /// member's next receive ([`get`](Team::get)) or at [`agreed`](Team::agreed), whichever
    /// comes first.
    ///
    /// Leaders choose their algorithm across ranks by the length of their own buffer (recursive
    /// doubling or ring allreduce, binomial tree or chain broadcast): leaders passing lengths on
    /// either side of a switch point would each wait for a message the other never sends, where
    /// the documented report of unequal lengths is due. If every leader's word equals its
    /// neighbour's, all are equal. The comparison comes before the first receive of either
    /// algorithm, so a mismatch is reported however the algorithms differ, while the message
    /// travels beside the algorithm's first one instead of taking a round of its own.
    ///
    /// An allreduce closes the ring (every leader waits for all anyway). A broadcast runs a chain
    /// from its root, which receives nothing: closed into a ring, the root of a small broadcast,
    /// which used to send and return, waited for the last leader to enter the broadcast (a
    /// program whose root then sends to a rank that receives before its broadcast deadlocked).
    pub(crate) fn agree<T>(
        &self,
        c: &Call,
        (to, from): (Option<usize>, Option<usize>),
        len: usize,
        alg: u8,
    ) {
        let mine = Agree {
            kind: c.kind as u8,
            len: len as u64,
            ty: hash_str(std::any::type_name::<T>()),
            root: c.root_word(),
            alg,
        };
        if let Some(to) = to {
            gossamer::send(self.members[to], c.tag(AGREE_STEP), mine);
        }
        self.agreeing
            .set(from.map(|from| (from, mine, std::any::type_name::<T>())));
    }

    /// Receives and compares the word [`agree`](Team::agree) expects, if it has not yet: a
    /// leader that receives nothing in its algorithm (a broadcast's root) calls this at the end.
    pub(crate) fn agreed(&self, c: &Call) {
        let Some((from, mine, ty_name)) = self.agreeing.take() else {
            return;
        };
        let theirs: Agree = gossamer::recv(self.members[from], c.tag(AGREE_STEP));
        if theirs.kind != mine.kind {
            self.out_of_step(c, from, theirs.kind, c.seq);
        }
        if theirs.ty != mine.ty {
            self.other_type(c, from, ty_name);
        }
        if theirs.root != mine.root {
            self.other_root(c, from, theirs.root, mine.root);
        }
        if theirs.len != mine.len {
            self.mismatch(c, from, theirs.len as usize, mine.len as usize);
        }
        if theirs.alg != mine.alg {
            self.disagreement(
                c,
                from,
                format_args!("chose algorithm {} for {} elements", theirs.alg, mine.len),
                format_args!("chose {}", mine.alg),
                "the members' tuning differs (GSM_COLL_* or Team::with_tuning must be the same \
                 on every rank)",
            );
        }
    }

    /// Receives member `from`'s message under `step` of collective `c`.
    pub(crate) fn get<P: Wire>(&self, c: &Call, from: usize, step: u16) -> P {
        self.agreed(c);
        let w = self.members[from];
        #[cfg(debug_assertions)]
        {
            let k: Check = gossamer::recv(w, c.tag(step));
            if k.kind != c.kind as u8 || k.seq != c.seq {
                self.out_of_step(c, from, k.kind, k.seq);
            }
            if k.ty != hash_str(std::any::type_name::<P>()) {
                self.other_type(c, from, std::any::type_name::<P>());
            }
            if k.root != c.root_word() {
                self.other_root(c, from, k.root, c.root_word());
            }
        }
        gossamer::recv(w, c.tag(step))
    }

    /// Ends the job because member `from` is in collective `kind` #`seq` while this one is in
    /// `c`. Through `gossamer::fail_job`, not `panic!`, as every report of a disagreement
    /// between members: a panic in a spawned fiber goes to its `JoinHandle`, and a joiner that
    /// carries on would leave the other members waiting for ever.
    pub(crate) fn out_of_step(&self, c: &Call, from: usize, kind: u8, seq: u64) -> ! {
        gossamer::fail_job(format!(
            "gsm-collectives: team {:#x}: member {from} ({}) is in {} (collective #{seq} of the \
             team) while member {} ({}) is in {} (collective #{}): every member must call the \
             same collectives in the same order",
            self.id,
            self.members[from],
            Kind::from_u8(kind),
            self.me,
            self.members[self.me],
            c.kind.name(),
            c.seq
        ));
    }

    /// Ends the job because member `from` sent another element type than `expected`.
    pub(crate) fn other_type(&self, c: &Call, from: usize, expected: &str) -> ! {
        self.disagreement(
            c,
            from,
            "sent another element type",
            format_args!("expects {expected}"),
            "every member must use the same element type",
        )
    }

    /// Ends the job because member `from` passed root `theirs` where this member passes `mine`
    /// (team indices as [`Call::root_word`] gives them).
    pub(crate) fn other_root(&self, c: &Call, from: usize, theirs: u64, mine: u64) -> ! {
        let root = |r: u64| {
            if r == u64::MAX {
                "none".to_string()
            } else {
                r.to_string()
            }
        };
        self.disagreement(
            c,
            from,
            format_args!("passed root {}", root(theirs)),
            format_args!("passes root {}", root(mine)),
            "every member must pass the same root",
        )
    }

    /// Sends `data` to member `to` as pieces `(total length, part)`: one piece within a rank
    /// (it moves by pointer), pieces of at most [`Tuning::piece`] bytes to another rank (the
    /// runtime moves a few pieces of 256 KiB several times faster than one large record).
    pub(crate) fn put_slice<T: Plain>(&self, c: &Call, to: usize, step: u16, data: &[T]) {
        let total = data.len() as u64;
        if data.is_empty() {
            self.put(c, to, step, (total, PodVec::<T>(Vec::new())));
            return;
        }
        let per = if self.shape.rank_of[to] == self.shape.rank_of[self.me] {
            data.len()
        } else {
            (self.tuning.piece / size_of::<T>()).max(1)
        };
        for part in data.chunks(per) {
            self.put(c, to, step, (total, PodVec(part.to_vec())));
        }
    }

    /// Receives what [`put_slice`](Team::put_slice) sent: calls `each(offset, piece)` for every
    /// piece in order.
    ///
    /// # Panics
    /// If the sender's length is not `want` (the message names both members).
    pub(crate) fn get_slice<T: Plain>(
        &self,
        c: &Call,
        from: usize,
        step: u16,
        want: usize,
        mut each: impl FnMut(usize, PodVec<T>),
    ) {
        let mut at = 0;
        loop {
            let (total, piece): (u64, PodVec<T>) = self.get(c, from, step);
            let n = piece.0.len();
            if total as usize != want || at + n > want || (n == 0 && want > 0) {
                self.mismatch(c, from, total as usize, want);
            }
            each(at, piece);
            at += n;
            if at >= want {
                return;
            }
        }
    }

    /// Sends `buf[send]` to member `to` and receives member `from`'s part of `buf[recv]` from
    /// it at the same time, alternating piece by piece (`put_slice`'s pieces), so that neither
    /// side has more than one piece in flight ahead of the other: `apply(dest, piece)` gets each
    /// received piece with the part of `buf[recv]` it covers. A piece is copied out before any
    /// later piece is applied, so `send` and `recv` may be the same range (recursive doubling).
    ///
    /// # Panics
    /// If `from`'s length is not `recv.len()`.
    #[allow(clippy::too_many_arguments, reason = "one exchange, spelt out")]
    pub(crate) fn swap<T: Plain>(
        &self,
        c: &Call,
        to: usize,
        from: usize,
        step: u16,
        buf: &mut [T],
        send: std::ops::Range<usize>,
        recv: std::ops::Range<usize>,
        mut apply: impl FnMut(&mut [T], &[T]),
    ) {
        let total = send.len() as u64;
        let per = if self.shape.rank_of[to] == self.shape.rank_of[self.me] {
            send.len().max(1)
        } else {
            (self.tuning.piece / size_of::<T>()).max(1)
        };
        let want = recv.len();
        let mut sent = 0;
        let mut got = 0;
        let mut first_send = true;
        let mut first_recv = true;
        while sent < send.len() || first_send || got < want || first_recv {
            if sent < send.len() || first_send {
                let end = (sent + per).min(send.len());
                let part = buf[send.start + sent..send.start + end].to_vec();
                self.put(c, to, step, (total, PodVec(part)));
                sent = end;
                first_send = false;
            }
            if got < want || first_recv {
                let (their, piece): (u64, PodVec<T>) = self.get(c, from, step);
                let n = piece.0.len();
                if their as usize != want || got + n > want || (n == 0 && want > 0) {
                    self.mismatch(c, from, their as usize, want);
                }
                apply(&mut buf[recv.start + got..recv.start + got + n], &piece.0);
                got += n;
                first_recv = false;
            }
        }
    }

    /// Ends the job because member `from` contributed `got` elements where this member expects
    /// `want`.
    #[track_caller]
    pub(crate) fn mismatch(&self, c: &Call, from: usize, got: usize, want: usize) -> ! {
        self.disagreement(
            c,
            from,
            format_args!("passed {got} elements"),
            format_args!("expects {want}"),
            "the buffers of this collective must have equal lengths on every member",
        )
    }

    /// Ends the job for a disagreement in `c`: "member `from` `theirs` where member (this one)
    /// `mine`: `rule`", both members named with their workers.
    #[track_caller]
    fn disagreement(
        &self,
        c: &Call,
        from: usize,
        theirs: impl std::fmt::Display,
        mine: impl std::fmt::Display,
        rule: &str,
    ) -> ! {
        gossamer::fail_job(format!(
            "gsm-collectives: team {:#x}, {} #{}: member {from} ({}) {theirs} where member {} \
             ({}) {mine}: {rule}",
            self.id,
            c.kind.name(),
            c.seq,
            self.members[from],
            self.me,
            self.members[self.me]
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_group_members_by_rank_in_team_order() {
        let s = Shape::new(&[1, 0, 1, 2, 0], true);
        assert_eq!(s.groups, vec![vec![0, 2], vec![1, 4], vec![3]]);
        assert_eq!(s.group_of, vec![0, 1, 0, 2, 1]);
        assert_eq!(s.slot_of, vec![0, 0, 1, 0, 1]);
        assert_eq!(s.leader(1, None), 1);
        assert_eq!(s.leader(1, Some(4)), 4);
        assert_eq!(s.leader(0, Some(4)), 0);
        let flat = Shape::new(&[0, 0, 0], false);
        assert_eq!(flat.groups, vec![vec![0], vec![1], vec![2]]);
    }
}
