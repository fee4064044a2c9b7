//! Reference counting of a trust across workers and ranks: clone, drop and serialisation send
//! registrations and releases of trust ids to the trustee (`property.rs` keeps the id sets).
//! See ARCHITECTURE.md.

use super::*;

/// Sends a reference-counting record (`kind`: `CONTROL_REGISTER` or `CONTROL_RELEASE`, see
/// `worker::control_words`) for trust id `id` of property `(idx, gn)` on `trustee`, with its
/// second word.
pub(super) fn control(
    core: &WorkerCore,
    trustee: usize,
    idx: u32,
    gn: u32,
    kind: u32,
    id: u64,
    word: u64,
) {
    let mut cap = [0u8; 16];
    cap[..8].copy_from_slice(&id.to_le_bytes());
    cap[8..].copy_from_slice(&word.to_le_bytes());
    core.send_request(trustee, None, idx, gn, kind, Src::slice(&cap), None, false);
}

/// What a dropped handle asks a worker it sent `apply_then`s from to do (see the `trust` module
/// docs, "A handle that moved"): register a stand-in trust made from `parent` and release it at
/// once, behind that worker's earlier requests to the trustee.
#[derive(Clone, Copy)]
pub(super) struct StandIn {
    trustee: u32,
    idx: u32,
    gn: u32,
    parent: u64,
}

/// The requests for the stand-in registrations a dropped handle asks for (see the `trust`
/// module docs, "A handle that moved").
pub(super) struct ServeStandIn;

impl Delegated for ServeStandIn {
    /// # Safety
    /// `rec` must be a record encoded by `Trust::drop` (captured bytes: one `StandIn`).
    #[inline(always)]
    unsafe fn serve(
        core: &WorkerCore,
        _client: usize,
        rec: &Request<'_>,
        _more: &mut RequestReader<'_>,
    ) {
        // SAFETY: `Trust::drop` copied one `StandIn` into the captured bytes (the contract). A
        // corrupt record is dropped: nobody waits for an answer, and the property stays alive.
        let Ok(s) = (unsafe { captured::<StandIn>(rec) }) else {
            return;
        };
        let (t, id) = (s.trustee as usize, core.new_trust_id());
        control(core, t, s.idx, s.gn, CONTROL_REGISTER, id, s.parent);
        control(core, t, s.idx, s.gn, CONTROL_RELEASE, id, 0);
    }
}

impl<T: Send + 'static> Clone for Trust<T> {
    fn clone(&self) -> Self {
        let core = core_or_panic("Trust::clone");
        let id = core.new_trust_id();
        if self.current(core) {
            self.register(core, id);
        }
        Trust {
            home: self.home,
            idx: self.idx,
            gn: self.gn,
            ty: self.ty,
            id,
            made: AtomicU64::new(0),
            senders: AtomicU64::new(0),
            _t: PhantomData,
        }
    }
}

impl<T: Send + 'static> Drop for Trust<T> {
    fn drop(&mut self) {
        // Outside a worker, or while the runtime stops, the property goes down with its trustee's
        // table; there is nobody left to tell.
        if let Some(core) = crate::worker::core() {
            if !core.stopping() && self.current(core) {
                let senders = self.senders.load(Ordering::Relaxed);
                // Sent from nowhere, or from this worker alone (whose bit 63, from 63 up, may
                // stand for others too).
                let alone = senders & !core.sender_bit == 0 && (senders == 0 || core.local < 63);
                let others = if alone {
                    Vec::new()
                } else {
                    self.other_senders(core)
                };
                let made = self.made.load(Ordering::Relaxed) + others.len() as u64;
                self.control(core, CONTROL_RELEASE, self.id, made);
                let stand_in = StandIn {
                    trustee: self.trustee_id() as u32,
                    idx: self.idx,
                    gn: self.gn,
                    parent: self.id,
                };
                for w in others {
                    core.send_request(
                        w,
                        Some(codeptr::offset_of(trampoline::<ServeStandIn>() as usize)),
                        0,
                        0,
                        NO_REPLY,
                        Src::of(&stand_in),
                        None,
                        false,
                    );
                }
            }
        }
    }
}

/// Serialising a trust makes a *new* handle for the receiver, as `clone` does: a fresh trust id,
/// registered with the trustee (asynchronously, naming this handle as the one it was made from),
/// is what the bytes carry; the original handle stays valid and is dropped as usual. So a trust
/// sent to another rank inside an `apply_with` argument (or a result) keeps the property alive
/// until both the sender's handle and the receiver's are gone, and the property is freed exactly
/// once, on its trustee, whatever order the registration and the two releases arrive in (see
/// `property.rs`).
///
/// Deserialise the bytes exactly once: every deserialised handle drops its id once, and bytes that
/// are never deserialised keep the property alive until the job ends. Bytes read twice release
/// their id twice: if the property was freed by the first release, the second ends the job
/// ([`Error::TrustCount`](crate::Error::TrustCount)); if another handle still kept it, the id
/// stays counted and the property outlives every handle, which a run that ends well reports on
/// standard error. Deserialise them on a
/// worker of the same job: a handle read outside any worker, or from the bytes of a handle whose
/// runtime had ended, names nothing (its applies fail with `DeadProperty`).
///
/// # Panics
/// Outside a gossamer worker (the registration is sent from the current worker).
impl<T: Send + 'static> serde::Serialize for Trust<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let core = core_or_panic("serialising a Trust");
        if !self.current(core) {
            // Generation 0 is never live: the copy names nothing either (see `deserialize`).
            return (self.trustee_id() as u32, self.idx, 0u32, 0u64).serialize(s);
        }
        let id = core.new_trust_id();
        self.register(core, id);
        (self.trustee_id() as u32, self.idx, self.gn, id).serialize(s)
    }
}

impl<'de, T: Send + 'static> serde::Deserialize<'de> for Trust<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (trustee, idx, gn, id) = <(u32, u32, u32, u64)>::deserialize(d)?;
        // A copy of a handle that named nothing (generation 0) names nothing here either.
        let epoch = match crate::worker::core() {
            Some(core) if gn != 0 => core.epoch(),
            _ => 0,
        };
        Ok(Trust {
            home: home(trustee as usize, epoch),
            idx,
            gn,
            ty: type_index::<T>(),
            id,
            made: AtomicU64::new(0),
            senders: AtomicU64::new(0),
            _t: PhantomData,
        })
    }
}
