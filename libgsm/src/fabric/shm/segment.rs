//! This rank's segment and its peers': creating it (exclusively, mode 0600, sized and every page
//! reserved so that a full `/dev/shm` fails here and not with `SIGBUS` later), writing its table,
//! header and ready word, and opening, checking the owner and mode of, and mapping a peer's. It
//! does not decide the layout (`layout`) or trust a peer's contents (`validate` does the
//! checking), and it unlinks nothing (`Shm::unlink`, this rank's own segment only).

use std::ffi::CString;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::layout::*;
use super::mapping::Mapping;
use super::validate::{Expect, PeerSegment, validate};
use super::{Shm, os};
use crate::board::BOARD_BYTES;
use crate::fabric::{FabricError, FabricKind, Lane, Topology};
use crate::sys;
use crate::wire::ring::RingLayout;

/// `rings` rings of `layout` do not fit a segment in this address space.
pub(super) fn too_big(path: &str, rings: usize, layout: RingLayout) -> FabricError {
    FabricError::Os {
        fabric: FabricKind::Shm,
        what: format!("sizing segment {path}"),
        detail: format!(
            "{} rings of {} bytes do not fit this address space; lower the slot size or the \
             slots per ring",
            rings,
            layout.bytes()
        ),
    }
}

impl Shm {
    /// Creates this rank's segment `name` (at `path`) of geometry `g` holding `rings` rings, and
    /// maps it; from its creation on, the name is this fabric's to unlink.
    pub(super) fn create_segment(
        &mut self,
        topo: &Topology,
        name: String,
        path: &str,
        g: &Geometry,
        rings: u32,
    ) -> Result<Mapping, FabricError> {
        let c = CString::new(format!("/{name}")).map_err(|_| FabricError::Choice {
            value: topo.job_id.clone(),
            reason: "the job id contains a NUL byte",
        })?;
        let fd = sys::shm::create_exclusive(&c, 0o600).map_err(|e| {
            let detail = if e.kind() == std::io::ErrorKind::AlreadyExists {
                format!(
                    "{path} already exists: a previous job with id {} left it behind (or two \
                     ranks claim rank {}); remove it with `rm {path}` if no such job is running",
                    topo.job_id, topo.rank
                )
            } else {
                e.to_string()
            };
            FabricError::Os {
                fabric: FabricKind::Shm,
                what: format!("creating rank {}'s segment {path}", topo.rank),
                detail,
            }
        })?;
        // From here on the name is ours: drop unlinks it if set-up fails.
        self.linked = Some(name);
        // The umask may have narrowed the mode; make it exactly 0600.
        sys::shm::set_mode(fd.as_fd(), 0o600)
            .map_err(|e| os(format!("setting mode 600 on {path}"), e))?;
        let size =
            i64::try_from(g.total).map_err(|_| too_big(path, rings as usize, topo.layout))?;
        sys::shm::set_len(fd.as_fd(), size as u64)
            .map_err(|e| os(format!("sizing {path} to {} bytes", g.total), e))?;
        // Reserve every page now: a full /dev/shm fails here, not with SIGBUS later.
        if let Err(e) = sys::shm::reserve(fd.as_fd(), size) {
            // How short it is, when the file system says what it has left.
            let free = sys::shm::free_bytes(fd.as_fd())
                .map(|b| format!(" (it has {b} bytes free)"))
                .unwrap_or_default();
            return Err(FabricError::Os {
                fabric: FabricKind::Shm,
                what: format!("reserving {} bytes for {path}", g.total),
                detail: format!(
                    "{}; is /dev/shm large enough{free} for {} rings of {} bytes? (lower the \
                     slot size or the slots per ring, or give /dev/shm more room)",
                    e,
                    rings,
                    topo.layout.bytes()
                ),
            });
        }
        let map = Mapping::map(&fd, g.total).map_err(|e| os(format!("mapping {path}"), e))?;
        Ok(map)
    }

    /// Opens, checks and maps peer `p`'s segment.
    pub(super) fn open_peer(
        topo: &Topology,
        p: u32,
    ) -> Result<(Arc<Mapping>, PeerSegment), FabricError> {
        let name = segment_name(&topo.job_id, p);
        let path = segment_path(&name);
        let host = topo.hosts.get(p as usize).cloned().unwrap_or_default();
        let protocol = |detail: String| FabricError::Protocol {
            fabric: FabricKind::Shm,
            peer: p,
            host: host.clone(),
            detail: format!("segment {path}: {detail}"),
        };
        let c = CString::new(format!("/{name}")).map_err(|_| protocol("bad name".into()))?;
        let fd = sys::shm::open_read_write(&c).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "; that rank did not create it (did its set-up fail?) or it does not share this \
                 host's /dev/shm (use --fabric tcp between hosts)"
            } else {
                ""
            };
            FabricError::Os {
                fabric: FabricKind::Shm,
                what: format!("opening rank {p}'s segment {path} (host {host})"),
                detail: format!("{e}{hint}"),
            }
        })?;
        let st = sys::shm::status(fd.as_fd()).map_err(|e| {
            os(
                format!("fstat of rank {p}'s segment {path} (host {host})"),
                e,
            )
        })?;
        let me = sys::shm::effective_uid();
        if st.uid != me || st.mode & 0o077 != 0 {
            return Err(protocol(format!(
                "owned by uid {} with mode {:o}; a job's segments belong to its user (uid {me}) \
                 with mode 600",
                st.uid,
                st.mode & 0o7777
            )));
        }
        let len = usize::try_from(st.size)
            .ok()
            .filter(|&l| l >= HEADER_BYTES && l <= isize::MAX as usize)
            .ok_or_else(|| {
                protocol(format!(
                    "its size is {} bytes, less than a {HEADER_BYTES}-byte header",
                    st.size
                ))
            })?;
        let map = Mapping::map(&fd, len).map_err(|e| {
            os(
                format!("mapping rank {p}'s segment {path} (host {host})"),
                e,
            )
        })?;
        let seg = validate(&map, &Expect { topo, peer: p }).map_err(protocol)?;
        tracing::debug!(
            target: "gossamer::fabric",
            fabric = "shm",
            peer = p,
            segment = %path,
            bytes = len,
            rings = seg.ours.len(),
            "mapped a peer's segment"
        );
        Ok((Arc::new(map), seg))
    }
}

/// Writes a fresh segment's ring table (`plan`, in order), then its header, then its ready word
/// (Release), and returns the table as entries.
pub(super) fn write_segment(
    map: &Mapping,
    topo: &Topology,
    g: &Geometry,
    plan: &[(u32, u32, Lane)],
) -> Vec<Entry> {
    let (local, rings) = (topo.local_workers(), plan.len() as u32);
    // The file is fresh (O_EXCL) and ftruncate/fallocate zero-fill it: every ring and
    // doorbell starts at zero. Write the table, then the header, then the ready word.
    let mut entries = Vec::with_capacity(plan.len());
    for (i, &(consumer, producer, lane)) in plan.iter().enumerate() {
        let e = g.entry(i);
        let offset = g.ring(i);
        map.store32(e + E_CONSUMER, consumer);
        map.store32(e + E_PRODUCER, producer);
        map.store32(e + E_LANE, lane_code(lane));
        map.store32(e + E_ZERO, 0);
        map.store64(e + E_OFFSET, offset as u64);
        map.store64(e + E_BYTES, topo.layout.bytes() as u64);
        entries.push(Entry {
            consumer,
            producer,
            lane,
            offset,
        });
    }
    map.store64(H_MAGIC, MAGIC);
    map.store32(H_VERSION, VERSION);
    map.store32(H_RANK, topo.rank);
    map.store32(H_SLOTS, topo.layout.slots);
    map.store32(H_SLOT_SIZE, topo.layout.slot_size);
    map.store32(H_WORKERS, local);
    map.store32(H_RINGS, rings);
    map.store64(H_BELLS, g.bells as u64);
    map.store64(H_TABLE, g.table as u64);
    map.store64(H_TABLE_LEN, g.table_len as u64);
    map.store64(H_TOTAL, g.total as u64);
    map.store64(H_BOARD, g.board as u64);
    map.store64(H_BOARD_LEN, BOARD_BYTES as u64);
    map.u32_at(H_READY)
        .expect("the header is inside the segment")
        .store(READY, Ordering::Release);
    entries
}
