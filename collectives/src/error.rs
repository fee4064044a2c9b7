//! The errors a collective reports to the member that made the mistake.
//!
//! Only mistakes a member can see in its own arguments, before it sends anything, are returned
//! as [`Error`]: the call then did nothing, so the member can fix its arguments without leaving
//! half a protocol behind. Disagreements *between* members (a member passing a buffer of another
//! length than the root's, a member calling another collective) are seen only in the middle of
//! the protocol, where the other members already wait for this one; those end the whole job
//! (`gossamer::fail_job`, then a panic, so even a spawned fiber's joiner cannot carry on) with a
//! message naming the team, the operation and both workers, which is the only way the waiting
//! members learn about it.

/// A collective refused its arguments; nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `root` names no member of the team.
    #[error(
        "gsm-collectives {op}: root {root} is not a member of this team of {size} (roots are team \
         indices 0..{size}, not worker ids)"
    )]
    BadRoot {
        /// The operation.
        op: &'static str,
        /// The root given.
        root: usize,
        /// The team's size.
        size: usize,
    },
    /// A buffer of this member has the wrong number of elements.
    #[error(
        "gsm-collectives {op}: the {buffer} buffer holds {got} elements but {want} are needed \
         ({why})"
    )]
    Length {
        /// The operation.
        op: &'static str,
        /// Which buffer (`send`, `recv`, `counts`).
        buffer: &'static str,
        /// Its length.
        got: usize,
        /// The length it must have.
        want: usize,
        /// Why that length.
        why: &'static str,
    },
    /// The root of a rooted operation on values passed no value (`None`).
    #[error("gsm-collectives {op}: the root (team index {root}) must pass Some(value)")]
    MissingRootValue {
        /// The operation.
        op: &'static str,
        /// The root.
        root: usize,
    },
}
