//! The host board: a region of shared memory per rank that every rank on the same host maps.
//!
//! The `shm` fabric gives each rank's segment a board of [`BOARD_BYTES`] bytes after its rings
//! (see `fabric::shm`). [`host_board`] hands a fiber the boards of its own rank and of every
//! rank it reaches over `shm`, so that code above the runtime can build its own shared-memory
//! protocols between the ranks of one host: `gsm-collectives` runs its barrier, reductions,
//! broadcast, allgather and all-to-all between ranks of one host on it, with flags and copies
//! instead of messages.
//!
//! What the runtime promises: the memory is zero when a `run` starts, lies in a 0600 segment of
//! this job (created, validated, unlinked and cleaned up after crashes with the rings), stays
//! mapped while any [`Board`] lives, and is the same bytes in every process that maps it. What
//! it does not do: the runtime never reads or writes a board, so every protocol on it (who
//! writes where, and when a reader may look) is its user's. Words shared between processes must
//! be used through [`BoardRegion::word`]'s atomics; bulk bytes through the raw pointer of
//! [`BoardRegion::ptr`], under the user's protocol.
//!
//! There is no board between ranks on different hosts, nor when a rank's peers on its host are
//! reached over `tcp` (`GSM_FABRIC=tcp`), nor in a job of one rank: [`host_board`] then gives
//! only this rank's own region, or nothing at all for a job of one rank.

use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// Bytes of each rank's board (4 MiB, reserved in `/dev/shm` with the rank's segment).
pub const BOARD_BYTES: usize = 4 << 20;

/// One rank's board, as mapped in this process (what a fabric hands the runtime).
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
    /// Keeps the mapping alive.
    _keep: Arc<dyn Any + Send + Sync>,
}

impl Region {
    /// The board at `ptr`, `len` bytes long, kept mapped by `keep`.
    ///
    /// # Safety
    /// `ptr` is 4096-aligned and `len` bytes from it are shared memory that stays mapped while
    /// `keep` lives and is only ever accessed through the [`Board`] API (atomics, or raw
    /// pointers under the user's protocol).
    pub(crate) unsafe fn new(
        ptr: NonNull<u8>,
        len: usize,
        keep: Arc<dyn Any + Send + Sync>,
    ) -> Region {
        Region {
            ptr,
            len,
            _keep: keep,
        }
    }
}

// SAFETY: a region is shared memory that stays mapped while it lives (`_keep`); it only hands
// out atomics and raw pointers, whose use is the caller's protocol.
unsafe impl Send for Region {}
// SAFETY: as for `Send`.
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

/// The boards of the ranks on this host that this rank reaches over `shm`, its own included.
pub struct Board {
    /// Per rank of the job: its board, where mapped.
    regions: Vec<Option<Region>>,
    me: usize,
    /// Process id of each rank.
    pids: Vec<u32>,
    /// `readable[r][q]`: rank r can read rank q's memory (`process_vm_readv`, probed at set-up).
    readable: Vec<Vec<bool>>,
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ranks: Vec<usize> = self.ranks().collect();
        f.debug_struct("Board")
            .field("rank", &self.me)
            .field("ranks", &ranks)
            .finish()
    }
}

impl Board {
    /// A board of `pids.len()` ranks, this one `me`, with the given regions and the probed
    /// matrix of who can read whom.
    pub(crate) fn new(
        me: usize,
        pids: Vec<u32>,
        regions: Vec<(usize, Region)>,
        readable: Vec<Vec<bool>>,
    ) -> Board {
        let mut v: Vec<Option<Region>> = (0..pids.len()).map(|_| None).collect();
        for (r, region) in regions {
            if let Some(slot) = v.get_mut(r) {
                *slot = Some(region);
            }
        }
        Board {
            regions: v,
            me,
            pids,
            readable,
        }
    }

    /// Whether rank `reader` can read and write rank `owner`'s memory with single copies
    /// ([`Board::read_from`], [`Board::write_to`]), as probed when the run started: both on
    /// this board, and the kernel allowed it (same user; Yama's `ptrace_scope` at most 1; not
    /// turned off with `GSM_SINGLE_COPY=0`). The same answer on every rank.
    pub fn can_copy(&self, reader: usize, owner: usize) -> bool {
        reader != owner
            && self.region(reader).is_some()
            && self.region(owner).is_some()
            && self
                .readable
                .get(reader)
                .and_then(|v| v.get(owner))
                .copied()
                .unwrap_or(false)
    }

    /// Copies `dst.len()` bytes at address `addr` of rank `rank`'s process into `dst`, in one
    /// copy (`process_vm_readv`). The bytes must not change while they are read (the caller's
    /// protocol with that rank); an address that is not mapped there is an error, never a fault
    /// here.
    ///
    /// # Errors
    /// If `rank` is not on this board or the kernel refuses (see [`Board::can_copy`]).
    pub fn read_from(&self, rank: usize, addr: usize, dst: &mut [u8]) -> std::io::Result<()> {
        let pid = self.pid(rank)?;
        crate::wire::far::copy(pid, addr as u64, dst.as_mut_ptr(), dst.len())
            .map_err(|e| std::io::Error::other(format!("reading rank {rank}'s memory: {e}")))
    }

    /// Copies `src` to address `addr` of rank `rank`'s process, in one copy
    /// (`process_vm_writev`).
    ///
    /// # Safety
    /// The `src.len()` bytes at `addr` in that process are memory it lets this process write
    /// now, under the caller's protocol with it: nothing there reads or writes them meanwhile,
    /// and whatever they hold afterwards is valid for their type.
    ///
    /// # Errors
    /// If `rank` is not on this board or the kernel refuses (see [`Board::can_copy`]).
    pub unsafe fn write_to(&self, rank: usize, addr: usize, src: &[u8]) -> std::io::Result<()> {
        let pid = self.pid(rank)?;
        // SAFETY: the caller's contract.
        unsafe { crate::wire::far::copy_to(pid, addr as u64, src.as_ptr(), src.len()) }
            .map_err(|e| std::io::Error::other(format!("writing rank {rank}'s memory: {e}")))
    }

    fn pid(&self, rank: usize) -> std::io::Result<u32> {
        match (self.region(rank), self.pids.get(rank)) {
            (Some(_), Some(&pid)) if rank != self.me => Ok(pid),
            _ => Err(std::io::Error::other(format!(
                "rank {rank} is not another rank on this host's board"
            ))),
        }
    }

    /// The rank whose process this is.
    pub fn rank(&self) -> usize {
        self.me
    }

    /// The ranks whose boards are mapped here, ascending (this rank's among them).
    pub fn ranks(&self) -> impl Iterator<Item = usize> + '_ {
        self.regions
            .iter()
            .enumerate()
            .filter_map(|(r, x)| x.as_ref().map(|_| r))
    }

    /// Rank `rank`'s board, if it is mapped here.
    pub fn region(&self, rank: usize) -> Option<BoardRegion<'_>> {
        self.regions
            .get(rank)
            .and_then(Option::as_ref)
            .map(|r| BoardRegion { region: r })
    }
}

/// One rank's board: [`BOARD_BYTES`] bytes, 4096-aligned.
#[derive(Debug, Clone, Copy)]
pub struct BoardRegion<'a> {
    region: &'a Region,
}

impl<'a> BoardRegion<'a> {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.region.len
    }

    /// Never: a board has [`BOARD_BYTES`] bytes.
    pub fn is_empty(&self) -> bool {
        self.region.len == 0
    }

    /// The 64-bit word at byte `offset`, to be used atomically by every process.
    ///
    /// # Panics
    /// If `offset` is not a multiple of 8 or the word does not lie inside the board.
    pub fn word(&self, offset: usize) -> &'a AtomicU64 {
        assert!(
            offset % 8 == 0 && offset.checked_add(8).is_some_and(|e| e <= self.region.len),
            "gossamer: board word at byte {offset} is misaligned or outside the {} bytes",
            self.region.len
        );
        // SAFETY: in bounds and aligned (checked; the base is page-aligned); the memory stays
        // mapped while `self.region` lives, and the module's contract is that shared words are
        // only used atomically.
        unsafe { AtomicU64::from_ptr(self.region.ptr.as_ptr().add(offset).cast::<u64>()) }
    }

    /// A raw pointer to the `len` bytes at `offset`. Reading or writing through it is the
    /// caller's protocol: another process may write the same bytes at any time unless that
    /// protocol rules it out.
    ///
    /// # Panics
    /// If the bytes do not lie inside the board.
    pub fn ptr(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(
            offset
                .checked_add(len)
                .is_some_and(|e| e <= self.region.len),
            "gossamer: board bytes {offset}..+{len} lie outside its {} bytes",
            self.region.len
        );
        // SAFETY: in bounds (checked).
        unsafe { self.region.ptr.as_ptr().add(offset) }
    }
}
