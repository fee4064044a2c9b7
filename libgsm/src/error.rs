//! The runtime's error types: [`Error`] for starting, running and joining, and
//! [`DelegationError`] for one delegated request. It does not decide policy (who panics and who
//! returns an error); the callers in `trust/` and `spawn.rs` do.

/// The message of a blocking call made where blocking is impossible.
pub const BLOCKING_IN_DELEGATED: &str = "gossamer: blocking call (apply/try_apply/apply_with/join/yield_now/entrust_on/recv, or a collective) inside a delegated closure, an apply_then callback, a wait_for condition or other code its poller runs (a destructor of a value it drops): a trustee runs these in its poller and cannot suspend there (it would stall every request it serves, or alias the property). Use apply_then (or spawn a fiber) instead";

/// An error of the runtime as a whole, or of a joined fiber.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot be used.
    #[error("invalid gossamer configuration: {0}")]
    Config(String),
    /// A setting (a `GSM_*` variable of the settings table) has a value it does not take.
    #[error("environment variable {name}={value:?} is invalid: {reason}")]
    Env {
        /// Variable name.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is expected.
        reason: String,
    },
    /// A worker thread or a fiber stack could not be created.
    #[error("could not start the gossamer runtime: {0}")]
    Start(String),
    /// The user's code panicked on a worker (the main fiber, an SPMD body, or a callback).
    #[error("panic on rank {rank}, worker {worker}: {message}")]
    Panicked {
        /// The rank on which the panic happened.
        rank: u32,
        /// The worker (global id) on which the panic happened.
        worker: usize,
        /// The panic message.
        message: String,
    },
    /// A joined fiber panicked.
    #[error("the joined fiber panicked: {0}")]
    FiberPanicked(String),
    /// A delegation failed.
    #[error(transparent)]
    Delegation(#[from] DelegationError),
    /// The runtime stopped before the awaited result arrived.
    #[error("the gossamer runtime stopped before the result arrived")]
    Stopped,
    /// The job could not be bootstrapped (MPI, binary identity, set-up exchange).
    #[error("gossamer could not bootstrap the job: {0}")]
    Bootstrap(String),
    /// A fabric failed: set-up, a vanished peer, a broken connection.
    #[error(transparent)]
    Fabric(#[from] crate::fabric::FabricError),
    /// A peer rank sent bytes that break the wire protocol.
    #[error(
        "rank {rank} (host {host}) sent a batch that breaks the gossamer wire protocol: {detail}"
    )]
    Protocol {
        /// The peer rank.
        rank: u32,
        /// Its host.
        host: String,
        /// What was wrong.
        detail: String,
    },
    /// A trust's reference count no longer holds: a handle registered or released an id on a
    /// property that is not alive. Some program misused the bytes of a serialised `Trust` (each
    /// copy of them read as a handle releases the same id), so the property could be freed while
    /// a handle still names it: the job ends instead. (When the same misuse instead leaves the
    /// property alive after its last handle, nothing is seen until the end of the run, which then
    /// says so on standard error.)
    #[error(
        "a trust's reference count broke on worker {worker} (rank {rank}): {detail}, from worker \
         {from} (rank {from_rank}); the bytes of a serialised Trust were deserialised more than \
         once, or bytes that are no serialised Trust of this job were read as one"
    )]
    TrustCount {
        /// The trustee (global worker id) whose property's count broke.
        worker: usize,
        /// Its rank.
        rank: u32,
        /// The worker that sent the registration or release.
        from: usize,
        /// Its rank.
        from_rank: u32,
        /// Which trust id and property.
        detail: String,
    },
    /// Every worker of every rank was idle, with nothing in flight between them, for a second
    /// while fibers still waited: nothing could ever wake them. `waits` says what this rank's
    /// fibers waited for, one entry per worker that had any.
    #[error(
        "the job is deadlocked: every worker of every rank is idle and nothing is in flight, yet \
         fibers still wait (a recv whose send never comes, a collective a member never called or \
         called with other arguments, fibers joining each other); on rank {rank}: {}",
        waits_text(waits)
    )]
    Deadlock {
        /// This rank.
        rank: u32,
        /// What this rank's waiting fibers wait for, per worker.
        waits: Vec<String>,
    },
    /// A rank of the job vanished (its process ended) while the job was running.
    #[error("rank {rank} (host {host}, pid {pid}) vanished while the job was running: {detail}")]
    PeerLost {
        /// The rank.
        rank: u32,
        /// Its host.
        host: String,
        /// Its process id.
        pid: u32,
        /// How it was noticed.
        detail: String,
    },
    /// Another rank's run failed, and it sent word of why before it gave the job up: its own
    /// error, as its run returned it there.
    #[error("rank {rank} (host {host}) failed, which ends the run on every rank: {cause}")]
    PeerFailed {
        /// The rank that failed.
        rank: u32,
        /// Its host.
        host: String,
        /// Its error, as text.
        cause: String,
    },
}

/// The waits of [`Error::Deadlock`] as one text.
fn waits_text(waits: &[String]) -> String {
    if waits.is_empty() {
        "no fiber waits (the waiting ones are on other ranks)".into()
    } else {
        waits.join("; ")
    }
}

/// Why one delegated request did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DelegationError {
    /// The delegated closure panicked; the property is poisoned from now on.
    #[error("the delegated closure panicked on its trustee: {0}")]
    Panicked(String),
    /// An earlier delegated closure panicked on this property.
    #[error("the property is poisoned: an earlier delegated closure panicked while holding it")]
    Poisoned,
    /// The trust names a property that does not exist (any more) on its trustee, or has another type.
    #[error(
        "the trust names a property that does not exist on its trustee (stale or foreign name)"
    )]
    DeadProperty,
    /// A blocking operation was attempted inside a delegated closure or a callback. The forms
    /// that cannot return this error (`apply`, `join`, `yield_now`, `recv`, …) panic with it
    /// instead, and inside a delegated closure that panic unwinds the closure, so its property is
    /// poisoned too (later applies get [`Poisoned`](Self::Poisoned)). A `try_` form returns it,
    /// and the closure that gets it goes on: its property is not poisoned.
    #[error("{}", BLOCKING_IN_DELEGATED)]
    BlockingInDelegatedContext,
    /// The runtime stopped before the answer arrived.
    #[error("the gossamer runtime stopped before the answer arrived")]
    Stopped,
    /// An argument or result could not be serialised or deserialised on its way to or from
    /// another rank.
    #[error("{0}")]
    Wire(String),
}

impl From<gsm_contract::SettingError> for Error {
    fn from(e: gsm_contract::SettingError) -> Self {
        Error::Env {
            name: e.name,
            value: e.value,
            reason: e.expected,
        }
    }
}
