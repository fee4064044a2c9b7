use super::*;

#[test]
fn offers_round_trip_and_truncation_is_refused() {
    let o = Offer {
        workers: 3,
        slots: 16,
        slot_size: 4096,
        probe: 0x1234,
        endpoints: vec![(FabricKind::Tcp, vec![1, 2, 3]), (FabricKind::Shm, vec![])],
    };
    let b = o.encode();
    assert_eq!(Offer::decode(&b), Some(o.clone()));
    assert_eq!(o.endpoint(FabricKind::Tcp), &[1, 2, 3]);
    assert!(o.endpoint(FabricKind::Ofi).is_empty());
    for cut in 0..b.len() {
        assert_eq!(Offer::decode(&b[..cut]), None, "cut at {cut}");
    }
    let mut longer = b.clone();
    longer.push(0);
    assert_eq!(Offer::decode(&longer), None);
}

#[test]
fn an_unknown_or_repeated_fabric_is_refused() {
    let mut o = Offer {
        workers: 1,
        slots: 8,
        slot_size: 64,
        probe: 0,
        endpoints: vec![(FabricKind::Tcp, vec![9])],
    };
    let mut b = o.encode();
    // The name "tcp" starts after 3 words, the probe and the count.
    let at = 12 + 8 + 4 + 1;
    assert_eq!(&b[at..at + 3], b"tcp");
    b[at..at + 3].copy_from_slice(b"xyz");
    assert_eq!(Offer::decode(&b), None);
    o.endpoints.push((FabricKind::Tcp, vec![8]));
    assert_eq!(Offer::decode(&o.encode()), None);
}
