//! Which host names are this machine, and the address the ranks reach `gsmrun` at: loopback
//! when every used host is this one, else the local address that routes to the first remote
//! host. Name checks go to the resolver only when plain text cannot tell; nothing here decides
//! placement.

use crate::hosts::Host;
use crate::placement::Placement;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};

/// Is `name` plainly this machine, without asking the resolver: `localhost`, a loopback
/// address, or this machine's hostname (full or short), in any ASCII case (as DNS compares)?
pub(crate) fn plainly_this_machine(name: &str, me: &str) -> bool {
    name.eq_ignore_ascii_case("localhost")
        || name.eq_ignore_ascii_case(me)
        || me
            .split('.')
            .next()
            .is_some_and(|short| name.eq_ignore_ascii_case(short))
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Is `name` this machine (loopback, our hostname, or an address of ours)?
pub fn is_local_host(name: &str) -> bool {
    if plainly_this_machine(name, &crate::sys::hostname()) {
        return true;
    }
    let Ok(addrs) = (name, 0u16).to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| a.ip().is_loopback() || UdpSocket::bind(SocketAddr::new(a.ip(), 0)).is_ok())
}

/// Address for the control listener: loopback when every used host is this machine, else the
/// local address that routes to the first remote host.
pub fn control_ip(placement: &Placement) -> IpAddr {
    let used: Vec<&Host> = (0..placement.hosts.len())
        .filter(|&h| placement.ranks_on(h).next().is_some())
        .map(|h| &placement.hosts[h])
        .collect();
    for h in used {
        if is_local_host(&h.name) {
            continue;
        }
        let Some(addr) = (h.name.as_str(), 9u16)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
        else {
            continue;
        };
        let bind: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        if let Ok(sock) = UdpSocket::bind(bind) {
            if sock.connect(addr).is_ok() {
                if let Ok(local) = sock.local_addr() {
                    return local.ip();
                }
            }
        }
    }
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}
