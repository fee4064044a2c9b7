//! The operating system calls of the store (the only module that makes any): the limit on open
//! descriptors, which bounds how many clients a rank can take, the CPU time and memory `INFO`
//! reports, and the host's address a cluster's shard is announced at.

/// Raises the soft limit on open descriptors towards `want` (as far as the hard limit allows,
/// as Redis does at start) and returns the soft limit then in force, or `None` when the system
/// does not say.
pub fn raise_open_files(want: u64) -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable `rlimit` for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < want && limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: want.min(limit.rlim_max),
            rlim_max: limit.rlim_max,
        };
        // SAFETY: `raised` is a valid `rlimit`; failing leaves the limit as it was.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Some(raised.rlim_cur);
        }
    }
    Some(limit.rlim_cur)
}

/// The user and system CPU seconds the process has used.
pub fn cpu_seconds() -> (f64, f64) {
    // SAFETY: `rusage` is plain data; all zeros is a valid value for the call to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage` for the call to fill.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// The process's resident memory in bytes (`VmRSS` of `/proc/self/status`).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// How many descriptors the process has open (`None` when the system does not say).
pub fn open_descriptors() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// Whether `e` says the process (or the system) is out of descriptors.
pub fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// A descriptor held in reserve, to be let go when the process is out of them so that one
/// more connection can be taken and told why it is refused.
pub fn spare_descriptor() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

/// Shuts a connected socket down both ways: its reader sees the end, its writer an error. The
/// caller guarantees that `fd` is open and is that socket.
pub fn shut_down(fd: std::os::fd::RawFd) {
    // SAFETY: a call on a descriptor number the caller keeps open; any failure is harmless.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

/// The first IPv4 address of the host's interfaces that is not a loopback one (`getifaddrs`),
/// the address a shard of a cluster is announced at when it listens on every interface.
pub fn first_ipv4() -> Option<std::net::IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `list` is a valid place for the call to store the head of its list.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut at = list;
    while !at.is_null() && found.is_none() {
        // SAFETY: `at` is a node of the list `getifaddrs` returned, not freed until below.
        let entry = unsafe { &*at };
        let addr = entry.ifa_addr;
        // SAFETY: a non-null `ifa_addr` points to a `sockaddr` whose family says its type;
        // for `AF_INET` it is a `sockaddr_in`.
        if !addr.is_null() && i32::from(unsafe { (*addr).sa_family }) == libc::AF_INET {
            // SAFETY: as above, the family is `AF_INET`.
            let v4 = unsafe { &*(addr as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
            if !ip.is_loopback() && !ip.is_unspecified() {
                found = Some(std::net::IpAddr::V4(ip));
            }
        }
        at = entry.ifa_next;
    }
    // SAFETY: `list` came from `getifaddrs` and is freed once; no reference into it outlives
    // this call.
    unsafe { libc::freeifaddrs(list) };
    found
}
