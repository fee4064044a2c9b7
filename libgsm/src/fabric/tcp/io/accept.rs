//! New connections: accepting them (bounded by `MAX_HELLOS` waiting at once, retrying when out
//! of descriptors), reading and checking their hello, and turning an authenticated one into an
//! incoming connection; taking over the outgoing connections `create` made. A connection that
//! fails its hello is dropped with one line on stderr and never touches the job. It does not
//! move frames (`io::send`, `io::recv`). See `fabric/tcp/README.md`.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::link::{ARMED, Link, OutCell};
use super::recv::Incoming;
use super::{Entry, Fate, Io, Pending, Side};
use crate::fabric::tcp::connect::{delay_acks, keep_alive_or_warn};
use crate::fabric::tcp::handshake::{Accepted, Expect, HELLO_LEN, check_hello};
use crate::fabric::tcp::{ACCEPT_RETRY, HELLO_TIMEOUT, MAX_HELLOS};
use crate::sys::net::{self, ready};

impl Io {
    /// Accepts every waiting connection (only after the listener's event: on Linux, even a
    /// failing `accept` allocates a socket), or until [`MAX_HELLOS`] wait for their hello; the
    /// listener then stays `acceptable`, to be taken up again by a later pass.
    pub(super) fn accept(&mut self) -> bool {
        let mut any = false;
        loop {
            if self.hellos >= MAX_HELLOS {
                return any;
            }
            let (sock, addr) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.acceptable = false;
                    return any;
                }
                // That one connection failed before it was taken (reset, or refused by a
                // firewall rule); the next may be fine.
                Err(e) if net::accept_lost_one(&e) => continue,
                // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) or worse: the
                // connections stay queued and the edge-triggered listener will not signal them
                // again, so stay `acceptable` and retry, and keep the cause for `attach`.
                Err(e) => {
                    self.accept_failed(&e);
                    return any;
                }
            };
            any = true;
            if self.accept_retry.take().is_some() {
                let mut st = self.shared.attach.lock().unwrap_or_else(|p| p.into_inner());
                st.accept_failure = None;
            }
            if let Err(e) = sock.set_nonblocking(true) {
                refuse(addr, &format!("cannot make it non-blocking: {e}"));
                continue;
            }
            // A two-way connection's frames leave this end too: without it, Nagle's algorithm
            // holds a small frame until the last one is acknowledged, which the peer's delayed
            // ACKs put off by up to 40 ms.
            if let Err(e) = sock.set_nodelay(true) {
                refuse(addr, &format!("cannot turn Nagle's algorithm off: {e}"));
                continue;
            }
            keep_alive_or_warn(&sock);
            delay_acks(&sock);
            let i = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            let ev = ready::IN | ready::RDHUP | ready::ET;
            if let Err(e) = self.epoll.add(sock.as_fd(), ev, i as u64) {
                refuse(addr, &format!("cannot watch it: {e}"));
                self.free.push(i);
                continue;
            }
            self.hellos += 1;
            self.conns[i] = Some(Entry::Hello(Box::new(Pending {
                sock,
                addr,
                readable: true,
                buf: [0; HELLO_LEN],
                got: 0,
                deadline: Instant::now() + HELLO_TIMEOUT,
            })));
        }
    }

    /// Takes the outgoing connections `create` handed over into their reserved places.
    pub(super) fn take_outgoing(&mut self) {
        self.shared.handed.store(false, Ordering::Relaxed);
        let handed = std::mem::take(
            &mut *self
                .shared
                .handover
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for (i, l) in handed {
            self.conns[i] = Some(Entry::Link(l));
        }
    }

    /// Notes that `accept` failed with `e`: retried after [`ACCEPT_RETRY`], reported once on
    /// stderr, and kept for the message of an `attach` that times out meanwhile.
    fn accept_failed(&mut self, e: &std::io::Error) {
        let first = self.accept_retry.is_none();
        self.accept_retry = Some(Instant::now() + ACCEPT_RETRY);
        let at = self
            .listener
            .local_addr()
            .map_or_else(|_| "the listener".to_string(), |a| a.to_string());
        let hint = if net::out_of_descriptors(e) {
            "; raise the limit on open files (ulimit -n)"
        } else {
            ""
        };
        let why = format!("accepting connections on {at}: {e}{hint}");
        if first {
            crate::eprint_line(format_args!("gossamer: tcp: {why} (retrying)"));
        }
        let mut st = self.shared.attach.lock().unwrap_or_else(|p| p.into_inner());
        st.accept_failure = Some(why);
    }

    /// Reads a connection's hello; once complete and checked, the connection is an incoming
    /// link (token `i`), armed for the I/O thread and offered to the workers. `Err` carries why
    /// it is refused.
    pub(super) fn read_hello(
        &mut self,
        mut h: Box<Pending>,
        i: usize,
        progress: &mut bool,
    ) -> Result<Entry, (Fate, SocketAddr)> {
        let addr = h.addr;
        let refuse = |why: String| Err((Fate::Refuse(why), addr));
        while h.got < HELLO_LEN {
            let got = h.got;
            match (&h.sock).read(&mut h.buf[got..]) {
                Ok(0) => return refuse("closed before completing its hello".into()),
                Ok(n) => {
                    h.got += n;
                    *progress = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    h.readable = false;
                    return Ok(Entry::Hello(h));
                }
                Err(e) => return refuse(format!("reading its hello: {e}")),
            }
        }
        let checked = check_hello(
            &h.buf,
            &Expect {
                key: &self.key,
                rank: self.rank,
                workers: &self.workers,
                is_peer: &self.is_peer,
                layout: self.layout,
                two_way: self.two_way,
                groups: &self.groups,
            },
        );
        let Accepted {
            src_rank,
            src_local,
            back,
        } = match checked {
            Ok(x) => x,
            Err(why) => return refuse(why),
        };
        let g = self.workers[..src_rank as usize].iter().sum::<u32>() + src_local;
        if self.unclaimed[g as usize].is_none() {
            return refuse(format!(
                "rank {src_rank} worker {src_local} is already connected"
            ));
        }
        let Pending { sock, .. } = *h;
        // A two-way connection's outgoing half: a `dup` of the socket, so that it has its own
        // epoll registration (edge-triggered writes; the incoming half's is level-triggered).
        let out = match back {
            None => None,
            Some(b) => match self.out_half(&sock, addr, src_rank, b) {
                Ok(x) => Some(x),
                Err(why) => return refuse(why),
            },
        };
        // Level-triggered from now on, one event per arming (see `link`): bytes that followed
        // the hello are read by the next pass (the link starts readable).
        if let Err(e) = self.epoll.modify(sock.as_fd(), ARMED, i as u64) {
            if let Some((j, link, cell)) = out {
                self.drop_out_half(j, link, cell);
            }
            return refuse(format!("cannot watch it: {e}"));
        }
        if let Some((j, link, cell)) = out {
            self.conns[j] = Some(Entry::Link(link.clone()));
            for r in self.groups.ranks_of(self.groups.of_rank(src_rank)) {
                self.outs_of_rank[r as usize].push(j);
            }
            let _ = cell.set(link);
        }
        let producers = self.unclaimed[g as usize].take().expect("checked above");
        let home = self.groups.local(self.groups.target(g, self.groups.mine()));
        let inc = Incoming::new(
            (src_rank, src_local, g, home),
            producers,
            self.dests.clone(),
            self.layout.slot_size,
        );
        let link = Arc::new(Link::new(sock, addr, i as u64, Side::In(Box::new(inc))));
        self.hellos -= 1;
        self.shared.offer_incoming(link.clone(), src_rank);
        tracing::debug!(
            target: "gossamer::fabric",
            fabric = "tcp",
            peer = src_rank,
            worker = src_local,
            two_way = back.is_some(),
            %addr,
            "accepted a connection that proved the key"
        );
        Ok(Entry::Link(link))
    }

    /// The outgoing half of this rank's worker `b` to rank `r` on a two-way connection `sock`
    /// from it: a `dup` of the socket in a reserved place `j` of the table, registered
    /// edge-triggered for writes, and the cell its bells look in (set once the connection is
    /// taken); `Err` says why the connection is refused.
    fn out_half(
        &mut self,
        sock: &TcpStream,
        addr: SocketAddr,
        r: u32,
        b: u32,
    ) -> Result<(usize, Arc<Link>, OutCell), String> {
        let Some((o, cell)) = self.awaited.remove(&(r, b)) else {
            return Err(format!(
                "worker {b} of this rank already writes to rank {r}"
            ));
        };
        let dup = match sock.try_clone() {
            Ok(d) => d,
            Err(e) => {
                self.awaited.insert((r, b), (o, cell));
                return Err(format!("cannot duplicate its descriptor: {e}"));
            }
        };
        let j = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(e) = self
            .epoll
            .add(dup.as_fd(), ready::OUT | ready::ET, j as u64)
        {
            self.free.push(j);
            self.awaited.insert((r, b), (o, cell));
            return Err(format!("cannot watch it: {e}"));
        }
        let link = Arc::new(Link::new(dup, addr, j as u64, Side::Out(Box::new(o))));
        Ok((j, link, cell))
    }

    /// Undoes [`Io::out_half`] for a connection refused after it.
    fn drop_out_half(&mut self, j: usize, link: Arc<Link>, cell: OutCell) {
        let _ = self.epoll.delete(link.sock.as_fd());
        self.free.push(j);
        let Ok(link) = Arc::try_unwrap(link) else {
            unreachable!("nobody else holds a half not yet in the table")
        };
        let Side::Out(o) = link
            .state
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .side
        else {
            unreachable!("an outgoing half")
        };
        self.awaited.insert((o.rank, o.local), (*o, cell));
    }
}

/// Drops an unauthenticated connection's report: one line on stderr.
pub(super) fn refuse(addr: SocketAddr, why: &str) {
    crate::eprint_line(format_args!(
        "gossamer: tcp: dropped a connection from {addr}: {why}"
    ));
}
