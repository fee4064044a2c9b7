//! A bare libfabric endpoint with one registered buffer, for programs that measure the provider
//! itself rather than the fabric (`gsm-bench rma-rate`): it opens the provider the `ofi` fabric
//! would (`GSM_OFI_PROVIDER`, else libfabric's first with RMA), publishes its address, connects
//! peers, posts RMA writes from its buffer into theirs and counts completions. How many writes
//! to keep in flight, and to whom, is the program's; the fabric's rings never use it.

use super::provider;
use crate::fabric::{FabricError, FabricKind};
use crate::sys::ofi::{self as fi, Completion, Registered, Stack};

/// One endpoint, its completion queue and its registered buffer.
#[derive(Debug)]
pub struct RmaEndpoint {
    stack: Stack,
    buf: Box<[u8]>,
    reg: Registered,
    /// Connected peers: (`fi_addr_t`, RMA address, key).
    peers: Vec<(u64, u64, u64)>,
    /// Scratch for completions.
    done: Vec<Completion>,
}

// SAFETY: the stack and the buffer it registered move with the endpoint; one thread uses it at
// a time (`FI_THREAD_DOMAIN`).
unsafe impl Send for RmaEndpoint {}

impl RmaEndpoint {
    /// Opens an endpoint with a registered buffer of `len` bytes (64 at least).
    pub fn open(len: usize) -> Result<RmaEndpoint, FabricError> {
        let (info, n) = provider::choose(provider::from_env().as_deref())?;
        let name = info.offers()[n].provider.clone();
        let mut stack = Stack::open(info, n, false).map_err(|e| super::setup_error(&name, &e))?;
        let mut buf = vec![0u8; len.max(64)].into_boxed_slice();
        // SAFETY: the buffer is moved into the endpoint with the stack and dropped after it
        // (field order), so it outlives the registration.
        let reg = unsafe { stack.register(buf.as_mut_ptr(), buf.len()) }
            .map_err(|e| super::setup_error(&name, &e))?;
        Ok(RmaEndpoint {
            stack,
            buf,
            reg,
            peers: Vec::new(),
            done: Vec::new(),
        })
    }

    /// The provider it opened.
    pub fn provider(&self) -> &str {
        &self.stack.offer.provider
    }

    /// What a peer needs to write here: `[u32 name length][name][u64 address][u64 key]`.
    pub fn address(&self) -> Result<Vec<u8>, FabricError> {
        let name = self
            .stack
            .name()
            .map_err(|e| super::setup_error(self.provider(), &e))?;
        let mut out = (name.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&name);
        out.extend_from_slice(&self.reg.base.to_le_bytes());
        out.extend_from_slice(&self.reg.key.to_le_bytes());
        Ok(out)
    }

    /// Adds the peer whose [`address`](Self::address) is `addr`; returns its index for
    /// [`write`](Self::write).
    pub fn connect(&mut self, addr: &[u8]) -> Result<usize, FabricError> {
        let bad = || FabricError::Choice {
            value: format!("{} bytes", addr.len()),
            reason: "an RMA endpoint address of the wrong length",
        };
        let n = u32::from_le_bytes(
            addr.get(..4)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        ) as usize;
        if addr.len() != 4 + n + 16 {
            return Err(bad());
        }
        let word = |at: usize| u64::from_le_bytes(addr[at..at + 8].try_into().unwrap_or([0; 8]));
        let fi_addr = self
            .stack
            .insert(&addr[4..4 + n])
            .map_err(|e| super::setup_error(self.provider(), &e))?;
        self.peers.push((fi_addr, word(4 + n), word(12 + n)));
        Ok(self.peers.len() - 1)
    }

    /// Peers connected.
    pub fn peers(&self) -> usize {
        self.peers.len()
    }

    /// Posts a write of `len` bytes (at most the buffer's) from this buffer to the start of peer
    /// `peer`'s; `Ok(false)` when the provider's queue is full (poll, then try again).
    pub fn write(&mut self, peer: usize, len: usize) -> Result<bool, FabricError> {
        let &(dest, base, key) = self.peers.get(peer).ok_or(FabricError::Choice {
            value: format!("peer {peer}"),
            reason: "not a peer connected to this RMA endpoint",
        })?;
        let len = len.min(self.buf.len());
        // SAFETY: the source lies in the registered buffer, which nothing writes while the
        // endpoint lives (its content does not matter).
        let r = unsafe {
            self.stack
                .write(self.buf.as_ptr(), len, None, dest, base, key, 1)
        };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.code == fi::EAGAIN => Ok(false),
            Err(e) => Err(super::setup_error(self.provider(), &e)),
        }
    }

    /// Reads the completion queue once, which also serves the peers' writes into this endpoint
    /// (manual progress); returns the writes of this endpoint that completed.
    pub fn poll(&mut self) -> Result<usize, FabricError> {
        self.done.clear();
        self.stack
            .poll(&mut self.done)
            .map_err(|f| FabricError::Os {
                fabric: FabricKind::Ofi,
                what: "an RMA write of a bare endpoint".into(),
                detail: f.detail,
            })
    }
}
