//! The trustee's half of delegation: the kinds of request a trust sends, each decoding its
//! closure and argument where the client's half (`call.rs`) encoded them, running it against
//! the property and responding. See ARCHITECTURE.md.

use super::*;

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
            core.run_plain(make)
                .map(|v| core.props.borrow_mut().insert(v, id))
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
        unsafe { core.serve_run::<T, U, F>(client, rec, more) }
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
        let r = core.run_delegated::<T, U>(rec.idx, rec.gn, move |t| f(t, a));
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
