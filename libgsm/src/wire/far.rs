//! Single-copy reads of another process's memory on the same host (`process_vm_readv`, "CMA"),
//! for records too large for a slot: the sender parks the body in its own memory and sends its
//! address; the receiver copies it straight into a buffer of its own, and sends the sender a
//! release record so that it frees the body. One copy instead of streaming the body through
//! ring slots (which copies it three times and is paced by the ring's size).
//!
//! It needs the kernel's permission to read the peer (same user, and under Yama's
//! `ptrace_scope = 1` the peer's consent, which [`allow_peers`] gives). Whether it works between
//! two ranks is tested once per run, at set-up ([`probe`]); otherwise records are streamed.
//!
//! This module only copies bytes (through `sys::far`, which makes the system calls); it does not
//! know records or workers. It also defines what a one-sided fabric offers for the same
//! purpose ([`Rendezvous`]: the body registered, then read by RMA), which the fabric implements.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys;

/// A body registered for peers to read ([`Rendezvous::park`]): where they read it, with which
/// key, and the number to give back to [`Rendezvous::unpark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parked {
    /// The RMA address peers read from (a virtual address or an offset, as the provider asks).
    pub addr: u64,
    /// The memory key peers pass.
    pub key: u64,
    /// This rank's number for the registration.
    pub id: u64,
}

/// The rendezvous for records larger than a slot over a one-sided fabric: the sender registers
/// the body ([`park`](Self::park)) and sends its address and key in the record; the receiver
/// reads it straight into a buffer of its own ([`read`](Self::read)) and then sends a release
/// record, upon which the sender deregisters ([`unpark`](Self::unpark)) and frees it. Nothing
/// of the body travels through the rings. See `fabric::ofi`, whose rendezvous this is.
pub trait Rendezvous: Send + Sync + std::fmt::Debug {
    /// Whether this rank reads parked bodies of `rank` (and `rank` reads this rank's).
    fn reaches(&self, rank: u32) -> bool;
    /// Registers `len` bytes at `ptr` for remote reads.
    ///
    /// # Safety
    /// `ptr..ptr + len` stays allocated and unchanged until [`unpark`](Self::unpark) of the
    /// returned id.
    unsafe fn park(&self, ptr: *const u8, len: usize) -> Result<Parked, String>;
    /// Deregisters a body parked under `id` (unknown ids are ignored).
    fn unpark(&self, id: u64);
    /// Reads `len` bytes at `addr` (key `key`) of rank `rank` into a new buffer; returns when
    /// every byte is in place, or why not (the peer is gone, the key is refused, the job ends).
    fn read(
        &self,
        rank: u32,
        addr: u64,
        key: u64,
        len: u64,
    ) -> Result<Box<[std::mem::MaybeUninit<u8>]>, String>;
}

/// What a peer reads to test whether it can read this process.
static PROBE: AtomicU64 = AtomicU64::new(0);
const MAGIC: u64 = 0x6773_6d5f_6661_7221;

/// The largest body a peer may announce (1 TiB): a corrupt length is an error, not an allocation.
const MAX_FAR: u64 = 1 << 40;

/// Lets processes of this user read this one (Yama `ptrace_scope = 1` otherwise allows only
/// descendants), and returns the address peers probe.
pub(crate) fn allow_peers() -> u64 {
    PROBE.store(MAGIC, Ordering::SeqCst);
    // Only changes which processes may attach; fails harmlessly (EINVAL) where Yama is absent.
    let _ = sys::far::allow_any_tracer();
    PROBE.as_ptr() as usize as u64
}

/// Whether this process can read process `pid`'s probe at `addr`.
pub(crate) fn probe(pid: u32, addr: u64) -> bool {
    let mut v = [0u8; 8];
    copy(pid, addr, v.as_mut_ptr(), 8).is_ok() && u64::from_ne_bytes(v) == MAGIC
}

/// Reads `len` bytes at `addr` in process `pid` into a new buffer.
///
/// A length this process has no memory for is not the peer's fault: like any allocation that
/// fails, it ends the process (`handle_alloc_error`: "memory allocation of N bytes failed",
/// then SIGABRT), rather than reporting the peer's record as a breach of the protocol.
pub(crate) fn read(pid: u32, addr: u64, len: u64) -> Result<Box<[MaybeUninit<u8>]>, String> {
    let mut buf = alloc(len)?;
    copy(pid, addr, buf.as_mut_ptr().cast::<u8>(), buf.len())?;
    Ok(buf)
}

/// A buffer of `len` bytes for a single-copy read, whoever fills it (`process_vm_readv` here, an
/// RMA read of a one-sided fabric's rendezvous), with [`read`]'s limits: a length over 1 TiB is
/// an error, one this process has no memory for ends it.
pub(crate) fn alloc(len: u64) -> Result<Box<[MaybeUninit<u8>]>, String> {
    if len > MAX_FAR {
        return Err(format!(
            "an announced length of {len} bytes is larger than 1 TiB"
        ));
    }
    let n = len as usize;
    let mut buf: Vec<MaybeUninit<u8>> = Vec::new();
    if buf.try_reserve_exact(n).is_err() {
        match std::alloc::Layout::array::<u8>(n) {
            Ok(layout) => std::alloc::handle_alloc_error(layout),
            Err(_) => return Err(format!("an announced length of {len} bytes is too large")),
        }
    }
    sys::mem::advise_huge(buf.as_ptr().cast(), n);
    // SAFETY: `n` bytes are reserved, and `MaybeUninit<u8>` needs no initialisation.
    unsafe { buf.set_len(n) };
    Ok(buf.into_boxed_slice())
}

/// The direction of a [`transfer`].
#[derive(Clone, Copy)]
enum Way {
    /// From the other process into ours (`process_vm_readv`).
    Read,
    /// From ours into the other process (`process_vm_writev`).
    Write,
}

/// Moves `len` bytes between `local` here and `addr` in process `pid`, looping over partial
/// transfers.
///
/// # Safety
/// `local` is valid for `len` bytes (writable for [`Way::Read`]); for [`Way::Write`], the bytes at
/// `addr` in `pid` are for this process to write now (the caller's protocol with that process):
/// the kernel checks only that they are mapped and writable.
unsafe fn transfer(
    pid: u32,
    addr: u64,
    local: *mut u8,
    len: usize,
    way: Way,
) -> Result<(), String> {
    let mut done = 0usize;
    while done < len {
        // SAFETY: `done < len` and `local` is valid for `len` bytes (the caller's), writable for
        // a read; any byte is a valid `MaybeUninit<u8>`.
        let here = unsafe {
            std::slice::from_raw_parts_mut(local.add(done).cast::<MaybeUninit<u8>>(), len - done)
        };
        let there = addr + done as u64;
        let r = match way {
            Way::Read => sys::far::read_from(pid, there, here),
            // SAFETY: the bytes at `there` are ours to write (the caller's).
            Way::Write => unsafe { sys::far::write_to(pid, there, here) },
        };
        match r {
            Err(e) => return Err(e.to_string()),
            Ok(0) => return Err("the peer's memory ended early".into()),
            Ok(n) => done += n,
        }
    }
    Ok(())
}

/// Copies `len` bytes from `src` here to `addr` in process `pid`.
///
/// # Safety
/// `src` is valid for `len` bytes, and the bytes at `addr` in `pid` are for this process to write
/// now (the caller's protocol with that process).
pub(crate) unsafe fn copy_to(
    pid: u32,
    addr: u64,
    src: *const u8,
    len: usize,
) -> Result<(), String> {
    // SAFETY: the caller's; a write only reads `src`.
    unsafe { transfer(pid, addr, src.cast_mut(), len, Way::Write) }
}

/// Copies `len` bytes from `addr` in `pid` to `dst`.
pub(crate) fn copy(pid: u32, addr: u64, dst: *mut u8, len: usize) -> Result<(), String> {
    // SAFETY: `dst` is valid and writable for `len` bytes (callers' buffers).
    unsafe { transfer(pid, addr, dst, len, Way::Read) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_itself_and_refuses_nonsense() {
        let addr = allow_peers();
        assert!(probe(std::process::id(), addr));
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let got = read(
            std::process::id(),
            data.as_ptr() as usize as u64,
            data.len() as u64,
        )
        .unwrap();
        // SAFETY: `read` filled every byte.
        let got: Vec<u8> = got.iter().map(|b| unsafe { b.assume_init() }).collect();
        assert_eq!(got, data);
        assert!(
            read(std::process::id(), 8, 16).is_err(),
            "address 8 is not mapped"
        );
        assert!(read(std::process::id(), addr, u64::MAX).is_err());
    }

    /// A record this process has no memory for ends it as any failed allocation does (SIGABRT
    /// after "memory allocation of N bytes failed"), instead of an error that the job reported
    /// as the peer breaking the protocol. Runs itself as a child under a small address-space
    /// limit.
    #[test]
    fn a_record_too_large_for_this_process_memory_aborts_it() {
        const NAME: &str = "wire::far::tests::a_record_too_large_for_this_process_memory_aborts_it";
        const LEN: u64 = 8 << 30;
        if std::env::var_os("GSM_FAR_OOM_CHILD").is_some() {
            sys::far::limit_address_space(2 << 30).expect("setrlimit");
            let addr = allow_peers();
            let r = read(std::process::id(), addr, LEN);
            println!("read returned: {:?}", r.map(|b| b.len()));
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env("GSM_FAR_OOM_CHILD", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(sys::far::ABORT_SIGNAL),
            "{:?}\n{}{stderr}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            stderr.contains(&format!("memory allocation of {LEN} bytes failed")),
            "{stderr}"
        );
    }
}
