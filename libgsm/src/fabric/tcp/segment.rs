//! The tcp fabric's shared-memory segment, `/dev/shm/{job_id}-r{rank}-tcp`: the incoming rings
//! this rank's workers consume from remote workers whose frames another rank of this host reads
//! (per-host connections, see the module docs). This rank creates it (exclusively, mode 0600,
//! every page reserved) in `create`; the reading ranks of its host map it in `attach` and
//! produce into it; it is unlinked at `sealed` (or when the fabric drops before). It does not
//! decide who reads what (`groups`) or move frames (`io::recv`).
//!
//! Format: a 128-byte header (magic `GSMTCPRG` u64, version u32, rank u32, slots u32, slot
//! size u32, rings u32, ready word u32), then the rings, each at `128 + i * stride` (the ring's
//! bytes rounded up to 128), in the order of [`plan`], which both ends compute from the
//! topology: the reader checks the header and the size and never reads an offset from the
//! segment.

use std::ffi::CString;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::groups::Groups;
use crate::fabric::shm::mapping::{Mapping, ring_at};
use crate::fabric::{FabricError, FabricKind, Lane, Topology};
use crate::sys;
use crate::wire::ring::{Consumer, Producer, RingLayout};

const MAGIC: u64 = u64::from_le_bytes(*b"GSMTCPRG");
const VERSION: u32 = 1;
const HEADER: usize = 128;
const READY: u32 = 1;
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_RANK: usize = 12;
const H_SLOTS: usize = 16;
const H_SLOT_SIZE: usize = 20;
const H_RINGS: usize = 24;
const H_READY: usize = 28;

/// The file name of `rank`'s tcp segment in job `job_id`, as the launch contract names it.
pub use gsm_contract::contract::tcp_segment_name as segment_name;

/// The rings of rank `c` (of this rank's group) that another rank of the group fills: (remote
/// source worker, `c`'s consuming worker, lane), in segment order.
pub(super) fn plan(groups: &Groups, topo: &Topology, c: u32) -> Vec<(u32, u32, Lane)> {
    let mut v = Vec::new();
    for h in groups.remote() {
        for &g in groups.members(h) {
            if groups.reader(g) == c {
                continue;
            }
            for l in 0..topo.workers[c as usize] {
                v.push((g, l, Lane::Request));
                v.push((g, l, Lane::Response));
            }
        }
    }
    v
}

fn stride(layout: RingLayout) -> usize {
    layout.bytes().div_ceil(RingLayout::align()) * RingLayout::align()
}

fn total(rings: usize, layout: RingLayout) -> Option<usize> {
    rings.checked_mul(stride(layout))?.checked_add(HEADER)
}

fn os(what: String, e: &std::io::Error) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Tcp,
        what,
        detail: e.to_string(),
    }
}

/// This rank's segment while its name is this rank's to unlink.
#[derive(Debug, Default)]
pub(super) struct OwnSegment {
    linked: Option<String>,
}

impl OwnSegment {
    /// Removes the segment's name (every reader has mapped it, or set-up failed).
    pub(super) fn unlink(&mut self) {
        if let Some(name) = self.linked.take()
            && let Ok(c) = CString::new(format!("/{name}"))
        {
            let _ = sys::shm::unlink(&c);
        }
    }
}

impl Drop for OwnSegment {
    fn drop(&mut self) {
        self.unlink();
    }
}

/// Creates this rank's segment for `plan`'s rings and returns it with the rings' consumers, in
/// plan order.
pub(super) fn create(
    topo: &Topology,
    plan: &[(u32, u32, Lane)],
) -> Result<(OwnSegment, Vec<Consumer>), FabricError> {
    let name = segment_name(&topo.job_id, topo.rank);
    let path = format!("/dev/shm/{name}");
    let c = CString::new(format!("/{name}")).map_err(|_| FabricError::Choice {
        value: topo.job_id.clone(),
        reason: "the job id contains a NUL byte",
    })?;
    let layout = topo.layout;
    let len = total(plan.len(), layout).ok_or(FabricError::Choice {
        value: format!("{} rings of {} bytes", plan.len(), layout.bytes()),
        reason: "the tcp segment would not fit this address space",
    })?;
    let fd = sys::shm::create_exclusive(&c, 0o600).map_err(|e| {
        os(
            format!("creating rank {}'s tcp segment {path}", topo.rank),
            &e,
        )
    })?;
    let own = OwnSegment { linked: Some(name) };
    sys::shm::set_mode(fd.as_fd(), 0o600).map_err(|e| os(format!("chmod 600 {path}"), &e))?;
    sys::shm::set_len(fd.as_fd(), len as u64)
        .map_err(|e| os(format!("sizing {path} to {len} bytes"), &e))?;
    sys::shm::reserve(fd.as_fd(), len as i64).map_err(|e| {
        os(
            format!("reserving {len} bytes for {path} (is /dev/shm large enough?)"),
            &e,
        )
    })?;
    let map = Arc::new(Mapping::map(&fd, len).map_err(|e| os(format!("mapping {path}"), &e))?);
    let mut consumers = Vec::with_capacity(plan.len());
    for i in 0..plan.len() {
        // SAFETY: aligned (HEADER and the stride are multiples of the ring alignment), inside
        // the mapping (`total`), zeroed (a fresh file), and only its consumer is taken here;
        // the producer is taken once, by the one rank `plan` says reads for it.
        let ring = unsafe { ring_at(&map, HEADER + i * stride(layout), layout) };
        consumers.push(ring.consumer().expect("a fresh ring"));
    }
    map.store64(H_MAGIC, MAGIC);
    map.store32(H_VERSION, VERSION);
    map.store32(H_RANK, topo.rank);
    map.store32(H_SLOTS, layout.slots);
    map.store32(H_SLOT_SIZE, layout.slot_size);
    map.store32(H_RINGS, plan.len() as u32);
    map.u32_at(H_READY)
        .expect("the header is inside the segment")
        .store(READY, Ordering::Release);
    Ok((own, consumers))
}

/// Opens, checks and maps rank `c`'s segment and returns the producers of the rings this rank
/// reads for, as (remote source worker, `c`'s consuming worker, lane, producer).
pub(super) fn open_peer(
    topo: &Topology,
    groups: &Groups,
    c: u32,
) -> Result<Vec<(u32, u32, Lane, Producer)>, FabricError> {
    let name = segment_name(&topo.job_id, c);
    let path = format!("/dev/shm/{name}");
    let host = topo.hosts.get(c as usize).cloned().unwrap_or_default();
    let bad = |detail: String| FabricError::Protocol {
        fabric: FabricKind::Tcp,
        peer: c,
        host: host.clone(),
        detail: format!("tcp segment {path}: {detail}"),
    };
    let cname = CString::new(format!("/{name}")).map_err(|_| bad("bad name".into()))?;
    let fd = sys::shm::open_read_write(&cname)
        .map_err(|e| os(format!("opening rank {c}'s tcp segment {path}"), &e))?;
    let st = sys::shm::status(fd.as_fd()).map_err(|e| os(format!("fstat {path}"), &e))?;
    let me = sys::shm::effective_uid();
    if st.uid != me || st.mode & 0o077 != 0 {
        return Err(bad(format!(
            "owned by uid {} with mode {:o}, not by uid {me} with mode 600",
            st.uid,
            st.mode & 0o7777
        )));
    }
    let plan = plan(groups, topo, c);
    let layout = topo.layout;
    let len = total(plan.len(), layout).ok_or_else(|| bad("too many rings".into()))?;
    if u64::try_from(st.size).unwrap_or(0) < len as u64 {
        return Err(bad(format!(
            "{} bytes, its {} rings need {len}",
            st.size,
            plan.len()
        )));
    }
    let map = Arc::new(Mapping::map(&fd, len).map_err(|e| os(format!("mapping {path}"), &e))?);
    let ready = map.u32_at(H_READY).map(|w| w.load(Ordering::Acquire));
    let want = [
        (H_VERSION, VERSION, "version"),
        (H_RANK, c, "rank"),
        (H_SLOTS, layout.slots, "slots"),
        (H_SLOT_SIZE, layout.slot_size, "slot size"),
        (H_RINGS, plan.len() as u32, "rings"),
    ];
    if ready != Some(READY) || map.load64(H_MAGIC) != Some(MAGIC) {
        return Err(bad("not a ready gossamer tcp segment".into()));
    }
    for (off, v, what) in want {
        let got = map.load32(off).unwrap_or(u32::MAX);
        if got != v {
            return Err(bad(format!("its {what} is {got}, expected {v}")));
        }
    }
    let mut out = Vec::new();
    for (i, &(g, l, lane)) in plan.iter().enumerate() {
        if groups.reader(g) != topo.rank {
            continue;
        }
        // SAFETY: as in `create`: aligned, inside the mapping (size checked), zeroed by its
        // creator before the ready word, and this rank is the only reader `plan` names for it.
        let ring = unsafe { ring_at(&map, HEADER + i * stride(layout), layout) };
        let p = ring.producer().map_err(|e| bad(format!("ring {i}: {e}")))?;
        out.push((g, l, lane, p));
    }
    Ok(out)
}
