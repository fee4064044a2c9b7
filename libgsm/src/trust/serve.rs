//! The trustee's half of delegation: the kinds of request a trust sends, each decoding its
//! closure and argument where the client's half (`call.rs`) encoded them, running it against
//! the property and responding; and what running a closure on a property means: the lookup, the
//! delegated context, poisoning on a panic, and serving a run of requests of one kind. The
//! worker's inbox hands each decoded request here through its trampoline. See ARCHITECTURE.md.

use std::mem::{ManuallyDrop, MaybeUninit};
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::*;
use crate::property::PropertyTable;
use crate::wire::record::SMALL;
use crate::worker::{CALLBACK, DELEGATED, capture_mismatch, panic_to_error};

/// Results of a run of requests ([`serve_run`]) staged together.
const RUN_GROUP: usize = 16;

/// The requests of `entrust_on` of a `T` made by `F`.
pub(super) struct Entrust<T, F>(Of<(T, F)>);

impl<T: Send + 'static, F: FnOnce() -> T + Copy> Delegated for Entrust<T, F> {
    /// # Safety
    /// `rec` must be a record encoded by `entrust_on::<T, F>`.
    #[inline(always)]
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        _more: &mut RequestReader<'_>,
    ) {
        let id = crate::worker::control_id(rec.arg());
        // SAFETY: the client copied one `F` into the captured bytes (this function's contract).
        let r = unsafe { captured::<F>(rec) }.and_then(|make| {
            run_plain(core, make).map(|v| core.props.borrow_mut().insert(v, id))
        });
        core.respond(client, rec.req, r);
    }
}

/// The requests of `apply` and `apply_then` of `F` on a `T`, answering a `U`.
pub(super) struct Apply<T, U, F>(Of<(T, U, F)>);

impl<T: Send + 'static, U: Wire, F: FnOnce(&mut T) -> U + Copy> Delegated for Apply<T, U, F> {
    /// # Safety
    /// `rec` must be a record encoded by `apply*::<T, U, F>` (captured bytes = one `F`).
    #[inline(always)]
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        more: &mut RequestReader<'_>,
    ) {
        // SAFETY: `rec` was encoded for this trampoline (contract), and so was every record behind
        // it with the same first header word, which names the same code in the same batch.
        unsafe { serve_run::<T, U, F>(core, client, rec, more) }
    }
}

/// Takes ownership of the argument a record carries: a moved `A` (same process) or the
/// `postcard` encoding of one (flag `SER`, from another rank), decoded with every check
/// `postcard` makes. Whether the bytes may be a moved `A` is decided here, by where the batch
/// came from, never by the sender's flag: from another process (`core.serving_foreign`) only an
/// encoding is taken, and a record without `SER` ends the job as a protocol error of `client`
/// (an `A` read by its bytes could carry a pointer into this process).
///
/// # Safety
/// The record's argument bytes must be one moved `A` not yet taken (without `SER`, from this
/// process), or initialised bytes (with `SER`, or from another process).
pub(crate) unsafe fn take_arg<A: Wire>(
    core: &WorkerCore,
    client: usize,
    rec: &Request<'_>,
) -> Result<A, DelegationError> {
    let arg = rec.arg();
    if rec.flags & SER == 0 && core.serving_foreign.get() {
        return Err(argument_by_its_bytes::<A>(core, client));
    }
    if rec.flags & SER != 0 {
        // SAFETY: a serialised argument is initialised bytes (contract); `MaybeUninit<u8>` has
        // the layout of `u8`.
        let b = unsafe { std::slice::from_raw_parts(arg.as_ptr().cast::<u8>(), arg.len()) };
        crate::wire::codec::decode::<A>(b).map_err(|e| {
            DelegationError::Wire(format!(
                "gossamer: the argument (a `{}`) from another rank could not be decoded: {e}",
                std::any::type_name::<A>()
            ))
        })
    } else {
        if arg.len() != std::mem::size_of::<A>() {
            return Err(DelegationError::Wire(
                "gossamer: an argument of the wrong size".into(),
            ));
        }
        // SAFETY: the client moved one `A` into the argument bytes (contract); we take ownership.
        Ok(unsafe { std::ptr::read_unaligned(arg.as_ptr().cast::<A>()) })
    }
}

/// The refusal of an argument that another process sent as the bytes of its type.
#[cold]
#[inline(never)]
pub(super) fn argument_by_its_bytes<A>(core: &WorkerCore, client: usize) -> DelegationError {
    let m = format!(
        "an argument (a `{}`) as the bytes of its type, not an encoding; it was refused",
        std::any::type_name::<A>()
    );
    core.ring_broken(client, &m);
    DelegationError::Wire(format!("gossamer: {m}"))
}

/// The requests of `apply_with` and `apply_with_then` of `F` on a `T` with an argument `A`,
/// answering a `U`.
pub(super) struct ApplyWith<T, A, U, F>(Of<(T, A, U, F)>);

impl<T: Send + 'static, A: Wire, U: Wire, F: FnOnce(&mut T, A) -> U + Copy> Delegated
    for ApplyWith<T, A, U, F>
{
    /// # Safety
    /// `rec` must be a record encoded by `apply_with::<T, A, U, F>`: captured bytes = one `F`;
    /// argument bytes = one moved `A`, or (flag `SER`, from another rank) its `postcard` encoding.
    #[inline(always)]
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        _more: &mut RequestReader<'_>,
    ) {
        // SAFETY: the client copied one `F` into the captured bytes (this function's contract).
        let f: F = match unsafe { captured::<F>(rec) } {
            Ok(f) => f,
            Err(e) => {
                core.respond::<U>(client, rec.req, Err(e));
                return;
            }
        };
        // SAFETY: the argument bytes are one moved `A` or its encoding (this function's contract).
        let a: A = match unsafe { take_arg::<A>(core, client, rec) } {
            Ok(a) => a,
            Err(e) => {
                core.respond::<U>(client, rec.req, Err(e));
                return;
            }
        };
        let r = run_delegated::<T, U>(core, rec.idx, rec.gn, move |t| f(t, a));
        core.respond(client, rec.req, r);
    }
}

/// The `F` (a `Copy` closure: its bytes carry no drop obligation) that request `rec` carries
/// in its captured bytes. A record whose captured bytes are not one `F` long was written by no
/// sender of this binary (it is corrupt): it is refused with an error rather than read past.
///
/// # Safety
/// `rec` must have been encoded for a trampoline of `F`: captured bytes of `F`'s size are one `F`.
pub(crate) unsafe fn captured<F: Copy>(rec: &Request<'_>) -> Result<F, DelegationError> {
    if rec.cap_len != std::mem::size_of::<F>() {
        return Err(crate::worker::capture_mismatch());
    }
    // SAFETY: `size_of::<F>()` initialised bytes that hold one `F` (the contract).
    Ok(unsafe { std::ptr::read_unaligned(rec.cap().as_ptr().cast::<F>()) })
}

/// Runs `f` on property `(idx, gn)` of type `T` on worker `core` as a delegated closure: no
/// blocking inside, panics caught and turned into poison.
#[inline]
pub(super) fn run_delegated<T: 'static, U>(
    core: &WorkerCore,
    idx: u32,
    gn: u32,
    f: impl FnOnce(&mut T) -> U,
) -> Result<U, DelegationError> {
    let p = lookup::<T>(core, idx, gn)?;
    // SAFETY: `p` was just looked up, so it is live; see `run_on`.
    unsafe { run_on(core, p, idx, gn, f) }
}

/// [`run_delegated`] for a trust of this process, which carries the property's key word `k`
/// (`property::key`): the lookup is one compare when it matches.
#[inline(always)]
pub(super) fn run_keyed<T: 'static, U>(
    core: &WorkerCore,
    idx: u32,
    gn: u32,
    k: u64,
    f: impl FnOnce(&mut T) -> U,
) -> Result<U, DelegationError> {
    // SAFETY: the reference ends with this statement, and a lookup runs no user code.
    let p = unsafe { table(core) }.get_keyed::<T>(idx, gn, k)?;
    // SAFETY: `p` was just looked up, so it is live; see `run_on`.
    unsafe { run_on(core, p, idx, gn, f) }
}

/// [`run_keyed`] and then `then` with its result, as an inline `apply_then` does: the closure
/// in delegated context, the callback in callback context (a panic in it ends the job, see
/// `WorkerCore::guarded`). The context word goes from the closure's level straight to the
/// callback's: three stores per apply instead of four.
#[inline(always)]
pub(super) fn run_keyed_then<T: 'static, U>(
    core: &WorkerCore,
    idx: u32,
    gn: u32,
    k: u64,
    f: impl FnOnce(&mut T) -> U,
    then: impl FnOnce(Result<U, DelegationError>),
) {
    let cx = core.context();
    let level = cx.level();
    // SAFETY: the reference ends with this statement, and a lookup runs no user code.
    let r = match unsafe { table(core) }.get_keyed::<T>(idx, gn, k) {
        Ok(p) => {
            cx.set(level + DELEGATED);
            // SAFETY: `p` was just looked up, so it is live; see `run_on`.
            let r = catch_unwind(AssertUnwindSafe(|| f(unsafe { &mut *p })));
            cx.set(level + CALLBACK);
            r.map_err(|e| closure_panicked(core, idx, gn, &*e))
        }
        Err(e) => {
            cx.set(level + CALLBACK);
            Err(e)
        }
    };
    let c = catch_unwind(AssertUnwindSafe(|| then(r)));
    cx.set(level);
    if let Err(p) = c {
        core.callback_panicked(&*p);
    }
}

/// Where the live, unpoisoned property `(idx, gn)` of type `T` is.
#[inline(always)]
fn lookup<T: 'static>(core: &WorkerCore, idx: u32, gn: u32) -> Result<*mut T, DelegationError> {
    // SAFETY: the reference ends with this statement, and a lookup runs no user code.
    unsafe { table(core) }.get::<T>(idx, gn)
}

/// The property table, for one lookup, without a `RefCell` guard: then the lookup stores
/// nothing, and a guard's two stores to the borrow flag per closure cost more than the lookup in
/// a loop of inline applies, whose stores are what limits it.
///
/// Nor does it test the borrow flag, as `RefCell::try_borrow_unguarded` would: no mutable borrow
/// of the table can be live when a closure starts, since every `borrow_mut` of it ends within the
/// statement that takes it, and none of those statements runs user code (values leave the table
/// by `toggle` and `drain` and are dropped after the borrow has ended). The test was a load and a
/// branch per inline apply, which showed in a loop of them. Debug builds still check it.
///
/// # Safety
/// The caller must drop the reference before anything can borrow the table mutably: before any
/// user code runs, and before anything inserts, toggles or poisons.
#[inline(always)]
unsafe fn table(core: &WorkerCore) -> &PropertyTable {
    debug_assert!(
        core.props.try_borrow_mut().is_ok(),
        "gossamer: the property table is borrowed while a closure starts"
    );
    // SAFETY: only this thread uses the table, no mutable borrow of it is live (see above), and
    // the caller drops the reference before anything borrows it mutably (contract).
    unsafe { &*core.props.as_ptr() }
}

/// Runs `f` on the property `(idx, gn)` at `p` as a delegated closure; a panic poisons it.
///
/// # Safety
/// `p` must be what [`lookup`] returned for `(idx, gn)`, with no toggle or poisoning on this
/// worker since. Then it points to the live boxed property, and it is not freed while `f` runs:
/// frees happen only in `toggle`, which runs from the poller's serve loop or loopback, never
/// nested inside a delegated closure (requests to self are deferred while a delegated closure
/// runs), and no other `&mut T` exists since only this thread touches it and delegated closures
/// do not nest on one property (nested requests to this worker are deferred).
#[inline(always)]
unsafe fn run_on<T: 'static, U>(
    core: &WorkerCore,
    p: *mut T,
    idx: u32,
    gn: u32,
    f: impl FnOnce(&mut T) -> U,
) -> Result<U, DelegationError> {
    // SAFETY: see the contract above.
    let r = core.context().caught(DELEGATED, || f(unsafe { &mut *p }));
    r.map_err(|e| closure_panicked(core, idx, gn, &*e))
}

/// A delegated closure on property `(idx, gn)` panicked with `e`: poisons the property and
/// returns the error its caller gets.
#[cold]
fn closure_panicked(
    core: &WorkerCore,
    idx: u32,
    gn: u32,
    e: &(dyn std::any::Any + Send),
) -> DelegationError {
    core.props.borrow_mut().poison(idx, gn);
    panic_to_error(e)
}

/// Runs `f` as a delegated closure that has no property (`entrust_on`'s maker).
fn run_plain<U>(core: &WorkerCore, f: impl FnOnce() -> U) -> Result<U, DelegationError> {
    core.context()
        .caught(DELEGATED, f)
        .map_err(|e| panic_to_error(&*e))
}

/// Serves `first`, a request to run an `F` on a `T`, and then every record right behind it in
/// its batch that is of the same kind and plain ([`Request::plain_head`]): one trampoline call
/// for the run instead of one per record, no general decoding, and the property looked up again
/// only when a record names another one (or the last closure panicked). What ends the run is
/// left in `more` for the inbox's serve loop.
///
/// The looked-up pointer stays valid from one record to the next: the only code that runs in
/// between is the closures themselves, and they can neither free a property (their toggles to
/// this worker are deferred to the loopback queue) nor poison one without panicking, which ends
/// the reuse.
///
/// The continuations behind a record (most of a run: a batch starts each run with one full
/// record) are served by a loop of their own ([`serve_continuations`]).
///
/// # Safety
/// `first` must have been encoded for this `(T, U, F)` (captured bytes = one `F`), and so must
/// every record of `more` whose first header word equals `first`'s.
#[inline(always)]
unsafe fn serve_run<T: 'static, U: serde::Serialize + 'static, F: FnOnce(&mut T) -> U + Copy>(
    core: &WorkerCore,
    client: usize,
    first: &Request<'_>,
    more: &mut RequestReader<'_>,
) {
    if first.cap_len != std::mem::size_of::<F>() {
        // Not what this trampoline's sender writes: refuse it (and the run with it, whose
        // records have the same length) rather than read past the captured bytes.
        core.respond::<U>(client, first.req, Err(capture_mismatch()));
        return;
    }
    // A closure that never returns is reported by the stall watch, named by its type.
    let _serving = core.shared.busy[core.local].serving::<F>();
    // Only a plain record starts a run; any other is served alone.
    let head = first.plain_head();
    let mut group = Group::<U>::new(core, client);
    // The property last looked up, while it is known to be live and unpoisoned.
    let mut known = None;
    let mut next = Some((first.req, first.idx, first.gn, first.cap()));
    while let Some((req, idx, gn, cap)) = next {
        // SAFETY: `first`, or a record of the same first header word (contract), so of the same
        // capture length, which is one `F`'s (checked above).
        let f: F = unsafe { std::ptr::read_unaligned(cap.as_ptr().cast::<F>()) };
        let p = match known {
            Some((i, g, p)) if i == idx && g == gn => Ok(p),
            _ => lookup::<T>(core, idx, gn),
        };
        let r = match p {
            Ok(p) => {
                known = Some((idx, gn, p));
                // SAFETY: looked up for `(idx, gn)` by this run, and nothing toggled or poisoned
                // since (a poisoning closure clears `known` below).
                unsafe { run_on(core, p, idx, gn, f) }
            }
            Err(e) => Err(e),
        };
        match r {
            Ok(u) if group.gather && req != NO_REPLY => group.push(req, u),
            r => {
                if r.is_err() {
                    known = None;
                }
                group.answer(req, r);
            }
        }
        if let (Some(h), Some((i, g, p))) = (head, known)
            && more.continues(h, i, g)
        {
            // SAFETY: `p` was looked up for `(i, g)` by this run and nothing toggled or poisoned
            // since; the continuations of a record of this kind carry one `F` each (contract).
            let live = unsafe { serve_continuations::<T, U, F>(core, p, &mut group, more) };
            if !live {
                core.props.borrow_mut().poison(i, g);
                known = None;
            }
        }
        next = head.and_then(|h| more.next_plain(h));
    }
    group.stage();
}

/// Serves the continuations right behind a record, which name the same live property at `p`
/// and closure type, so each needs only its id and captured bytes: no lookup or compare, and one
/// depth count and one `catch_unwind` for all of them. A panic answers the record that panicked
/// after those before it and returns `false` (the caller poisons the property); the rest is left
/// to the general loop, which finds the property poisoned.
///
/// # Safety
/// As for [`run_on`] for `p`, and the continuations in `more` were encoded for this `(T, U, F)`.
#[inline(always)]
unsafe fn serve_continuations<T: 'static, U: serde::Serialize + 'static, F>(
    core: &WorkerCore,
    p: *mut T,
    group: &mut Group<'_, U>,
    more: &mut RequestReader<'_>,
) -> bool
where
    F: FnOnce(&mut T) -> U + Copy,
{
    let cx = core.context();
    let level = cx.level();
    cx.set(level + DELEGATED);
    let mut at = NO_REPLY;
    let mut running = false;
    let caught = catch_unwind(AssertUnwindSafe(|| {
        while let Some((req, cap)) = more.next_continuation() {
            // SAFETY: a continuation of a record of this kind (`continues`), so its captured
            // bytes are one `F` (contract).
            let f: F = unsafe { std::ptr::read_unaligned(cap.as_ptr().cast::<F>()) };
            at = req;
            running = true;
            // SAFETY: see the contract (`run_on`).
            let u = f(unsafe { &mut *p });
            running = false;
            if req == NO_REPLY {
                drop(u);
            } else if group.gather {
                group.push(req, u);
            } else {
                core.respond(group.client, req, Ok(u));
            }
        }
    }));
    cx.set(level);
    match caught {
        Ok(()) => true,
        Err(e) if running => {
            group.answer(at, Err(panic_to_error(&*e)));
            false
        }
        Err(e) => std::panic::resume_unwind(e),
    }
}

/// Results of a run for a client of this rank, gathered and staged [`RUN_GROUP`] at a time with
/// one call into the outbox; anything else (a failure, a one-way request, a client in another
/// rank) first stages what was gathered, so the responses keep the order of the requests.
struct Group<'a, U> {
    core: &'a WorkerCore,
    client: usize,
    gather: bool,
    done: [MaybeUninit<(u32, ManuallyDrop<U>)>; RUN_GROUP],
    n: usize,
}

impl<'a, U: serde::Serialize + 'static> Group<'a, U> {
    #[inline(always)]
    fn new(core: &'a WorkerCore, client: usize) -> Self {
        Group {
            core,
            client,
            gather: !core.is_remote(client) && std::mem::size_of::<U>() <= SMALL,
            done: [const { MaybeUninit::uninit() }; RUN_GROUP],
            n: 0,
        }
    }

    /// Gathers the result `u` of request `req`.
    #[inline(always)]
    fn push(&mut self, req: u32, u: U) {
        self.done[self.n] = MaybeUninit::new((req, ManuallyDrop::new(u)));
        self.n += 1;
        if self.n == RUN_GROUP {
            self.stage();
        }
    }

    /// Stages what was gathered, then answers `req` with `r`.
    #[inline(always)]
    fn answer(&mut self, req: u32, r: Result<U, DelegationError>) {
        self.stage();
        self.core.respond(self.client, req, r);
    }

    /// Stages what was gathered.
    #[inline(always)]
    fn stage(&mut self) {
        if self.n > 0 {
            // SAFETY: the first `n` entries were written by `push` and not yet staged;
            // `MaybeUninit<X>` has the layout of `X`.
            let done = unsafe {
                std::slice::from_raw_parts(
                    self.done.as_ptr().cast::<(u32, ManuallyDrop<U>)>(),
                    self.n,
                )
            };
            self.core.respond_values(self.client, done);
            self.n = 0;
        }
    }
}
