//! Turning the runtime's log on: a `tracing` subscriber writing to standard error, installed at
//! the first run when `GSM_LOG` (or `RUST_LOG`) asks for one. It logs nothing itself.
//!
//! The log is off by default, coloured only when standard error is a terminal and `NO_COLOR` is
//! unset, and says nothing per request. The filter is `GSM_LOG`'s value, or else `RUST_LOG`'s
//! (`GSM_LOG=debug`, `GSM_LOG=gossamer::quiesce=trace`); a subscriber the program installed
//! itself is kept and used as it is. The targets, and what each says at which level:
//!
//! - `gossamer::bootstrap`: joining the job (rank, size, job id, time taken) at info; each stage
//!   of the bootstrap and its time, each run starting, at debug.
//! - `gossamer::fabric`: at info, this rank's segment or connections made (size, rings), every
//!   peer attached, a peer failed, the ofi endpoint opened (provider, how it was chosen) and
//!   attached, the verbs device opened (port, LID, how it was chosen), its queue pairs ready and
//!   the fabric attached, `auto`'s fabric between hosts and why; at debug, the fabric chosen for
//!   each peer rank and why, each connection made or ended, each peer's segment mapped, an ofi
//!   write tried again.
//! - `gossamer::ring`: slot size, slots per ring, ring bytes, rings consumed and their memory
//!   (info).
//! - `gossamer::worker`: the workers started: how many, the first's id, pinning, stack sizes
//!   (info).
//! - `gossamer::quiesce`: how the run ended (quiet, deadlocked, failed here, a peer's run failed,
//!   a peer vanished) at info; stalled at debug; each termination wave's sample and totals at
//!   trace.
//!
//! So `GSM_LOG=info` shows the job joined, the fabrics set up, the rings, the workers and how the
//! run ended; `debug` adds the bootstrap's stages and each peer's fabric and connections; the
//! waves need `trace`. `gsmrun` reads `GSM_LOG` only (not `RUST_LOG`) for its own log and its
//! rank wrappers', and passes `GSM_LOG` on to every rank, so `GSM_LOG=debug gsmrun …` turns on
//! every rank's log too; a `RUST_LOG` reaches the ranks only as any variable does (`-x RUST_LOG`,
//! or `srun`'s whole environment).

/// Installs the log subscriber once per process, if `GSM_LOG` (or else `RUST_LOG`) is set and
/// the program has not installed a subscriber of its own (then that one is kept).
pub(crate) fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let ours = gsm_contract::get::<Option<String>>(&gsm_contract::table::LOG);
        let Some(filter) = ours
            .ok()
            .flatten()
            .or_else(|| std::env::var("RUST_LOG").ok())
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
