//! Algorithm switch points: which algorithm a collective uses for which size, with defaults,
//! environment overrides, and how the defaults were measured.
//!
//! Each field has a `GSM_COLL_*` setting of the settings table (`gsm_contract::table`, listed in
//! `docs/settings.md` with its default and what it takes); a variable that is set but not allowed
//! is an error naming it, never the default.
//!
//! **How the defaults were measured**: `gsm-bench collectives --sweep` (in
//! `benches/src/collectives.rs`) times both algorithms of each switch, forced through a team
//! with the switch at 0 and one with it at `usize::MAX`, under `gsmrun -np 2` and `-np 3`; the
//! piece size was also compared between two hosts (`--two-hosts`). Rerun the sweep on the target
//! machine and set the variables. The figures behind each default, and why each switch sits
//! where it does, are in docs/performance-log.md ("Collectives: the measurements behind the
//! switch points").
//!
//! Waiting members suspend in `gossamer::recv` at once: polling (`try_recv` and `yield_now` for a
//! bounded time) made barriers slower, since the messages were in effect taken only once the
//! fiber suspended.
//!
//! This module does not look at the team: the same tuning holds for every size of team.

use std::env::VarError;
use std::sync::OnceLock;

use gsm_contract::{Setting, table};

/// Switch points between algorithms (see the module docs for the table and how they were
/// measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Combine the workers of each rank first (their messages move by pointer), then one leader
    /// per rank across ranks, then fan back out. Off: every member takes part in the algorithm
    /// across the team directly (the tests use this to run the inter-rank algorithms on odd
    /// numbers of members within one process).
    pub hierarchical: bool,
    /// Leaders of ranks on one host meet on the host board (shared memory, see the `board`
    /// module) for barrier, broadcast, reduce, allreduce, allgather and all-to-all, instead of
    /// sending messages. Off: messages everywhere (to compare, or to test the message path).
    pub board: bool,
    /// On the board, broadcasts and allreduces of at least this many bytes copy straight
    /// between the leaders' buffers (`process_vm_readv`/`writev`, where the runtime found them
    /// allowed) instead of through the board in steps.
    pub copy_min: usize,
    /// The piece a single-copy allreduce reads, combines and hands on at a time, in bytes.
    pub copy_piece: usize,
    /// Allreduce contributions of at least this many bytes use the ring (Patarasuk & Yuan's
    /// bandwidth-optimal reduce-scatter + allgather; Rabenseifner's algorithm with a ring in both
    /// halves), smaller ones recursive doubling (Thakur, Rabenseifner & Gropp 2005, with the
    /// fold of the members beyond a power of two).
    pub allreduce_ring_min: usize,
    /// Broadcasts of at least this many bytes across at least 3 ranks are pipelined along a
    /// chain in chunks of `bcast_chunk` bytes; smaller ones use a binomial tree.
    pub bcast_pipeline_min: usize,
    /// The chunk of the pipelined broadcast, in bytes.
    pub bcast_chunk: usize,
    /// Vectors sent to another rank by the reductions and the binomial broadcast travel in
    /// pieces of at most this many bytes (each piece is combined or forwarded as it arrives).
    pub piece: usize,
    /// Broadcasts and reduces of at least this many bytes wait for the receiver's
    /// acknowledgement across ranks (a rendezvous) instead of returning once the data is sent.
    pub rendezvous_min: usize,
}

impl Default for Tuning {
    fn default() -> Self {
        use gsm_contract::default;
        Tuning {
            hierarchical: default(&table::COLL_HIERARCHICAL),
            board: default(&table::COLL_BOARD),
            copy_min: default(&table::COLL_COPY),
            copy_piece: default(&table::COLL_COPY_PIECE),
            allreduce_ring_min: default(&table::COLL_ALLREDUCE_RING),
            bcast_pipeline_min: default(&table::COLL_BCAST_PIPELINE),
            bcast_chunk: default(&table::COLL_BCAST_CHUNK),
            piece: default(&table::COLL_PIECE),
            rendezvous_min: default(&table::COLL_RENDEZVOUS),
        }
    }
}

/// An environment variable of [`Tuning::from_env`] that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("gsm-collectives: {name}={value:?} is not valid: {expected}")]
pub struct TuningError {
    /// The variable.
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// What it should look like ("expected ...").
    pub expected: String,
}

impl From<gsm_contract::SettingError> for TuningError {
    fn from(e: gsm_contract::SettingError) -> Self {
        TuningError {
            name: e.name,
            value: e.value,
            expected: e.expected,
        }
    }
}

impl Tuning {
    /// The defaults, overridden by the `GSM_COLL_*` settings.
    ///
    /// # Errors
    /// A [`TuningError`] naming the first variable that is set but not allowed: not UTF-8, not a
    /// size or switch, or 0 for a piece or chunk size (`GSM_COLL_COPY_PIECE`,
    /// `GSM_COLL_BCAST_CHUNK`, `GSM_COLL_PIECE`).
    pub fn from_env() -> Result<Tuning, TuningError> {
        Tuning::from_vars(std::env::var)
    }

    /// [`Tuning::from_env`] with the variables read by `var` (the unit tests pass their own, so
    /// they do not change the process environment).
    fn from_vars(
        var: impl Fn(&'static str) -> Result<String, VarError>,
    ) -> Result<Tuning, TuningError> {
        let raw = |s: &Setting| match var(s.name) {
            Ok(v) => Some(Ok(v)),
            Err(VarError::NotPresent) => None,
            Err(VarError::NotUnicode(v)) => Some(Err(v)),
        };
        let read = |s: &Setting| gsm_contract::get_from::<usize>(s, raw(s));
        let switch = |s: &Setting| gsm_contract::get_from::<bool>(s, raw(s));
        Ok(Tuning {
            hierarchical: switch(&table::COLL_HIERARCHICAL)?,
            board: switch(&table::COLL_BOARD)?,
            copy_min: read(&table::COLL_COPY)?,
            copy_piece: read(&table::COLL_COPY_PIECE)?,
            allreduce_ring_min: read(&table::COLL_ALLREDUCE_RING)?,
            bcast_pipeline_min: read(&table::COLL_BCAST_PIPELINE)?,
            bcast_chunk: read(&table::COLL_BCAST_CHUNK)?,
            piece: read(&table::COLL_PIECE)?,
            rendezvous_min: read(&table::COLL_RENDEZVOUS)?,
        })
    }

    /// [`Tuning::from_env`], read once per process.
    ///
    /// # Panics
    /// If a variable is malformed, after ending the job with a message that names it
    /// ([`gossamer::fail_job`]): every worker meets the same variable, and the job must end
    /// once, with that message, not go on with some workers' teams missing.
    pub(crate) fn cached() -> Tuning {
        static T: OnceLock<Result<Tuning, TuningError>> = OnceLock::new();
        match T.get_or_init(Tuning::from_env) {
            Ok(t) => *t,
            Err(e) => gossamer::fail_job(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    fn with(name: &'static str, value: Result<String, VarError>) -> Result<Tuning, TuningError> {
        Tuning::from_vars(|n| {
            if n == name {
                value.clone()
            } else {
                Err(VarError::NotPresent)
            }
        })
    }

    #[test]
    fn unset_variables_give_the_defaults_and_set_ones_override() {
        assert_eq!(
            with("GSM_COLL_PIECE", Err(VarError::NotPresent)),
            Ok(Tuning::default())
        );
        let t = with("GSM_COLL_PIECE", Ok("64K".into())).unwrap();
        assert_eq!(t.piece, 64 << 10);
    }

    #[test]
    fn a_value_that_is_not_utf8_is_an_error_naming_the_variable() {
        for name in ["GSM_COLL_BOARD", "GSM_COLL_COPY", "GSM_COLL_PIECE"] {
            let raw = OsString::from_vec(vec![b'4', 0xff, b'K']);
            let e = with(name, Err(VarError::NotUnicode(raw))).unwrap_err();
            assert_eq!(
                (e.name, e.expected.as_str()),
                (name, "expected UTF-8 text"),
                "{e}"
            );
            assert_eq!(e.value, "4\u{fffd}K");
        }
    }

    #[test]
    fn a_piece_or_chunk_of_zero_bytes_is_an_error_naming_the_variable() {
        for name in [
            "GSM_COLL_COPY_PIECE",
            "GSM_COLL_BCAST_CHUNK",
            "GSM_COLL_PIECE",
        ] {
            for zero in ["0", "0K", " 0M "] {
                let e = with(name, Ok(zero.into())).unwrap_err();
                assert_eq!((e.name, e.value.as_str()), (name, zero), "{e}");
                assert!(e.to_string().contains("at least 1 byte"), "{e}");
            }
        }
        // Switch points may be 0 (always the larger algorithm).
        assert_eq!(with("GSM_COLL_COPY", Ok("0".into())).unwrap().copy_min, 0);
    }

    #[test]
    fn switches_take_the_runtime_s_words_and_empty_values_mean_the_default() {
        for (v, on) in [("OFF", false), ("No", false), ("yes", true), (" On ", true)] {
            let t = with("GSM_COLL_BOARD", Ok(v.into())).unwrap();
            assert_eq!(t.board, on, "GSM_COLL_BOARD={v:?}");
        }
        let e = with("GSM_COLL_BOARD", Ok("x".into())).unwrap_err();
        assert_eq!((e.name, e.value.as_str()), ("GSM_COLL_BOARD", "x"), "{e}");
        for name in ["GSM_COLL_BOARD", "GSM_COLL_PIECE", "GSM_COLL_COPY"] {
            for empty in ["", "  "] {
                assert_eq!(
                    with(name, Ok(empty.into())),
                    Ok(Tuning::default()),
                    "{name}"
                );
            }
        }
    }
}
