//! Tests of the `verbs` fabric that run without an RDMA device: the start-up error when there is
//! none, the bytes ranks exchange and the checks they must pass, the queue-pair attributes that
//! depend on both sides, and the queue depths. The ring protocol it drives is tested over ofi
//! (`fabric/rdma`); the data path itself needs a device (see the module docs).

use super::setup::depths;
use super::wire::{Endpoint, check_queue_pair, psn, rtr};
use super::*;
use crate::bootstrap::KEY_LEN;
use crate::sys::verbs::{LINK_LAYER_ETHERNET, Transition};

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

/// A card's queue pair words are 24 bits, the number non-zero, and its key an rkey.
#[test]
fn a_cards_queue_pair_words_are_checked() {
    assert_eq!(check_queue_pair(0x1234, 99, 0xabcd), Ok(()));
    assert!(check_queue_pair(0, 99, 1).is_err());
    assert!(check_queue_pair(1 << 24, 99, 1).is_err());
    assert!(check_queue_pair(1, 1 << 24, 1).is_err());
    assert!(check_queue_pair(1, 1, 1 << 32).is_err());
}

#[test]
fn queue_depths_cover_the_rings_and_respect_the_device() {
    assert_eq!(depths(4, 16, 1 << 15), setup::Depths { send: 68, recv: 68 });
    assert_eq!(
        depths(1024, 16, 16_384),
        setup::Depths {
            send: 16_384,
            recv: 16_384
        }
    );
    assert_eq!(depths(0, 16, 100).send, 1);
}
