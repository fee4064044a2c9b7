//! Time limits as the user gives them: the instant a number of seconds after a start (or none,
//! when no instant holds it) and seconds written back short in messages. Shared by the command
//! line, which refuses a limit no clock can count to, and the supervisor, which keeps it; this
//! module measures nothing itself.

use std::time::{Duration, Instant};

/// The instant `secs` seconds after `start`, or `None` when no `Instant` can hold it (a huge
/// `--timeout` such as 1e19 would otherwise panic once the launcher is running; the command line
/// refuses such values with this same test).
pub fn deadline(start: Instant, secs: f64) -> Option<Instant> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .and_then(|d| start.checked_add(d))
}

/// `secs` as messages show it: whole numbers without a point, very small or large ones in
/// exponent form (`1e-300` as typed, not as 300 zeros).
pub fn fmt_secs(s: f64) -> String {
    if s.fract() == 0.0 && s < 1e15 {
        format!("{}", s as u64)
    } else if !(1e-4..1e15).contains(&s) {
        format!("{s:e}")
    } else {
        format!("{s}")
    }
}
