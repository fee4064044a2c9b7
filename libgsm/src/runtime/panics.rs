//! How a panic on a worker reaches the user: one line each. Rust's default hook prints a
//! panic's location and message on two lines (three for the first), and a delegated closure's
//! panic appeared twice: once on its trustee and once more when its caller's `apply` panicked
//! with the error the trustee sent back. This hook, installed by the first run of a process,
//! prints a worker's panic as one line naming rank, worker, location and message, and prints
//! nothing for a delegated closure's panic: its message travels to the caller in
//! [`DelegationError::Panicked`](crate::DelegationError::Panicked), whose `apply` reports it (a
//! `try_` form returns it), and its location goes to the log (`GSM_LOG=debug`, target
//! `gossamer::worker`). Threads that are not workers, and every panic while `RUST_BACKTRACE` is
//! set, keep the hook that was there before.
//!
//! It does not catch or end anything; `worker/context.rs` catches, the runtime decides.

use std::sync::Once;

/// Installs the hook once per process, in front of whatever hook was there.
pub(super) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        let backtrace = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
        std::panic::set_hook(Box::new(move |info| {
            let Some(core) = crate::worker::core() else {
                return before(info);
            };
            let message = crate::worker::panic_message(info.payload());
            let at = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_else(|| "an unknown place".into());
            if core.context().in_delegated() {
                tracing::debug!(
                    target: "gossamer::worker",
                    worker = core.id,
                    at = %at,
                    message = %message,
                    "a delegated closure panicked; its caller gets the error"
                );
                return;
            }
            if backtrace {
                return before(info);
            }
            crate::output::eprint_line(format_args!(
                "gossamer: panic on rank {}, worker {} at {at}: {message}",
                core.shared.place.rank, core.id
            ));
        }));
    });
}
