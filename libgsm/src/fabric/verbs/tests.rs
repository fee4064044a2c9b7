//! Tests of the `verbs` fabric that run without an RDMA device: the start-up error when there is
//! none, the bytes ranks exchange and the checks they must pass, the queue-pair attributes that
//! depend on both sides, and the region's offsets and immediates. The data path itself needs a
//! device (see the module docs).

use super::layout::{Arrivals, Imm, Plan, header_offset, payload_offset, position, read_imm};
use super::layout::{slot_imm, tag};
use super::setup::depths;
use super::wire::{CARD, Card, Endpoint, Expect, card_for, psn, rtr};
use super::*;
use crate::bootstrap::KEY_LEN;
use crate::fabric::Lane;
use crate::sys::verbs::{LINK_LAYER_ETHERNET, Transition};
use crate::wire::ring::RingLayout;

/// This machine has no RDMA device (no InfiniBand in its kernel, no rxe/siw): opening the fabric
/// fails at once with one line naming what it looked for.
#[test]
fn without_a_device_prepare_fails_in_one_line_naming_what_it_looked_for() {
    if !crate::sys::verbs::devices().is_empty() {
        return; // a machine with RDMA hardware
    }
    let settings = Settings {
        bind: None,
        connect_timeout: std::time::Duration::from_secs(1),
    };
    let e = Verbs::prepare(&settings).unwrap_err().to_string();
    assert_eq!(
        e,
        "GSM_FABRIC=verbs: no RDMA device with an active port: ibv_get_device_list found none \
         (/sys/class/infiniband is empty or missing: no InfiniBand/RoCE driver, nor rxe/siw)"
    );
    let named = open_error(Some("mlx5_0"), OpenError::NoDevice).to_string();
    assert!(named.contains("no RDMA device mlx5_0 (GSM_VERBS_DEVICE): ibv_get_device_list"));
    let other = OpenError::NotFound {
        wanted: "mlx5_9".into(),
        found: vec!["mlx5_0".into()],
    };
    assert_eq!(
        open_error(Some("mlx5_9"), other).to_string(),
        "GSM_FABRIC=verbs: no RDMA device mlx5_9 (GSM_VERBS_DEVICE); found [\"mlx5_0\"]"
    );
    for e in [e, named] {
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

fn ib(lid: u16, mtu: u32) -> Endpoint {
    Endpoint {
        device: "mlx5_0".into(),
        port: 1,
        link_layer: 1,
        lid,
        mtu,
        gid: [0xfe; 16],
        gid_index: 0,
    }
}

#[test]
fn an_endpoint_round_trips_and_untrusted_bytes_are_refused() {
    let e = ib(7, 5);
    let b = e.encode();
    assert_eq!(Endpoint::decode(&b), Ok(e.clone()));
    // Cut short, grown, a name longer than the bytes, a bad version, MTU or port.
    assert!(Endpoint::decode(&b[..b.len() - 1]).is_err());
    let mut long = b.clone();
    long.push(0);
    assert!(Endpoint::decode(&long).is_err());
    for (at, v) in [(0, 9u8), (4, 0), (4, 6), (2, 0), (23, 200)] {
        let mut bad = b.clone();
        bad[at] = v;
        assert!(Endpoint::decode(&bad).is_err(), "byte {at} = {v}");
    }
    assert!(Endpoint::decode(&[]).is_err());
    // An InfiniBand port with neither LID nor GID cannot be reached.
    let mut none = ib(0, 5);
    none.gid = [0; 16];
    assert!(Endpoint::decode(&none.encode()).is_err());
}

#[test]
fn rtr_takes_the_smaller_mtu_and_routes_roce_by_gid() {
    let t = rtr(&ib(3, 5), &ib(9, 4), 0x42, 17);
    assert_eq!(
        t,
        Transition::Rtr {
            port: 1,
            path_mtu: 4,
            dest_qpn: 0x42,
            rq_psn: 17,
            dlid: 9,
            global: None,
        }
    );
    let mut roce = ib(0, 3);
    roce.link_layer = LINK_LAYER_ETHERNET;
    roce.gid_index = 3;
    let mut peer = roce.clone();
    peer.gid = [1; 16];
    let Transition::Rtr { dlid, global, .. } = rtr(&roce, &peer, 1, 1) else {
        panic!("an RTR transition");
    };
    assert_eq!((dlid, global), (0, Some(([1; 16], 3))));
    // Sequence numbers are 24 bits and differ by direction.
    let key = [5; KEY_LEN];
    assert!(psn(&key, 0, 1) <= 0xFF_FFFF);
    assert_ne!(psn(&key, 0, 1), psn(&key, 1, 0));
}

fn card() -> Card {
    Card {
        key: [7; KEY_LEN],
        from: 1,
        to: 0,
        slots: 16,
        slot_size: 256,
        workers: 2,
        qpn: 0x1234,
        psn: 99,
        first: 4,
        base: 0x7000_0000,
        rkey: 0xabcd,
        len: 1 << 20,
        rings: 8192,
        credits: 0,
        staged: 512,
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
    let lies: [fn(&mut Card); 9] = [
        |c| c.key[31] ^= 1,
        |c| c.from = 2,
        |c| c.to = 3,
        |c| c.slots = 32,
        |c| c.workers = 1,
        |c| c.qpn = 0,
        |c| c.qpn = 1 << 24,
        |c| c.rings = c.len,         // rings past the region's end
        |c| c.staged = u64::MAX - 8, // overflow
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
fn region_offsets_do_not_overlap_and_ring_numbers_match_across_sides() {
    let layout = RingLayout::new(16, 256).unwrap();
    let plan = Plan::new(layout, 2, &[(0, 3, 0), (2, 1, 5)]).unwrap();
    assert_eq!(plan.rings, 16);
    assert_eq!(plan.owner(11), Some((0, 11)));
    assert_eq!(plan.owner(12), Some((1, 0)));
    assert_eq!(plan.owner(16), None);
    // Parts in order, none overlapping: credits in, credits out, staged headers, rings.
    assert!(plan.credit_in(15) + 8 <= plan.credit_out(0));
    assert!(plan.credit_out(15) + 8 <= plan.staged(0, 0));
    assert!(plan.staged(15, 15) + 8 <= plan.ring_in(0));
    assert!(plan.ring_in(15) + plan.ring_bytes <= plan.ring_out(0));
    assert!(plan.ring_out(15) + plan.ring_bytes <= plan.total);
    assert_eq!(plan.ring_in(0) % 128, 0);
    assert_eq!(plan.staged(1, 0) - plan.staged(0, 0), 16 * 8);
    // A ring index names one (producer, consumer, lane) on both sides.
    assert_eq!(Plan::unindex(5, 3), (0, 2, Lane::Response));
    // Payload right after the header; slots spaced slot_size + 64 (wire::ring's format).
    assert_eq!(header_offset(layout, 0), 128);
    assert_eq!(payload_offset(layout, 1), 128 + 320 + 8);
    assert!(Plan::new(RingLayout::new(1 << 16, 64).unwrap(), 256, &[(1, 256, 0)]).is_err());
}

#[test]
fn immediates_and_positions_round_trip() {
    assert_eq!(read_imm(slot_imm(9, 16, 15), 16), Imm::Slot(9, 15));
    assert_eq!(read_imm(layout::CREDIT_BIT | 9, 16), Imm::Credit(9));
    // The position a slot stands for, from the next one expected.
    assert_eq!(position(0, 0, 16), 0);
    assert_eq!(position(17, 1, 16), 17);
    assert_eq!(position(17, 0, 16), 32);
    assert_eq!(position(17, 5, 16), 21);
    // Tags are lap + 1, as the ring's producer writes them.
    assert_eq!((tag(0, 16), tag(15, 16), tag(16, 16)), (1, 1, 2));
}

/// Writes that complete out of slot order are published in ring order, with the tag of their
/// position; a write that lies (twice into a slot, a wrong lap, too long, past the credit) is
/// refused without being recorded.
#[test]
fn arrivals_publish_in_ring_order_and_refuse_what_lies() {
    let head = |pos: u64, len: u32| (u64::from(tag(pos, 4)) << 32) | u64::from(len);
    let mut a = Arrivals::new(4);
    assert_eq!(a.pop(), None);
    assert_eq!(a.arrive(1, head(1, 10), 0, 64), Ok(()));
    assert_eq!(a.pop(), None, "slot 0 has not arrived");
    assert_eq!(a.arrive(0, head(0, 64), 0, 64), Ok(()));
    assert_eq!(a.pop(), Some((0, head(0, 64))));
    assert_eq!(a.pop(), Some((1, head(1, 10))));
    assert_eq!(a.pop(), None);
    assert_eq!(a.next, 2);
    let before = a.clone();
    assert!(a.arrive(2, head(2, 65), 0, 64).is_err(), "too long");
    assert!(a.arrive(2, head(6, 1), 0, 64).is_err(), "a later lap's tag");
    assert!(a.arrive(9, head(2, 1), 0, 64).is_err(), "no such slot");
    assert_eq!(a, before, "nothing recorded");
    assert_eq!(a.arrive(3, head(3, 0), 0, 64), Ok(()));
    assert!(a.arrive(3, head(3, 0), 0, 64).is_err(), "twice");
    // Position 4 (slot 0, second lap) needs the consumer to have released position 0.
    assert!(
        a.arrive(0, head(4, 1), 0, 64).is_err(),
        "before its release"
    );
    assert_eq!(a.arrive(0, head(4, 1), 1, 64), Ok(()));
    assert_eq!(a.arrive(2, head(2, 5), 1, 64), Ok(()));
    let order: Vec<u64> = std::iter::from_fn(|| a.pop()).map(|(s, _)| s).collect();
    assert_eq!(order, vec![2, 3, 0]);
    assert_eq!(a.next, 5);
}

#[test]
fn queue_depths_cover_the_rings_and_respect_the_device() {
    assert_eq!(
        depths(4, 16, 1 << 15),
        setup::Depths {
            send: 132,
            recv: 68
        }
    );
    assert_eq!(
        depths(1024, 16, 16_384),
        setup::Depths {
            send: 16_384,
            recv: 16_384
        }
    );
    assert_eq!(depths(0, 16, 100).send, 1);
}
