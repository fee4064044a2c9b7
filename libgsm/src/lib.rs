//! Gossamer runtime (`gossamer`): worker threads that run fibers, and *trusts*, through which any
//! fiber delegates closures to the worker (the *trustee*) that owns a value (a *property*).
//!
//! ```
//! use gossamer::{entrust, spawn, Config};
//!
//! let total = gossamer::run(Config::default().workers(2), || {
//!     let counter = gossamer::entrust_on(gossamer::WorkerId::new(1), || 0u64);
//!     let fibers: Vec<_> = (0..4)
//!         .map(|_| {
//!             let c = counter.clone();
//!             spawn(move || {
//!                 for _ in 0..100 {
//!                     c.apply(|n| *n += 1);
//!                 }
//!             })
//!         })
//!         .collect();
//!     for f in fibers {
//!         f.join();
//!     }
//!     let local = entrust(String::from("owned here"));
//!     let len = local.apply_with(String::from("!"), |s, tail| {
//!         s.push_str(&tail);
//!         s.len()
//!     });
//!     assert_eq!(len, 11);
//!     counter.apply(|n| *n)
//! })
//! .unwrap();
//! assert_eq!(total, 400);
//! ```
//!
//! # Model
//!
//! [`run`] starts `Config::workers` threads; each runs a fiber scheduler and a poller. Your main
//! runs as a fiber on worker 0 ([`spmd`] runs a body on every worker). [`entrust`] places a value
//! on the current worker and returns a [`Trust`]; [`Trust::apply`] runs a closure on that value
//! on its trustee and suspends only the calling fiber until the answer is back;
//! [`Trust::apply_then`] returns at once and runs a callback on the calling worker later (a
//! worker keeps at most 16 384 of them unanswered; past that the issuing fiber waits).
//! [`Trust::apply_with`] and [`Trust::apply_with_then`] also move an owned argument (a `Vec` of
//! updates, say) to the trustee. On the trustee itself the closure runs inline; to another worker
//! it travels as bytes through a request ring (one per ordered pair of workers), batched with
//! other requests to the same trustee, and the answer comes back batched in a response ring. A
//! worker shares its time between the requests it serves and its own fibers one for one: after
//! serving k requests it lets its fibers run k inline applies (for a millisecond at most) before
//! it serves again, so neither a busy local loop nor a client that keeps its rings full starves
//! the other.
//!
//! # Many ranks
//!
//! Started by a launcher (`gsmrun -np N ./app`, or `mpirun`/`srun`), the program is one *rank*
//! of a job. The first [`run`]/[`spmd`] bootstraps the job over MPI (every rank's host, binary
//! identity and endpoints; a job key from rank 0; ranks running different builds refuse to start),
//! connects the fabrics (`shm` between ranks of one host, `tcp` between hosts; `GSM_FABRIC`
//! overrides), and then every worker of every rank is in one mesh: [`WorkerId`]s number the
//! workers rank by rank ([`rank`], [`rank_count`], [`rank_of`], [`workers_of_rank`]), and every
//! operation above works between ranks with the same types. [`run`]'s main runs once per rank;
//! `run` returns on every rank when the whole job is quiet, and a failure anywhere (a panic that
//! no `join` takes, a [`fail_job`], a vanished peer, a batch that breaks the wire protocol) ends
//! the run with an error naming the rank. So does a deadlock: when every worker of every rank
//! is idle with nothing in flight while fibers still wait (for a message whose send never comes,
//! a fiber that waits in turn, a collective a member never called), nothing can wake them, and
//! after a second the run fails with [`Error::Deadlock`], naming what they wait for. A fiber
//! waiting for a condition that no message announces (a word on the [`host_board`]) waits in
//! [`wait_for`], which counts as waiting too; one that waits by yielding in a loop keeps its
//! worker busy, and is not seen. MPI is not on the data path: it serves set-up
//! (`runtime/start.rs`, [`fabric`]) and termination (`runtime/quiesce.rs`, whose protocols are in
//! `runtime/README.md`). Without a launcher, the program is a job of one rank and MPI is never
//! initialised.
//!
//! Closures that travel capture only plain data ([`NoRef`]: `Copy + Send + 'static`); owned
//! data goes as the argument of [`Trust::apply_with`] and results are [`Wire`] values.
//!
//! ```compile_fail
//! // A borrowed capture cannot travel.
//! gossamer::run(gossamer::Config::default(), || {
//!     let t = gossamer::entrust(0u64);
//!     let x = 5u64;
//!     let r = &x;
//!     t.apply(|p| *p += *r);
//! });
//! ```
//! ```compile_fail,E0277
//! // Nor can an owned `String` ...
//! gossamer::run(gossamer::Config::default(), || {
//!     let t = gossamer::entrust(0usize);
//!     let s = String::from("x");
//!     t.apply(move |p| *p += s.len());
//! });
//! ```
//! ```compile_fail,E0277
//! // ... a `Vec<T>` ...
//! gossamer::run(gossamer::Config::default(), || {
//!     let t = gossamer::entrust(0u32);
//!     let v = vec![1u32, 2];
//!     t.apply(move |p| *p += v[0]);
//! });
//! ```
//! ```compile_fail,E0277
//! // ... or a `Box<T>`: pass them with `apply_with` instead.
//! gossamer::run(gossamer::Config::default(), || {
//!     let t = gossamer::entrust(0u32);
//!     let b = Box::new(3u32);
//!     t.apply(move |p| *p += *b);
//! });
//! ```
//! ```compile_fail,E0080
//! // A capture larger than 65 535 bytes is refused when the program is built: pass large data
//! // as the argument of `apply_with` instead.
//! gossamer::run(gossamer::Config::default(), || {
//!     let t = gossamer::entrust(0u8);
//!     let big = [1u8; 70_000];
//!     t.apply(move |p| *p += big[69_999]);
//! });
//! ```
//! ```
//! // Plain `Copy` captures are fine.
//! gossamer::run(gossamer::Config::default().workers(1), || {
//!     let t = gossamer::entrust(0u32);
//!     let k = 3u32;
//!     t.apply(move |p| *p += k);
//!     assert_eq!(t.apply(|p| *p), 3);
//! }).unwrap();
//! ```
//!
//! # Segments and streams
//!
//! Delegation moves code to data; two modules move data without running the caller's code on the
//! other side. [`segment`]: memory a rank exports with rights (read, write, atomic), or allocates
//! symmetrically with other ranks, that any rank reads, writes and updates atomically at
//! offsets, checked against the owner's header (bounds, rights, generation); `put_notify` adds
//! a notification the owner reads after the data. [`stream`]: bytes from a writer
//! (`std::io::Write`) on one worker to a reader (`std::io::Read + BufRead`) on another, through
//! a ring in the reader's memory with credit flow control. Within a host both work on shared
//! memory; between hosts they ride the fabric as requests to a runtime handler on the owner's or
//! reader's worker.
//!
//! # Rules for code in fibers
//!
//! - **No thread-blocking calls** (`std::sync::Mutex::lock` under contention, blocking I/O,
//!   `thread::sleep`, channel `recv`): they stop the whole worker, its other fibers and every
//!   request it serves. Use delegation (`apply`) or `join` to wait, and [`sleep`] to pause;
//!   they suspend only the fiber. For sockets, register a non-blocking one with
//!   [`reactor::Registered`] and wait on it (the worker polls it and sleeps in `epoll_wait`); to
//!   wait for an `apply_then` callback of the same worker, use [`Notify`].
//! - **No thread-locals across a yield**: every blocking gossamer call may let other fibers of the
//!   worker run in between, and they share the thread's locals.
//! - **Yield in long loops** ([`yield_now`]) so that the worker keeps serving its trustees.
//!   To wait for a condition that no message announces (a word another rank writes on the
//!   [`host_board`]), use [`wait_for`] rather than a loop of yields: the worker tests the
//!   condition between its other work, and the wait counts as one for the deadlock report.
//! - **Delegated closures and `apply_then` callbacks must not block** (no `apply`, `join`,
//!   `yield_now` inside them): they run in the trustee's poller; such a call panics at once.
//!   `apply_then`, `entrust`, `Trust::clone` and dropping trusts work there.
//! - A fiber stack is `Config::stack_size` bytes (default 256 KiB) with a guard page below it: an
//!   overflow crashes the process with SIGSEGV instead of corrupting memory, after a line naming
//!   the worker and the stack size. Delegated closures and `apply_then` callbacks run on the
//!   stack of whatever fiber was running when the worker served them (it serves when a fiber
//!   yields or applies inline), or on the worker thread's own stack when it was idle (that stack
//!   is the fiber stack size plus 64 KiB, at least 2 MiB): what they put on the stack must fit in
//!   what a fiber leaves free, so keep large data on the heap there. Raising the stack size
//!   raises both. Debug builds put far more on the stack than release builds (a closure that
//!   captures 32 KiB can overflow the default stack there); test deep code in release mode or
//!   raise the size for debug runs.
//! - **At most about 32 700 live fibers per process** on a default Linux kernel, whatever their
//!   stack size: each stack is two memory mappings (the stack and its guard page) and the kernel
//!   allows `vm.max_map_count` (65 530) per process. Spawning past that fails with a message that
//!   says so; keep fewer fibers alive (start more as earlier ones finish), or raise the limit.
//!
//! # Memory
//!
//! Every ordered pair of workers in the job has a request ring and a response ring of
//! `128 + slots_per_ring × (slot_size + 64)` bytes (66 688 bytes with the defaults, 16 slots of
//! 4 KiB). A worker consumes `2 × (W − 1)` rings, W being the workers in the job, so a rank of L
//! workers holds about `2 × L × W` rings: on the heap for its own workers' pairs, in its shared
//! segment for workers of `shm` peers, and on the heap for `tcp` peers (where the sender also
//! keeps a same-sized shadow ring of each outgoing ring, doubling that share). With the defaults
//! and 16 workers per rank: 2 ranks (W = 32) ≈ 68 MB per rank; 64 ranks (W = 1024) ≈ 2.2 GB per
//! rank; 1024 ranks (W = 16 384) ≈ 35 GB per rank. Jobs that large need smaller rings
//! (`GSM_SLOT_SIZE`, `Config::slots_per_ring`): memory scales linearly with both.
//!
//! # Logging
//!
//! The runtime logs through `tracing`, off by default. Set `GSM_LOG` (or `RUST_LOG`) to a filter,
//! `GSM_LOG=debug` say, and the first [`run`]/[`spmd`] of the process writes to standard error:
//! the bootstrap's stages and their times, the fabric chosen for each peer rank and why,
//! connections made and lost, the rings' sizes, the workers started and how the job ended
//! (targets `gossamer::bootstrap`, `::fabric`, `::ring`, `::worker`, `::quiesce`). A subscriber
//! the program installed itself is kept. Nothing is logged per request. Ranks inherit `GSM_LOG`
//! from `gsmrun`, so `GSM_LOG=debug gsmrun …` shows every rank's.
//!
//! # Trust boundary
//!
//! A peer process is admitted by the job key and must run the same build (the bootstrap checks
//! both). From then on a trustee still checks what it serves for it: a request from another
//! process runs only code that is exactly one of this program's delegation entries (a table read
//! from the binary's own symbol table, so a binary stripped of its symbols refuses to start as
//! more than one rank), and its arguments and results are taken only from their `postcard`
//! encodings, never as the bytes of their type. Anything else ends the job with a report naming
//! the peer. See `libgsm/TRUST_BOUNDARY.md` for the checks, their tests, and what a peer holding
//! the key can still do.

mod batches;
mod board;
pub mod bootstrap;
mod bridge;
mod config;
mod error;
pub mod fabric;
mod fiber;
mod future;
mod mail;
mod noref;
mod notify;
mod output;
mod property;
pub mod reactor;
mod runtime;
mod scope;
pub mod segment;
mod spawn;
pub mod stream;
mod sys;
mod trust;
pub mod wire;
mod worker;

pub use batches::{Batches, entrust_all};
pub use board::{BOARD_BYTES, Board, BoardRegion};
pub use bridge::Bridge;
pub use config::{Config, available_cpus, default_workers};
pub use error::{BLOCKING_IN_DELEGATED, DelegationError, Error};
pub use future::{JoinAll, Promise, WhenAll, block_on, join_all, when_all};
pub use mail::{flush, mail_pending, name_tags, recv, recv_async, send, try_recv};
pub use noref::{NoRef, Wire};
pub use notify::Notify;
pub use output::eprint_line;
pub use runtime::{fail_job, run, spmd};
pub use scope::{finish, finish_all, finish_all_min};
pub use spawn::{
    JoinHandle, Worker, WorkerId, current_worker, host_board, host_of_rank, in_run_main,
    live_properties_here, oversubscribed, rank, rank_count, rank_of, sleep, spawn, spawn_async,
    spawn_on, spawn_on_with, wait_for, worker_count, workers_of_rank, yield_now,
};
pub use trust::{Trust, entrust, entrust_on};
