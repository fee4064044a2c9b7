//! Tests of the ring protocol's pure parts: the region's plan, the immediates, the receive
//! side's ordering and checks, and the card with its checks. The protocol's turns run in the
//! `ofi` fabric's tests (and the conformance suite) over libfabric.

use super::card::{CARD, Card, Expect, card_for};
use super::plan::{
    Arrivals, CREDIT_BIT, Imm, Plan, credit_imm, header_offset, position, read_imm, slot_imm, tag,
};
use crate::bootstrap::KEY_LEN;
use crate::fabric::Lane;
use crate::wire::ring::RingLayout;

fn card() -> Card {
    Card {
        key: [7; KEY_LEN],
        from: 1,
        to: 0,
        slots: 16,
        slot_size: 256,
        workers: 2,
        first: 4,
        extra: [0x1234, 99],
        base: 0x7000_0000,
        mr_key: 0xabcd,
        len: 1 << 20,
        rings: 8192,
        credits: 0,
    }
}

fn expect() -> Expect {
    Expect {
        key: [7; KEY_LEN],
        from: 1,
        to: 0,
        slots: 16,
        slot_size: 256,
        workers: 2,
        rings: 8,
        ring_bytes: 128 + 16 * 320,
    }
}

#[test]
fn a_card_round_trips_and_every_lie_is_refused() {
    let c = card();
    let b = c.encode();
    assert_eq!(Card::decode(&b), Ok(c.clone()));
    assert_eq!(c.check(&expect()), Ok(()));
    assert!(Card::decode(&b[..CARD - 1]).is_err());
    let mut magic = b;
    magic[0] ^= 1;
    assert!(Card::decode(&magic).is_err());
    let mut version = b;
    version[8] = 2;
    assert!(Card::decode(&version).is_err());
    let lies: [fn(&mut Card); 8] = [
        |c| c.key[31] ^= 1,
        |c| c.from = 2,
        |c| c.to = 3,
        |c| c.slots = 32,
        |c| c.slot_size = 512,
        |c| c.workers = 1,
        |c| c.rings = c.len,          // rings past the region's end
        |c| c.credits = u64::MAX - 8, // overflow
    ];
    for (n, lie) in lies.iter().enumerate() {
        let mut c = card();
        lie(&mut c);
        assert!(c.check(&expect()).is_err(), "lie {n}: {c:?}");
    }
    let mut big = card();
    big.base = u64::MAX - 10;
    assert!(big.check(&expect()).is_err());
}

#[test]
fn the_card_for_this_rank_is_found_once_among_a_ranks_cards() {
    let mut to2 = card();
    to2.to = 2;
    let mut blob = card().encode().to_vec();
    blob.extend_from_slice(&to2.encode());
    assert_eq!(card_for(&blob, 2), Ok(to2));
    assert_eq!(card_for(&blob, 0).map(|c| c.to), Ok(0));
    assert!(
        card_for(&blob, 5)
            .unwrap_err()
            .contains("no card for rank 5")
    );
    assert!(card_for(&blob[..CARD + 1], 0).is_err());
    let mut twice = card().encode().to_vec();
    twice.extend_from_slice(&card().encode());
    assert!(card_for(&twice, 0).unwrap_err().contains("two cards"));
    assert!(card_for(&[], 0).is_err());
}

#[test]
fn region_parts_do_not_overlap_and_ring_numbers_match_across_sides() {
    let layout = RingLayout::new(16, 256).unwrap();
    let plan = Plan::new(layout, 2, &[(0, 3, 0), (2, 1, 5)], 300).unwrap();
    // 2 local workers × (3 + 1) peer workers × 2 lanes.
    assert_eq!(plan.rings, 16);
    assert_eq!(plan.owner(11), Some((0, 11)));
    assert_eq!(plan.owner(12), Some((1, 0)));
    assert_eq!(plan.owner(16), None);
    // Parts in order, none overlapping: the adapter's, credits in, credits out, rings.
    assert!(300 <= plan.credit_in(0));
    assert!(plan.credit_in(15) + 8 <= plan.credit_out(0));
    assert!(plan.credit_out(15) + 8 <= plan.ring_in(0));
    assert!(plan.ring_in(15) + plan.ring_bytes <= plan.ring_out(0));
    assert!(plan.ring_out(15) + plan.ring_bytes <= plan.total);
    assert_eq!(plan.ring_in(0) % 128, 0);
    // A ring index names one (producer, consumer, lane) on both sides.
    for i in 0..12 {
        let (p, c, lane) = Plan::unindex(i, 2);
        assert_eq!(Plan::index(p, c, 2, lane), i);
    }
    assert_eq!(Plan::unindex(5, 3), (0, 2, Lane::Response));
    // Slots spaced slot_size + 64 after the control block (wire::ring's format).
    assert_eq!(header_offset(layout, 0), 128);
    assert_eq!(header_offset(layout, 1), 128 + 320);
    let many = RingLayout::new(1 << 16, 64).unwrap();
    assert!(Plan::new(many, 256, &[(1, 256, 0)], 0).is_err());
}

#[test]
fn immediates_and_positions_round_trip() {
    assert_eq!(read_imm(slot_imm(9, 16, 15), 16), Imm::Slot(9, 15));
    assert_eq!(read_imm(credit_imm(9), 16), Imm::Credit(9));
    assert_eq!(slot_imm(9, 16, 15) & CREDIT_BIT, 0);
    // The position a slot stands for, from the next one expected.
    assert_eq!(position(0, 0, 16), 0);
    assert_eq!(position(17, 1, 16), 17);
    assert_eq!(position(17, 0, 16), 32);
    assert_eq!(position(17, 5, 16), 21);
    // Tags are lap + 1, as the ring's producer writes them.
    assert_eq!((tag(0, 16), tag(15, 16), tag(16, 16)), (1, 1, 2));
}

/// Writes that complete out of slot order are published in ring order, with the tag of their
/// position; a write that lies (twice into a slot, a header that is not the previous lap's, too
/// long, past the credit) is refused without being recorded.
#[test]
fn arrivals_publish_in_ring_order_and_refuse_what_lies() {
    // What a writer sends for position `pos`: the previous lap's tag and the length.
    let sent = |pos: u64, len: u32| (u64::from(tag(pos, 4) - 1) << 32) | u64::from(len);
    let head = |pos: u64, len: u32| (u64::from(tag(pos, 4)) << 32) | u64::from(len);
    let mut a = Arrivals::new(4);
    assert_eq!(a.pop(), None);
    assert_eq!(a.arrive(1, sent(1, 10), 0, 64), Ok(()));
    assert_eq!(a.pop(), None, "slot 0 has not arrived");
    assert_eq!(a.arrive(0, sent(0, 64), 0, 64), Ok(()));
    assert_eq!(a.pop(), Some((0, head(0, 64))));
    assert_eq!(a.pop(), Some((1, head(1, 10))));
    assert_eq!(a.pop(), None);
    assert_eq!(a.next, 2);
    let before = a.clone();
    assert!(a.arrive(2, sent(2, 65), 0, 64).is_err(), "too long");
    assert!(a.arrive(2, sent(6, 1), 0, 64).is_err(), "a later lap's tag");
    assert!(a.arrive(2, head(2, 1), 0, 64).is_err(), "its own lap's tag");
    assert!(a.arrive(9, sent(2, 1), 0, 64).is_err(), "no such slot");
    assert_eq!(a, before, "nothing recorded");
    assert_eq!(a.arrive(3, sent(3, 0), 0, 64), Ok(()));
    assert!(a.arrive(3, sent(3, 0), 0, 64).is_err(), "twice");
    // Position 4 (slot 0, second lap) needs the consumer to have released position 0.
    assert!(
        a.arrive(0, sent(4, 1), 0, 64).is_err(),
        "before its release"
    );
    assert_eq!(a.arrive(0, sent(4, 1), 1, 64), Ok(()));
    assert_eq!(a.arrive(2, sent(2, 5), 1, 64), Ok(()));
    let order: Vec<u64> = std::iter::from_fn(|| a.pop()).map(|(s, _)| s).collect();
    assert_eq!(order, vec![2, 3, 0]);
    assert_eq!(a.next, 5);
}
