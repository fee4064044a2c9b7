//! Turning the runtime's log on: a `tracing` subscriber writing to standard error, installed at
//! the first run when `GSM_LOG` (or `RUST_LOG`) asks for one. It logs nothing itself; what is
//! logged, and under which targets, is said in the runtime's module docs.

/// Installs the log subscriber once per process, if `GSM_LOG` (or else `RUST_LOG`) is set and
/// the program has not installed a subscriber of its own (then that one is kept).
pub(crate) fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Some(filter) = ["GSM_LOG", "RUST_LOG"]
            .into_iter()
            .find_map(|v| std::env::var(v).ok())
        else {
            return;
        };
        use std::io::IsTerminal as _;
        // Coloured only on a terminal, as gsmrun's own log: a log in a file gets no escapes.
        let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .with_ansi(colour)
            .finish();
        // Not `try_init`, which would also take the `log` crate's logger from the program.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}
