//! Sockets and readiness, for the tcp fabric: an epoll instance, an eventfd to wake its waiter,
//! socket options (keepalive), `listen`, a `send` of possibly uninitialised bytes, this host's
//! name, and what an `accept` error means.
//!
//! Each function is one system call (or a fixed short sequence of them), on `rustix` except
//! `send` (rustix takes only initialised bytes). It does not own sockets beyond the epoll and
//! eventfd descriptors it creates, retry anything, or decide what an error means for the job:
//! the fabric does. Functions marked `cfg(test)` exist for the fabric's tests, which inspect the
//! sockets the fabric made.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::epoll;

/// Readiness bits of an epoll registration or event: the kernel's `EPOLL*` values.
pub(crate) mod ready {
    use rustix::event::epoll::EventFlags;

    /// `EPOLLIN`: readable (or, on a listener, a connection to accept).
    pub(crate) const IN: u32 = EventFlags::IN.bits();
    /// `EPOLLOUT`: writable.
    pub(crate) const OUT: u32 = EventFlags::OUT.bits();
    /// `EPOLLRDHUP`: the peer closed its side.
    pub(crate) const RDHUP: u32 = EventFlags::RDHUP.bits();
    /// `EPOLLHUP`: hang-up.
    pub(crate) const HUP: u32 = EventFlags::HUP.bits();
    /// `EPOLLERR`: an error is pending on the descriptor.
    pub(crate) const ERR: u32 = EventFlags::ERR.bits();
    /// `EPOLLET`: edge-triggered registration.
    pub(crate) const ET: u32 = EventFlags::ET.bits();
    /// `EPOLLONESHOT`: after one event the registration is disabled until modified again.
    pub(crate) const ONESHOT: u32 = EventFlags::ONESHOT.bits();
}

/// An epoll instance (close-on-exec), closed on drop.
#[derive(Debug)]
pub(crate) struct Epoll(OwnedFd);

/// A buffer for the events one [`Epoll::wait`] returns.
pub(crate) struct Events(Vec<epoll::Event>);

impl Events {
    /// Room for `n` events.
    pub(crate) fn with_capacity(n: usize) -> Events {
        let empty = epoll::Event {
            flags: epoll::EventFlags::empty(),
            data: epoll::EventData::new_u64(0),
        };
        Events(vec![empty; n])
    }

    /// The first `n` events a wait filled, as (readiness bits, token).
    #[inline]
    pub(crate) fn ready(&self, n: usize) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.0[..n].iter().map(|e| {
            let (flags, data) = (e.flags, e.data);
            (flags.bits(), data.u64())
        })
    }
}

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub(crate) fn new() -> io::Result<Epoll> {
        Ok(Epoll(epoll::create(epoll::CreateFlags::CLOEXEC)?))
    }

    /// The epoll descriptor itself (to put this set in another one).
    pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.0)
    }

    /// Registers `fd` for the [`ready`] bits `events`, reported with `token`.
    pub(crate) fn add(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        let flags = epoll::EventFlags::from_bits_retain(events);
        epoll::add(&self.0, fd, epoll::EventData::new_u64(token), flags)?;
        Ok(())
    }

    /// Changes `fd`'s registration to `events` (re-arms a [`ready::ONESHOT`] one).
    pub(crate) fn modify(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        let flags = epoll::EventFlags::from_bits_retain(events);
        epoll::modify(&self.0, fd, epoll::EventData::new_u64(token), flags)?;
        Ok(())
    }

    /// Removes `fd`'s registration (closing the descriptor would too, but not while another
    /// thread still holds it open).
    pub(crate) fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        Ok(epoll::delete(&self.0, fd)?)
    }

    /// Waits up to `timeout_ms` (0: do not wait); returns how many entries of `events` were
    /// filled. EINTR (or any error) is a wait with no events.
    #[inline]
    pub(crate) fn wait(&self, events: &mut Events, timeout_ms: i32) -> usize {
        let timeout = rustix::event::Timespec {
            tv_sec: i64::from(timeout_ms / 1000),
            tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
        };
        epoll::wait(&self.0, &mut events.0[..], Some(&timeout)).unwrap_or(0)
    }
}

/// A non-blocking, close-on-exec eventfd counting from 0.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    let flags = rustix::event::EventfdFlags::NONBLOCK | rustix::event::EventfdFlags::CLOEXEC;
    Ok(rustix::event::eventfd(0, flags)?)
}

/// Adds 1 to an eventfd's counter. A full counter (EAGAIN) means a wake is pending anyway, so
/// errors are ignored.
pub(crate) fn eventfd_signal(fd: BorrowedFd<'_>) {
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

/// Resets a non-blocking eventfd's counter (reads it); nothing to read is fine.
pub(crate) fn eventfd_drain(fd: BorrowedFd<'_>) {
    let mut v = [0u8; 8];
    let _ = rustix::io::read(fd, &mut v);
}

/// A non-blocking, close-on-exec timerfd on the monotonic clock that expires every `period`,
/// first one period from now. A zero period would disarm it: refused (`InvalidInput`).
pub(crate) fn timerfd_every(period: Duration) -> io::Result<OwnedFd> {
    use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
    if period.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a zero timer period",
        ));
    }
    let flags = TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC;
    let fd = rustix::time::timerfd_create(TimerfdClockId::Monotonic, flags)?;
    let every = Timespec {
        tv_sec: i64::try_from(period.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(period.subsec_nanos()),
    };
    let spec = Itimerspec {
        it_interval: every,
        it_value: every,
    };
    rustix::time::timerfd_settime(&fd, TimerfdTimerFlags::empty(), &spec)?;
    Ok(fd)
}

/// Expirations of a non-blocking timerfd since the last call (`WouldBlock` when none).
pub(crate) fn timerfd_take(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut v = [0u8; 8];
    let n = rustix::io::read(fd, &mut v)?;
    if n != 8 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a short timerfd read",
        ));
    }
    Ok(u64::from_ne_bytes(v))
}

/// Turns on TCP keepalive for `sock`: `SO_KEEPALIVE`, then `TCP_KEEPIDLE` (`idle`),
/// `TCP_KEEPINTVL` (`interval`) and `TCP_KEEPCNT` (`probes`), in whole seconds; stops at the
/// first option the kernel refuses.
pub(crate) fn keep_alive(
    sock: BorrowedFd<'_>,
    idle: Duration,
    interval: Duration,
    probes: u32,
) -> io::Result<()> {
    use rustix::net::sockopt;
    sockopt::set_socket_keepalive(sock, true)?;
    sockopt::set_tcp_keepidle(sock, idle)?;
    sockopt::set_tcp_keepintvl(sock, interval)?;
    sockopt::set_tcp_keepcnt(sock, probes)?;
    Ok(())
}

/// `TCP_QUICKACK` off on `sock`: the kernel delays the ACK of data read from it (its "ping-pong"
/// mode) instead of sending one as soon as the reader empties the queue. The kernel leaves that
/// mode by itself when a delayed ACK's timer fires, so a caller re-asserts it now and then.
pub(crate) fn delay_acks(sock: BorrowedFd<'_>) -> io::Result<()> {
    Ok(rustix::net::sockopt::set_tcp_quickack(sock, false)?)
}

/// Whether `sock`'s ACKs are delayed (`TCP_QUICKACK` reads 0: the kernel's ping-pong mode).
#[cfg(test)]
pub(crate) fn acks_delayed(sock: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(!rustix::net::sockopt::tcp_quickack(sock)?)
}

/// How long `sock` has waited for an acknowledgement of what it sent (`TCP_INFO`: the time since
/// the last ACK came, while data is unacknowledged or zero-window probes are out), or `None` when
/// it waits for nothing. A live peer, even one whose window is closed, answers every segment and
/// probe; only a silent one lets this grow.
pub(crate) fn unanswered(sock: BorrowedFd<'_>) -> io::Result<Option<Duration>> {
    // SAFETY: an all-zero `tcp_info` is a valid value (integers only).
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` live for the call, `len` holds `info`'s size, and the kernel
    // writes at most `len` bytes into it (and the size it wrote back into `len`).
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let waits = info.tcpi_unacked > 0 || info.tcpi_probes > 0;
    Ok(waits.then(|| Duration::from_millis(info.tcpi_last_ack_recv.into())))
}

/// `listen(sock, backlog)`: on a bound socket, sets (or changes) its queue of connections.
pub(crate) fn listen(sock: BorrowedFd<'_>, backlog: i32) -> io::Result<()> {
    Ok(rustix::net::listen(sock, backlog)?)
}

/// `send(sock, buf, MSG_NOSIGNAL | MSG_DONTWAIT)`: how many bytes the kernel took. A broken pipe
/// is `EPIPE`, not a signal; a full socket buffer is `WouldBlock`.
///
/// `buf` may hold uninitialised bytes (padding a producer left in a slot): the kernel only
/// copies them, and they are never read as values in this process. That is why this is `libc`:
/// rustix's `send` takes initialised bytes only.
#[inline]
pub(crate) fn send_nosignal(sock: BorrowedFd<'_>, buf: &[MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call; the kernel only copies
    // them out.
    let n = unsafe {
        libc::send(
            sock.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Whether an `accept` error lost only the connection being taken (`ECONNABORTED`: reset before
/// it was taken; `EPROTO`; `EPERM`: refused by a firewall rule), so the next may be fine.
pub(crate) fn accept_lost_one(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNABORTED | libc::EPROTO | libc::EPERM)
    )
}

/// Whether `e` is `EMFILE`: this process has no descriptor left.
pub(crate) fn out_of_descriptors(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EMFILE)
}

/// This machine's host name (what `gethostname` returns: the node name of `uname`), lossily as
/// UTF-8.
pub(crate) fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// The keepalive settings of a socket, as [`keep_alive`] sets them, plus `TCP_USER_TIMEOUT`
/// (which the fabric leaves at 0).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeepAlive {
    pub(crate) on: bool,
    pub(crate) idle: Duration,
    pub(crate) interval: Duration,
    pub(crate) probes: u32,
    pub(crate) user_timeout_ms: u32,
    /// `TCP_NODELAY` (not keepalive, but read with it: every connection of the fabric sets it).
    pub(crate) nodelay: bool,
}

/// Reads the [`KeepAlive`] options of descriptor `fd` (a number found in `/proc/self/fd`; one
/// that is not a TCP socket gives an error).
#[cfg(test)]
pub(crate) fn keep_alive_of(fd: std::os::fd::RawFd) -> io::Result<KeepAlive> {
    use rustix::net::sockopt;
    // SAFETY: the descriptor is only passed to getsockopt, which fails with EBADF or ENOTSOCK if
    // it is not an open socket; nothing is read or written through it.
    let sock = unsafe { BorrowedFd::borrow_raw(fd) };
    Ok(KeepAlive {
        on: sockopt::socket_keepalive(sock)?,
        idle: sockopt::tcp_keepidle(sock)?,
        interval: sockopt::tcp_keepintvl(sock)?,
        probes: sockopt::tcp_keepcnt(sock)?,
        user_timeout_ms: sockopt::tcp_user_timeout(sock)?,
        nodelay: sockopt::tcp_nodelay(sock)?,
    })
}

/// The ports of descriptor `fd`'s local and peer addresses, if it is a connected IPv4 socket.
/// `fd` is a number found in `/proc/self/fd`; a descriptor that is not a socket, or was closed
/// meanwhile, gives `None`.
#[cfg(test)]
pub(crate) fn ipv4_ports(fd: std::os::fd::RawFd) -> Option<(u16, u16)> {
    // SAFETY: the descriptor is only passed to getsockname and getpeername, which fail with
    // EBADF or ENOTSOCK if it is not an open socket; nothing is read or written through it.
    let sock = unsafe { BorrowedFd::borrow_raw(fd) };
    let port =
        |a: rustix::net::SocketAddrAny| std::net::SocketAddrV4::try_from(a).ok().map(|a| a.port());
    let local = port(rustix::net::getsockname(sock).ok()?)?;
    let peer = port(rustix::net::getpeername(sock).ok()??)?;
    Some((local, peer))
}

/// This machine's first IPv4 address that is not loopback, if it has one (`getifaddrs`, which
/// rustix does not offer). The `ofi` fabric prefers the interface holding it.
#[cfg(any(test, feature = "ofi"))]
pub(crate) fn first_outside_ipv4() -> Option<std::net::IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is an entry of the list getifaddrs returned.
        let entry = unsafe { &*at };
        let family = if entry.ifa_addr.is_null() {
            None
        } else {
            // SAFETY: a non-null `ifa_addr` points to a sockaddr.
            Some(i32::from(unsafe { (*entry.ifa_addr).sa_family }))
        };
        if family == Some(libc::AF_INET) {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*entry.ifa_addr.cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            if !ip.is_loopback() {
                found = Some(ip.into());
                break;
            }
        }
        at = entry.ifa_next;
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// Lowers this process's limit on open descriptors (soft and hard) to `n`: how the tcp tests
/// make `accept` fail for want of descriptors. Irreversible for the hard limit, so only for a
/// test running in a child process of its own.
#[cfg(test)]
pub(crate) fn limit_descriptors(n: u64) -> io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let lim = Rlimit {
        current: Some(n),
        maximum: Some(n),
    };
    Ok(setrlimit(Resource::Nofile, lim)?)
}

/// CPU time this process has used so far, all threads, user and system (for measurements).
#[cfg(test)]
pub(crate) fn process_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
