//! The trustee-side property table: every property a worker holds, named by (index, generation),
//! with its type tag (`TypeId`, through `dyn Any`), its trust-id set and its poison flag (a bit
//! of its key word, below).
//!
//! Names that arrive in requests are only ever looked up here, so a stale name (the slot was freed
//! and maybe reused: its generation moved on) or a foreign one (out of range, wrong type) yields
//! [`DelegationError::DeadProperty`], never a dangling pointer.
//!
//! Reference counting follows the thesis (§3.2.6): each `Trust` has a unique id; creating a trust
//! (a *registration*) and dropping one (a *release*) both send the id to the trustee, which
//! *toggles* it in the property's set (symmetric difference). Because toggles commute, an "add"
//! that arrives after the matching "remove" (a clone travelled and was dropped before its
//! creator's message got through) leaves the id in the set until the add arrives.
//!
//! The set alone is not enough: a clone's registration and the release of the trust it was made
//! from (its *parent*) travel on different rings when the parent moved to another worker after
//! the clone was made, and the release can arrive first. The set is then empty while the clone
//! lives. So a registration names the parent, a release says how many trusts were made from the
//! released one (clones and serialised copies), and the slot keeps, per parent, the trusts its
//! release announced minus the registrations naming it that arrived (`owed`, only the non-zero
//! balances). The property is freed when its set is empty *and* no balance is left. That is
//! exactly when every trust ever made is gone: while a trust lives, either its registration has
//! arrived (its id is in the set), or it has not, and then its parent's release has either
//! arrived (the parent's balance is positive: the registrations naming it are its own children,
//! one of which is missing) or not (then the parent is in the set, or is in this same case, and
//! so on up to the first trust, which `insert` put in). Balances are kept per parent because a
//! registration whose parent's release has not arrived must not pay for another parent's.
//! This module does not send anything; `trust/refcount.rs` does.
//!
//! **The key word.** Each slot also keeps its generation, its type's [`type_index`] and its poison
//! flag in one word, [`key`], and a trust carries its own half of it. An apply on the trustee
//! itself compares that one word ([`PropertyTable::get_keyed`]) instead of the generation, the
//! 128-bit `TypeId` and the flag one by one (the `TypeId` compare alone showed in a loop of inline
//! applies); any mismatch goes to the full checks, which name the error. Type indexes are numbered
//! per process, so only a trust made or deserialised in the trustee's own process can match; every
//! other name takes the full checks, as requests from other workers do. See `trust/README.md`.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::error::DelegationError;

pub(crate) type Value = Box<dyn Any + Send>;

/// The bit of a slot's key that says the property is poisoned; no trust's key has it.
const POISONED: u64 = 1 << 63;

/// The key word of generation `gn` of a property of type index `ty` (see the module docs).
#[inline(always)]
pub(crate) fn key(gn: u32, ty: u32) -> u64 {
    u64::from(gn) | u64::from(ty) << 32
}

/// This process's small number for type `T`, the same on every thread, never 0 (the type
/// index of no type), below 2^31 (the key's poison bit stays free). Each thread remembers the
/// numbers it has looked up, so only a thread's first look at a type takes the process-wide
/// lock (and every look does, on a thread whose locals are being torn down).
pub(crate) fn type_index<T: 'static>() -> u32 {
    thread_local! {
        static KNOWN: RefCell<HashMap<TypeId, u32>> = RefCell::new(HashMap::new());
    }
    static TYPES: Mutex<Option<HashMap<TypeId, u32>>> = Mutex::new(None);
    let t = TypeId::of::<T>();
    if let Ok(Some(i)) = KNOWN.try_with(|k| k.borrow().get(&t).copied()) {
        return i;
    }
    let i = {
        let mut types = TYPES.lock().unwrap_or_else(PoisonError::into_inner);
        let types = types.get_or_insert_with(HashMap::new);
        let next = types.len() as u32 + 1;
        assert!(
            next < 1 << 31,
            "gossamer: more than 2^31 property types in one process"
        );
        *types.entry(t).or_insert(next)
    };
    let _ = KNOWN.try_with(|k| k.borrow_mut().insert(t, i));
    i
}

#[derive(Debug)]
struct Slot {
    /// `key(gn, type index)`, with [`POISONED`] set once poisoned; 0 while the slot is free.
    key: u64,
    gn: u32,
    value: Option<Value>,
    /// The value's type tag and address, cached so the hot path needs no virtual call.
    tag: Option<TypeId>,
    ptr: *mut u8,
    /// The trust-id set: the ids registered and not released, and those released before their
    /// registration arrived (marked `true`: see [`PropertyTable::released_twice`]).
    ids: IdMap<bool>,
    /// Per parent trust id: the trusts its release announced (made from it), minus the
    /// registrations naming it that arrived; only non-zero balances (negative while
    /// registrations run ahead of the parent's release).
    owed: IdMap<i64>,
}

/// Trust ids are made by this program (a worker's counter), so they need no keyed hash.
type IdBuild = std::hash::BuildHasherDefault<KeyHasher>;

/// Entries of an [`IdMap`] kept in a vector; one more moves them into a hash map.
const FEW_IDS: usize = 32;

/// A map keyed by trust id: a vector searched from end to end while it holds at most
/// [`FEW_IDS`] entries (most properties have a few trusts, and a toggle then costs a few
/// compares and no hashing), a hash map beyond. Without the hash map a property with n trusts
/// took O(n) per toggle, and a property with many trusts O(n²) in all.
#[derive(Debug)]
enum IdMap<V> {
    Few(Vec<(u64, V)>),
    Many(HashMap<u64, V, IdBuild>),
}

impl<V: Copy> IdMap<V> {
    fn one(id: u64, v: V) -> Self {
        IdMap::Few(vec![(id, v)])
    }

    fn is_empty(&self) -> bool {
        match self {
            IdMap::Few(v) => v.is_empty(),
            IdMap::Many(m) => m.is_empty(),
        }
    }

    /// Whether some value satisfies `f`.
    fn any(&self, f: impl Fn(&V) -> bool) -> bool {
        match self {
            IdMap::Few(v) => v.iter().any(|e| f(&e.1)),
            IdMap::Many(m) => m.values().any(f),
        }
    }

    /// Empties the map, keeping a vector's allocation.
    fn clear(&mut self) {
        match self {
            IdMap::Few(v) => v.clear(),
            IdMap::Many(_) => *self = IdMap::Few(Vec::new()),
        }
    }

    /// Replaces the entry of `id` by `f(its value)`: `None` in or out means no entry.
    fn update(&mut self, id: u64, f: impl FnOnce(Option<V>) -> Option<V>) {
        match self {
            IdMap::Few(v) => {
                let at = v.iter().position(|e| e.0 == id);
                match (at, f(at.map(|i| v[i].1))) {
                    (Some(i), Some(x)) => v[i].1 = x,
                    (Some(i), None) => {
                        v.swap_remove(i);
                    }
                    (None, Some(x)) if v.len() < FEW_IDS => v.push((id, x)),
                    (None, Some(x)) => {
                        let mut m: HashMap<u64, V, IdBuild> = v.drain(..).collect();
                        m.insert(id, x);
                        *self = IdMap::Many(m);
                    }
                    (None, None) => {}
                }
            }
            IdMap::Many(m) => match f(m.get(&id).copied()) {
                Some(x) => {
                    m.insert(id, x);
                }
                None => {
                    m.remove(&id);
                }
            },
        }
    }
}

/// What a reference-counting message does to its trust id (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Toggle {
    /// A trust was made from trust `parent` (a clone, or a serialised copy): its id goes in,
    /// and one of the trusts `parent` owes is paid.
    Register { parent: u64 },
    /// A trust was dropped after `made` trusts were made from it: its id goes out, and those
    /// `made` registrations are owed.
    Release { made: u64 },
}

/// Adds `by` to `parent`'s balance in `owed`, keeping only non-zero balances.
fn owe(owed: &mut IdMap<i64>, parent: u64, by: i64) {
    owed.update(parent, |b| {
        let b = b.unwrap_or(0).saturating_add(by);
        (b != 0).then_some(b)
    });
}

/// The table of one trustee.
#[derive(Debug, Default)]
pub(crate) struct PropertyTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl PropertyTable {
    /// Places a value with its first trust id; returns its name.
    pub(crate) fn insert<T: Send + 'static>(&mut self, value: T, id: u64) -> (u32, u32) {
        self.live += 1;
        let ty = type_index::<T>();
        let mut value: Value = Box::new(value);
        let tag = Some((*value).type_id());
        let ptr = (&mut *value as *mut (dyn Any + Send)).cast::<u8>();
        if let Some(i) = self.free.pop() {
            let s = &mut self.slots[i as usize];
            s.key = key(s.gn, ty);
            s.value = Some(value);
            s.tag = tag;
            s.ptr = ptr;
            s.ids.clear();
            s.ids.update(id, |_| Some(false));
            s.owed.clear();
            (i, s.gn)
        } else {
            self.slots.push(Slot {
                key: key(1, ty),
                gn: 1,
                value: Some(value),
                tag,
                ptr,
                ids: IdMap::one(id, false),
                owed: IdMap::Few(Vec::new()),
            });
            ((self.slots.len() - 1) as u32, 1)
        }
    }

    fn slot(&mut self, idx: u32, gn: u32) -> Option<&mut Slot> {
        self.slots
            .get_mut(idx as usize)
            .filter(|s| s.gn == gn && s.value.is_some())
    }

    /// [`get`](Self::get) for a trust that carries `key(gn, type index)` as `k`: one compare
    /// when it matches (then the generation, the type and the flag all do), the full checks
    /// otherwise.
    #[inline(always)]
    pub(crate) fn get_keyed<T: 'static>(
        &self,
        idx: u32,
        gn: u32,
        k: u64,
    ) -> Result<*mut T, DelegationError> {
        match self.slots.get(idx as usize) {
            Some(s) if s.key == k => Ok(s.ptr.cast::<T>()),
            _ => self.get_cold::<T>(idx, gn),
        }
    }

    #[cold]
    #[inline(never)]
    fn get_cold<T: 'static>(&self, idx: u32, gn: u32) -> Result<*mut T, DelegationError> {
        self.get::<T>(idx, gn)
    }

    /// A pointer to the live `T` named `(idx, gn)`. The pointee lives in its own box, so it
    /// stays put when the table grows; it is freed only by [`toggle`](Self::toggle).
    #[inline]
    pub(crate) fn get<T: 'static>(&self, idx: u32, gn: u32) -> Result<*mut T, DelegationError> {
        let s = self
            .slots
            .get(idx as usize)
            .ok_or(DelegationError::DeadProperty)?;
        if s.gn != gn || s.tag != Some(TypeId::of::<T>()) {
            return Err(DelegationError::DeadProperty);
        }
        if s.key & POISONED != 0 {
            return Err(DelegationError::Poisoned);
        }
        Ok(s.ptr.cast::<T>())
    }

    /// Clears a live property's poison (`Trust::reset`); a pointer to its `T`, as [`get`](Self::get).
    pub(crate) fn restore<T: 'static>(
        &mut self,
        idx: u32,
        gn: u32,
    ) -> Result<*mut T, DelegationError> {
        let s = self.slot(idx, gn).ok_or(DelegationError::DeadProperty)?;
        if s.tag != Some(TypeId::of::<T>()) {
            return Err(DelegationError::DeadProperty);
        }
        s.key &= !POISONED;
        Ok(s.ptr.cast::<T>())
    }

    /// Marks a property poisoned (a delegated closure panicked while holding it).
    pub(crate) fn poison(&mut self, idx: u32, gn: u32) {
        if let Some(s) = self.slot(idx, gn) {
            s.key |= POISONED;
        }
    }

    /// Toggles trust id `id` in the property's set and counts what `what` owes or pays. Returns
    /// the value when the set became empty with nothing owed: the caller drops it (outside any
    /// borrow of the table, since its destructor may run user code). A toggle for a dead name
    /// changes nothing and is refused (`DeadProperty`): a property dies only when no trust of
    /// it is left and every trust made from one has been counted, so no correct sender can
    /// still name it.
    pub(crate) fn toggle(
        &mut self,
        idx: u32,
        gn: u32,
        id: u64,
        what: Toggle,
    ) -> Result<Option<Value>, DelegationError> {
        let Some(s) = self.slot(idx, gn) else {
            return Err(DelegationError::DeadProperty);
        };
        // Symmetric difference: an id that is in goes out, one that is not comes in (marked
        // when a release brought it).
        let release = matches!(what, Toggle::Release { .. });
        s.ids.update(id, |here| match here {
            Some(_) => None,
            None => Some(release),
        });
        match what {
            Toggle::Register { parent } => owe(&mut s.owed, parent, -1),
            Toggle::Release { made } => {
                owe(&mut s.owed, id, i64::try_from(made).unwrap_or(i64::MAX))
            }
        }
        if !s.ids.is_empty() || !s.owed.is_empty() {
            return Ok(None);
        }
        s.gn = s.gn.wrapping_add(1).max(1);
        s.key = 0;
        let v = s.value.take();
        s.tag = None;
        s.ptr = std::ptr::null_mut();
        self.free.push(idx);
        self.live -= 1;
        Ok(v)
    }

    /// Live properties that hold an id a release brought in, after every message of the job
    /// has been applied (at the end of a run that went well): a registration that never came,
    /// so the id was released twice. Only the bytes of a serialised trust read as two handles
    /// do that (each releases the id the bytes carry); the property then outlived every handle
    /// and is freed only with the table. Before the end, such an id is a release that overtook
    /// its registration, which is fine.
    pub(crate) fn released_twice(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.value.is_some() && s.ids.any(|&r| r))
            .count()
    }

    /// Properties alive in this table.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// Takes every value out (at shutdown), so they can be dropped outside the table's borrow.
    pub(crate) fn drain(&mut self) -> Vec<Value> {
        self.live = 0;
        self.slots
            .iter_mut()
            .filter_map(|s| {
                s.key = 0;
                s.tag = None;
                s.ptr = std::ptr::null_mut();
                s.value.take()
            })
            .collect()
    }
}

/// A fast hasher for integer keys chosen by this program, not by an attacker: sender ids and
/// tags in `worker/mailbox.rs`, trust ids here.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_foreign_and_mistyped_names_are_dead() {
        let mut t = PropertyTable::default();
        let (i, g) = t.insert(5u64, 1);
        assert!(t.get::<u64>(i, g).is_ok());
        assert_eq!(
            t.get::<u32>(i, g).unwrap_err(),
            DelegationError::DeadProperty
        );
        assert_eq!(
            t.get::<u64>(i + 7, g).unwrap_err(),
            DelegationError::DeadProperty
        );
        assert!(live_toggle(&mut t, i, g, 1, RELEASED).is_some());
        assert_eq!(
            t.get::<u64>(i, g).unwrap_err(),
            DelegationError::DeadProperty
        );
        let (i2, g2) = t.insert(6u64, 2);
        assert_eq!(i2, i);
        assert_ne!(g2, g);
        assert_eq!(
            t.get::<u64>(i, g).unwrap_err(),
            DelegationError::DeadProperty
        );
        assert_eq!(
            t.toggle(i, g, 2, RELEASED).err(),
            Some(DelegationError::DeadProperty),
            "a stale toggle is refused and must not touch the new property"
        );
        assert_eq!(t.live(), 1);
    }

    /// [`PropertyTable::toggle`] of a name that must be alive.
    fn live_toggle(
        t: &mut PropertyTable,
        idx: u32,
        gn: u32,
        id: u64,
        what: Toggle,
    ) -> Option<Value> {
        t.toggle(idx, gn, id, what)
            .expect("a toggle for a live property")
    }

    /// A release of a trust from which nothing was made.
    const RELEASED: Toggle = Toggle::Release { made: 0 };

    #[test]
    fn add_after_remove_keeps_the_property() {
        let mut t = PropertyTable::default();
        let (i, g) = t.insert(1u8, 10);
        // The clone (id 11) is dropped and its removal arrives before its creation.
        assert!(live_toggle(&mut t, i, g, 11, RELEASED).is_none());
        assert!(live_toggle(&mut t, i, g, 11, Toggle::Register { parent: 10 }).is_none());
        assert!(t.get::<u8>(i, g).is_ok());
        assert!(live_toggle(&mut t, i, g, 10, Toggle::Release { made: 1 }).is_some());
    }

    /// Trust 10 made 11 and was dropped elsewhere; its release arrives before 11's
    /// registration, which leaves the set empty: the property must wait for what is owed.
    #[test]
    fn a_release_that_overtakes_the_registration_of_a_trust_made_from_it_keeps_the_property() {
        let mut t = PropertyTable::default();
        let (i, g) = t.insert(1u8, 10);
        assert!(live_toggle(&mut t, i, g, 10, Toggle::Release { made: 1 }).is_none());
        assert!(t.get::<u8>(i, g).is_ok());
        assert!(live_toggle(&mut t, i, g, 11, Toggle::Register { parent: 10 }).is_none());
        assert!(live_toggle(&mut t, i, g, 11, RELEASED).is_some());
        // Every order of the messages of a trust that made two (11, 12), one of which (12) made
        // a third (13), frees the property at the last message and not before; in particular
        // 13's registration must not pay for 12's while 12's release has not arrived.
        let msgs = [
            (10, Toggle::Release { made: 2 }),
            (11, Toggle::Register { parent: 10 }),
            (12, Toggle::Register { parent: 10 }),
            (11, RELEASED),
            (12, Toggle::Release { made: 1 }),
            (13, Toggle::Register { parent: 12 }),
            (13, RELEASED),
        ];
        let mut order: Vec<usize> = (0..msgs.len()).collect();
        let mut orders = 0;
        permute(&mut order, 0, &mut |o| {
            let (i, g) = t.insert(1u8, 10);
            for (n, &m) in o.iter().enumerate() {
                let (id, what) = msgs[m];
                let freed = live_toggle(&mut t, i, g, id, what).is_some();
                assert_eq!(freed, n == o.len() - 1, "order {o:?}, message {n}");
            }
            orders += 1;
        });
        assert_eq!(orders, 5040);
    }

    fn permute(v: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
        if k == v.len() {
            f(v);
            return;
        }
        for i in k..v.len() {
            v.swap(k, i);
            permute(v, k + 1, f);
            v.swap(k, i);
        }
    }

    #[test]
    fn type_indexes_are_one_per_type_on_every_thread_and_never_zero() {
        let here = (
            type_index::<u64>(),
            type_index::<String>(),
            type_index::<u64>(),
        );
        let there = std::thread::spawn(|| (type_index::<String>(), type_index::<u64>()))
            .join()
            .unwrap();
        assert_eq!(here.0, here.2);
        assert_ne!(here.0, here.1);
        assert_eq!((there.0, there.1), (here.1, here.0));
        assert!(here.0 > 0 && here.1 > 0);
    }

    #[test]
    fn the_key_word_matches_only_a_live_unpoisoned_property_of_its_type() {
        let mut t = PropertyTable::default();
        let (i, g) = t.insert(5u64, 1);
        let k = key(g, type_index::<u64>());
        assert!(t.get_keyed::<u64>(i, g, k).is_ok());
        // A key of another type, or none (0), takes the full checks, which still name the
        // property when the type is right.
        assert!(t.get_keyed::<u64>(i, g, key(g, 0)).is_ok());
        assert_eq!(
            t.get_keyed::<u32>(i, g, key(g, type_index::<u32>()))
                .unwrap_err(),
            DelegationError::DeadProperty
        );
        t.poison(i, g);
        assert_eq!(
            t.get_keyed::<u64>(i, g, k).unwrap_err(),
            DelegationError::Poisoned
        );
        assert!(live_toggle(&mut t, i, g, 1, RELEASED).is_some());
        assert_eq!(
            t.get_keyed::<u64>(i, g, k).unwrap_err(),
            DelegationError::DeadProperty
        );
        let (i2, g2) = t.insert(6u64, 2);
        assert_eq!(i2, i);
        assert_eq!(
            t.get_keyed::<u64>(i, g, k).unwrap_err(),
            DelegationError::DeadProperty
        );
        assert!(
            t.get_keyed::<u64>(i2, g2, key(g2, type_index::<u64>()))
                .is_ok()
        );
        t.drain();
        assert_eq!(
            t.get_keyed::<u64>(i2, g2, key(g2, type_index::<u64>()))
                .unwrap_err(),
            DelegationError::DeadProperty
        );
    }

    /// An `IdMap` holds what a hash map would, through every update, across its switch from a
    /// vector to a hash map and back to a vector on `clear`.
    #[test]
    fn id_maps_hold_what_a_hash_map_holds_across_the_switch() {
        use rand::{Rng, SeedableRng};
        let seed = 0x1d_4a9;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut m: IdMap<i64> = IdMap::Few(Vec::new());
        let mut model: HashMap<u64, i64> = HashMap::new();
        let mut spilled = false;
        for step in 0..20_000 {
            if step % 5_000 == 4_999 {
                m.clear();
                model.clear();
                assert!(matches!(m, IdMap::Few(_)), "seed {seed}, step {step}");
            }
            // Ids from a range about three times `FEW_IDS`, added to more often than removed
            // while few, so the map grows past the switch and shrinks back below it.
            let id = rng.gen_range(0..3 * FEW_IDS as u64);
            let by: i64 = if rng.gen_bool(0.7) { 1 } else { -1 };
            let add = |b: Option<i64>| {
                let b = b.unwrap_or(0) + by;
                (b != 0).then_some(b)
            };
            let expected = add(model.get(&id).copied());
            m.update(id, add);
            match expected {
                Some(b) => model.insert(id, b),
                None => model.remove(&id),
            };
            spilled |= matches!(m, IdMap::Many(_));
            let held: HashMap<u64, i64> = match &m {
                IdMap::Few(v) => v.iter().copied().collect(),
                IdMap::Many(h) => h.iter().map(|(&k, &v)| (k, v)).collect(),
            };
            if let IdMap::Few(v) = &m {
                assert_eq!(v.len(), held.len(), "seed {seed}, step {step}: an id twice");
                assert!(v.len() <= FEW_IDS, "seed {seed}, step {step}");
            }
            assert_eq!(held, model, "seed {seed}, step {step}");
            assert_eq!(m.is_empty(), model.is_empty(), "seed {seed}, step {step}");
        }
        assert!(
            spilled,
            "the test never moved the map past {FEW_IDS} entries"
        );
    }

    /// A property with a hundred thousand trusts (each made from the first, each making one
    /// more), whose messages arrive in a shuffled order, is freed at the last message and not
    /// before, and in well under the time a toggle of O(trusts) would take (several seconds).
    #[test]
    fn a_property_with_many_trusts_is_freed_at_the_last_message_without_quadratic_cost() {
        use rand::SeedableRng;
        use rand::seq::SliceRandom;
        const N: u64 = 100_000;
        let seed = 0x5eed;
        let mut msgs = vec![(1, Toggle::Release { made: N })];
        for c in 0..N {
            let (child, grandchild) = (2 + 2 * c, 3 + 2 * c);
            msgs.push((child, Toggle::Register { parent: 1 }));
            msgs.push((child, Toggle::Release { made: 1 }));
            msgs.push((grandchild, Toggle::Register { parent: child }));
            msgs.push((grandchild, RELEASED));
        }
        msgs.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
        let mut t = PropertyTable::default();
        let (i, g) = t.insert(1u8, 1);
        let start = std::time::Instant::now();
        for (n, &(id, what)) in msgs.iter().enumerate() {
            let freed = live_toggle(&mut t, i, g, id, what).is_some();
            assert_eq!(freed, n == msgs.len() - 1, "seed {seed}, message {n}");
        }
        let took = start.elapsed();
        assert_eq!(t.live(), 0);
        assert!(
            took < std::time::Duration::from_secs(2),
            "{} messages took {took:?}",
            msgs.len()
        );
    }

    #[test]
    fn poison_sticks() {
        let mut t = PropertyTable::default();
        let (i, g) = t.insert(1u8, 1);
        t.poison(i, g);
        assert_eq!(t.get::<u8>(i, g).unwrap_err(), DelegationError::Poisoned);
    }
}
