//! What each rank publishes for one run (its workers, ring geometry, fabric endpoints and
//! single-copy probe), as bytes for the run's all-gather. It only encodes and decodes; what the
//! fields mean to the fabrics is theirs.

/// What each rank publishes for one run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Offer {
    pub(crate) workers: u32,
    pub(crate) slots: u32,
    pub(crate) slot_size: u32,
    pub(crate) tcp: Vec<u8>,
    pub(crate) shm: Vec<u8>,
    /// Where peers on this host read to test single-copy reads (0: not offered).
    pub(crate) probe: u64,
    /// The ofi fabric's endpoint (empty when not needed); last, so the fields before it keep
    /// their places.
    pub(crate) ofi: Vec<u8>,
    /// The verbs fabric's endpoint (empty when not needed); after `ofi`, for the same reason.
    pub(crate) verbs: Vec<u8>,
}

impl Offer {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [self.workers, self.slots, self.slot_size] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for e in [&self.tcp, &self.shm] {
            b.extend_from_slice(&(e.len() as u32).to_le_bytes());
            b.extend_from_slice(e);
        }
        b.extend_from_slice(&self.probe.to_le_bytes());
        for e in [&self.ofi, &self.verbs] {
            b.extend_from_slice(&(e.len() as u32).to_le_bytes());
            b.extend_from_slice(e);
        }
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Offer> {
        let u = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
        };
        let (workers, slots, slot_size) = (u(0)?, u(4)?, u(8)?);
        let tl = u(12)? as usize;
        let tcp = b.get(16..16 + tl)?.to_vec();
        let sl = u(16 + tl)? as usize;
        let shm = b.get(20 + tl..20 + tl + sl)?.to_vec();
        let at = 20 + tl + sl;
        let probe = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
        let ol = u(at + 8)? as usize;
        let ofi = b.get(at + 12..at + 12 + ol)?.to_vec();
        let at = at + 12 + ol;
        let vl = u(at)? as usize;
        let verbs = b.get(at + 4..at + 4 + vl)?.to_vec();
        if b.len() != at + 4 + vl {
            return None;
        }
        Some(Offer {
            workers,
            slots,
            slot_size,
            tcp,
            shm,
            probe,
            ofi,
            verbs,
        })
    }
}

#[cfg(test)]
mod tests;
