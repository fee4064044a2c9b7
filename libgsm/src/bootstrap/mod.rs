//! Job bootstrap: who the ranks of this job are, whether they run the same build, and the job's
//! secret key.
//!
//! [`Job::init`] initialises MPI, all-gathers one record per rank (hostname, [`BinaryId`], pid and
//! the caller's opaque fabric endpoint bytes), has rank 0 draw a random 32-byte key from
//! `/dev/urandom` and broadcasts it. If the ranks' binary identities differ, `init` fails on every
//! rank with [`BootstrapError::BinaryMismatch`] (every rank sees every identity, so all agree).
//! A program started without `gsmrun` or `mpirun` is a job of one rank (MPI singleton init).
//!
//! MPI is never on the data path: after `init`, the only MPI calls are the runtime's set-up
//! exchanges ([`Job::all_gather`], [`Job::all_true`] as a checked barrier), the few non-blocking
//! sums of its termination detection ([`Job::start_sum`]), [`Job::barrier`], and `MPI_Finalize`
//! in [`Job::finalize`] (or when the [`Job`] is dropped). Data moves over the fabrics, which use
//! the endpoints and key exchanged here. A program that initialised MPI itself bootstraps with
//! [`Job::join`] and keeps finalising to itself. This module does not connect
//! anything; [`run`](crate::run) calls it when the program was started by a launcher.
//!
//! Only this module names the `mpi` crate; each MPI call is a safe function in `mpi_calls`.

mod identity;
mod mpi_calls;
mod stage;

pub use identity::{BinaryId, IdentityError};
pub use stage::STATE_FD_VAR;
pub(crate) use stage::{Stage, tell};

use std::fmt;
use std::io::Read;
use std::time::Instant;

/// Whether MPI has been initialised in this process, by gossamer or by the program (finalised
/// since or not): a launched run then joins the program's MPI rather than initialising it.
pub(crate) fn mpi_initialised() -> bool {
    mpi_calls::initialised()
}

/// Whether MPI is initialised in this process and not yet finalised: a program that did so
/// itself is a rank of a job even without a launcher's variables.
pub(crate) fn mpi_live() -> bool {
    mpi_calls::live()
}

/// The length of the job key in bytes.
pub const KEY_LEN: usize = 32;

/// The environment variable `gsmrun` sets to a name unique to the job.
pub const JOB_ID_VAR: &str = gsm_contract::table::JOB_ID.name;

/// Why a job could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BootstrapError {
    /// MPI was initialised before (by an earlier `Job` or by other code).
    #[error(
        "MPI is already initialised in this process: a process can bootstrap one gossamer job, \
         once; create a single `Job` and keep it for the whole program"
    )]
    AlreadyInitialised,
    /// [`Job::join`] was called but the program has not initialised MPI.
    #[error(
        "Job::join needs MPI initialised by the program (mpi::initialize); use Job::init to let \
         gossamer initialise it"
    )]
    NotInitialised,
    /// The executable could not be read to find its identity.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The job key could not be drawn.
    #[error("cannot draw the job key from /dev/urandom: {0}")]
    Key(#[source] std::io::Error),
    /// A buffer does not fit MPI's `int` counts.
    #[error(
        "{what} is {len} bytes, more than MPI can move in one call (2 GiB); use a shorter endpoint"
    )]
    TooLarge {
        /// Which buffer.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// A rank's record could not be decoded (ranks built from different protocol versions).
    #[error(
        "the bootstrap record of rank {rank} is malformed ({detail}); \
         every rank must run the same build of the program"
    )]
    Malformed {
        /// The rank whose record is bad.
        rank: u32,
        /// What was wrong.
        detail: &'static str,
    },
    /// The ranks run different builds of the program.
    #[error("{0}")]
    BinaryMismatch(Mismatch),
    /// MPI made a job of another size than the launcher started: the program's MPI library is
    /// not the launcher's, so every rank would run as a job of its own.
    #[error(
        "MPI_Init made a job of {mpi} rank(s), but the launcher started {launcher} ({var}={launcher}): \
         this program's MPI library is not the one of its launcher (a program built against Open \
         MPI started by MPICH's mpiexec, or the reverse), and every rank would run alone; build \
         the program against the launcher's MPI, or start it with its own MPI's launcher \
         (gsmrun --launcher mpirun or mpiexec, whichever belongs to it)"
    )]
    WorldMismatch {
        /// The size of `MPI_COMM_WORLD`.
        mpi: u32,
        /// The number of ranks the launcher started.
        launcher: u32,
        /// The variable that said so.
        var: &'static str,
    },
}

/// The number of ranks the launcher says it started, and the variable that says it: gsmrun's
/// `GSM_SIZE`, Open MPI's `OMPI_COMM_WORLD_SIZE` or Hydra's `PMI_SIZE`, the first one set to a
/// number. (Slurm's task counts are left out: one inherited from an allocation may differ from
/// the job an `mpirun` inside it starts.)
fn launcher_size(var: &dyn Fn(&str) -> Option<String>) -> Option<(&'static str, u32)> {
    [
        gsm_contract::table::SIZE.name,
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
    ]
    .into_iter()
    .find_map(|name| Some((name, var(name)?.trim().parse().ok()?)))
}

/// [`BootstrapError::WorldMismatch`] unless `MPI_COMM_WORLD`, of `mpi_size` ranks, is as large
/// as the job the launcher says it started (this process's environment). For a program that
/// initialises MPI itself outside [`Job`] (a pure-MPI engine beside a Gossamer one): with a
/// launcher of another MPI than the program's, every rank is a world of one and would run
/// alone. A process no launcher started passes.
pub fn check_world_size(mpi_size: u32) -> Result<(), BootstrapError> {
    check_world(mpi_size, &|name| std::env::var(name).ok())
}

/// [`BootstrapError::WorldMismatch`] unless MPI's world has the size the launcher said.
fn check_world(mpi_size: u32, var: &dyn Fn(&str) -> Option<String>) -> Result<(), BootstrapError> {
    match launcher_size(var) {
        Some((name, said)) if said != mpi_size => Err(BootstrapError::WorldMismatch {
            mpi: mpi_size,
            launcher: said,
            var: name,
        }),
        _ => Ok(()),
    }
}

/// The ranks of a job whose builds differ from rank 0's.
///
/// It keeps MPI initialised until it is dropped, and `MPI_Finalize` runs then: so a program can
/// print the error before the launcher, seeing a rank finish, tears the job down (Open MPI's
/// `MPI_Finalize` waits for every rank, and every rank gets this error). Drop it before exiting
/// (returning it from `main` does).
pub struct Mismatch {
    /// Rank 0's host and identity, the reference.
    pub reference: (String, BinaryId),
    /// Every rank whose identity differs from rank 0's: rank, host, identity.
    pub differing: Vec<(u32, String, BinaryId)>,
    finalizer: Option<mpi_calls::Finalizer>,
}

impl fmt::Debug for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mismatch")
            .field("reference", &self.reference)
            .field("differing", &self.differing)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (host, id) = &self.reference;
        write!(
            f,
            "the ranks of this job run different builds of the program: rank 0 on host {host} \
             runs {id}, but"
        )?;
        for (i, (rank, host, id)) in self.differing.iter().enumerate() {
            let sep = if i == 0 { "" } else { ";" };
            write!(f, "{sep} rank {rank} on host {host} runs {id}")?;
        }
        write!(
            f,
            ". Install the same build of the program on every host (the same path on each) and \
             launch again"
        )
    }
}

/// What one rank told the others at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    /// Its rank.
    pub rank: u32,
    /// Its hostname (`gethostname`).
    pub hostname: String,
    /// Its process id on its host.
    pub pid: u32,
    /// The identity of the build it runs.
    pub binary_id: BinaryId,
    /// The opaque bytes it passed to [`Job::init`] (its fabric endpoints).
    pub endpoint: Vec<u8>,
}

/// A bootstrapped job. Holds MPI initialised until [`finalize`](Self::finalize) or drop.
///
/// Use it from the thread that created it (MPI is initialised as `MPI_THREAD_FUNNELED`).
pub struct Job {
    mpi: Option<mpi_calls::Mpi>,
    rank: u32,
    size: u32,
    key: [u8; KEY_LEN],
    peers: Vec<PeerInfo>,
    local: Vec<u32>,
    job_id: String,
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("job_id", &self.job_id)
            .field("key", &"<secret>")
            .field("peers", &self.peers)
            .finish()
    }
}

impl Job {
    /// Initialises MPI and exchanges every rank's record; `endpoint` is this rank's opaque
    /// fabric endpoint (any length, may be empty). Collective: every rank of the job must call it.
    ///
    /// # Errors
    /// [`BootstrapError::BinaryMismatch`] on every rank if the ranks' builds differ; the other
    /// variants if MPI was initialised before, the executable cannot be read, or the key cannot
    /// be drawn. Once MPI was initialised, an error finalises it before it is returned, except
    /// `BinaryMismatch`, which finalises MPI when it is dropped (see [`Mismatch`]).
    pub fn init(endpoint: &[u8]) -> Result<Job, BootstrapError> {
        // Everything that can fail locally is done before MPI_Init, so that one rank's local
        // failure does not leave the others waiting in a collective.
        let began = Instant::now();
        let mine = own_record(endpoint)?;
        step_done("own record (binary identity, hostname)", began);
        tell(Stage::Joining);
        left_on_error(mpi_calls::init().and_then(|mpi| {
            step_done("MPI_Init", began);
            Self::exchange(mpi, &mine)
        }))
    }

    /// Like [`init`](Self::init), but in a program that initialised MPI itself (for example to
    /// measure MPI beside gossamer in one job): uses `MPI_COMM_WORLD` as it is and leaves
    /// `MPI_Finalize` to the program. Collective.
    ///
    /// # Errors
    /// [`BootstrapError::NotInitialised`] if MPI is not initialised (or already finalised); the
    /// others as [`init`](Self::init).
    pub fn join(endpoint: &[u8]) -> Result<Job, BootstrapError> {
        let began = Instant::now();
        let mine = own_record(endpoint)?;
        step_done("own record (binary identity, hostname)", began);
        tell(Stage::Joining);
        left_on_error(
            mpi_calls::join_existing()
                .ok_or(BootstrapError::NotInitialised)
                .and_then(|mpi| Self::exchange(mpi, &mine)),
        )
    }

    fn exchange(mpi: mpi_calls::Mpi, mine: &[u8]) -> Result<Job, BootstrapError> {
        let began = Instant::now();
        let hostname = hostname();
        let rank = mpi.rank();
        let size = mpi.size();
        // Before any collective: with a foreign MPI every rank is a world of one, and each finds
        // that out alone.
        check_world_size(size)?;

        let counts = mpi.all_gather_count(mine.len())?;
        let all = mpi.all_gather_bytes(mine, &counts)?;
        step_done("records exchanged (MPI_Allgatherv)", began);

        // Rank 0 draws the key; if it cannot, it still takes part in the broadcast (with zeros)
        // and then fails, and the others fail at the check below, so nobody hangs.
        let mut key = [0u8; KEY_LEN];
        let key_result = if rank == 0 {
            draw_key(&mut key)
        } else {
            Ok(())
        };
        mpi.broadcast_from_root(&mut key)?;
        step_done("job key broadcast", began);
        key_result.map_err(BootstrapError::Key)?;
        if key == [0u8; KEY_LEN] {
            return Err(BootstrapError::Key(std::io::Error::other(
                "rank 0 could not draw the key (see rank 0's error)",
            )));
        }

        let peers = decode_records(&all, &counts)?;
        if let Err(mut mismatch) = check_same_build(&peers) {
            mismatch.finalizer = Some(mpi.into_finalizer());
            return Err(BootstrapError::BinaryMismatch(mismatch));
        }

        let local = peers
            .iter()
            .filter(|p| p.hostname == hostname)
            .map(|p| p.rank)
            .collect();
        let job_id = match gsm_contract::get::<Option<String>>(&gsm_contract::table::JOB_ID) {
            Ok(Some(id)) => id,
            // Same on every rank: derived from the broadcast key's first bytes.
            _ => {
                let mut id = String::from("gsm-");
                for b in &key[..6] {
                    id.push_str(&format!("{b:02x}"));
                }
                id
            }
        };
        Ok(Job {
            mpi: Some(mpi),
            rank,
            size,
            key,
            peers,
            local,
            job_id,
        })
    }

    /// This process's rank, `0..size()`.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The job's secret key, the same on every rank (fabrics authenticate connections with it).
    pub fn key(&self) -> &[u8; KEY_LEN] {
        &self.key
    }

    /// Every rank's record, indexed by rank.
    pub fn peers(&self) -> &[PeerInfo] {
        &self.peers
    }

    /// Whether `rank` runs on this rank's host (same hostname). `false` for a rank out of range.
    pub fn same_host(&self, rank: u32) -> bool {
        self.peers
            .get(rank as usize)
            .is_some_and(|p| p.hostname == self.peers[self.rank as usize].hostname)
    }

    /// The ranks on this rank's host (including this one), in increasing order.
    pub fn local_ranks(&self) -> &[u32] {
        &self.local
    }

    /// The job's name: `GSM_JOB_ID` as `gsmrun` set it, or else `gsm-<hex>` derived from the key
    /// (the same on every rank; unique per job with overwhelming probability).
    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    /// Waits until every rank has called `barrier` (`MPI_Barrier`). Collective.
    ///
    /// # Errors
    /// None in practice: MPI aborts the job if the barrier fails.
    pub fn barrier(&self) -> Result<(), BootstrapError> {
        match &self.mpi {
            Some(mpi) => mpi.barrier(),
            None => Ok(()),
        }
    }

    /// Every rank's `mine`, indexed by rank (`MPI_Allgather` of the lengths, then
    /// `MPI_Allgatherv`). Collective.
    pub fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let Some(mpi) = &self.mpi else {
            return Ok(vec![mine.to_vec()]);
        };
        let counts = mpi.all_gather_count(mine.len())?;
        let all = mpi.all_gather_bytes(mine, &counts)?;
        let mut out = Vec::with_capacity(counts.len());
        let mut at = 0usize;
        for c in counts {
            let n = usize::try_from(c).unwrap_or(0);
            out.push(all.get(at..at + n).unwrap_or_default().to_vec());
            at += n;
        }
        Ok(out)
    }

    /// Whether every rank passed `true` (`MPI_Allreduce` with `MPI_MIN`); also a barrier.
    /// Collective.
    pub fn all_true(&self, mine: bool) -> bool {
        match &self.mpi {
            Some(mpi) => mpi.all_true(mine),
            None => mine,
        }
    }

    /// Starts a non-blocking sum of `vals` over the ranks (`MPI_Iallreduce`); poll it with
    /// [`Sum::test`]. Collective.
    pub fn start_sum(&self, vals: &[u64]) -> Sum {
        Sum(self
            .mpi
            .as_ref()
            .map(|m| m.start_sum(vals))
            .ok_or_else(|| vals.to_vec()))
    }

    /// Tells every other rank why this rank's run failed: a failure note, which
    /// [`failure_note`](Self::failure_note) takes on their side. Waits up to `within` for the
    /// notes to leave (see `Mpi::post_notes`), never for their receivers. A text longer than
    /// 3 KiB (`mpi_calls::NOTE_MAX`) is cut at a character boundary, and the note says so
    /// (this rank's own error has all of it).
    pub fn post_failure(&self, text: &str, within: std::time::Duration) {
        let Some(mpi) = &self.mpi else {
            return;
        };
        let note = cut_note(text, mpi_calls::NOTE_MAX);
        let me = self.rank();
        mpi.post_notes(
            (0..self.size()).filter(|&r| r != me),
            note.as_bytes(),
            within,
        );
    }

    /// A failure note another rank posted with [`post_failure`](Self::post_failure), if one
    /// has arrived: `(its rank, its text)`. Never waits.
    pub fn failure_note(&self) -> Option<(u32, String)> {
        let (rank, bytes) = self.mpi.as_ref()?.take_note()?;
        Some((rank, String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Gives up MPI without finalising it: after a failure in which a peer may be gone,
    /// `MPI_Finalize` could wait for it forever. The process should exit soon after.
    pub fn abandon(&mut self) {
        if let Some(mpi) = self.mpi.take() {
            std::mem::forget(mpi);
            tell(Stage::Abandoned);
        }
    }

    /// Lets go of MPI at the end of a job that went well in a program that owns MPI: its
    /// objects are left to the program's own `MPI_Finalize` (which has told the wrapper that
    /// this rank is leaving), and nothing is told, since nothing failed (an
    /// [`abandon`](Self::abandon) would tell `gsmrun` that the rank gave the job up).
    pub fn release(&mut self) {
        if let Some(mpi) = self.mpi.take() {
            std::mem::forget(mpi);
        }
    }

    /// Finalises MPI (`MPI_Finalize`). Collective. Dropping the `Job` does the same.
    pub fn finalize(mut self) {
        if let Some(mpi) = self.mpi.take() {
            mpi.finalize();
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(mpi) = self.mpi.take() {
            mpi.finalize();
        }
    }
}

/// A non-blocking sum over the ranks, started by [`Job::start_sum`].
pub struct Sum(Result<mpi_calls::Wave, Vec<u64>>);

impl fmt::Debug for Sum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sum { .. }")
    }
}

impl Sum {
    /// The sums, once every rank has contributed (`None` until then).
    pub fn test(&mut self) -> Option<Vec<u64>> {
        match &mut self.0 {
            Ok(w) => w.test(),
            Err(v) => Some(v.clone()),
        }
    }

    /// Gives up waiting (a peer vanished; the sum will never complete).
    pub fn abandon(self) {
        if let Ok(w) = self.0 {
            w.abandon();
        }
    }
}

/// What [`Job::post_failure`] sends for `text`: all of it when it fits in `max` bytes, or else
/// as much as fits at a character boundary with a mark saying that the rest was cut.
fn cut_note(text: &str, max: usize) -> String {
    const CUT: &str = " [… cut; the failed rank's own error has all of it]";
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(CUT.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT}", &text[..end])
}

/// Logs that a stage of the bootstrap is done, with the time since `began`.
fn step_done(step: &'static str, began: Instant) {
    tracing::debug!(target: "gossamer::bootstrap", step, took = ?began.elapsed(), "bootstrap stage done");
}

/// A failed bootstrap has given the job up (MPI is finalised by then), except a build mismatch,
/// which leaves it when its [`Mismatch`] is dropped.
fn left_on_error(r: Result<Job, BootstrapError>) -> Result<Job, BootstrapError> {
    if let Err(e) = &r {
        if !matches!(e, BootstrapError::BinaryMismatch(_)) {
            tell(Stage::Abandoned);
        }
    }
    r
}

/// This process's bootstrap record (everything that can fail locally, before any MPI call).
fn own_record(endpoint: &[u8]) -> Result<Vec<u8>, BootstrapError> {
    let binary_id = BinaryId::current()?;
    encode_record(std::process::id(), &binary_id, &hostname(), endpoint)
}

/// A rank's record: pid (u32 LE), identity (see `BinaryId::encode`), hostname (u16 LE length +
/// bytes), endpoint (all remaining bytes).
fn encode_record(
    pid: u32,
    id: &BinaryId,
    hostname: &str,
    endpoint: &[u8],
) -> Result<Vec<u8>, BootstrapError> {
    let host = hostname.as_bytes();
    let host_len = u16::try_from(host.len()).map_err(|_| BootstrapError::TooLarge {
        what: "the hostname",
        len: host.len(),
    })?;
    let mut out = Vec::with_capacity(32 + host.len() + endpoint.len());
    out.extend_from_slice(&pid.to_le_bytes());
    id.encode(&mut out);
    out.extend_from_slice(&host_len.to_le_bytes());
    out.extend_from_slice(host);
    out.extend_from_slice(endpoint);
    Ok(out)
}

fn decode_records(all: &[u8], counts: &[i32]) -> Result<Vec<PeerInfo>, BootstrapError> {
    let mut peers = Vec::with_capacity(counts.len());
    let mut at = 0usize;
    for (rank, &count) in counts.iter().enumerate() {
        let rank = rank as u32;
        let bad = |detail| BootstrapError::Malformed { rank, detail };
        let len = usize::try_from(count).map_err(|_| bad("negative length"))?;
        let rec = all.get(at..at + len).ok_or(bad("truncated"))?;
        at += len;
        let pid = u32::from_le_bytes(
            rec.get(..4)
                .ok_or(bad("no pid"))?
                .try_into()
                .unwrap_or([0; 4]),
        );
        let (binary_id, used) = BinaryId::decode(&rec[4..]).ok_or(bad("bad binary identity"))?;
        let rest = &rec[4 + used..];
        let host_len = rest
            .get(..2)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
            .ok_or(bad("no hostname"))?;
        let host = rest.get(2..2 + host_len).ok_or(bad("truncated hostname"))?;
        peers.push(PeerInfo {
            rank,
            hostname: String::from_utf8_lossy(host).into_owned(),
            pid,
            binary_id,
            endpoint: rest[2 + host_len..].to_vec(),
        });
    }
    Ok(peers)
}

fn check_same_build(peers: &[PeerInfo]) -> Result<(), Mismatch> {
    let Some(first) = peers.first() else {
        return Ok(());
    };
    let differing: Vec<_> = peers
        .iter()
        .filter(|p| p.binary_id != first.binary_id)
        .map(|p| (p.rank, p.hostname.clone(), p.binary_id.clone()))
        .collect();
    if differing.is_empty() {
        Ok(())
    } else {
        Err(Mismatch {
            reference: (first.hostname.clone(), first.binary_id.clone()),
            differing,
            finalizer: None,
        })
    }
}

fn draw_key(key: &mut [u8; KEY_LEN]) -> std::io::Result<()> {
    std::fs::File::open("/dev/urandom")?.read_exact(key)
}

/// This machine's hostname (as `gethostname` gives it).
pub(crate) fn hostname() -> String {
    crate::sys::proc::hostname()
}

#[cfg(test)]
mod tests;
