//! MPI one-sided communication (RMA) for the peers of `gsm-bench segments`: a window allocated
//! on every rank and locked for passive-target access (`MPI_Win_allocate`, `MPI_Win_lock_all`),
//! `MPI_Get`, `MPI_Put` and `MPI_Fetch_and_op` each completed by `MPI_Win_flush`. The `mpi` crate
//! (0.8) has no RMA, so these are its raw bindings (`mpi::ffi`), each behind a safe method.
//!
//! It measures nothing itself, and does not check MPI's return codes beyond turning a failure
//! into a panic (MPI's default error handler aborts the job first anyway).

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use std::os::raw::c_void;

/// A window of `len` bytes on every rank, locked for passive-target access from here.
#[derive(Debug)]
pub struct Window {
    win: ffi::MPI_Win,
    len: usize,
}

fn ok(rc: i32, what: &str) {
    assert_eq!(rc, 0, "{what} failed with MPI error {rc}");
}

impl Window {
    /// `MPI_Win_allocate(len)` over `world` (collective), then `MPI_Win_lock_all`.
    pub fn allocate(world: &SimpleCommunicator, len: usize) -> Window {
        let mut base: *mut c_void = std::ptr::null_mut();
        let mut win = std::mem::MaybeUninit::<ffi::MPI_Win>::uninit();
        // SAFETY: plain MPI calls with out-pointers to locals; MPI owns the memory it allocates
        // until `MPI_Win_free` (in `drop`). `RSMPI_INFO_NULL` is a constant of the bindings; the
        // handle is read only after the call that writes it succeeded.
        unsafe {
            ok(
                ffi::MPI_Win_allocate(
                    len as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_INFO_NULL,
                    world.as_raw(),
                    (&raw mut base).cast(),
                    win.as_mut_ptr(),
                ),
                "MPI_Win_allocate",
            );
            // MPI_Win_allocate succeeded (checked), so it wrote the handle.
            let win = win.assume_init();
            ok(ffi::MPI_Win_lock_all(0, win), "MPI_Win_lock_all");
            Window { win, len }
        }
    }

    /// `MPI_Get` of `buf.len()` bytes at `disp` of `rank`'s window, then `MPI_Win_flush`.
    pub fn get(&self, rank: i32, disp: usize, buf: &mut [u8]) {
        assert!(disp + buf.len() <= self.len);
        // SAFETY: `buf` is ours and outlives the flush that completes the get.
        unsafe {
            ok(
                ffi::MPI_Get(
                    buf.as_mut_ptr().cast(),
                    buf.len() as i32,
                    ffi::RSMPI_UINT8_T,
                    rank,
                    disp as ffi::MPI_Aint,
                    buf.len() as i32,
                    ffi::RSMPI_UINT8_T,
                    self.win,
                ),
                "MPI_Get",
            );
            ok(ffi::MPI_Win_flush(rank, self.win), "MPI_Win_flush");
        }
    }

    /// `MPI_Put` of `data` at `disp` of `rank`'s window, then `MPI_Win_flush`.
    pub fn put(&self, rank: i32, disp: usize, data: &[u8]) {
        assert!(disp + data.len() <= self.len);
        // SAFETY: `data` is ours and outlives the flush that completes the put.
        unsafe {
            ok(
                ffi::MPI_Put(
                    data.as_ptr().cast(),
                    data.len() as i32,
                    ffi::RSMPI_UINT8_T,
                    rank,
                    disp as ffi::MPI_Aint,
                    data.len() as i32,
                    ffi::RSMPI_UINT8_T,
                    self.win,
                ),
                "MPI_Put",
            );
            ok(ffi::MPI_Win_flush(rank, self.win), "MPI_Win_flush");
        }
    }

    /// `MPI_Fetch_and_op(v, MPI_SUM)` on the `u64` at `disp` of `rank`'s window, flushed; the old
    /// value.
    pub fn fetch_add(&self, rank: i32, disp: usize, v: u64) -> u64 {
        assert!(disp % 8 == 0 && disp + 8 <= self.len);
        let mut old = 0u64;
        // SAFETY: `v` and `old` are locals that outlive the flush completing the operation.
        unsafe {
            ok(
                ffi::MPI_Fetch_and_op(
                    (&raw const v).cast(),
                    (&raw mut old).cast(),
                    ffi::RSMPI_UINT64_T,
                    rank,
                    disp as ffi::MPI_Aint,
                    ffi::RSMPI_SUM,
                    self.win,
                ),
                "MPI_Fetch_and_op",
            );
            ok(ffi::MPI_Win_flush(rank, self.win), "MPI_Win_flush");
        }
        old
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: the window from `allocate`, unlocked and freed once (collective: every rank
        // drops its window at the same point of the program).
        unsafe {
            ffi::MPI_Win_unlock_all(self.win);
            ffi::MPI_Win_free(&mut self.win);
        }
    }
}
