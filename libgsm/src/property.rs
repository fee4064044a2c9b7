//! The trustee-side property table: every property a worker holds, named by (index, generation),
//! with its type tag (`TypeId`, through `dyn Any`), its trust-id set and its poison flag.
//!
//! Names that arrive in requests are only ever looked up here, so a stale name (the slot was freed
//! and maybe reused: its generation moved on) or a foreign one (out of range, wrong type) yields
//! [`DelegationError::DeadProperty`], never a dangling pointer.
//!
//! Reference counting follows the thesis (§3.2.6): each `Trust` has a unique id; creating a trust
//! and dropping one both send the id to the trustee, which *toggles* it in the property's set
//! (symmetric difference). Because toggles commute, an "add" that arrives after the matching
//! "remove" (a clone travelled and was dropped before its creator's message got through) leaves
//! the id in the set until the add arrives, so the set is empty only when every trust that was
//! ever created has been dropped. The property is freed exactly when its set becomes empty. This
//! module does not send anything; `trust.rs` does.

use std::any::{Any, TypeId};

use crate::error::DelegationError;

pub(crate) type Value = Box<dyn Any + Send>;

#[derive(Debug)]
struct Slot {
    gn: u32,
    value: Option<Value>,
    /// The value's type tag and address, cached so the hot path needs no virtual call.
    tag: Option<TypeId>,
    ptr: *mut u8,
    ids: Vec<u64>,
    poisoned: bool,
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
    pub(crate) fn insert(&mut self, mut value: Value, id: u64) -> (u32, u32) {
        self.live += 1;
        let tag = Some((*value).type_id());
        let ptr = (&mut *value as *mut (dyn Any + Send)).cast::<u8>();
        if let Some(i) = self.free.pop() {
            let s = &mut self.slots[i as usize];
            s.value = Some(value);
            s.tag = tag;
            s.ptr = ptr;
            s.ids.clear();
            s.ids.push(id);
            s.poisoned = false;
            (i, s.gn)
        } else {
            self.slots.push(Slot {
                gn: 1,
                value: Some(value),
                tag,
                ptr,
                ids: vec![id],
                poisoned: false,
            });
            ((self.slots.len() - 1) as u32, 1)
        }
    }

    fn slot(&mut self, idx: u32, gn: u32) -> Option<&mut Slot> {
        self.slots
            .get_mut(idx as usize)
            .filter(|s| s.gn == gn && s.value.is_some())
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
        if s.poisoned {
            return Err(DelegationError::Poisoned);
        }
        Ok(s.ptr.cast::<T>())
    }

    /// Marks a property poisoned (a delegated closure panicked while holding it).
    pub(crate) fn poison(&mut self, idx: u32, gn: u32) {
        if let Some(s) = self.slot(idx, gn) {
            s.poisoned = true;
        }
    }

    /// Toggles trust id `id` in the property's set. Returns the value when the set became empty:
    /// the caller drops it (outside any borrow of the table, since its destructor may run user
    /// code). A toggle for a dead name is ignored.
    pub(crate) fn toggle(&mut self, idx: u32, gn: u32, id: u64) -> Option<Value> {
        let s = self.slot(idx, gn)?;
        match s.ids.iter().position(|&x| x == id) {
            Some(i) => {
                s.ids.swap_remove(i);
            }
            None => s.ids.push(id),
        }
        if !s.ids.is_empty() {
            return None;
        }
        s.gn = s.gn.wrapping_add(1).max(1);
        let v = s.value.take();
        s.tag = None;
        s.ptr = std::ptr::null_mut();
        self.free.push(idx);
        self.live -= 1;
        v
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
                s.tag = None;
                s.ptr = std::ptr::null_mut();
                s.value.take()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_foreign_and_mistyped_names_are_dead() {
        let mut t = PropertyTable::default();
        let (i, g) = t.insert(Box::new(5u64), 1);
        assert!(t.get::<u64>(i, g).is_ok());
        assert_eq!(
            t.get::<u32>(i, g).unwrap_err(),
            DelegationError::DeadProperty
        );
        assert_eq!(
            t.get::<u64>(i + 7, g).unwrap_err(),
            DelegationError::DeadProperty
        );
        assert!(t.toggle(i, g, 1).is_some());
        assert_eq!(
            t.get::<u64>(i, g).unwrap_err(),
            DelegationError::DeadProperty
        );
        let (i2, g2) = t.insert(Box::new(6u64), 2);
        assert_eq!(i2, i);
        assert_ne!(g2, g);
        assert_eq!(
            t.get::<u64>(i, g).unwrap_err(),
            DelegationError::DeadProperty
        );
        assert!(
            t.toggle(i, g, 2).is_none(),
            "a stale toggle must not touch the new property"
        );
        assert_eq!(t.live(), 1);
    }

    #[test]
    fn add_after_remove_keeps_the_property() {
        let mut t = PropertyTable::default();
        let (i, g) = t.insert(Box::new(1u8), 10);
        // The clone (id 11) is dropped and its removal arrives before its creation.
        assert!(t.toggle(i, g, 11).is_none());
        assert!(t.toggle(i, g, 11).is_none());
        assert!(t.get::<u8>(i, g).is_ok());
        assert!(t.toggle(i, g, 10).is_some());
    }

    #[test]
    fn poison_sticks() {
        let mut t = PropertyTable::default();
        let (i, g) = t.insert(Box::new(1u8), 1);
        t.poison(i, g);
        assert_eq!(t.get::<u8>(i, g).unwrap_err(), DelegationError::Poisoned);
    }
}
