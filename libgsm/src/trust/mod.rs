//! `Trust<T>`: the handle through which any worker delegates closures to the property's trustee,
//! and `entrust`/`entrust_on`, which create properties.
//!
//! **Paths.** On the trustee itself a closure runs inline, at once (a delegated closure: no
//! blocking inside); the property is found by one compare of the key word the trust carries
//! (`property.rs`). Elsewhere the closure's bytes are copied into a request record for the trustee
//! (`call.rs`) together with the code offset of a *trampoline*, the delegation entry
//! (`worker/entry.rs`) monomorphised per kind of request and (T, F, U[, A]) (`serve.rs`), that
//! reads `F` back (`read_unaligned`), looks the property up by name and type, runs `F` under
//! `catch_unwind` and moves `U` into the response. Inside a delegated closure or a callback,
//! requests to the worker's own properties go through its loopback queue instead of running inline
//! (they would alias the property being used); they run at the next poll.
//!
//! **Results.** `apply` suspends the fiber until the answer arrives; the answer is written
//! straight into the waiting fiber's stack. `apply_then` returns at once; its callback is kept in
//! the worker's pending table (inline when it is at most 32 bytes, boxed otherwise) and runs on
//! this worker when the answer arrives. A failed `apply_then` (panic, poison, dead property) has
//! no value to hand to its callback: it panics on the client's worker, which ends the runtime
//! with an error (use [`Trust::try_apply_then`] to see the error instead).
//!
//! **Reference counting** (`refcount.rs`) is the trust-id set of `property.rs`: `entrust` puts the
//! first id in, `clone` (and serialising a trust) registers a fresh id naming the trust it was made
//! from, and `drop` releases the handle's id saying how many trusts were made from it, as
//! asynchronous control records (to the worker's own loopback queue when the trustee is local, so
//! that a property is never freed under a running closure). Requests from one worker to one trustee
//! are served in the order they were issued (one FIFO ring per ordered pair), so a handle's
//! requests from the worker it is dropped on precede its release; records from different workers
//! may arrive in any order, which the counts of `property.rs` make safe.
//!
//! **A handle that moved.** Within a process a trust moves between workers by its bytes
//! (`spawn_on_with`, `apply_with`, results), keeping its id. `apply_then`s it sent from one
//! worker may then still wait in that worker's ring when it is dropped on another, whose release
//! could overtake them and free the property under them. So a handle notes the workers it sent
//! `apply_then`s from (`senders`; a blocking apply is answered before its handle can move), and
//! its drop on another worker has each of those workers register and at once release a
//! stand-in trust made from it, its release counting them as trusts made: the trustee frees the
//! property only once every stand-in's registration has come, each behind its worker's earlier
//! requests on that worker's ring.
//!
//! **`entrust_on(worker, make)`** ships a `NoRef` closure that builds the value on the trustee, so
//! it works unchanged across processes; it blocks the calling fiber until the trustee has
//! answered with the new property's name.
//!
//! This module does not schedule fibers or carry records: the worker (`crate::worker`) batches
//! the records and calls the trampolines, and `property.rs` keeps the properties and their
//! counts. See ARCHITECTURE.md.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::DelegationError;
use crate::noref::{NoRef, Wire};
use crate::property::{key, type_index};
use crate::wire::codeptr;
use crate::wire::record::{Byte, Request, RequestReader, SER, SER_STATUS, Src};
use crate::worker::WorkerId;
use crate::worker::entry::{Delegated, Of, trampoline};
use crate::worker::tasks;
use crate::worker::{
    CONTROL_REGISTER, CONTROL_RELEASE, Data, NO_REPLY, Trampoline, WorkerCore, core_or_panic,
    sender_bit, status,
};

/// A handle to a property held by a trustee worker. Cloning and dropping it updates the
/// trustee's reference count asynchronously; the property is dropped on its trustee when the last
/// handle is gone.
///
/// The release is sent by the worker the handle is dropped on. A handle dropped on a thread that
/// is no worker (moved into a `std::thread`, say) has nobody to send it, so its property stays
/// alive until the run ends, when every trustee drops what its table still holds: drop handles
/// on a worker (or return them to one) when the property should go sooner.
///
/// A trust belongs to the runtime that made it. Kept past that runtime's end (returned from
/// [`run`](crate::run), or left in a static), it names nothing in a later runtime of the same
/// process: its applies fail with [`DelegationError::DeadProperty`].
pub struct Trust<T: Send + 'static> {
    /// The trustee's global worker id in the low half, and in the high half the runtime that
    /// made this handle (`Shared::epoch`), or 0 for a handle that names nothing (one
    /// serialised after its runtime ended). A handle kept past the end of its runtime names
    /// nothing in a later runtime of the same process, even where that runtime has a property
    /// of the same type at the same index and generation: its applies fail with
    /// `DeadProperty`, and its clones, copies and drop tell no trustee. One word, so that the
    /// inline path tells "on this worker, of this runtime" with the one compare it made before
    /// (`WorkerCore::home`): a separate compare of the runtime showed in a loop of inline
    /// `apply_then`s.
    home: u64,
    idx: u32,
    gn: u32,
    /// This process's type index of `T` (`property::type_index`): with `gn` it makes the key
    /// word that an apply on the trustee compares (`property::key`).
    ty: u32,
    id: u64,
    /// Trusts made from this one so far (clones and serialised copies), announced with its
    /// release (see `property.rs`). Atomic only so that `Trust` stays `Sync`; one thread at a
    /// time uses a trust.
    made: AtomicU64,
    /// The workers of this rank that sent `apply_then`s through this handle: bit `i` for local
    /// worker `i`, bit 63 for any worker from 63 up (`WorkerCore::sender_bit`; see the module
    /// docs, "A handle that moved").
    senders: AtomicU64,
    _t: PhantomData<fn() -> T>,
}

impl<T: Send + 'static> std::fmt::Debug for Trust<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("trustee", &self.trustee_id())
            .field("idx", &self.idx)
            .field("generation", &self.gn)
            .finish()
    }
}

pub(crate) use crate::worker::home;

/// Places `value` as a property on the current worker and returns the first trust to it.
///
/// # Panics
/// Outside a gossamer worker.
#[track_caller]
pub fn entrust<T: Send + 'static>(value: T) -> Trust<T> {
    let core = core_or_panic("entrust");
    let id = core.new_trust_id();
    let (idx, gn) = core.props.borrow_mut().insert(value, id);
    Trust {
        home: core.home,
        idx,
        gn,
        ty: type_index::<T>(),
        id,
        made: AtomicU64::new(0),
        senders: AtomicU64::new(0),
        _t: PhantomData,
    }
}

/// Builds a property on `worker` by running `make` there, and returns the first trust to it.
/// Blocks the calling fiber until the trustee answers (inline when `worker` is this worker).
///
/// # Panics
/// Outside a fiber or inside a delegated closure (when `worker` is another worker), if `worker`
/// does not exist, or if `make` panics.
#[track_caller]
pub fn entrust_on<T, F>(worker: WorkerId, make: F) -> Trust<T>
where
    F: FnOnce() -> T + NoRef,
    T: Send + 'static,
{
    let core = core_or_panic("entrust_on");
    let w = worker.index();
    assert!(
        w < core.count,
        "gossamer: entrust_on: worker {w} does not exist (this runtime has {} workers)",
        core.count
    );
    if w == core.id {
        return entrust(make());
    }
    let id = core.new_trust_id();
    let r: Result<(u32, u32), DelegationError> = block_on(
        core,
        w,
        trampoline::<Entrust<T, F>>(),
        0,
        0,
        Src::closure(&make),
        Some(Src::of(&id)),
        false,
    );
    match r {
        Ok((idx, gn)) => Trust {
            home: home(w, core.epoch()),
            idx,
            gn,
            ty: type_index::<T>(),
            id,
            made: AtomicU64::new(0),
            senders: AtomicU64::new(0),
            _t: PhantomData,
        },
        Err(e) => panic!("gossamer: entrust_on({w}) failed: {e}"),
    }
}

/// The current worker, if the caller may block on it: an error inside a delegated closure or a
/// callback, a panic outside a fiber (`what` names the call).
///
/// Inlined into every blocking apply together with the apply itself, with the panics out of
/// line: an apply to a property on the caller's own worker is then a few checks around the
/// closure instead of three calls.
#[inline(always)]
#[track_caller]
fn blocking_core(what: &'static str) -> Result<&'static WorkerCore, DelegationError> {
    let core = core_or_panic(what);
    if core.delegated_or_callback() {
        return Err(DelegationError::BlockingInDelegatedContext);
    }
    if core.current_fiber().is_none() {
        if core.unwinding_fibers() {
            return Err(DelegationError::Stopped);
        }
        outside_fiber(what);
    }
    Ok(core)
}

#[cold]
#[inline(never)]
#[track_caller]
fn outside_fiber(what: &str) -> ! {
    panic!("gossamer: {what} was called outside a fiber; spawn a fiber or use apply_then");
}

/// The panic of a failed `apply`/`apply_with` (`what` names the call).
#[cold]
#[inline(never)]
#[track_caller]
fn apply_failed(what: &str, e: DelegationError) -> ! {
    match e {
        // The caller itself may not block here.
        DelegationError::BlockingInDelegatedContext
            if crate::worker::core().is_some_and(|c| c.delegated_or_callback()) =>
        {
            panic!("{}", crate::error::BLOCKING_IN_DELEGATED)
        }
        // The answer says so: the closure made the blocking call on its trustee (which panicked
        // there, at the call), not this caller.
        DelegationError::BlockingInDelegatedContext => panic!(
            "gossamer: {what} failed: the delegated closure made a blocking call on its trustee, \
             where it panicked (its property is poisoned now): {}",
            crate::error::BLOCKING_IN_DELEGATED
        ),
        e => panic!("gossamer: {what} failed: {e}"),
    }
}

impl<T: Send + 'static> Trust<T> {
    /// The key word the property's slot holds while it is live, unpoisoned and of type `T`.
    #[inline(always)]
    fn key(&self) -> u64 {
        key(self.gn, self.ty)
    }

    /// Whether this handle was made by the runtime `core` belongs to (see `home`).
    #[inline(always)]
    fn current(&self, core: &WorkerCore) -> bool {
        self.home >> 32 == core.home >> 32
    }

    /// The trustee's global worker id.
    #[inline(always)]
    fn trustee_id(&self) -> usize {
        self.home as u32 as usize
    }

    /// The worker that holds the property.
    pub fn trustee(&self) -> WorkerId {
        WorkerId::new(self.trustee_id())
    }

    /// Whether to run inline: on the trustee, outside any delegated closure. Requests deferred
    /// to the loopback queue earlier are served first, so this worker's requests to itself keep
    /// their issue order; if too many wait there to serve now, this one is queued behind them.
    ///
    /// While this worker watches its gate (`WorkerCore::gate`), that word equals its home word,
    /// so the one compare also says that nothing waits to be looked at, and the apply is not
    /// counted towards the next look; otherwise it is (`WorkerCore::inline_ran`).
    #[inline]
    fn local(&self, core: &WorkerCore) -> bool {
        // Equal homes: the trustee is this worker, and the handle is of this runtime. A closed
        // gate equals no home word.
        if self.home == core.gate() {
            return !core.must_defer();
        }
        self.home == core.home && !core.must_defer() && core.inline_ran()
    }

    /// Runs `f` on the property and returns its result; suspends the calling fiber (not the
    /// worker) until the trustee has run it.
    ///
    /// # Panics
    /// If the closure panicked (with its message), if the property is poisoned or dead, or when
    /// called where blocking is impossible (inside a delegated closure or a callback). Use
    /// [`try_apply`](Self::try_apply) to get these as errors. Called outside a gossamer worker
    /// (from `main` after the run returned, say) or on a worker outside any fiber, it panics,
    /// and so do all the `try_` forms: that is a mistake in the program, not a failure of the
    /// request.
    #[inline]
    #[track_caller]
    pub fn apply<U: Wire>(&self, f: impl FnOnce(&mut T) -> U + NoRef) -> U {
        match self.try_apply_as("Trust::apply", f) {
            Ok(u) => u,
            Err(e) => apply_failed("Trust::apply", e),
        }
    }

    /// Like [`apply`](Self::apply), but returns failures as errors. In a destructor that runs
    /// because the run ended with its fiber unfinished (a deadlock, a failure, or a detached
    /// fiber still waiting at the end), it answers [`DelegationError::Stopped`]: a panic there
    /// would abort the process, so destructors that delegate should use the `try_` calls.
    #[inline]
    #[track_caller]
    pub fn try_apply<U: Wire, F: FnOnce(&mut T) -> U + NoRef>(
        &self,
        f: F,
    ) -> Result<U, DelegationError> {
        self.try_apply_as("Trust::try_apply", f)
    }

    /// [`try_apply`](Self::try_apply), naming the call `what` in its panics.
    #[inline(always)]
    #[track_caller]
    fn try_apply_as<U: Wire, F: FnOnce(&mut T) -> U + NoRef>(
        &self,
        what: &'static str,
        f: F,
    ) -> Result<U, DelegationError> {
        let core = blocking_core(what)?;
        if self.local(core) {
            return serve::run_keyed::<T, U>(core, self.idx, self.gn, self.key(), f);
        }
        if !self.current(core) {
            return Err(DelegationError::DeadProperty);
        }
        let scope = tasks::current();
        if scope != 0 {
            // The closure carries the scope, so that what it starts there is the scope's too;
            // the call is a task, so that `finish` knows the body started something.
            tasks::started(scope);
            let r = self.block_apply(core, move |t: &mut T| tasks::within(scope, || f(t)));
            tasks::finished(scope, None);
            return r;
        }
        self.block_apply(core, f)
    }

    /// The remote half of [`try_apply`](Self::try_apply): stages the request and waits.
    #[inline(always)]
    fn block_apply<U: Wire, F: FnOnce(&mut T) -> U + NoRef>(
        &self,
        core: &WorkerCore,
        f: F,
    ) -> Result<U, DelegationError> {
        block_on(
            core,
            self.trustee_id(),
            trampoline::<Apply<T, U, F>>(),
            self.idx,
            self.gn,
            Src::closure(&f),
            None,
            false,
        )
    }

    /// Runs `f(property, arg)` on the trustee; `arg` is moved there (by bytes within a process).
    ///
    /// # Panics
    /// As [`apply`](Self::apply).
    #[inline]
    #[track_caller]
    pub fn apply_with<A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        arg: A,
        f: F,
    ) -> U {
        match self.try_apply_with_as("Trust::apply_with", arg, f) {
            Ok(u) => u,
            Err(e) => apply_failed("Trust::apply_with", e),
        }
    }

    /// Like [`apply_with`](Self::apply_with), but returns failures as errors.
    #[inline]
    #[track_caller]
    pub fn try_apply_with<A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        arg: A,
        f: F,
    ) -> Result<U, DelegationError> {
        self.try_apply_with_as("Trust::try_apply_with", arg, f)
    }

    /// [`try_apply_with`](Self::try_apply_with), naming the call `what` in its panics.
    #[inline(always)]
    #[track_caller]
    fn try_apply_with_as<A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        what: &'static str,
        arg: A,
        f: F,
    ) -> Result<U, DelegationError> {
        let core = blocking_core(what)?;
        if self.local(core) {
            return serve::run_keyed::<T, U>(core, self.idx, self.gn, self.key(), move |t| {
                f(t, arg)
            });
        }
        if !self.current(core) {
            return Err(DelegationError::DeadProperty);
        }
        let scope = tasks::current();
        if scope != 0 {
            let f = move |t: &mut T, a: A| tasks::within(scope, || f(t, a));
            tasks::started(scope);
            let r = self.block_apply_with(core, arg, f);
            tasks::finished(scope, None);
            return r;
        }
        self.block_apply_with(core, arg, f)
    }

    /// The remote half of [`try_apply_with`](Self::try_apply_with): stages the request and
    /// waits.
    #[inline(always)]
    fn block_apply_with<A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        core: &WorkerCore,
        arg: A,
        f: F,
    ) -> Result<U, DelegationError> {
        let room = std::mem::size_of::<F>();
        let mut arg = OutArg::with_room(core, self.trustee_id(), arg, room)?;
        arg.offer(core, self.trustee_id());
        block_on(
            core,
            self.trustee_id(),
            trampoline::<ApplyWith<T, A, U, F>>(),
            self.idx,
            self.gn,
            Src::closure(&f),
            Some(arg.src()),
            arg.encoded(),
        )
    }

    /// Runs `f` on the property without waiting; `then` runs on this worker with the result when
    /// it is back (at once when the property is on this worker and no closure is running here).
    ///
    /// A worker keeps at most 16 384 `apply_then`s to other workers unanswered: a fiber that
    /// issues one more waits (taking answers in and running their callbacks, while the worker
    /// goes on serving) until fewer are, so a loop that issues faster than it is answered runs
    /// in bounded memory. Inside a delegated closure or a callback, which cannot wait, the
    /// bound is not enforced. The bound counts requests, not bytes: the answers not yet taken in
    /// wait on the trustee's side (in another rank, queued for the ring to the client, or held
    /// for the client to read), so 16 384 results of 1 MiB can hold 16 GiB there. A loop whose
    /// results are large should keep its own window (wait for answers every few requests).
    ///
    /// # Panics
    /// On the client's worker, when the answer comes back as a failure (panic, poison, dead
    /// property): this ends the runtime with an error. Use
    /// [`try_apply_then`](Self::try_apply_then) to handle failures.
    #[inline]
    #[track_caller]
    pub fn apply_then<U: Wire, F: FnOnce(&mut T) -> U + NoRef>(
        &self,
        f: F,
        then: impl FnOnce(U) + 'static,
    ) {
        self.try_apply_then_as(
            "Trust::apply_then",
            f,
            move |r: Result<U, DelegationError>| match r {
                Ok(u) => then(u),
                Err(e) => panic!("gossamer: Trust::apply_then failed: {e}"),
            },
        )
    }

    /// Like [`apply_then`](Self::apply_then), but hands the callback a `Result`.
    #[inline]
    #[track_caller]
    pub fn try_apply_then<U: Wire, F: FnOnce(&mut T) -> U + NoRef>(
        &self,
        f: F,
        then: impl FnOnce(Result<U, DelegationError>) + 'static,
    ) {
        self.try_apply_then_as("Trust::try_apply_then", f, then);
    }

    /// [`try_apply_then`](Self::try_apply_then), naming the call `what` in its panics.
    #[inline(always)]
    #[track_caller]
    fn try_apply_then_as<U: Wire, F: FnOnce(&mut T) -> U + NoRef>(
        &self,
        what: &'static str,
        f: F,
        then: impl FnOnce(Result<U, DelegationError>) + 'static,
    ) {
        let core = core_or_panic(what);
        let scope = tasks::current();
        if scope != 0 {
            return self.scoped_then(core, scope, f, then);
        }
        if self.local(core) {
            // The callback in callback context, as when the answer comes from another worker:
            // the same callback may not block there, so it may not here either.
            serve::run_keyed_then::<T, U>(core, self.idx, self.gn, self.key(), f, then);
            return;
        }
        self.send_then(core, f, then);
    }

    /// [`try_apply_then`](Self::try_apply_then) from code in a completion scope: the request is
    /// a task of `scope`, its closure runs in it on the trustee and its callback here
    /// (`worker::tasks`).
    #[inline(never)]
    fn scoped_then<U: Wire, F: FnOnce(&mut T) -> U + NoRef>(
        &self,
        core: &WorkerCore,
        scope: u64,
        f: F,
        then: impl FnOnce(Result<U, DelegationError>) + 'static,
    ) {
        tasks::started(scope);
        let f = move |t: &mut T| tasks::within(scope, || f(t));
        let then = move |r: Result<U, DelegationError>| tasks::callback(scope, || then(r));
        if self.local(core) {
            serve::run_keyed_then::<T, U>(core, self.idx, self.gn, self.key(), f, then);
            return;
        }
        self.send_then(core, f, then);
    }

    /// Runs `f(property, arg)` on the trustee without waiting, `arg` moved there as with
    /// [`apply_with`](Self::apply_with); `then` runs on this worker with the result when it is
    /// back, as with [`apply_then`](Self::apply_then), under the same bound of unanswered
    /// requests. This is how a fiber pushes owned batches (a `Vec` of updates, say) to many
    /// trustees at once and goes on.
    ///
    /// # Panics
    /// As [`apply_then`](Self::apply_then); an argument that cannot be serialised for another
    /// rank is a failure of the request, answered to the callback.
    #[inline]
    #[track_caller]
    pub fn apply_with_then<A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        arg: A,
        f: F,
        then: impl FnOnce(U) + 'static,
    ) {
        self.try_apply_with_then_as(
            "Trust::apply_with_then",
            arg,
            f,
            move |r: Result<U, DelegationError>| match r {
                Ok(u) => then(u),
                Err(e) => panic!("gossamer: Trust::apply_with_then failed: {e}"),
            },
        )
    }

    /// Like [`apply_with_then`](Self::apply_with_then), but hands the callback a `Result`.
    #[inline]
    #[track_caller]
    pub fn try_apply_with_then<A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        arg: A,
        f: F,
        then: impl FnOnce(Result<U, DelegationError>) + 'static,
    ) {
        self.try_apply_with_then_as("Trust::try_apply_with_then", arg, f, then);
    }

    /// [`try_apply_with_then`](Self::try_apply_with_then), naming the call `what` in its panics.
    #[inline(always)]
    #[track_caller]
    fn try_apply_with_then_as<A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        what: &'static str,
        arg: A,
        f: F,
        then: impl FnOnce(Result<U, DelegationError>) + 'static,
    ) {
        let core = core_or_panic(what);
        let scope = tasks::current();
        if scope != 0 {
            return self.scoped_with_then(core, scope, arg, f, then);
        }
        if self.local(core) {
            serve::run_keyed_then::<T, U>(
                core,
                self.idx,
                self.gn,
                self.key(),
                move |t| f(t, arg),
                then,
            );
            return;
        }
        self.send_with_then(core, arg, f, then);
    }

    /// [`try_apply_with_then`](Self::try_apply_with_then) from code in a completion scope, as
    /// [`scoped_then`](Self::scoped_then) is for `try_apply_then`.
    #[inline(never)]
    fn scoped_with_then<A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        core: &WorkerCore,
        scope: u64,
        arg: A,
        f: F,
        then: impl FnOnce(Result<U, DelegationError>) + 'static,
    ) {
        tasks::started(scope);
        let f = move |t: &mut T, a: A| tasks::within(scope, || f(t, a));
        let then = move |r: Result<U, DelegationError>| tasks::callback(scope, || then(r));
        if self.local(core) {
            serve::run_keyed_then::<T, U>(
                core,
                self.idx,
                self.gn,
                self.key(),
                move |t| f(t, arg),
                then,
            );
            return;
        }
        self.send_with_then(core, arg, f, then);
    }

    /// The remote half of [`try_apply_with_then`](Self::try_apply_with_then), as
    /// [`send_then`](Self::send_then) is of `try_apply_then`.
    #[inline(never)]
    fn send_with_then<A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + NoRef>(
        &self,
        core: &WorkerCore,
        arg: A,
        f: F,
        then: impl FnOnce(Result<U, DelegationError>) + 'static,
    ) {
        if !self.current(core) {
            core.guarded((), || then(Err(DelegationError::DeadProperty)));
            return;
        }
        let room = std::mem::size_of::<F>();
        let mut arg = match OutArg::with_room(core, self.trustee_id(), arg, room) {
            Ok(arg) => arg,
            Err(e) => {
                core.guarded((), || then(Err(e)));
                return;
            }
        };
        arg.offer(core, self.trustee_id());
        self.stage_then(
            core,
            then,
            trampoline::<ApplyWith<T, A, U, F>>(),
            Src::closure(&f),
            Some((arg.src(), arg.encoded())),
        );
    }

    /// Registers `then` and stages a request for trampoline `tramp` with captured bytes `cap`
    /// and the argument `arg` (its bytes, and whether they are encoded), if any: the common
    /// tail of [`send_then`](Self::send_then) and [`send_with_then`](Self::send_with_then).
    #[inline(always)]
    fn stage_then<U: Wire>(
        &self,
        core: &WorkerCore,
        then: impl FnOnce(Result<U, DelegationError>) + 'static,
        tramp: Trampoline,
        cap: Src<'_>,
        arg: Option<(Src<'_>, bool)>,
    ) {
        if self.senders.load(Ordering::Relaxed) & core.sender_bit == 0 {
            self.sent_from(core);
        }
        let req = push_callback(core, self.trustee_id(), then);
        // Counted before it is staged: staging may wait for room, polling, and the answer to
        // this very request can come back during that wait and be counted off.
        core.then_issued();
        let (arg, encoded) = match arg {
            Some((a, e)) => (Some(a), e),
            None => (None, false),
        };
        core.send_request(
            self.trustee_id(),
            Some(codeptr::offset_of(tramp as usize)),
            self.idx,
            self.gn,
            req,
            cap,
            arg,
            encoded,
        );
    }

    /// The remote half of [`try_apply_then`](Self::try_apply_then): registers `then` and stages
    /// the request. Out of line, so that a loop of `apply_then`s keeps only the local path and a
    /// call in its body.
    #[inline(never)]
    fn send_then<U: Wire, F: FnOnce(&mut T) -> U + NoRef>(
        &self,
        core: &WorkerCore,
        f: F,
        then: impl FnOnce(Result<U, DelegationError>) + 'static,
    ) {
        if !self.current(core) {
            core.guarded((), || then(Err(DelegationError::DeadProperty)));
            return;
        }
        self.stage_then(
            core,
            then,
            trampoline::<Apply<T, U, F>>(),
            Src::closure(&f),
            None,
        );
    }

    /// Registers trust id `id`, a trust made from this one (a clone or a serialised copy), with
    /// the trustee, and counts it for this trust's release.
    fn register(&self, core: &WorkerCore, id: u64) {
        self.made.fetch_add(1, Ordering::Relaxed);
        self.control(core, CONTROL_REGISTER, id, self.id);
    }

    /// Sends a reference-counting record for trust id `id` (see [`control`]).
    fn control(&self, core: &WorkerCore, kind: u32, id: u64, word: u64) {
        control(core, self.trustee_id(), self.idx, self.gn, kind, id, word);
    }

    /// Notes that this handle sent an `apply_then` from `core`'s worker (the first time only).
    #[cold]
    #[inline(never)]
    fn sent_from(&self, core: &WorkerCore) {
        // One read-modify-write: a `Trust` is `Sync`, and two workers' first `apply_then`s
        // through one shared handle each wrote back what they had read, so one bit could be
        // lost and the drop released the property ahead of that worker's requests
        // (`DeadProperty` in 1 to 15 of 20 000 rounds, found by an API walkthrough).
        self.senders.fetch_or(core.sender_bit, Ordering::Relaxed);
    }

    /// The workers other than this one that sent `apply_then`s through this handle, by global
    /// id (bit 63 of `senders` stands for every local worker from 63 up).
    fn other_senders(&self, core: &WorkerCore) -> Vec<usize> {
        let senders = self.senders.load(Ordering::Relaxed);
        let place = &core.shared.place;
        (0..place.local)
            .filter(|&l| l != core.local && senders & sender_bit(l) != 0)
            .map(|l| place.base + l)
            .collect()
    }
}

mod call;
mod nonblocking;
mod recover;
mod refcount;
mod serve;

use call::push_callback;
pub(crate) use call::{OutArg, block_on, decode};
use refcount::control;
use serve::{Apply, ApplyWith, Entrust};
pub(crate) use serve::{captured, take_arg};

#[cfg(test)]
mod tests;
