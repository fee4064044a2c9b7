//! What each rank publishes for one run (its workers, ring geometry, single-copy probe and the
//! endpoints of the fabrics it opened), as bytes for the run's all-gather. It only encodes and
//! decodes; what the endpoints mean to the fabrics is theirs.
//!
//! The bytes, little-endian: workers, slots, slot size (u32 each), the probe (u64), the number
//! of endpoints (u32), then each endpoint as its fabric's name (u8 length, then the name of
//! [`crate::fabric::FABRICS`]), its length (u32) and its bytes. Another rank wrote them: a name
//! this build lacks, a length past the end or bytes left over refuse the whole offer.

use crate::fabric::FabricKind;

/// What each rank publishes for one run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Offer {
    pub(crate) workers: u32,
    pub(crate) slots: u32,
    pub(crate) slot_size: u32,
    /// Where peers on this host read to test single-copy reads (0: not offered).
    pub(crate) probe: u64,
    /// The endpoint of each fabric this rank opened (only those some peer needs).
    pub(crate) endpoints: Vec<(FabricKind, Vec<u8>)>,
}

impl Offer {
    /// This rank's endpoint for fabric `k` (empty when it did not open it).
    pub(crate) fn endpoint(&self, k: FabricKind) -> &[u8] {
        self.endpoints
            .iter()
            .find(|(kind, _)| *kind == k)
            .map_or(&[][..], |(_, e)| e.as_slice())
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [self.workers, self.slots, self.slot_size] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.probe.to_le_bytes());
        b.extend_from_slice(&(self.endpoints.len() as u32).to_le_bytes());
        for (k, e) in &self.endpoints {
            let name = k.to_string();
            b.push(name.len() as u8);
            b.extend_from_slice(name.as_bytes());
            b.extend_from_slice(&(e.len() as u32).to_le_bytes());
            b.extend_from_slice(e);
        }
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Offer> {
        let mut r = Reader(b);
        let (workers, slots, slot_size) = (r.u32()?, r.u32()?, r.u32()?);
        let probe = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
        let n = r.u32()?;
        let mut endpoints = Vec::new();
        for _ in 0..n {
            let len = usize::from(*r.take(1)?.first()?);
            let kind = crate::fabric::named(std::str::from_utf8(r.take(len)?).ok()?)?;
            if endpoints.iter().any(|(k, _)| *k == kind) {
                return None;
            }
            let len = r.u32()? as usize;
            endpoints.push((kind, r.take(len)?.to_vec()));
        }
        if !r.0.is_empty() {
            return None;
        }
        Some(Offer {
            workers,
            slots,
            slot_size,
            probe,
            endpoints,
        })
    }
}

/// The bytes not read yet.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests;
