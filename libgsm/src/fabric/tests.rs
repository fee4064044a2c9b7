//! Tests of what the fabrics share: the settings read from the environment and the address the
//! tcp fabric listens on.

use super::*;

#[test]
fn bad_settings_name_their_variable_and_the_accepted_form() {
    assert_eq!(connect_timeout(" 45 "), Ok(45));
    assert_eq!(
        connect_timeout("-1").unwrap_err().to_string(),
        "environment variable GSM_CONNECT_TIMEOUT=\"-1\" is invalid: expected a whole number \
         of seconds from 1 to 86400, e.g. 60"
    );
    // 0 reached the socket (which refuses a 0 timeout), and 2^64-1 overflowed the deadline.
    for bad in ["0", "86401", "18446744073709551615"] {
        assert!(connect_timeout(bad).is_err(), "{bad}");
    }
    assert_eq!(connect_timeout("86400"), Ok(86_400));
    assert_eq!(FabricChoice::parse(" TCP"), Ok(FabricChoice::Tcp));
    let e = FabricChoice::parse("bogus").unwrap_err().to_string();
    assert_eq!(
        e,
        "environment variable GSM_FABRIC=\"bogus\" is invalid: expected auto, shm or tcp"
    );
    let e = FabricChoice::parse("verbs").unwrap_err().to_string();
    assert!(
        e.starts_with("environment variable GSM_FABRIC=\"verbs\""),
        "{e}"
    );
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
