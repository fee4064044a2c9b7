use super::*;

#[test]
fn offers_round_trip_and_truncation_is_refused() {
    let o = Offer {
        workers: 3,
        slots: 16,
        slot_size: 4096,
        tcp: vec![1, 2, 3],
        shm: vec![],
        probe: 0x1234,
        ofi: vec![9, 8],
        verbs: vec![7; 40],
    };
    let b = o.encode();
    assert_eq!(Offer::decode(&b), Some(o));
    assert_eq!(Offer::decode(&b[..b.len() - 1]), None);
}
