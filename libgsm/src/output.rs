//! Lines for the user on standard error, each written whole.

/// Writes `line` and a newline to standard error in one `write(2)`.
///
/// `eprintln!` writes each formatted piece with a call of its own, and a launcher that forwards
/// the output of many ranks while printing its own messages (Open MPI's `mpirun` does) can put
/// another process's text between the pieces: a rank's `prog: rank 1 … vanished` report arrived
/// split in two that way. A line written at once reaches a pipe whole (up to `PIPE_BUF`, 4 KiB),
/// so a rank's one-line report stays one line for the user and for tools that read it.
pub fn eprint_line(line: impl std::fmt::Display) {
    use std::io::Write as _;
    let text = format!("{line}\n");
    // Standard error gone (closed by the launcher) leaves nobody to tell.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
