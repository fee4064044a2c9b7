//! The RMA write-rate microbenchmark of the Gossamer thesis's figures 12 and 13, as endpoints a
//! benchmark program drives (`gsm-bench rma-rate`): how many small RMA writes per second a
//! thread issues when it has one endpoint per remote worker (one queue pair per worker pair,
//! "quadratic") against one endpoint for every remote worker of a host (per (worker, host),
//! "reduced"). Each [`WriteEndpoint`] is one libfabric endpoint with its own completion queue
//! and a registered buffer that peers write into; the program exchanges [`address`]es (MPI),
//! [`connect`]s them and calls [`write_for`] on every thread at once. A thread drives all its
//! endpoints in turn, each writing to its peers in turn, with up to 64 writes in flight per thread.
//!
//! It measures only: it is not part of the runtime, and the fabric's rings never use it.
//!
//! [`address`]: WriteEndpoint::address
//! [`connect`]: WriteEndpoint::connect

use std::time::{Duration, Instant};

use super::provider;
use crate::fabric::FabricError;
use crate::sys::ofi::{self as fi, Completion, Registered, Stack};

/// One endpoint of the microbenchmark, its completion queue and its registered buffer.
#[derive(Debug)]
pub struct WriteEndpoint {
    stack: Stack,
    buf: Box<[u8]>,
    reg: Registered,
    /// Connected peers: (`fi_addr_t`, RMA address, key).
    peers: Vec<(u64, u64, u64)>,
    /// Writes posted and not completed.
    in_flight: usize,
    /// The next write's peer (round robin).
    next: usize,
}

// SAFETY: the stack and the buffer it registered move with the endpoint; one thread uses it at
// a time (`FI_THREAD_DOMAIN`).
unsafe impl Send for WriteEndpoint {}

/// Writes in flight per thread at most, shared by its endpoints: both set-ups then keep the
/// same number of writes outstanding, so the figure compares endpoints, not window sizes.
const WINDOW: usize = 64;

impl WriteEndpoint {
    /// Opens an endpoint of the provider `GSM_OFI_PROVIDER` names (else libfabric's first with
    /// RMA) with a registered buffer of `len` bytes.
    pub fn open(len: usize) -> Result<WriteEndpoint, FabricError> {
        let (info, n) = provider::choose(provider::from_env().as_deref())?;
        let name = info.offers()[n].provider.clone();
        let mut stack = Stack::open(info, n, false).map_err(|e| super::setup_error(&name, &e))?;
        let mut buf = vec![0u8; len.max(64)].into_boxed_slice();
        // SAFETY: the buffer is moved into the endpoint with the stack and dropped after it
        // (field order), so it outlives the registration.
        let reg = unsafe { stack.register(buf.as_mut_ptr(), buf.len()) }
            .map_err(|e| super::setup_error(&name, &e))?;
        Ok(WriteEndpoint {
            stack,
            buf,
            reg,
            peers: Vec::new(),
            in_flight: 0,
            next: 0,
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

    /// Adds the peer whose [`address`](Self::address) is `addr`: [`write_for`] writes to it.
    pub fn connect(&mut self, addr: &[u8]) -> Result<(), FabricError> {
        let bad = || FabricError::Choice {
            value: format!("{} bytes", addr.len()),
            reason: "a write-rate endpoint address of the wrong length",
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
        Ok(())
    }

    /// One step: posts writes of `size` bytes to its peers in turn while fewer than `window`
    /// are in flight (when `post`), then reads its completion queue once (which also serves the peers'
    /// writes into this endpoint: manual progress). Returns the writes that completed.
    fn step(&mut self, size: usize, post: bool, window: usize) -> Result<u64, FabricError> {
        let size = size.min(self.buf.len());
        while post && !self.peers.is_empty() && self.in_flight < window {
            let (dest, base, key) = self.peers[self.next % self.peers.len()];
            // SAFETY: the source lies in the registered buffer, which no one writes while the
            // benchmark runs (its content does not matter).
            let r = unsafe {
                self.stack
                    .write(self.buf.as_ptr(), size, None, dest, base, key, 1)
            };
            match r {
                Ok(()) => {
                    self.in_flight += 1;
                    self.next += 1;
                }
                Err(e) if e.code == fi::EAGAIN => break,
                Err(e) => return Err(super::setup_error(self.provider(), &e)),
            }
        }
        let mut got: Vec<Completion> = Vec::new();
        match self.stack.poll(&mut got) {
            Ok(n) => {
                self.in_flight -= n.min(self.in_flight);
                Ok(n as u64)
            }
            Err(f) => Err(FabricError::Os {
                fabric: crate::fabric::FabricKind::Ofi,
                what: "an RMA write of the write-rate benchmark".into(),
                detail: f.detail,
            }),
        }
    }
}

/// Drives `endpoints` (one thread's) in turn: each writes `size` bytes to its peers in turn, up
/// to 64 in flight in all (shared evenly), until `until` (no writes with `size` 0: it only serves the peers');
/// then waits for the writes in flight (at most 5 s). Returns the writes completed.
pub fn write_for(
    endpoints: &mut [WriteEndpoint],
    size: usize,
    until: Instant,
) -> Result<u64, FabricError> {
    let mut done = 0u64;
    let window = (WINDOW / endpoints.len().max(1)).max(1);
    loop {
        let writing = Instant::now() < until;
        for e in endpoints.iter_mut() {
            done += e.step(size, writing && size > 0, window)?;
        }
        if !writing {
            let drain = Instant::now() + Duration::from_secs(5);
            while endpoints.iter().any(|e| e.in_flight > 0) && Instant::now() < drain {
                for e in endpoints.iter_mut() {
                    done += e.step(size, false, window)?;
                }
            }
            return Ok(done);
        }
    }
}
