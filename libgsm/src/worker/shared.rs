//! State shared by every worker of this rank: where the rank sits in the job, the stop flag,
//! doorbells, the first failure, traffic counters, and the words of the quiescence protocol. The
//! protocol itself is run by the workers (`idle.rs`) and the rank's main thread
//! (`runtime::quiesce::terminate`). See ARCHITECTURE.md.

use super::*;

/// Where this rank sits in the job (the same numbers on every worker of the rank).
#[derive(Debug, Clone)]
pub(crate) struct Place {
    /// This rank.
    pub rank: u32,
    /// Workers of each rank.
    pub rank_workers: Vec<u32>,
    /// Hostname of each rank (for messages).
    pub hosts: Vec<String>,
    /// Global id of this rank's first worker.
    pub base: usize,
    /// Workers of this rank.
    pub local: usize,
    /// Workers in the job.
    pub total: usize,
    /// Process id of each rank.
    pub pids: Vec<u32>,
    /// Per rank: whether it can read this process's memory (`process_vm_readv`), so that large
    /// bodies for it are parked here instead of streamed through the rings.
    pub far: Vec<bool>,
    /// Per rank: whether this rank reads parked bodies from its memory (same host, over `shm`,
    /// and its single-copy probe read back at start). A parked record from any other rank is
    /// refused: its address would be read in whatever local process has that rank's pid.
    pub reads: Vec<bool>,
    /// The host boards this rank maps (`crate::board`), if any.
    pub board: Option<Arc<crate::board::Board>>,
    /// The one-sided fabric's rendezvous: large bodies to and from the ranks it reaches are
    /// parked in registered memory and read by RMA (the ofi rendezvous, `fabric/ofi/README.md`).
    pub rma: Option<Arc<dyn crate::wire::far::Rendezvous>>,
}

impl Place {
    /// A job of one rank with `n` workers.
    pub(crate) fn single(n: usize) -> Place {
        Place {
            rank: 0,
            rank_workers: vec![n as u32],
            hosts: vec![crate::bootstrap::hostname()],
            base: 0,
            local: n,
            total: n,
            pids: vec![std::process::id()],
            far: vec![false],
            reads: vec![false],
            board: None,
            rma: None,
        }
    }

    /// How many of this rank's workers have a CPU each: the CPUs it may use, less those the
    /// workers of the other ranks on this host (same hostname) take of the host's online CPUs.
    pub(crate) fn cpu_room(&self) -> usize {
        let here = &self.hosts[self.rank as usize];
        let others: usize = self
            .rank_workers
            .iter()
            .zip(&self.hosts)
            .enumerate()
            .filter(|&(r, (_, h))| r != self.rank as usize && h == here)
            .map(|(_, (&w, _))| w as usize)
            .sum();
        let online = crate::sys::proc::cpus_online();
        crate::config::available_cpus().min(online.saturating_sub(others))
    }

    /// Whether global worker `g` belongs to this rank.
    #[inline]
    pub(crate) fn is_local(&self, g: usize) -> bool {
        g >= self.base && g < self.base + self.local
    }

    /// The rank of global worker `g`.
    pub(crate) fn rank_of(&self, g: usize) -> u32 {
        let mut base = 0usize;
        for (r, &n) in self.rank_workers.iter().enumerate() {
            if g < base + n as usize {
                return r as u32;
            }
            base += n as usize;
        }
        self.rank_workers.len() as u32
    }

    /// Global id of `rank`'s first worker.
    pub(crate) fn first_of(&self, rank: u32) -> usize {
        self.rank_workers[..rank as usize]
            .iter()
            .map(|&n| n as usize)
            .sum()
    }
}

/// A counter on its own cache line (one writer: its worker).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Counter(pub AtomicU64);

/// State shared by all workers of this rank.
#[derive(Debug)]
pub(crate) struct Shared {
    pub place: Place,
    pub stop: AtomicBool,
    /// This rank's workers' doorbells (index = local worker).
    pub doors: Vec<Doorbell>,
    /// By global worker id: what to ring after publishing to it (`None` for nobody to ring).
    pub bells: Vec<Option<Bell>>,
    pub failure: Mutex<Option<Error>>,
    /// Failures reported, the first of which is `failure` (the mutation tests count with it).
    pub failures: AtomicU64,
    pub roots_left: AtomicUsize,
    /// Set when the roots are done: workers keep serving until the job is quiet (see
    /// [`WorkerCore::try_finish`]).
    pub draining: AtomicBool,
    /// Set by a worker that goes to sleep while roots are still running, cleared by the next
    /// worker that does work: while it is set, the workers count their activity as when
    /// draining, so that a rank whose workers are all idle with roots left (a deadlock) is seen.
    pub watching: AtomicBool,
    /// Bumped by every worker after each loop turn that did work while counting (draining or
    /// watching), and once at the first turn that sees counting on after seeing it off.
    pub activity: AtomicU64,
    /// Per local worker: the `activity` value it last saw while locally quiet (`u64::MAX`: never).
    pub quiet: Vec<AtomicU64>,
    /// Per local worker: the delegated closure it serves now (`runtime/stall.rs` watches it).
    pub busy: Vec<Busy>,
    /// Whether other ranks take part: then a quiet rank does not stop by itself; it reports
    /// `rank_quiet` and the rank's main thread decides with the other ranks
    /// (`runtime::quiesce::terminate`).
    pub multi: bool,
    /// The `activity` value at which every worker of this rank was last seen quiet.
    pub rank_quiet: AtomicU64,
    /// A job of this rank alone found stalled (every worker quiet with roots left) at this
    /// `activity` value, first at this time (see [`STALL_CONFIRM`]).
    pub stall: Mutex<Option<(u64, Instant)>>,
    /// After a deadlock: per local worker that had waiting fibers, what they waited for.
    pub waits: Mutex<Vec<(usize, Vec<String>)>>,
    /// Waves of the termination protocol this rank has completed (`runtime::quiesce::terminate`).
    pub waves: AtomicU64,
    /// Per local worker with fibers in [`crate::wait_for`]: the `waves` value read before it
    /// last found all their conditions false while counting; `u64::MAX` while it has none. A
    /// rank whose waiters were not all looked at since its last wave is not quiet in the next
    /// one (see `runtime::quiesce::sample`): a condition is set by another rank's write to the host
    /// board, which no message counts.
    pub board_fresh: Vec<AtomicU64>,
    /// Per local worker: slots it published to, and consumed from, rings of other ranks.
    pub sent: Vec<Counter>,
    pub received: Vec<Counter>,
    /// This rank's workers that are not asleep in their doorbells, and how many of them have a
    /// CPU each ([`Place::cpu_room`]): see [`Shared::spin`].
    pub awake: AtomicUsize,
    pub cpu_room: usize,
    /// The CPUs this rank may use, and the host's online CPUs, for [`Shared::host_fits`].
    pub cpus: usize,
    pub online: usize,
    /// Whether idle workers look at the host's runnable threads (`GSM_SPIN_HOST`).
    pub host_aware: bool,
    /// This runtime's number among those this process started (from 1; see [`RUNTIMES`]).
    pub epoch: u32,
    /// The rings between this rank's workers, made on first use, and their summaries.
    pub lanes: Lanes,
    /// The thread that rings workers without a doorbell alarm for their sockets.
    pub sockets: SocketWatch,
}

/// Runtimes this process has started. Each one's number marks the trusts it makes
/// (`Trust::home`), so a trust kept past the end of its runtime is told apart from the trusts
/// of a later one, whose tables reuse the same indexes and generations.
static RUNTIMES: AtomicU32 = AtomicU32::new(0);

/// What one worker is serving, for the stall watch (`runtime/stall.rs`): the type-name function
/// of the delegated closure it runs now (0: none), and a count of the runs it started, so that a
/// watcher tells one closure that never returns from many short ones. One worker writes it (two
/// relaxed stores per run of requests); the watcher only reads.
#[derive(Default, Debug)]
pub(crate) struct Busy {
    closure: AtomicUsize,
    runs: AtomicU64,
}

/// Clears a [`Busy`] when the run it marks ends, also by a panic.
pub(crate) struct Serving<'a>(&'a Busy);

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.0.closure.store(0, Ordering::Relaxed);
    }
}

impl Busy {
    /// Marks the start of a run of closures of type `F`, until the guard is dropped.
    #[inline(always)]
    pub(crate) fn serving<F>(&self) -> Serving<'_> {
        let name: fn() -> &'static str = std::any::type_name::<F>;
        self.runs.store(
            self.runs.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        self.closure.store(name as usize, Ordering::Relaxed);
        Serving(self)
    }

    /// The run being served, if any: its number and its closure's type name.
    pub(crate) fn now(&self) -> Option<(u64, &'static str)> {
        let f = self.closure.load(Ordering::Relaxed);
        if f == 0 {
            return None;
        }
        // SAFETY: `closure` only ever holds 0 or a `fn() -> &'static str` stored by `serving`
        // (function pointers and `usize` have the same size on every target Rust supports).
        let name: fn() -> &'static str =
            unsafe { std::mem::transmute::<usize, fn() -> &'static str>(f) };
        Some((self.runs.load(Ordering::Relaxed), name()))
    }
}

impl Shared {
    pub(crate) fn new(
        place: Place,
        doors: Vec<Doorbell>,
        mut bells: Vec<Option<Bell>>,
        roots: usize,
        multi: bool,
        layout: RingLayout,
    ) -> Self {
        let n = place.local;
        for (l, d) in doors.iter().enumerate() {
            bells[place.base + l] = Some(Bell::Door(d.clone()));
        }
        Shared {
            awake: AtomicUsize::new(n),
            cpu_room: place.cpu_room(),
            cpus: crate::config::available_cpus().min(crate::sys::proc::cpus_online()),
            online: crate::sys::proc::cpus_online(),
            host_aware: gsm_contract::value(&gsm_contract::table::SPIN_HOST),
            epoch: RUNTIMES
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_add(1)
                .max(1),
            stop: AtomicBool::new(false),
            doors,
            bells,
            failure: Mutex::new(None),
            failures: AtomicU64::new(0),
            roots_left: AtomicUsize::new(roots),
            draining: AtomicBool::new(false),
            watching: AtomicBool::new(false),
            activity: AtomicU64::new(0),
            quiet: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
            busy: (0..n).map(|_| Busy::default()).collect(),
            multi,
            rank_quiet: AtomicU64::new(u64::MAX),
            stall: Mutex::new(None),
            waits: Mutex::new(Vec::new()),
            waves: AtomicU64::new(0),
            board_fresh: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
            sent: (0..n).map(|_| Counter::default()).collect(),
            received: (0..n).map(|_| Counter::default()).collect(),
            lanes: Lanes::new(n, place.base, layout),
            sockets: SocketWatch::default(),
            place,
        }
    }

    /// Whether this host runs more workers than there are CPUs for them: this rank's workers
    /// beyond the CPUs it may use, or the workers of every rank on this host beyond the host's
    /// online CPUs ([`Place::cpu_room`]).
    pub(crate) fn oversubscribed(&self) -> bool {
        self.place.local > self.cpu_room
    }

    /// Idle turns a worker spins before yielding: [`SPIN`] while this rank's awake workers have
    /// a CPU each, [`SPIN_OVERSUBSCRIBED`] when they do not. Counted awake, not started: a host
    /// with more workers than CPUs whose idle workers sleep still has a CPU for each of the
    /// others, and a worker that waits for an answer from another one on the other CPU then
    /// sees it within nanoseconds instead of yielding its CPU to nobody. The workers of the
    /// other ranks on the host are counted awake all the time, since their sleep is not seen
    /// from here; [`Shared::may_spin`] looks at the kernel's count of runnable threads instead.
    #[inline]
    pub(crate) fn spin(&self) -> u32 {
        if self.awake.load(Ordering::Relaxed) <= self.cpu_room {
            SPIN
        } else {
            SPIN_OVERSUBSCRIBED
        }
    }

    /// Whether the host's runnable threads right now, the caller included, are at most its
    /// online CPUs plus `spare`, and this rank's awake workers fit the CPUs it may use. The
    /// kernel's count sees every process, the other ranks on this host (or in another network
    /// namespace of the same machine) among them, asleep or not, where [`Shared::spin`] counts
    /// the other ranks' workers as always awake. One sample (one `pread`) per idle
    /// spell and use; always `false` with `GSM_SPIN_HOST=0`.
    pub(crate) fn host_fits(&self, spare: usize) -> bool {
        self.host_aware
            && self.awake.load(Ordering::Relaxed) <= self.cpus
            && crate::sys::proc::runnable_threads().is_some_and(|n| n <= self.online + spare)
    }

    /// Whether a worker may spin for [`SPIN`] turns although [`Shared::spin`] says
    /// [`SPIN_OVERSUBSCRIBED`]: the host's runnable threads fit its CPUs with one to spare (in a
    /// round trip the sampler, the worker it waits for and one more were runnable in most
    /// samples; docs/performance-log.md has the measurement).
    pub(crate) fn may_spin(&self) -> bool {
        self.host_fits(1)
    }

    /// Whether a worker whose spin is [`SPIN`] may linger (`run_loop`): the host's runnable
    /// threads fit its CPUs, so that lingering workers of ranks that cannot see each other
    /// (namespace hosts sharing cores) do not take turns on the cores with the ones at work; or
    /// `GSM_SPIN_HOST=0` (lingering as before).
    pub(crate) fn may_linger(&self) -> bool {
        !self.host_aware || self.host_fits(0)
    }

    /// Asks every worker of this rank to stop and wakes them.
    pub(crate) fn stop_all(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for d in &self.doors {
            d.force();
        }
    }

    /// The roots are done: workers drain in-flight work, then stop (the last to see the job
    /// quiet calls [`Shared::stop_all`], or the main thread does once every rank is quiet).
    pub(crate) fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        for d in &self.doors {
            d.force();
        }
    }

    /// Records the first failure and stops the runtime.
    pub(crate) fn fail(&self, e: Error) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut f) = self.failure.lock() {
            f.get_or_insert(e);
        }
        self.stop_all();
    }

    /// How many failures were reported on this rank (the first is the one kept).
    #[cfg(test)]
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Whether a failure was recorded.
    pub(crate) fn failed(&self) -> bool {
        self.failure.lock().map(|f| f.is_some()).unwrap_or(true)
    }

    /// A ring or record from worker `peer` to this rank's worker `me` broke the protocol: the
    /// job cannot go on safely.
    #[cold]
    pub(crate) fn ring_broken(&self, me: usize, peer: usize, detail: &str) {
        let rank = self.place.rank_of(peer);
        self.fail(Error::Protocol {
            rank,
            host: self
                .place
                .hosts
                .get(rank as usize)
                .cloned()
                .unwrap_or_default(),
            detail: format!("worker {peer} -> worker {me}: {detail}"),
        });
    }

    /// Wakes global worker `w` if it sleeps (after a publication to it).
    #[inline]
    pub(super) fn wake(&self, w: usize) {
        if let Some(b) = &self.bells[w] {
            b.ring();
        }
    }

    /// Slots this rank published to other ranks' rings, and consumed from theirs.
    pub(crate) fn traffic(&self) -> (u64, u64) {
        let s = self.sent.iter().map(|c| c.0.load(Ordering::Acquire)).sum();
        let r = self
            .received
            .iter()
            .map(|c| c.0.load(Ordering::Acquire))
            .sum();
        (s, r)
    }
}
