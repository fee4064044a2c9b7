//! Unit tests of the places that follow use (`places.rs`), and of the outbox over them: a worker
//! of a large job keeps nothing per worker it does not talk to.

use std::cell::{Cell, OnceCell};
use std::sync::Arc;

use super::outbox::Outbox;
use super::places::{BLOCK, Places};
use super::{Place, Shared};
use crate::fabric::Doorbell;

/// 1,024 hosts of 128 workers; this rank is host 3's.
const TOTAL: usize = 1024 * 128;
const BASE: usize = 3 * 128;
const LOCAL: usize = 128;

/// An entry as large as the outbox's queues for one peer, to make a per-worker cost show.
type Big = [u8; 1024];

#[test]
fn a_slot_is_pointer_sized() {
    assert_eq!(std::mem::size_of::<OnceCell<Box<Big>>>(), 8);
    assert_eq!(
        std::mem::size_of::<OnceCell<Box<[OnceCell<Box<Big>>; BLOCK]>>>(),
        8
    );
}

/// Untouched, a job of 131,072 workers costs a slot per local worker and per block of `BLOCK`
/// global ids: about 9 KiB, where an entry per worker of the job would be 128 MiB.
#[test]
fn untouched_workers_cost_no_entry() {
    let p: Places<Big> = Places::new(BASE, LOCAL, TOTAL);
    assert_eq!(p.made(), 0);
    let bytes = p.heap_bytes();
    assert_eq!(bytes, LOCAL * 8 + TOTAL.div_ceil(BLOCK) * 8);
    assert!(bytes < 16 << 10, "{bytes} bytes for an untouched job");
    for g in [0, BASE, BASE + LOCAL - 1, BASE + LOCAL, TOTAL - 1] {
        assert!(
            p.get(g).is_none(),
            "worker {g} has no entry before its first use"
        );
    }
    assert_eq!(p.heap_bytes(), bytes, "a look makes nothing");
}

/// The first use of a worker makes its one entry (and, for another rank's worker, the slots of
/// its block); later uses find it without making anything.
#[test]
fn first_use_makes_one_entry() {
    let p: Places<Big> = Places::new(BASE, LOCAL, TOTAL);
    let empty = p.heap_bytes();
    let made = Cell::new(0);
    let make = |v: u8| {
        made.set(made.get() + 1);
        [v; 1024]
    };
    // A worker of this rank: its entry only.
    let a: *const Big = p.get_or(BASE + 5, || make(1));
    assert_eq!((p.made(), made.get()), (1, 1));
    assert_eq!(p.heap_bytes(), empty + std::mem::size_of::<Big>());
    // Another rank's worker: its entry and its block's slots.
    let far = TOTAL - 3;
    assert_eq!(p.get_or(far, || make(2))[0], 2);
    assert_eq!((p.made(), made.get()), (2, 2));
    let one_block = empty + 2 * std::mem::size_of::<Big>() + BLOCK * 8;
    assert_eq!(p.heap_bytes(), one_block);
    // Used again: the same entries, nothing made.
    assert!(std::ptr::eq(a, p.get_or(BASE + 5, || make(9))));
    assert_eq!(p.get_or(far, || make(9))[0], 2);
    assert_eq!(made.get(), 2);
    // A neighbour in the same block: one entry more, no block more.
    assert!(p.get(far - 1).is_none());
    p.get_or(far - 1, || make(3));
    assert_eq!(p.heap_bytes(), one_block + std::mem::size_of::<Big>());
    assert_eq!(p.get(far - 1).map(|b| b[0]), Some(3));
    assert!(p.is_local(BASE) && p.is_local(BASE + LOCAL - 1));
    assert!(!p.is_local(BASE - 1) && !p.is_local(BASE + LOCAL) && !p.is_local(far));
}

/// A global id outside the job is refused, not given a slot.
#[test]
#[should_panic(expected = "of a job of")]
fn a_worker_outside_the_job_is_refused() {
    let p: Places<u64> = Places::new(0, 2, 200);
    p.get_or(200, || 0);
}

/// This rank's 128 workers in a job of 1,024 such ranks: an outbox keeps its loopback queue and
/// a slot table, not queues per worker of the job, and a peer's queues appear with the first
/// record staged for it.
#[test]
fn an_outbox_keeps_queues_only_for_the_peers_it_stages_for() {
    let mut place = Place::single(LOCAL);
    place.rank = 3;
    place.base = BASE;
    place.total = TOTAL;
    place.rank_workers = vec![LOCAL as u32; TOTAL / LOCAL];
    place.hosts = (0..TOTAL / LOCAL).map(|h| format!("h{h}")).collect();
    place.pids = vec![0; TOTAL / LOCAL];
    place.far = vec![false; TOTAL / LOCAL];
    place.reads = vec![false; TOTAL / LOCAL];
    let doors = (0..LOCAL).map(|_| Doorbell::heap()).collect();
    let bells = (0..TOTAL).map(|_| None).collect();
    let layout = crate::wire::ring::RingLayout::new(16, 4096).expect("a valid layout");
    let shared = Arc::new(Shared::new(place, doors, bells, 1, true, layout));
    let outbox = Outbox::new((BASE + 1, 1), shared, Vec::new(), Vec::new(), 4096);
    let (made, bytes) = outbox.places_for_tests();
    assert_eq!(made, 1, "the loopback queue only");
    assert!(
        bytes < 24 << 10,
        "{bytes} bytes of places for a job of {TOTAL} workers"
    );
    // A release to another rank's worker stages a record for it: its queues, nothing else.
    outbox.push_release(TOTAL - 1, 7);
    outbox.push_release(BASE + 2, 7);
    let (made, more) = outbox.places_for_tests();
    assert_eq!(made, 3);
    // Two peers' queues (under a kilobyte each), and the block of the remote one.
    let peers = more - bytes - BLOCK * 8;
    assert!(peers < 2 << 10, "{peers} bytes for two peers' queues");
    assert!(outbox.any_dirty());
    assert!(outbox.is_remote(TOTAL - 1) && !outbox.is_remote(BASE + 2));
}
