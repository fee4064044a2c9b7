//! The launch contract: what `gsmrun` (and its rank wrapper) and the runtime must say alike. The
//! stage bytes a rank reports on its `GSM_STATE_FD` socket, the file names of a job's
//! shared-memory segments, and the names of the fabrics (`GSM_FABRIC`, `gsmrun --fabric`). The
//! variables themselves are settings of [`crate::table`]'s launch section.
//!
//! Both sides link this module, so they cannot drift apart; it holds no I/O.

/// Most worker threads one rank may run: the runtime refuses more, and `gsmrun -t` too.
pub const MAX_WORKERS: u64 = 4096;

/// A stage of a rank's job, sent as one byte to its rank wrapper (which forwards it to
/// `gsmrun`) as the rank enters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    /// About to initialise MPI and wait for every rank in the bootstrap exchange.
    Joining = b'J',
    /// About to start one collective `run`/`spmd` (its first exchange).
    Run = b'R',
    /// About to finalise MPI at the end of the job: the rank starts no more runs.
    Leaving = b'L',
    /// MPI given up after a failure (never finalised): the rank has failed, even if the process
    /// then exits 0.
    Abandoned = b'A',
    /// The job was found deadlocked: every rank found it in the same wave and fails its run with
    /// its own report.
    Deadlocked = b'D',
    /// The rank's run failed because another rank's did (it vanished, or told its failure).
    Follows = b'F',
}

impl Stage {
    /// Every stage.
    pub const ALL: [Stage; 6] = [
        Stage::Joining,
        Stage::Run,
        Stage::Leaving,
        Stage::Abandoned,
        Stage::Deadlocked,
        Stage::Follows,
    ];

    /// The byte sent for this stage.
    pub const fn byte(self) -> u8 {
        self as u8
    }

    /// The stage a byte names, `None` for a byte that names none.
    pub fn from_byte(b: u8) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.byte() == b)
    }
}

/// The file name of rank `rank`'s `shm` segment in job `job_id` (under `/dev/shm`). The runtime
/// unlinks it once every rank has attached; after a crash the wrapper and `gsmrun` remove it.
pub fn segment_name(job_id: &str, rank: u32) -> String {
    format!("{job_id}-r{rank}")
}

/// The suffix of the `tcp` fabric's segment of a rank (per-host connections), after
/// [`segment_name`].
pub const TCP_SEGMENT_SUFFIX: &str = "-tcp";

/// The file name of rank `rank`'s `tcp` fabric segment in job `job_id`.
pub fn tcp_segment_name(job_id: &str, rank: u32) -> String {
    format!("{}{TCP_SEGMENT_SUFFIX}", segment_name(job_id, rank))
}

/// Whether a job id can name segments at all: a non-empty file-name component. An empty or odd
/// id matches nothing, so nothing is removed for it.
pub fn usable_job_id(job_id: &str) -> bool {
    !job_id.is_empty() && !job_id.contains('/') && !job_id.contains('\0') && job_id != "."
}

/// Whether `file_name` is a segment of job `job_id`: exactly [`segment_name`] of a rank number
/// (ASCII digits only), optionally followed by [`TCP_SEGMENT_SUFFIX`]. `gsm-1-ab-r0` is a
/// segment of `gsm-1-ab`, `gsm-1-abc-r0` is not.
pub fn is_job_segment(file_name: &str, job_id: &str) -> bool {
    if !usable_job_id(job_id) {
        return false;
    }
    let Some(rest) = file_name
        .strip_prefix(job_id)
        .and_then(|r| r.strip_prefix("-r"))
    else {
        return false;
    };
    let rest = rest.strip_suffix(TCP_SEGMENT_SUFFIX).unwrap_or(rest);
    !rest.is_empty() && rest.len() <= 10 && rest.bytes().all(|b| b.is_ascii_digit())
}

/// A fabric as `GSM_FABRIC` and `gsmrun --fabric` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fabric {
    /// Shared memory within a host, tcp between hosts.
    #[default]
    Auto,
    /// Shared memory only (every rank on one host).
    Shm,
    /// tcp between every pair of ranks.
    Tcp,
    /// One-sided RMA over libfabric between every pair of ranks.
    Ofi,
    /// RDMA writes on RC queue pairs between every pair of ranks.
    Verbs,
}

/// Every word `GSM_FABRIC` takes: the fabrics' names, and `rdma` for `verbs`.
pub const FABRIC_WORDS: &[&str] = &["auto", "shm", "tcp", "ofi", "verbs", "rdma"];

impl Fabric {
    /// Every fabric.
    pub const ALL: [Fabric; 5] = [
        Fabric::Auto,
        Fabric::Shm,
        Fabric::Tcp,
        Fabric::Ofi,
        Fabric::Verbs,
    ];

    /// The value of `GSM_FABRIC` that chooses it.
    pub const fn name(self) -> &'static str {
        match self {
            Fabric::Auto => "auto",
            Fabric::Shm => "shm",
            Fabric::Tcp => "tcp",
            Fabric::Ofi => "ofi",
            Fabric::Verbs => "verbs",
        }
    }

    /// The fabric `word` names (any case, surrounding blanks allowed; `rdma` is `verbs`, blank is
    /// `auto`), `None` for another word.
    pub fn parse(word: &str) -> Option<Fabric> {
        match word.trim().to_ascii_lowercase().as_str() {
            "" => Some(Fabric::Auto),
            "rdma" => Some(Fabric::Verbs),
            w => Fabric::ALL.into_iter().find(|f| f.name() == w),
        }
    }
}
