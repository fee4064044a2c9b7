//! Checking a peer's segment before anything is taken from it: the header (magic, version,
//! ready word, rank, ring geometry, where every part lies) and the ring table (one ring per
//! (peer worker, our worker, lane), each inside the mapping, aligned, where the format puts it).
//! Every value is read once; only the returned copy is used afterwards, never the shared memory
//! again. It does not open or map the segment (`segment`).

use std::sync::atomic::Ordering;

use super::layout::*;
use super::mapping::Mapping;
use crate::board::BOARD_BYTES;
use crate::fabric::Topology;
use crate::wire::ring::RingLayout;

/// What this rank expects of peer `p`'s segment.
pub(super) struct Expect<'a> {
    pub(super) topo: &'a Topology,
    pub(super) peer: u32,
}

/// A peer segment's validated contents.
pub(super) struct PeerSegment {
    pub(super) geometry: Geometry,
    pub(super) workers: u32,
    /// Rings produced by our workers: (index of our worker, consumer local index in p, lane,
    /// offset).
    pub(super) ours: Vec<Entry>,
}

/// Reads and validates a peer's segment header and table; every value used later comes from the
/// returned copy, never from the shared memory again. Errors are a description for the message.
pub(super) fn validate(map: &Mapping, ex: &Expect<'_>) -> Result<PeerSegment, String> {
    let (g, workers, rings) = header(map, ex)?;
    let ours = table(map, ex, &g, workers, rings)?;
    Ok(PeerSegment {
        geometry: g,
        workers,
        ours,
    })
}

/// Checks the header against the job and the format: `(geometry, workers, rings)` of a segment
/// whose header and table lie inside the mapping.
fn header(map: &Mapping, ex: &Expect<'_>) -> Result<(Geometry, u32, u32), String> {
    let t = ex.topo;
    let short = || "the segment ends inside its header or table".to_string();
    if map.len < HEADER_BYTES {
        return Err(format!(
            "the segment is {} bytes, shorter than its {HEADER_BYTES}-byte header",
            map.len
        ));
    }
    let ready = map
        .u32_at(H_READY)
        .ok_or_else(short)?
        .load(Ordering::Acquire);
    let magic = map.load64(H_MAGIC).ok_or_else(short)?;
    if magic != MAGIC {
        return Err(format!(
            "it is not a Gossamer shm segment (magic {magic:#018x}, expected {MAGIC:#018x})"
        ));
    }
    let version = map.load32(H_VERSION).ok_or_else(short)?;
    if version != VERSION {
        return Err(format!(
            "its format version is {version}, this build reads version {VERSION} (are all ranks \
             the same build?)"
        ));
    }
    if ready != READY {
        return Err("its ready word is not set: the rank had not finished creating it".to_string());
    }
    let rank = map.load32(H_RANK).ok_or_else(short)?;
    if rank != ex.peer {
        return Err(format!("it says it belongs to rank {rank}"));
    }
    let (slots, slot_size) = (
        map.load32(H_SLOTS).ok_or_else(short)?,
        map.load32(H_SLOT_SIZE).ok_or_else(short)?,
    );
    if (slots, slot_size) != (t.layout.slots, t.layout.slot_size) {
        return Err(format!(
            "its rings have {slots} slots of {slot_size} bytes, ours {} of {}",
            t.layout.slots, t.layout.slot_size
        ));
    }
    let workers = map.load32(H_WORKERS).ok_or_else(short)?;
    let expected_workers = t.workers[ex.peer as usize];
    if workers != expected_workers {
        return Err(format!(
            "it has doorbells for {workers} workers, the job gives rank {} {expected_workers}",
            ex.peer
        ));
    }
    let rings = map.load32(H_RINGS).ok_or_else(short)?;
    // Each of the rank's workers has two rings per worker of each shm peer.
    let per_peer_worker = 2 * u64::from(workers);
    let max = per_peer_worker * u64::from(t.total_workers() - workers);
    if per_peer_worker == 0 || u64::from(rings) % per_peer_worker != 0 || u64::from(rings) > max {
        return Err(format!(
            "its ring count {rings} is not 2 × {workers} × (workers of its peers), at most {max}"
        ));
    }
    let g = Geometry::new(t.layout, workers, rings)
        .ok_or_else(|| format!("its {rings} rings do not fit the address space"))?;
    let declared = (
        map.load64(H_BELLS).ok_or_else(short)?,
        map.load64(H_TABLE).ok_or_else(short)?,
        map.load64(H_TABLE_LEN).ok_or_else(short)?,
        map.load64(H_TOTAL).ok_or_else(short)?,
        map.load64(H_BOARD).ok_or_else(short)?,
        map.load64(H_BOARD_LEN).ok_or_else(short)?,
    );
    let computed = (
        g.bells as u64,
        g.table as u64,
        g.table_len as u64,
        g.total as u64,
        g.board as u64,
        BOARD_BYTES as u64,
    );
    if declared != computed {
        return Err(format!(
            "its header places (doorbells, table, table bytes, total, board, board bytes) at \
             {declared:?}, the format gives {computed:?}"
        ));
    }
    if g.total != map.len {
        return Err(format!(
            "it is {} bytes long, its header says {}",
            map.len, g.total
        ));
    }
    if !map.contains(g.bell(workers), 0) || !map.contains(g.table, g.table_len) {
        return Err(short());
    }
    Ok((g, workers, rings))
}

/// Checks every ring-table entry and returns those of the rings our workers produce into: each
/// (their consumer, our worker, lane) exactly once, at the offset the format gives.
fn table(
    map: &Mapping,
    ex: &Expect<'_>,
    g: &Geometry,
    workers: u32,
    rings: u32,
) -> Result<Vec<Entry>, String> {
    let t = ex.topo;
    let mine = t.workers_of(t.rank);
    let theirs = t.workers_of(ex.peer);
    let ring_bytes = t.layout.bytes();
    // One flag per (their consumer, our producer, lane): each must appear exactly once.
    let mut seen = vec![false; (workers as usize) * (mine.len()) * 2];
    let mut ours = Vec::new();
    for i in 0..rings as usize {
        let e = g.entry(i);
        let field = |o: usize| format!("ring table entry {i} (field at byte {o}) is outside");
        let consumer = map.load32(e + E_CONSUMER).ok_or_else(|| field(e))?;
        let producer = map.load32(e + E_PRODUCER).ok_or_else(|| field(e))?;
        let lane = map.load32(e + E_LANE).ok_or_else(|| field(e))?;
        let zero = map.load32(e + E_ZERO).ok_or_else(|| field(e))?;
        let offset = map.load64(e + E_OFFSET).ok_or_else(|| field(e))?;
        let bytes = map.load64(e + E_BYTES).ok_or_else(|| field(e))?;
        let bad = |what: String| format!("ring table entry {i}: {what}");
        let Some(lane) = lane_of(lane) else {
            return Err(bad(format!("lane {lane} is neither 0 nor 1")));
        };
        if zero != 0 {
            return Err(bad(format!("reserved word is {zero:#x}, not 0")));
        }
        if consumer >= workers {
            return Err(bad(format!(
                "consumer worker {consumer}, the rank has {workers}"
            )));
        }
        if producer >= t.total_workers() || theirs.contains(&producer) {
            return Err(bad(format!(
                "producer worker {producer} is not a worker of another rank"
            )));
        }
        let Ok(offset) = usize::try_from(offset) else {
            return Err(bad(format!("offset {offset} does not fit")));
        };
        if bytes != ring_bytes as u64 {
            return Err(bad(format!("ring of {bytes} bytes, expected {ring_bytes}")));
        }
        if offset != g.ring(i)
            || offset % RingLayout::align() != 0
            || !map.contains(offset, ring_bytes)
        {
            return Err(bad(format!(
                "ring at offset {offset}, expected {} (aligned to {}, inside the {} bytes of the \
                 segment)",
                g.ring(i),
                RingLayout::align(),
                map.len
            )));
        }
        if mine.contains(&producer) {
            let ours_idx = producer - mine.start;
            let k = ((consumer as usize * mine.len()) + ours_idx as usize) * 2
                + lane_code(lane) as usize;
            if std::mem::replace(&mut seen[k], true) {
                return Err(bad(format!(
                    "a second {lane:?} ring from worker {producer} to its worker {consumer}"
                )));
            }
            ours.push(Entry {
                consumer,
                producer,
                lane,
                offset,
            });
        }
    }
    if let Some(k) = seen.iter().position(|s| !s) {
        let lane = if k % 2 == 0 { "request" } else { "response" };
        let ours_idx = (k / 2) % mine.len();
        let consumer = k / 2 / mine.len();
        return Err(format!(
            "it has no {lane} ring from our worker {} to its worker {consumer}: did that rank \
             treat this one as an shm peer?",
            mine.start as usize + ours_idx
        ));
    }
    Ok(ours)
}
