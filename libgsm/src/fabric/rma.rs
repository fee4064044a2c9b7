//! One-sided operations a fabric offers the runtime's segments (`segment/rma.rs`): the [`Port`]
//! a fabric with RMA installs for the process (the `ofi` fabric does, at attach), the operations
//! it posts and their completions. It knows nothing of segments, rights or generations.
//! See `segment/README.md`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// The type of a remote atomic's word: 4 or 8 bytes, integer or IEEE float.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Datatype {
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

/// What a remote atomic does to its word; every one answers the old value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    /// Read the word.
    Load,
    /// Store `words[0]`.
    Store,
    /// Add `words[0]` (wrapping for integers).
    Add,
    /// Bitwise and, or, exclusive or with `words[0]` (integers only).
    And,
    Or,
    Xor,
    /// Keep the smaller, the larger of the word and `words[0]`.
    Min,
    Max,
    /// Fetch and store `words[0]`.
    Swap,
    /// Store `words[1]` if the word is `words[0]` (bit for bit).
    Cas,
}

/// One kind of remote atomic: a datatype and an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Atomic {
    pub ty: Datatype,
    pub op: AtomicOp,
}

const TYPES: [Datatype; 6] = [
    Datatype::I32,
    Datatype::U32,
    Datatype::I64,
    Datatype::U64,
    Datatype::F32,
    Datatype::F64,
];
const OPS: [AtomicOp; 10] = [
    AtomicOp::Load,
    AtomicOp::Store,
    AtomicOp::Add,
    AtomicOp::And,
    AtomicOp::Or,
    AtomicOp::Xor,
    AtomicOp::Min,
    AtomicOp::Max,
    AtomicOp::Swap,
    AtomicOp::Cas,
];

impl Datatype {
    /// The word's bytes (its alignment too).
    pub(crate) fn width(self) -> u64 {
        match self {
            Datatype::I32 | Datatype::U32 | Datatype::F32 => 4,
            _ => 8,
        }
    }

    pub(crate) fn is_float(self) -> bool {
        matches!(self, Datatype::F32 | Datatype::F64)
    }

    /// Its number on the wire ([`Atomic::code`]).
    pub(crate) fn code(self) -> u8 {
        TYPES.iter().position(|&t| t == self).unwrap_or(0) as u8
    }
}

impl Atomic {
    /// Every kind that exists (bitwise operations on floats do not), for a port's survey.
    pub(crate) fn all() -> impl Iterator<Item = Atomic> {
        TYPES.into_iter().flat_map(|ty| {
            OPS.into_iter()
                .map(move |op| Atomic { ty, op })
                .filter(|a| a.exists())
        })
    }

    /// Whether the operation applies to the type (bitwise ones to integers only).
    pub(crate) fn exists(self) -> bool {
        !(self.ty.is_float() && matches!(self.op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor))
    }

    /// Its number in a request (`segment/remote.rs`) and in a port's bit set: type, then op.
    pub(crate) fn code(self) -> u8 {
        let op = OPS.iter().position(|&o| o == self.op).unwrap_or(0) as u8;
        self.ty.code() * OPS.len() as u8 + op
    }

    /// The kind numbered `code`, if that is one that exists (a request's number is checked).
    pub(crate) fn decode(code: u64) -> Option<Atomic> {
        let c = usize::try_from(code).ok()?;
        let a = Atomic {
            ty: *TYPES.get(c / OPS.len())?,
            op: OPS[c % OPS.len()],
        };
        a.exists().then_some(a)
    }
}

/// One operation handed to the port.
#[derive(Debug)]
#[cfg_attr(
    not(feature = "ofi"),
    allow(dead_code, reason = "read by the ofi fabric's port")
)]
pub(crate) enum Posted {
    /// Read `len` bytes.
    Read { len: usize },
    /// Write these bytes.
    Write { data: Vec<u8> },
    /// An atomic on a 4- or 8-byte word (operands in the low bytes of `words[0]` and
    /// `words[1]`); the old word comes back.
    Word { kind: Atomic, words: [u64; 3] },
}

/// Why a post did not happen.
#[derive(Debug)]
pub(crate) enum NotPosted {
    /// The provider's queue is full: try again after a turn.
    Busy,
    /// Anything else, worded for the user.
    Failed(String),
}

/// What a completed operation gives: the bytes read and the old word, or the provider's error.
pub(crate) type Outcome = Result<(Vec<u8>, u64), String>;

/// A posted operation's completion.
#[derive(Debug, Default)]
pub(crate) struct Done {
    finished: AtomicBool,
    out: Mutex<Option<Outcome>>,
}

impl Done {
    /// Called once, by whoever reads the completion.
    pub(crate) fn finish(&self, r: Outcome) {
        *self.out.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        self.finished.store(true, Ordering::Release);
    }

    /// Whether the operation is complete.
    pub(crate) fn finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Its outcome (once).
    pub(crate) fn take(&self) -> Outcome {
        let mut o = self.out.lock().unwrap_or_else(|p| p.into_inner());
        o.take().unwrap_or_else(|| Err("completed twice".into()))
    }
}

/// A region registered for remote access.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    /// For [`Port::unexpose`].
    pub handle: usize,
    /// The address peers name its first byte by (0 when the provider takes offsets).
    pub base: u64,
    /// Its key.
    pub key: u64,
}

/// What a fabric with one-sided operations offers segments.
pub(crate) trait Port: Send + Sync {
    /// Whether this port reaches `rank`.
    fn serves(&self, rank: usize) -> bool;
    /// Whether fetching atomics are available at all (then segments register atomic regions).
    fn word_atomics(&self) -> bool;
    /// Whether the provider does this kind of atomic itself; the others are delegated to the
    /// owner's handler.
    fn native(&self, kind: Atomic) -> bool;
    /// Registers `len` bytes at `ptr` for remote reads and/or writes (atomics need both) under
    /// a key no other process can guess.
    ///
    /// # Safety
    /// The bytes stay mapped until [`unexpose`](Port::unexpose) (or the port's end).
    unsafe fn expose(
        &self,
        ptr: *mut u8,
        len: usize,
        read: bool,
        write: bool,
    ) -> Result<Region, String>;
    /// Closes a region: the provider refuses its key from now on.
    fn unexpose(&self, handle: usize);
    /// Posts `op` on the memory at `addr` (key `key`) of `rank`.
    fn post(&self, rank: usize, addr: u64, key: u64, op: Posted) -> Result<Arc<Done>, NotPosted>;
}

static PORT: RwLock<Option<Arc<dyn Port>>> = RwLock::new(None);

/// Installs (or, with `None`, removes) this process's port.
pub(crate) fn install(p: Option<Arc<dyn Port>>) {
    *PORT.write().unwrap_or_else(|e| e.into_inner()) = p;
}

/// This process's port, if a fabric with one-sided operations installed one.
pub(crate) fn port() -> Option<Arc<dyn Port>> {
    PORT.read().ok()?.clone()
}
