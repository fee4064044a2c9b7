//! Tests of the `ofi` fabric beyond the conformance suite: provider choice and its errors.

use super::provider;
use crate::fabric::FabricError;
use crate::sys::ofi::{Offer, bits};

#[test]
fn a_provider_that_does_not_exist_is_named_in_the_error() {
    let e = provider::choose(Some("no-such-provider")).unwrap_err();
    let FabricError::Provider {
        provider,
        capability,
    } = &e
    else {
        panic!("unexpected error {e}");
    };
    assert_eq!(provider, "no-such-provider");
    assert!(capability.contains("no such provider"), "{capability}");
}

fn offer(rdm: bool, caps: u64, cq_data_size: usize) -> Offer {
    Offer {
        provider: "p".into(),
        fabric: "f".into(),
        domain: "d".into(),
        caps,
        rdm,
        cq_data_size,
        mr_mode: 0,
    }
}

#[test]
fn a_provider_without_rma_is_refused_naming_the_capability() {
    // Every provider of libfabric 1.17 here has RMA (through rxm or rxd where the core lacks
    // it), so the judgement is checked on the answers such a provider would give.
    let msg_only = || vec![offer(true, bits::MSG, 8)];
    let e = provider::lacks("udp", &[], msg_only).to_string();
    assert_eq!(e, "ofi fabric: provider udp lacks FI_RMA");
    let dgram = || vec![offer(false, bits::MSG | bits::RMA, 8)];
    let e = provider::lacks("udp", &[], dgram).to_string();
    assert_eq!(
        e,
        "ofi fabric: provider udp lacks reliable datagram endpoints (FI_EP_RDM)"
    );
    let e = provider::lacks("verbs", &[offer(true, bits::RMA, 4)], Vec::new).to_string();
    assert!(e.contains("8 bytes of remote completion data"), "{e}");
    assert!(e.contains("it offers 4"), "{e}");
}

#[test]
fn the_default_choice_has_rma() {
    let (info, n) = provider::choose(None).expect("some provider with RMA here");
    let o = &info.offers()[n];
    assert!(o.caps & super::fi::bits::RMA != 0, "{o:?}");
    assert!(o.cq_data_size >= provider::CQ_DATA);
}

#[test]
fn the_interface_holding_the_host_address_is_preferred_over_a_bridge_listed_first() {
    let at = |fabric: &str, cq| Offer {
        fabric: fabric.into(),
        ..offer(true, bits::RMA, cq)
    };
    let offers = [
        at("10.77.54.0/24", 8),
        at("fe80::/64", 8),
        at("192.0.2.0/23", 4),
        at("192.0.2.0/24", 8),
    ];
    let host = "192.0.2.2".parse().ok();
    assert_eq!(provider::preferred(&offers, host), Some(3));
    // No answer holds it: the first that is not link-local.
    let elsewhere = "172.16.0.1".parse().ok();
    assert_eq!(provider::preferred(&offers[1..], elsewhere), Some(2));
    assert_eq!(provider::preferred(&offers[1..2], None), Some(0));
    assert_eq!(provider::preferred(&offers[2..3], host), None);
    assert!(provider::subnet_holds(
        "fd00::/64",
        "fd00::2".parse().unwrap()
    ));
    assert!(!provider::subnet_holds(
        "fd00::/64",
        "192.0.2.2".parse().unwrap()
    ));
    assert!(!provider::subnet_holds("shm", "192.0.2.2".parse().unwrap()));
    assert!(provider::subnet_holds(
        "0.0.0.0/0",
        "192.0.2.2".parse().unwrap()
    ));
}
