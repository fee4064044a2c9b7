//! `eprint_line` hands its whole line to one `write(2)`: while the line is still being formatted,
//! nothing of it has reached standard error. (`eprintln!` writes each piece as it is formatted,
//! which let `mpirun` put its own line between the pieces of a rank's report.)
//!
//! A test binary of its own: it points file descriptor 2 at a pipe for a moment, which would
//! swallow the output of tests running beside it.

use std::fmt;
use std::os::fd::RawFd;

/// Reads whatever the pipe holds now, without waiting.
fn drain(fd: RawFd) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: `buf` is writable for its length; `fd` is the pipe's read end, non-blocking.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
}

/// Formats in two pieces and, between them, records what the pipe already holds.
struct Probe {
    pipe: RawFd,
    seen_between: std::cell::RefCell<Option<Vec<u8>>>,
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("rank 1 (host a)")?;
        *self.seen_between.borrow_mut() = Some(drain(self.pipe));
        f.write_str(" vanished")
    }
}

#[test]
fn a_line_reaches_stderr_only_when_whole() {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [read_end, write_end] = fds;
    // SAFETY: fcntl and dup/dup2 on descriptors this test owns (and fd 2, restored below).
    let saved = unsafe {
        assert_eq!(libc::fcntl(read_end, libc::F_SETFL, libc::O_NONBLOCK), 0);
        let saved = libc::dup(2);
        assert!(saved >= 0);
        assert_eq!(libc::dup2(write_end, 2), 2);
        saved
    };
    let probe = Probe {
        pipe: read_end,
        seen_between: Default::default(),
    };
    gossamer::eprint_line(format_args!("check: {probe}"));
    let written = drain(read_end);
    // SAFETY: as above; fd 2 gets its original target back before anything is asserted.
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
        libc::close(write_end);
        libc::close(read_end);
    }
    let between = probe.seen_between.take().expect("the probe was formatted");
    assert!(
        between.is_empty(),
        "part of the line reached stderr before the rest was formatted: {:?}",
        String::from_utf8_lossy(&between)
    );
    assert_eq!(
        String::from_utf8_lossy(&written),
        "check: rank 1 (host a) vanished\n"
    );
}
