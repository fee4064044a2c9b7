//! Tests of what the fabrics share: the registry, the settings read from the environment and the
//! address the tcp fabric listens on.

use std::sync::Arc;
use std::time::Duration;

use super::*;

#[test]
fn bad_settings_name_their_variable_and_the_accepted_form() {
    use gsm_contract::{get_from, table};
    let timeout = |v: &str| get_from::<Duration>(&table::CONNECT_TIMEOUT, Some(Ok(v.into())));
    assert_eq!(timeout(" 45 "), Ok(Duration::from_secs(45)));
    assert_eq!(
        FabricError::from(timeout("-1").unwrap_err()).to_string(),
        "environment variable GSM_CONNECT_TIMEOUT=\"-1\" is invalid: expected a whole number \
         of seconds from 1 to 86400"
    );
    // 0 reached the socket (which refuses a 0 timeout), and 2^64-1 overflowed the deadline.
    for bad in ["0", "86401", "18446744073709551615"] {
        assert!(timeout(bad).is_err(), "{bad}");
    }
    assert_eq!(timeout("86400"), Ok(Duration::from_secs(86_400)));
    let tcp = FabricChoice::Only(FabricKind::Tcp);
    assert_eq!(parse_choice(" TCP"), Ok(tcp));
    let e = parse_choice("bogus").unwrap_err().to_string();
    assert_eq!(
        e,
        "environment variable GSM_FABRIC=\"bogus\" is invalid: expected auto, shm, tcp, ofi or \
         verbs"
    );
    #[cfg(feature = "ofi")]
    assert_eq!(parse_choice("OFI"), Ok(FabricChoice::Only(FabricKind::Ofi)));
    // Without the feature, one line naming it, the package it needs and what this build takes.
    #[cfg(not(feature = "ofi"))]
    {
        let e = parse_choice("ofi").unwrap_err().to_string();
        assert!(
            e.starts_with(
                "GSM_FABRIC=ofi: this build of Gossamer has no ofi fabric (cargo feature `ofi` of \
                 the gossamer crate, which needs libfabric-dev); this build takes auto, shm"
            ),
            "{e}"
        );
    }
    // With the `rdma` feature `verbs` is a choice (whether a device exists is checked when the
    // fabric opens it: `fabric::verbs::tests`); without it, one line naming the feature.
    #[cfg(feature = "rdma")]
    assert_eq!(
        parse_choice(" Verbs"),
        Ok(FabricChoice::Only(FabricKind::Verbs))
    );
    #[cfg(not(feature = "rdma"))]
    {
        let e = parse_choice("verbs").unwrap_err().to_string();
        assert!(
            e.starts_with(
                "GSM_FABRIC=verbs: this build of Gossamer has no verbs fabric (cargo \
                           feature `rdma`"
            ),
            "{e}"
        );
        assert!(e.contains("GSM_FABRIC=ofi with GSM_OFI_PROVIDER"), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

/// Every line of the registry names its own kind once, and every fabric of the launch contract
/// is either in the registry, served by its choice, or refused by that choice naming the cargo
/// feature that builds it: a new fabric needs its folder, its registry line and its contract
/// line, and nothing here.
#[test]
fn the_registry_has_one_line_per_fabric_of_the_contract_this_build_has() {
    let mut seen = Vec::new();
    for e in FABRICS {
        assert!(!seen.contains(&e.kind), "{} twice", e.kind);
        seen.push(e.kind);
        assert_eq!(entry(e.kind).map(|x| x.kind), Some(e.kind));
        assert_eq!(named(e.kind.name()), Some(e.kind));
        let choice = parse_choice(e.kind.name()).expect("a registered fabric is a choice");
        assert_eq!(choice, FabricChoice::Only(e.kind));
        assert_eq!(pick(choice, true, 1, "h"), Ok(e.kind));
    }
    for &k in FabricKind::ALL {
        if entry(k).is_some() {
            continue;
        }
        let gsm_contract::contract::Build::Feature { feature, .. } = k.build() else {
            panic!("{k} is in every build, by the contract, but in no line of FABRICS");
        };
        assert_eq!(named(k.name()), None);
        let e = parse_choice(k.name()).unwrap_err().to_string();
        assert!(e.contains(&format!("cargo feature `{feature}`")), "{e}");
    }
    assert_eq!(named("bogus"), None);
    assert_eq!(entry(FabricKind::Ofi).is_some(), cfg!(feature = "ofi"));
    assert_eq!(entry(FabricKind::Verbs).is_some(), cfg!(feature = "rdma"));
    // `auto` takes shm within a host and tcp between hosts; shm cannot leave its host.
    assert_eq!(pick(FabricChoice::Auto, true, 1, "h"), Ok(FabricKind::Shm));
    assert_eq!(pick(FabricChoice::Auto, false, 1, "h"), Ok(FabricKind::Tcp));
    let shm = FabricChoice::Only(FabricKind::Shm);
    assert!(matches!(
        pick(shm, false, 1, "h"),
        Err(FabricError::ShmAcrossHosts { peer: 1, .. })
    ));
    // The opened fabric says which it is.
    let (shm, endpoint) = (entry(FabricKind::Shm).unwrap().open)(&Settings::default()).unwrap();
    assert_eq!((shm.kind(), endpoint.len()), (FabricKind::Shm, 0));
}

/// A host name that resolves to loopback on its own host (Debian's `127.0.1.1 <hostname>`)
/// is replaced, in a job of several hosts, by the address of the route to another host;
/// an address that is not loopback, or a job with no other reachable host, keeps its own.
#[test]
fn a_loopback_host_address_gives_way_to_the_route_to_the_other_hosts() {
    let lo: std::net::IpAddr = "127.0.1.1".parse().unwrap();
    let other: std::net::IpAddr = "10.1.2.3".parse().unwrap();
    assert_eq!(outward(other, "a", ["a", "b"].into_iter()), other);
    assert_eq!(outward(lo, "me", ["me"].into_iter()), lo);
    assert_eq!(outward(lo, "me", ["me", "127.0.0.1", ""].into_iter()), lo);
    let mine = crate::sys::net::first_outside_ipv4()
        .expect("this machine has an address besides loopback");
    let text = mine.to_string();
    // The other host is this machine's own address: the route to it starts from it.
    assert_eq!(outward(lo, "me", ["me", text.as_str()].into_iter()), mine);
}

/// A job of `workers.len()` ranks set up phase by phase on this one thread (no phase waits for a
/// peer): the fabrics and their links, rank by rank.
fn set_up_here<F: super::conformance::Open>(job_id: &str, workers: &[u32]) -> Vec<(F, Links)> {
    let n = workers.len() as u32;
    let settings = Settings {
        bind: Some(std::net::Ipv4Addr::LOCALHOST.into()),
        connect_timeout: std::time::Duration::from_secs(10),
    };
    let prepared: Vec<(F, Vec<u8>)> = (0..n).map(|_| F::open(&settings).unwrap()).collect();
    let endpoints: Vec<Vec<u8>> = prepared.iter().map(|(_, e)| e.clone()).collect();
    let mut fabrics: Vec<F> = prepared.into_iter().map(|(f, _)| f).collect();
    for (rank, f) in fabrics.iter_mut().enumerate() {
        let topo = Topology {
            rank: rank as u32,
            workers: workers.to_vec(),
            hosts: vec!["localhost".into(); n as usize],
            layout: crate::wire::ring::RingLayout::new(4, 128).unwrap(),
            job_id: job_id.to_string(),
            key: [3; crate::bootstrap::KEY_LEN],
        };
        let peers: Vec<Peer> = (0..n)
            .filter(|&r| r != rank as u32)
            .map(|r| Peer {
                rank: r,
                endpoint: endpoints[r as usize].clone(),
            })
            .collect();
        let hooks = Hooks {
            wake: Arc::new(|_| {}),
            fail: Arc::new(|e| panic!("{e}")),
        };
        f.create(&topo, &peers, hooks).unwrap();
    }
    let links: Vec<Links> = fabrics.iter_mut().map(|f| f.attach().unwrap()).collect();
    for f in &mut fabrics {
        f.sealed();
    }
    fabrics.into_iter().zip(links).collect()
}

/// Everything written to it, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Set-up says what it did through `tracing`, under the target `gossamer::fabric`: each
/// fabric's slot and ring sizes, the shm segment made (name, size) and the peers' mapped, the
/// tcp connections made and how long the peers took to connect.
#[test]
fn set_up_is_logged_under_the_fabric_target() {
    let out = Captured::default();
    let sink = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let job = format!("gsm-test-log-{}", std::process::id());
        drop(set_up_here::<shm::Shm>(&job, &[1, 2]));
        drop(set_up_here::<tcp::Tcp>("tcp-log", &[2, 1]));
    });
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("gossamer::fabric"))
        .collect();
    let has = |words: &[&str]| lines.iter().any(|l| words.iter().all(|w| l.contains(w)));
    assert!(
        has(&[
            "segment created",
            "bytes=",
            "slot_size=128",
            "gsm-test-log-"
        ]),
        "{text}"
    );
    assert!(has(&["mapped a peer's segment", "peer=1"]), "{text}");
    assert!(has(&["mapped every peer's segment"]), "{text}");
    assert!(
        has(&["fabric created", "fabric=\"tcp\"", "slots=4", "ring_bytes="]),
        "{text}"
    );
    assert!(
        has(&["connected and sent the hello", "connect_us="]),
        "{text}"
    );
    assert!(has(&["every peer connected", "waited_ms="]), "{text}");
}
