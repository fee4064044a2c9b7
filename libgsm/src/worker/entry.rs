//! The one door through which a trustee runs delegated code.
//!
//! Every kind of delegated request (`apply`, `apply_with`, `entrust_on`, a remote spawn, a
//! mailed value, …) is a type implementing [`Delegated`]; what travels in a request is the code
//! offset of [`entry`]`::<D>`, the one generic function every trampoline is an instance of. A
//! batch from another process is served only through offsets that are exactly such an instance:
//! the table of them is read once from the binary's own symbol table (`wire::codeptr`), so a
//! peer cannot make a trustee jump anywhere else, whatever bytes it sends. See
//! `libgsm/TRUST_BOUNDARY.md`.

use super::{Trampoline, WorkerCore};
use crate::error::Error;
use crate::wire::codeptr;
use crate::wire::record::{Request, RequestReader};

/// A kind of delegated request, served on the trustee by [`Delegated::serve`].
pub(crate) trait Delegated {
    /// Serves `rec` (and, for kinds that do, the plain records of its own kind right behind it
    /// in `more`) on the trustee `core`, for worker `client`.
    ///
    /// # Safety
    /// `rec` was encoded by this kind's sender: its captured bytes are what `serve` reads them
    /// as (their size is checked, their contents cannot be), and so were the records of the
    /// same first header word it may take from `more`.
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        more: &mut RequestReader<'_>,
    );
}

/// The field of a delegation kind's marker type: names its type parameters, holds nothing, and
/// is `Send`/`Sync` whatever they are.
pub(crate) type Of<T> = std::marker::PhantomData<fn() -> T>;

/// The entry of every delegated request: the only functions whose offsets a trustee calls for a
/// batch from another process. Never inlined, so that each instance has an address and a symbol.
///
/// # Safety
/// As for [`Delegated::serve`].
#[inline(never)]
unsafe fn entry<D: Delegated>(
    core: &WorkerCore,
    client: usize,
    rec: &Request<'_>,
    more: &mut RequestReader<'_>,
) {
    // SAFETY: the caller's.
    unsafe { D::serve(core, client, rec, more) }
}

/// The path of [`entry`] as the symbol table spells it (demangled, without hash or generic
/// arguments); `the_entry_table_holds_every_instance` checks that it names this function.
pub(crate) const ENTRY_PATH: &str = "gossamer::worker::entry::entry";

/// The trampoline that travels for requests of kind `D`.
#[inline(always)]
pub(crate) fn trampoline<D: Delegated>() -> Trampoline {
    entry::<D>
}

/// Loads the table of delegation entries, for a rank that will serve batches from other
/// processes: an error (a binary without its symbol table) stops the start of the run, before
/// any peer's request could be refused for it.
pub(crate) fn check_entries() -> Result<(), Error> {
    let start = std::time::Instant::now();
    let table = codeptr::entries(ENTRY_PATH).map_err(|why| Error::Start(why.to_string()))?;
    tracing::debug!(
        target: "gossamer::bootstrap",
        entries = table.len(),
        took_us = start.elapsed().as_micros() as u64,
        "delegation entries read from this program's symbol table"
    );
    Ok(())
}

/// The address that code offset `offset` from another process names, if it is exactly one of
/// this binary's delegation entries.
#[inline]
pub(crate) fn foreign_entry(offset: u64) -> Option<usize> {
    codeptr::entries(ENTRY_PATH)
        .ok()
        .and_then(|t| codeptr::entry_in(t, offset))
}
