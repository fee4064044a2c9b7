//! The operating-system calls of `gsm-hello`, each in a safe function.

/// This machine's host name, or `unknown` if it cannot be read.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its whole length, and gethostname writes at most that many
    // bytes; we only read up to the first NUL below.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".to_string();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Dies of SIGSEGV, as a crashing rank does. Open MPI installs its own SIGSEGV handler, which
/// returns from a raised signal, so the default action is put back first; raising (rather than
/// dereferencing a bad pointer) keeps the behaviour defined.
pub fn crash() {
    // SAFETY: restoring the default disposition and raising a signal touch no Rust-managed
    // memory.
    unsafe {
        libc::signal(libc::SIGSEGV, libc::SIG_DFL);
        libc::raise(libc::SIGSEGV);
    }
}
