//! The client's half of delegation: staging a request, waiting for its answer (a fiber that
//! blocks) or keeping its callback (`apply_then`), and the argument on its way. It does not serve
//! requests (`serve.rs` does, where what is encoded here is decoded). See ARCHITECTURE.md.

use super::*;

/// Stages a request to `dest` and suspends the fiber until its answer arrives. `ser`: the
/// argument bytes are a `postcard` encoding.
#[allow(clippy::too_many_arguments)]
pub(crate) fn block_on<U: Wire>(
    core: &WorkerCore,
    dest: usize,
    tramp: Trampoline,
    idx: u32,
    gn: u32,
    cap: Src<'_>,
    arg: Option<Src<'_>>,
    ser: bool,
) -> Result<U, DelegationError> {
    if !core.can_block() {
        return Err(DelegationError::BlockingInDelegatedContext);
    }
    let fiber = core.current_fiber().unwrap_or(0);
    let mut out: (bool, MaybeUninit<Result<U, DelegationError>>) = (false, MaybeUninit::uninit());
    // Every later access to `out` goes through this one raw pointer (the completer's write and
    // our reads), so no reference to `out` is invalidated by the completer's write.
    let outp: *mut (bool, MaybeUninit<Result<U, DelegationError>>) = &mut out;
    let req = core.pending().add(dest, fill_fiber::<U>, |data| {
        data[0] = MaybeUninit::new(u64::from(fiber));
        data[1] = MaybeUninit::new(outp as usize as u64);
    });
    core.send_request(
        dest,
        Some(codeptr::offset_of(tramp as usize)),
        idx,
        gn,
        req,
        cap,
        arg,
        ser,
    );
    if core.nothing_ready() && dest != core.id {
        // No other fiber will add to this batch before the worker polls: send it now.
        core.flush_to(dest, true);
    }
    // SAFETY: `outp` points to `out` on this fiber's stack, alive for this whole
    // function; the completer writes through the same pointer, on this same thread, only while
    // the fiber is suspended, and sets the flag only after it wrote the result.
    core.wait_until(|| unsafe { std::ptr::read_volatile(&raw const (*outp).0) });
    // SAFETY: see above; the result is initialised and read once.
    unsafe { (*outp).1.assume_init_read() }
}

/// # Safety
/// `data` must come from `block_on::<U>` of a fiber that is still waiting.
pub(super) unsafe fn fill_fiber<U: Wire>(
    core: &WorkerCore,
    data: &mut Data,
    st: u8,
    body: &[Byte],
) {
    // SAFETY: `block_on` stored the fiber id and a pointer to its `(bool, MaybeUninit<..>)`.
    let (fiber, out) = unsafe {
        (
            data[0].assume_init() as u32,
            &mut *(data[1].assume_init() as usize
                as *mut (bool, MaybeUninit<Result<U, DelegationError>>)),
        )
    };
    // SAFETY: `st`/`body` are the response to this request, so an OK body holds a moved `U`.
    out.1 = MaybeUninit::new(unsafe { decode::<U>(st, body) });
    out.0 = true;
    core.wake_fiber(fiber);
}

/// # Safety
/// `data` must come from `push_callback::<U, G>`.
pub(super) unsafe fn fill_callback<U: Wire, G: FnOnce(Result<U, DelegationError>)>(
    core: &WorkerCore,
    data: &mut Data,
    st: u8,
    body: &[Byte],
) {
    core.pending().then_answered();
    let g: G = if inline_fits::<G>() {
        // SAFETY: `push_callback` wrote a `G` into `data` (it fits) and it is read once.
        unsafe { std::ptr::read(data.as_ptr().cast::<G>()) }
    } else {
        // SAFETY: `push_callback` stored a `Box<G>` raw pointer; reclaimed once.
        unsafe { *Box::from_raw(data[0].assume_init() as usize as *mut G) }
    };
    // SAFETY: the response to this request.
    g(unsafe { decode::<U>(st, body) })
}

pub(super) const fn inline_fits<G>() -> bool {
    std::mem::size_of::<G>() <= std::mem::size_of::<Data>()
        && std::mem::align_of::<G>() <= std::mem::align_of::<Data>()
}

pub(super) fn push_callback<U: Wire, G: FnOnce(Result<U, DelegationError>) + 'static>(
    core: &WorkerCore,
    dest: usize,
    g: G,
) -> u32 {
    core.pending().add(dest, fill_callback::<U, G>, |data: &mut Data| {
        if inline_fits::<G>() {
            // SAFETY: `G` fits in `data` in size and alignment (checked above).
            unsafe { std::ptr::write(data.as_mut_ptr().cast::<G>(), g) };
        } else {
            data[0] = MaybeUninit::new(Box::into_raw(Box::new(g)) as usize as u64);
        }
    })
}

/// An argument on its way to worker `dest`: within the process the value itself, to be moved by
/// bytes into the record (and then never dropped here); to another rank its `postcard` encoding
/// (the value is dropped here once encoded; trusts inside it travel as new handles, see
/// `Serialize for Trust`).
pub(crate) enum OutArg<A> {
    Moved(std::mem::ManuallyDrop<A>),
    Encoded(Vec<u8>),
    /// A large byte vector encoded in its own allocation behind `room` bytes for the captured
    /// ones (`codec::encode_spliced`), handed to the destination's queue by
    /// [`offer`](Self::offer); `at`/`len` are the encoding's bytes in it, valid while either
    /// holds the vector.
    Spliced {
        body: Option<Vec<Byte>>,
        room: usize,
        at: *const u8,
        len: usize,
    },
}

impl<A: Wire> OutArg<A> {
    /// Prepares `arg` for worker `dest`.
    pub(crate) fn new(core: &WorkerCore, dest: usize, arg: A) -> Result<Self, DelegationError> {
        if !core.is_remote(dest) {
            return Ok(OutArg::Moved(std::mem::ManuallyDrop::new(arg)));
        }
        crate::wire::codec::encode(&arg)
            .map(OutArg::Encoded)
            .map_err(|e| {
                DelegationError::Wire(format!(
                    "gossamer: the argument (a `{}`) could not be serialised for another rank: {e}",
                    std::any::type_name::<A>()
                ))
            })
    }

    /// As [`new`](Self::new), but a large `Vec<u8>` to another rank is encoded in its own
    /// allocation behind `room` bytes (the captured bytes' length) and given to the queue to
    /// `dest` by [`offer`](Self::offer), which parks it as the record's body with no copy.
    pub(crate) fn with_room(
        core: &WorkerCore,
        dest: usize,
        arg: A,
        room: usize,
    ) -> Result<Self, DelegationError> {
        if !core.is_remote(dest) {
            return Self::new(core, dest, arg);
        }
        match crate::wire::codec::encode_spliced(arg, room) {
            Ok(body) => Ok(OutArg::Spliced {
                at: body[room..].as_ptr().cast::<u8>(),
                len: body.len() - room,
                body: Some(body),
                room,
            }),
            Err(arg) => Self::new(core, dest, arg),
        }
    }

    /// Hands a spliced argument's vector to the queue to `dest` (see [`with_room`]): call just
    /// before staging the request. Other arguments stay here.
    ///
    /// [`with_room`]: Self::with_room
    pub(crate) fn offer(&mut self, core: &WorkerCore, dest: usize) {
        if let OutArg::Spliced { body, room, .. } = self {
            if let Some(body) = body.take() {
                core.offer_body(dest, body, *room);
            }
        }
    }

    /// The bytes the record carries.
    pub(crate) fn src(&self) -> Src<'_> {
        match self {
            OutArg::Moved(a) => Src::of(&**a),
            OutArg::Encoded(b) => Src::slice(b),
            OutArg::Spliced { at, len, .. } => {
                // SAFETY: `at..at + len` lies in the vector, initialised (the encoding); moving
                // the vector to the queue does not move its bytes, and the queue keeps it until
                // the request staged with these bytes, or a later offer, takes it.
                Src::slice(unsafe { std::slice::from_raw_parts(*at, *len) })
            }
        }
    }

    /// Whether the bytes are an encoding (the record's `SER` flag).
    pub(crate) fn encoded(&self) -> bool {
        !matches!(self, OutArg::Moved(_))
    }
}

/// Decodes a response into the result it carries.
///
/// # Safety
/// If `st == OK`, `body` must hold the bytes of a `U` moved by [`WorkerCore::respond`], not yet
/// taken by anyone else. If `st == OK | SER_STATUS`, `body` holds initialised bytes (a
/// `postcard` encoding from another rank, decoded with every check `postcard` makes).
#[inline]
pub(crate) unsafe fn decode<U: serde::de::DeserializeOwned + 'static>(
    st: u8,
    body: &[Byte],
) -> Result<U, DelegationError> {
    match st {
        status::OK => {
            debug_assert_eq!(body.len(), std::mem::size_of::<U>());
            if body.len() != std::mem::size_of::<U>() {
                return Err(DelegationError::Panicked(
                    "gossamer: response of the wrong size".into(),
                ));
            }
            // SAFETY: per the contract, these are the bytes of a moved `U`.
            Ok(unsafe { std::ptr::read_unaligned(body.as_ptr().cast::<U>()) })
        }
        st if st == status::OK | SER_STATUS => {
            // SAFETY: initialised bytes (contract); `MaybeUninit<u8>` has the layout of `u8`.
            let b = unsafe { std::slice::from_raw_parts(body.as_ptr().cast::<u8>(), body.len()) };
            crate::wire::codec::decode::<U>(b).map_err(|e| {
                DelegationError::Wire(format!(
                    "gossamer: the result (a `{}`) from another rank could not be decoded: {e}",
                    std::any::type_name::<U>()
                ))
            })
        }
        // SAFETY: every non-OK body is the bytes of a `str` (`error_to_status`), initialised.
        status::PANICKED => Err(DelegationError::Panicked(unsafe { message_of(body) })),
        status::POISONED => Err(DelegationError::Poisoned),
        status::DEAD => Err(DelegationError::DeadProperty),
        status::BLOCKING => Err(DelegationError::BlockingInDelegatedContext),
        // SAFETY: as for PANICKED.
        status::WIRE => Err(DelegationError::Wire(unsafe { message_of(body) })),
        _ => Err(DelegationError::Stopped),
    }
}

/// The text of an error body.
///
/// # Safety
/// Every byte of `body` must be initialised.
unsafe fn message_of(body: &[Byte]) -> String {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8` and the bytes are initialised (contract).
    let b = unsafe { std::slice::from_raw_parts(body.as_ptr().cast::<u8>(), body.len()) };
    String::from_utf8_lossy(b).into_owned()
}
