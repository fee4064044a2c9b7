//! One writer thread of `gsm-bench rma-rate`: it drives its endpoints in turn, each writing to
//! its peers in turn, with a window of writes in flight shared by the thread's endpoints, so
//! that both set-ups keep the same number of writes outstanding and the figure compares
//! endpoints, not window sizes.

use std::time::{Duration, Instant};

use gossamer::fabric::FabricError;
use gossamer::fabric::ofi::RmaEndpoint;

/// Writes in flight per thread at most, shared by its endpoints.
const WINDOW: usize = 64;

/// An endpoint and the writes it has in flight.
#[derive(Debug)]
pub struct Writer {
    endpoint: RmaEndpoint,
    in_flight: usize,
    /// The next write's peer (round robin).
    next: usize,
}

impl Writer {
    pub fn new(endpoint: RmaEndpoint) -> Writer {
        Writer {
            endpoint,
            in_flight: 0,
            next: 0,
        }
    }

    pub fn endpoint(&self) -> &RmaEndpoint {
        &self.endpoint
    }

    pub fn endpoint_mut(&mut self) -> &mut RmaEndpoint {
        &mut self.endpoint
    }

    /// One step: posts writes of `size` bytes to its peers in turn while fewer than `window`
    /// are in flight (when `post`), then polls once. Returns the writes that completed.
    fn step(&mut self, size: usize, post: bool, window: usize) -> Result<u64, FabricError> {
        let peers = self.endpoint.peers();
        while post && peers > 0 && self.in_flight < window {
            if !self.endpoint.write(self.next % peers, size)? {
                break;
            }
            self.in_flight += 1;
            self.next += 1;
        }
        let n = self.endpoint.poll()?;
        self.in_flight -= n.min(self.in_flight);
        Ok(n as u64)
    }
}

/// Drives `writers` (one thread's) in turn: each writes `size` bytes to its peers in turn, up
/// to 64 in flight in all (shared evenly), until `until` (no writes with `size` 0: it only
/// serves the peers'); then waits for the writes in flight (at most 5 s). Returns the writes
/// completed.
pub fn write_for(writers: &mut [Writer], size: usize, until: Instant) -> Result<u64, FabricError> {
    let mut done = 0u64;
    let window = (WINDOW / writers.len().max(1)).max(1);
    loop {
        let writing = Instant::now() < until;
        for w in writers.iter_mut() {
            done += w.step(size, writing && size > 0, window)?;
        }
        if !writing {
            let drain = Instant::now() + Duration::from_secs(5);
            while writers.iter().any(|w| w.in_flight > 0) && Instant::now() < drain {
                for w in writers.iter_mut() {
                    done += w.step(size, false, window)?;
                }
            }
            return Ok(done);
        }
    }
}
