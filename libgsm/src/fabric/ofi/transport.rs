//! The `ofi` fabric's [`Transport`]: the ring protocol's writes as `fi_writedata` (the
//! immediate is the write's remote completion data), its completions read from the endpoint's
//! completion queue. The same queue carries the fabric's other operations, which this adapter
//! finishes itself: repeated set-up hellos (answered), segment RMA (`rma.rs`'s table) and
//! rendezvous reads (`rendezvous.rs`).
//!
//! It does not know rings; `fabric/rdma` does.

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use super::rendezvous::{Ended, READ_CTX, Reads};
use super::setup::{self, Hellos};
use crate::fabric::FabricKind;
use crate::fabric::rdma::{Event, Transport};
use crate::fabric::rma::{Atomic, AtomicOp, Datatype, Done, NotPosted, Posted};
use crate::sys::ofi::{self as fi, Completion, Stack, bits};

/// A segment's atomic as libfabric names it: `FI_ATOMIC_WRITE` serves both a store and a swap
/// (a store ignores the old word), `FI_ATOMIC_READ` a load.
pub(super) fn word_atomic(kind: Atomic) -> fi::WordAtomic {
    use fi::atomics as a;
    let datatype = match kind.ty {
        Datatype::I32 => a::INT32,
        Datatype::U32 => a::UINT32,
        Datatype::I64 => a::INT64,
        Datatype::U64 => a::UINT64,
        Datatype::F32 => a::FLOAT,
        Datatype::F64 => a::DOUBLE,
    };
    let op = match kind.op {
        AtomicOp::Load => a::READ,
        AtomicOp::Store | AtomicOp::Swap => a::WRITE,
        AtomicOp::Add => a::SUM,
        AtomicOp::And => a::BAND,
        AtomicOp::Or => a::BOR,
        AtomicOp::Xor => a::BXOR,
        AtomicOp::Min => a::MIN,
        AtomicOp::Max => a::MAX,
        AtomicOp::Cas => a::CSWAP,
    };
    fi::WordAtomic { datatype, op }
}

/// Context kinds of the operations posted here: the top three bits (`READ_CTX` in
/// `rendezvous.rs`; the hellos' contexts of `setup.rs` leave bits 62-63 clear).
const RING_CTX: usize = 2 << 61;
const RMA_CTX: usize = 6 << 61;
const KIND_MASK: usize = 7 << 61;

/// Failed operations towards one peer posted again before it is reported lost: rxm in
/// libfabric 1.17 can fail a write while a connection is being made.
const ATTEMPTS: u32 = 8;

/// One rank's endpoint, its peers and the fabric's own operations in flight.
pub(super) struct OfiTransport {
    stack: Stack,
    /// The provider's name, for messages.
    pub provider: String,
    /// Each peer's address and its region's key (plan order).
    peers: Vec<(u64, u64)>,
    /// The set-up hellos, to answer a peer that repeats its own.
    hellos: Hellos,
    /// Segment RMA operations in flight (`rma.rs`).
    rma: RmaTable,
    /// The rendezvous's reads and registrations (`rendezvous.rs`).
    reads: Reads,
    /// Bodies parked for peers to read and not yet unparked.
    parked: usize,
    /// Scratch for completions.
    done: Vec<Completion>,
}

// SAFETY: the raw pointers (read buffers, local descriptors) belong to reads this transport
// tracks; it is moved into the ring state once and then used under the engine's lock, by one
// thread at a time, as the endpoint requires (`FI_THREAD_DOMAIN`).
unsafe impl Send for OfiTransport {}

impl OfiTransport {
    pub(super) fn new(stack: Stack, peers: Vec<(u64, u64)>, hellos: Hellos) -> OfiTransport {
        OfiTransport {
            provider: stack.offer.provider.clone(),
            stack,
            peers,
            hellos,
            rma: RmaTable::default(),
            reads: Reads::default(),
            parked: 0,
            done: Vec::with_capacity(fi::CQ_BATCH),
        }
    }

    /// The endpoint and the segment operations in flight, for `rma.rs`'s posts.
    pub(super) fn rma_parts(&mut self) -> (&mut Stack, &mut RmaTable) {
        (&mut self.stack, &mut self.rma)
    }

    /// (peer index, address) of every peer, and whether the provider wants local buffers
    /// registered.
    pub(super) fn peer_addresses(&self) -> (Vec<u64>, bool) {
        let v = self.peers.iter().map(|&(addr, _)| addr).collect();
        (v, self.stack.offer.mr_mode & bits::MR_LOCAL != 0)
    }

    /// Registers a body for peers to read (`Rendezvous::park`).
    ///
    /// # Safety
    /// As `Rendezvous::park`.
    pub(super) unsafe fn park(
        &mut self,
        ptr: *const u8,
        len: usize,
    ) -> Result<crate::fabric::Parked, String> {
        // SAFETY: the caller's.
        let p = unsafe { self.reads.park(&mut self.stack, ptr, len) }?;
        self.parked += 1;
        Ok(p)
    }

    /// Deregisters a parked body.
    pub(super) fn unpark(&mut self, id: u64) {
        self.stack.deregister(id);
        self.parked = self.parked.saturating_sub(1);
    }

    /// Starts reading `len` bytes at `addr` (key `key`) of peer `peer` into `dst`; the turns
    /// post it.
    ///
    /// # Safety
    /// As `Reads::start`.
    pub(super) unsafe fn start_read(
        &mut self,
        peer: usize,
        addr: u64,
        key: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<u64, String> {
        let src = self.peers[peer].0;
        // SAFETY: the caller's.
        unsafe {
            self.reads
                .start(&mut self.stack, (peer, src), addr, key, dst, len)
        }
    }

    /// How read `n` ended, if it did; every read fails once the job fails or stops (`ending`).
    pub(super) fn read_ended(&mut self, n: u64, ending: bool) -> Option<Ended> {
        if ending {
            self.reads
                .fail_all("the job is ending (a failure elsewhere)");
        }
        self.reads.ended(&mut self.stack, n)
    }

    /// One completion, as the ring protocol sees it (the fabric's own operations finished
    /// here).
    fn event(&mut self, e: &Completion) -> Event {
        if e.flags & bits::REMOTE_CQ_DATA != 0 && e.flags & bits::REMOTE_WRITE != 0 {
            return Event::Arrived {
                imm: e.data as u32,
                peer: None,
            };
        }
        match e.context & KIND_MASK {
            RING_CTX => Event::Done((e.context & !KIND_MASK) as u64),
            RMA_CTX => {
                self.rma.finish(e.context & !KIND_MASK, Ok(()));
                Event::Other
            }
            READ_CTX => {
                self.reads.completed(e.context);
                Event::Other
            }
            _ => self.repeated_hello(e.context),
        }
    }

    /// A peer sent its hello again (it has not heard this rank's): answer it.
    fn repeated_hello(&mut self, context: usize) -> Event {
        let Some(p) = setup::hello_buffer(context) else {
            return Event::Other; // a hello send completing
        };
        let r = self
            .hellos
            .repost(&mut self.stack, p)
            .and_then(|()| self.hellos.resend(&mut self.stack, p));
        match r {
            Ok(()) => Event::Other,
            Err(e) => Event::Trouble(p, e.to_string()),
        }
    }

    /// A failed operation, as the ring protocol sees it.
    fn failure(&mut self, context: usize, detail: String) -> Event {
        match context & KIND_MASK {
            RING_CTX => Event::Failed((context & !KIND_MASK) as u64, detail),
            // A segment operation's own failure: its caller gets the error (a peer that is
            // really gone fails the ring writes too).
            RMA_CTX => {
                self.rma.finish(context & !KIND_MASK, Err(detail));
                Event::Other
            }
            // Posted again by a later turn (`Reads::failed` queued it).
            READ_CTX => match self.reads.failed(context) {
                Some(p) => Event::Trouble(p, detail),
                None => Event::Other,
            },
            // A repeated hello that failed: the peer will repeat its own.
            _ if setup::is_hello_send(context) => Event::Other,
            _ => Event::Unknown(format!("a failed operation: {detail}")),
        }
    }
}

impl Transport for OfiTransport {
    const KIND: FabricKind = FabricKind::Ofi;
    const RETRIES: u32 = ATTEMPTS;

    unsafe fn write(
        &mut self,
        peer: usize,
        src: *const u8,
        len: usize,
        dst: u64,
        imm: u32,
        token: u64,
    ) -> Result<bool, String> {
        let (addr, key) = self.peers[peer];
        let ctx = RING_CTX | token as usize;
        // SAFETY: the caller's (the source lies in the registered region, unchanged until this
        // context's completion).
        let r = unsafe {
            self.stack
                .write(src, len, Some(u64::from(imm)), addr, dst, key, ctx)
        };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.code == fi::EAGAIN => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    fn poll(&mut self, out: &mut Vec<Event>) -> bool {
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        let more = match self.stack.poll(&mut done) {
            Ok(n) => {
                for e in &done {
                    let ev = self.event(e);
                    out.push(ev);
                }
                n >= fi::CQ_BATCH
            }
            Err(f) => {
                let ev = self.failure(f.context, f.detail);
                out.push(ev);
                true
            }
        };
        self.done = done;
        more
    }

    fn turn(&mut self) -> Result<bool, (usize, String)> {
        self.reads
            .post(&mut self.stack)
            .map_err(|(p, e)| (p, e.to_string()))
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.stack.cq_fd()
    }

    fn may_sleep(&mut self) -> bool {
        !self.stack.can_wait() || self.stack.trywait()
    }

    fn naps_short(&self) -> bool {
        // The shm provider's descriptor does not wake on a peer's write.
        self.provider == "shm"
    }

    fn serving(&self) -> bool {
        // A parked body's bytes move only as this rank's progress sends them (`tcp;ofi_rxm`).
        self.parked > 0
    }

    fn lost(&mut self, peer: usize, why: &str) {
        self.reads.lost(peer, why);
    }

    fn describe(&self) -> String {
        format!("{} RMA", self.provider)
    }
}

/// Segment operations in flight, by the index their context carries.
#[derive(Default)]
pub(super) struct RmaTable {
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
}

struct InFlight {
    buf: Vec<u8>,
    words: Box<[u64; 3]>,
    read: bool,
    done: Arc<Done>,
}

impl RmaTable {
    /// Posts `op` to `dest`'s memory at `addr` (key `key`).
    pub(super) fn post(
        &mut self,
        stack: &mut Stack,
        dest: u64,
        addr: u64,
        key: u64,
        op: Posted,
    ) -> Result<Arc<Done>, NotPosted> {
        let n = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let ctx = RMA_CTX | n;
        let done = Arc::new(Done::default());
        let mut f = InFlight {
            buf: Vec::new(),
            words: Box::new([0; 3]),
            read: false,
            done: done.clone(),
        };
        // SAFETY: the buffers are heap memory owned by `f`, which the table keeps (moving `f`
        // does not move them) until `finish` reads this context's completion.
        let r = unsafe {
            match op {
                Posted::Read { len } => {
                    f.buf = vec![0; len];
                    f.read = true;
                    stack.read(
                        f.buf.as_mut_ptr(),
                        len,
                        std::ptr::null_mut(),
                        dest,
                        addr,
                        key,
                        ctx,
                    )
                }
                Posted::Write { data } => {
                    f.buf = data;
                    stack.write_unregistered(f.buf.as_ptr(), f.buf.len(), dest, addr, key, ctx)
                }
                Posted::Word { kind, words } => {
                    *f.words = words;
                    let w: *mut [u64; 3] = &mut *f.words;
                    stack.word_atomic(word_atomic(kind), w, dest, addr, key, ctx)
                }
            }
        };
        match r {
            Ok(()) => {
                self.slots[n] = Some(f);
                Ok(done)
            }
            Err(e) => {
                self.free.push(n);
                Err(if e.code == fi::EAGAIN {
                    NotPosted::Busy
                } else {
                    NotPosted::Failed(e.to_string())
                })
            }
        }
    }

    /// Operation `n` completed (or failed with the provider's words).
    fn finish(&mut self, n: usize, r: Result<(), String>) {
        let Some(f) = self.slots.get_mut(n).and_then(Option::take) else {
            return;
        };
        self.free.push(n);
        let bytes = if f.read { f.buf } else { Vec::new() };
        f.done.finish(r.map(|()| (bytes, f.words[2])));
    }
}
