//! The keys of a segment's RMA regions, on both sides of `rma.rs`: the owner's table (its regions
//! of the current generation and the ranks that hold their keys, with the handler that hands them
//! out) and the table of keys this process holds. It posts nothing and sends nothing: `rma.rs`
//! registers and posts, `remote.rs` carries the key requests and invalidations.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::{Owned, Right, SegmentError, SegmentName, layout};
use crate::fabric::rma::{Port, Region};

/// The rights a region may serve, in the order of [`Keys::regions`].
pub(super) const RIGHTS: [Right; 3] = [Right::Read, Right::Write, Right::Atomic];

/// The place of `r` in [`RIGHTS`].
pub(super) fn index(r: Right) -> usize {
    match r {
        Right::Read => 0,
        Right::Write => 1,
        Right::Atomic => 2,
    }
}

/// The regions of one generation, by [`index`] (`None`: not registered).
pub(super) type Regions = [Option<Region>; 3];

/// The keys a rank holds for one generation of a segment: its rights, the data's length, and
/// the (address, key) of each region it may use (`None`: no right, or no region: delegated).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Keys {
    pub(super) generation: u64,
    pub(super) len: u64,
    pub(super) rights: u8,
    pub(super) regions: [Option<(u64, u64)>; 3],
}

/// The owner's side: the regions of the current generation and who holds their keys.
#[derive(Default)]
pub(crate) struct OwnerRma {
    state: Mutex<OwnerState>,
}

#[derive(Default)]
struct OwnerState {
    port: Option<Arc<dyn Port>>,
    regions: Regions,
    holders: BTreeSet<u32>,
}

impl std::fmt::Debug for OwnerRma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnerRma { .. }")
    }
}

/// What a revocation or a free takes from the owner's table: the port, the old regions (to
/// close once every holder has forgotten them) and their holders (to tell).
pub(super) struct Retired {
    pub(super) port: Arc<dyn Port>,
    pub(super) old: Regions,
    pub(super) holders: BTreeSet<u32>,
}

impl OwnerRma {
    fn lock(&self) -> MutexGuard<'_, OwnerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Installs `port` and the regions `make` registers on it (under the table's lock).
    pub(super) fn install(&self, port: Arc<dyn Port>, make: impl FnOnce(&dyn Port) -> Regions) {
        let mut st = self.lock();
        st.regions = make(port.as_ref());
        st.port = Some(port);
    }

    /// Takes the current regions and holders; with `again`, the new generation's regions that
    /// `make` registers (given the port and the rights the old ones served) take their place.
    /// `None` when no port was installed.
    pub(super) fn retire(
        &self,
        again: bool,
        make: impl FnOnce(&dyn Port, u8) -> Regions,
    ) -> Option<Retired> {
        let mut st = self.lock();
        let port = st.port.clone()?;
        let granted = st
            .regions
            .iter()
            .zip(RIGHTS)
            .filter(|(g, _)| g.is_some())
            .fold(0u8, |a, (_, r)| a | r.bit());
        let old = std::mem::take(&mut st.regions);
        if again {
            st.regions = make(port.as_ref(), granted);
        }
        let holders = std::mem::take(&mut st.holders);
        Some(Retired { port, old, holders })
    }
}

/// The owner's handler: the keys of rank `from`'s rights for `seg`'s generation, recording it
/// as a holder; `Stale` unless that generation is current.
pub(super) fn keys_for(
    own: &Owned,
    from: usize,
    seg: &SegmentName,
    offset: u64,
    right: Right,
) -> Result<Keys, SegmentError> {
    let mut st = own.rma.lock();
    let g = layout::generation(&own.file);
    if g == 0 || g != seg.generation {
        return Err(SegmentError::Stale {
            seg: *seg,
            offset,
            right,
            current: g,
        });
    }
    let rights = layout::rights_of(&own.file, own.data_at, from);
    let mut regions = [None; 3];
    for r in RIGHTS {
        if rights & r.bit() != 0 {
            regions[index(r)] = st.regions[index(r)].map(|g| (g.base, g.key));
        }
    }
    if regions.iter().any(Option::is_some) {
        st.holders.insert(from as u32);
    }
    Ok(Keys {
        generation: g,
        len: own.len,
        rights,
        regions,
    })
}

/// Keys this process holds, by (owner rank, segment id). One lock for every thread: an
/// invalidation must reach all of them, and posting happens under it.
static HELD: Mutex<Option<HashMap<(u32, u64), Keys>>> = Mutex::new(None);

/// Invalidations served so far (changed under `HELD`'s lock): keys asked for before one and
/// answered after it may be the keys it withdrew, and are asked for again.
static FORGOTTEN: AtomicU64 = AtomicU64::new(0);

/// The keys this process holds, locked: an operation posts while it holds this.
pub(super) struct Held(MutexGuard<'static, Option<HashMap<(u32, u64), Keys>>>);

impl Held {
    pub(super) fn lock() -> Held {
        Held(HELD.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The keys of `key` (owner rank, segment id) if they are of `generation`.
    pub(super) fn get(&mut self, key: (u32, u64), generation: u64) -> Option<Keys> {
        let map = self.0.get_or_insert_with(HashMap::new);
        map.get(&key)
            .filter(|k| k.generation == generation)
            .copied()
    }

    /// The invalidations served so far, to pass to [`Held::remember`] after asking for keys.
    pub(super) fn invalidations(&self) -> u64 {
        FORGOTTEN.load(Ordering::Relaxed)
    }

    /// Keeps `k` for `key` unless an invalidation was served since `asked`
    /// ([`Held::invalidations`] before the keys were asked for): it may have withdrawn them.
    pub(super) fn remember(&mut self, key: (u32, u64), k: Keys, asked: u64) {
        if FORGOTTEN.load(Ordering::Relaxed) == asked {
            self.0.get_or_insert_with(HashMap::new).insert(key, k);
        }
    }
}

/// The owner rank `from` revoked or freed segment `id`: forget its keys.
pub(super) fn forget(from: usize, id: u64) {
    let mut held = Held::lock();
    FORGOTTEN.fetch_add(1, Ordering::Relaxed);
    if let Some(m) = held.0.as_mut() {
        m.remove(&(from as u32, id));
    }
}
