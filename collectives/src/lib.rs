//! Collective operations for teams of Gossamer workers (`gsm-collectives`): barrier, broadcast,
//! reduce, allreduce, gather(v), scatter(v), allgather(v), alltoall(v), scan and exscan over
//! slices of plain data, and broadcast/gather/allgather/scatter/alltoall/allreduce of any
//! serialisable value.
//!
//! ```
//! use gsm_collectives::{Team, op::{Max, Sum}};
//!
//! let out = gossamer::spmd(gossamer::Config::default().workers(3), |w| {
//!     let world = Team::world();
//!     let me = world.index() as u64;
//!     let mut total = [0u64; 2];
//!     world.allreduce(&[me, 1], &mut total, Sum).unwrap();
//!     let mut top = [0u64];
//!     world.reduce(&[me * 10], &mut top, Max, 0).unwrap();
//!     let names = world.allgather_value(format!("worker {}", w.id()));
//!     (total, names.len())
//! })
//! .unwrap();
//! assert_eq!(out, vec![([3, 3], 3); 3]);
//! ```
//!
//! # Model
//!
//! A [`Team`] is an ordered set of workers, of one rank or of many; [`Team::world`] is every
//! worker of the job (for `gossamer::spmd` bodies, which run on every worker), [`Team::ranks`]
//! the first worker of each rank (for `gossamer::run`'s main, which runs once per rank), and
//! [`Team::split`] (by colour and key, like `MPI_Comm_split`),
//! [`Team::split_by_rank`] and [`Team::split_by_host`] make smaller ones. Every member calls the
//! same collectives in the same order; a call suspends the calling fiber (never its worker,
//! which keeps serving its trustees and other fibers) until this member's part is done. Members
//! are addressed by their team index (roots too).
//!
//! Everything is built on the runtime, not on MPI. Ranks of one host meet on the **host board**
//! (`gossamer::host_board`, shared memory in their segments; see the `board` module): a leader
//! writes a cache line and up to 64 KiB per step and the others read it, and from 32 KiB on
//! broadcast and allreduce copy straight between the leaders' buffers. Everything else goes by
//! the runtime's tagged one-way messages (`gossamer::send` / `gossamer::recv`): between workers
//! of one rank a message moves by pointer, so the algorithms are **hierarchical**: the workers
//! of a rank meet at a leader, the leaders run the algorithm across ranks (on the board or by
//! messages), and the leaders hand results back by pointer (shared `Arc`s; a member copies its
//! result out once). Plain data ([`Plain`]: `bytemuck::Pod`) crosses ranks as
//! its bytes (one `memcpy` each way); the reductions and the broadcast send long vectors to
//! another rank in pieces of [`Tuning::piece`] bytes (256 KiB), each combined or forwarded as it
//! arrives. The bundles of the gathers and the all-to-all go whole (the runtime streams them).
//!
//! The algorithms and their sources are described in each module: dissemination barrier
//! (`barrier`), binomial tree and pipelined chain broadcast (`broadcast`), binomial reduce,
//! recursive doubling and ring (reduce-scatter + allgather) allreduce, Hillis–Steele scans
//! (`reduce`), Bruck allgather and direct gather/scatter (`gather`), pairwise exchange
//! all-to-all (`alltoall`), and the steps and single copies on the host board (`board`). The
//! switch points are fields of [`Tuning`], with `GSM_COLL_*`
//! environment overrides; the module docs of `tuning` say how they were measured.
//!
//! # Errors
//!
//! Mistakes a member can see in its own arguments (a root that is no member, a receive buffer
//! of the wrong length, counts that do not add up) are returned as [`Error`] before anything is
//! sent. Disagreements between members (different lengths where equal ones are needed, a member
//! in another collective, another element type) end the job on every rank with a message naming
//! the team, the operation and both workers (`gossamer::fail_job`, then a panic: even in a
//! spawned fiber whose joiner would take the panic with `try_join` and carry on, the job ends,
//! since the other members would otherwise wait for ever); in debug builds every message carries
//! a check of operation, sequence number and type, so a member calling a different collective
//! is reported rather than left waiting.
//!
//! Element types of no size have no bytes to count by, and are refused when the call is
//! compiled:
//!
//! ```compile_fail,E0080
//! gossamer::spmd(gossamer::Config::default().workers(2), |_| {
//!     let team = gsm_collectives::Team::world();
//!     let mut nothing = [(); 3];
//!     team.broadcast(&mut nothing, 0).unwrap();
//! })
//! .unwrap();
//! ```
//!
//! # Limits
//!
//! - One fiber per worker at a time per team value ([`Team::dup`] makes an independent one).
//! - Message tags with the top bit set are this crate's (see the `call` module).
//! - `reduce`/`allreduce` assume a commutative operator; `scan`/`exscan` do not.
//! - Nothing times out, but a member that never calls leaves the others' fibers waiting for
//!   messages that never come, and once every worker of the job is idle the runtime ends the job
//!   as deadlocked (`gossamer::Error::Deadlock`, naming the messages waited for, and for this
//!   crate's messages the operation, its root, team and call, when the call began among the
//!   waiting worker's last 32). On the host board members wait in `gossamer::wait_for`, which the
//!   runtime sees in the same way (the report counts them as fibers waiting in `wait_for`).
//! - Members passing different roots are reported on the board (every rooted operation, every
//!   build) and in a broadcast between ranks (before the algorithm). Between ranks, the other
//!   rooted operations (reduce, gather, scatter and their variants) may leave both members
//!   waiting for each other instead, as may roots that put different members at the head of a
//!   rank's group (the root leads its own group): then the job ends as deadlocked, as for a
//!   member that never calls. One case is neither reported nor deadlocked: between ranks, two
//!   members of one rank that disagree on the root, each taking itself (or a rank's first
//!   member) for its group's leader, wait for nothing from each other, so the operation
//!   completes with different results on different members (MPI leaves this erroneous program
//!   undefined too); the runtime then warns, at the end of the run, of the messages the
//!   members sent and nobody received.
//! - In debug builds, a member in a collective that sends no length agreement (a gather, say)
//!   while its neighbouring leader is in a broadcast or allreduce between ranks leaves that
//!   leader waiting for the agreement instead of being reported by the debug check.
//! - Leaders whose tuning differs (`GSM_COLL_*` set differently per rank) are reported where the
//!   difference makes them choose different algorithms in a broadcast or allreduce between ranks;
//!   elsewhere (the size of pieces, say) it goes unchecked.
//! - Gathers, scatters and all-to-alls send each bundle whole and without a rendezvous: a
//!   program that runs many large ones back to back lets senders run ahead of receivers
//!   (broadcast and reduce wait for an acknowledgement from 64 KiB on).

mod alltoall;
mod barrier;
mod board;
mod broadcast;
mod call;
mod channel;
mod error;
mod gather;
mod nonblocking;
pub mod op;
mod pod;
mod reduce;
mod split;
mod team;
mod tuning;
mod value;

pub use error::Error;
pub use op::Op;
pub use pod::{Parts, Plain};
pub use team::Team;
pub use tuning::{Tuning, TuningError};
