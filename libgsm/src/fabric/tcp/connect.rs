//! Listening and connecting: the listener `prepare` binds and advertises, and the connection each
//! local worker opens to each peer rank (a blocking connect, then the hello), with the keepalive
//! options every connection gets. It holds no state of the fabric's (`Tcp` is `mod.rs`'s; what a
//! connection needs comes in a [`Dialer`]). It does not accept connections or read hellos (the
//! I/O thread does, `io::accept`), and it does not wait for peers (`Tcp::attach`).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::handshake::{Hello, encode_endpoint};
use super::{KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES, os_error};
use crate::fabric::{FabricError, Settings, Topology};
use crate::sys::net;

/// `prepare`'s socket: binds the listener (never `0.0.0.0` unless `settings.bind` says so) and
/// returns it, the address it is bound to, and the endpoint bytes that advertise it.
pub(super) fn bind(settings: &Settings) -> Result<(TcpListener, SocketAddr, Vec<u8>), FabricError> {
    let ip = settings
        .bind
        .or_else(host_address)
        .unwrap_or(Ipv4Addr::LOCALHOST.into());
    let listener = TcpListener::bind(SocketAddr::new(ip, 0))
        .map_err(|e| os_error(format!("binding a listener to {ip}"), &e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| os_error("reading the listener's address", &e))?;
    // Room for the connections that come before this rank starts accepting in `create` (the
    // kernel caps it at net.core.somaxconn; connects wait for room, bounded by their timeout).
    let _ = net::listen(listener.as_fd(), 4096);
    listener
        .set_nonblocking(true)
        .map_err(|e| os_error("making the listener non-blocking", &e))?;
    let advertised = if addr.ip().is_unspecified() {
        SocketAddr::new(
            host_address().unwrap_or(Ipv4Addr::LOCALHOST.into()),
            addr.port(),
        )
    } else {
        addr
    };
    Ok((listener, addr, encode_endpoint(advertised)))
}

/// How this rank's workers open their connections: how long a connect and the hello's write
/// may take, and the layout the hello announces (one connection per remote host or per rank).
#[derive(Debug, Clone, Copy)]
pub(super) struct Dialer {
    pub(super) timeout: Duration,
    pub(super) per_host: bool,
}

impl Dialer {
    /// Opens local worker `l`'s connection to rank `r` and sends the hello; `back` is the
    /// worker of `r` that writes back on it (two-way), if any.
    pub(super) fn connect(
        &self,
        topo: &Topology,
        l: u32,
        r: u32,
        addr: SocketAddr,
        back: Option<u32>,
    ) -> Result<TcpStream, FabricError> {
        let host = || topo.hosts.get(r as usize).cloned().unwrap_or_default();
        let what = || {
            format!(
                "connecting worker {l} to rank {r} (host {}) at {addr}",
                host()
            )
        };
        let start = Instant::now();
        let mut sock = TcpStream::connect_timeout(&addr, self.timeout).map_err(|e| {
            // This rank could not reach `r`, which `FabricError::Timeout` ("rank r did not
            // connect") would put the other way round.
            let e = if e.kind() == std::io::ErrorKind::TimedOut {
                std::io::Error::other(format!(
                    "no answer within {} s; is rank {r} running, and can this host reach it? \
                     (GSM_CONNECT_TIMEOUT raises the limit)",
                    self.timeout.as_secs()
                ))
            } else {
                e
            };
            os_error(what(), &e)
        })?;
        let hello = Hello {
            key: topo.key,
            src_rank: topo.rank,
            src_local: l,
            dst_rank: r,
            layout: topo.layout,
            back,
            per_host: self.per_host,
        };
        sock.set_write_timeout(Some(self.timeout))
            .and_then(|()| sock.write_all(&hello.encode()))
            .and_then(|()| sock.set_nodelay(true))
            .and_then(|()| sock.set_nonblocking(true))
            .map_err(|e| os_error(what(), &e))?;
        keep_alive_or_warn(&sock);
        tracing::debug!(
            target: "gossamer::fabric",
            fabric = "tcp",
            peer = r,
            worker = l,
            %addr,
            connect_us = start.elapsed().as_micros() as u64,
            "connected and sent the hello"
        );
        Ok(sock)
    }
}

/// Makes the kernel drop `sock` when the peer's host stops answering: keepalive probes after
/// [`KEEPALIVE_IDLE`] of silence, every [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_PROBES`] of them (about
/// 25 s in all). Without it a rank that waits for a peer whose host vanished without a FIN or RST
/// (powered off, cut off) waits for ever on an idle connection; with it the I/O thread sees an
/// error and reports the peer lost. A peer that is alive but slow is not affected: its kernel
/// answers the probes even when its rings are full and it reads nothing.
///
/// `TCP_USER_TIMEOUT` is deliberately not set. It would also bound data in flight (about 15
/// minutes of retransmissions otherwise), but since Linux 5.11 it also aborts a connection whose
/// peer has kept a zero window that long: a live rank stopped in a debugger, or busy in a fiber
/// that does not yield, would be reported lost.
///
/// Linux probes only a connection with nothing unacknowledged: one whose data to the vanished
/// host is still in flight, or that waits on its closed window, retransmits or probes on its own
/// clock instead and fails only after those 15 minutes. A two-way connection (the only one
/// between two ranks of one worker each) may be that connection, so the I/O thread also watches
/// how long each connection's data has waited for any acknowledgement (`Io::watch_acks`,
/// [`UNANSWERED_LIMIT`](super::UNANSWERED_LIMIT), as long as keepalive takes): a live peer, even
/// one that reads nothing, acknowledges within a round trip. The integration test
/// `a_host_that_vanishes_without_a_word_is_noticed_over_tcp` (`tests/tests/cluster/lost.rs`) shows it
/// end to end: the ranks end once keepalive's bound has passed after the other host goes silent.
///
/// Failing to set these options is not fatal (a kernel or sandbox may lack one): the connection
/// works, only a vanished host is noticed later (see [`keep_alive_or_warn`]).
pub(super) fn keep_alive(sock: &TcpStream) -> std::io::Result<()> {
    net::keep_alive(
        sock.as_fd(),
        KEEPALIVE_IDLE,
        KEEPALIVE_INTERVAL,
        KEEPALIVE_PROBES,
    )
}

/// [`keep_alive`], or a warning (once per process) that a vanished peer host will be noticed
/// late: the connection itself is fine.
pub(super) fn keep_alive_or_warn(sock: &TcpStream) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if let Err(e) = keep_alive(sock) {
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "gossamer: tcp: cannot turn on keepalive for a connection ({e}); a peer host that \
                 vanishes may go unnoticed"
            );
        }
    }
}

/// Delayed ACKs on an incoming connection (`TCP_QUICKACK` off). A connection carries data one way, so an ACK can never ride on an answer: without
/// this, the kernel sends a bare ACK from every `recv` that empties the socket, a second packet
/// through the stack per frame, on the path of every round trip. Streams are not slowed: the
/// kernel still acknowledges at
/// once every second full segment, and every second small pushed one. A refusal is ignored.
pub(in crate::fabric::tcp) fn delay_acks(sock: &TcpStream) {
    let _ = net::delay_acks(sock.as_fd());
}

/// The address this host's name resolves to, if it is one a peer can connect to.
pub(super) fn host_address() -> Option<IpAddr> {
    crate::fabric::resolve(&net::hostname()).filter(|ip| !ip.is_unspecified())
}
