//! Tests of the `ofi` fabric beyond the conformance suite: provider choice and its errors.

use super::provider;
use crate::fabric::FabricError;

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

#[test]
fn a_provider_without_rma_is_refused_naming_the_capability() {
    // udp alone has datagram messages, no reliable endpoints and no RMA.
    let e = provider::choose(Some("udp")).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("ofi fabric: provider udp lacks "),
        "{text}"
    );
    assert!(
        text.contains("FI_EP_RDM") || text.contains("FI_RMA"),
        "{text}"
    );
}

#[test]
fn the_default_choice_has_rma() {
    let (info, n) = provider::choose(None).expect("some provider with RMA here");
    let o = &info.offers()[n];
    assert!(o.caps & super::fi::bits::RMA != 0, "{o:?}");
    assert!(o.cq_data_size >= provider::CQ_DATA);
}
