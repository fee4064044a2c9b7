//! Memory: how much this machine has, where the calling thread's stack lies, and huge-page
//! advice for large buffers. Fiber stacks
//! themselves (mmap with a guard page) are `corosensei`'s; what to do with a size is the
//! runtime's.

/// Bytes of RAM this machine has (`_SC_PHYS_PAGES × _SC_PAGESIZE`), if the system says.
pub(crate) fn physical_memory() -> Option<u128> {
    // SAFETY: sysconf has no preconditions. (rustix has no sysconf for physical pages.)
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page > 0).then(|| pages as u128 * page as u128)
}

/// The lowest address of the calling thread's stack (where its guard page is), 0 if unknown.
pub(crate) fn thread_stack_low() -> usize {
    // SAFETY: a zeroed attribute object filled in by pthread_getattr_np for this thread, read
    // with pthread_attr_getstack and destroyed only when filled in. (rustix has no pthreads.)
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return 0;
        }
        let mut addr = std::ptr::null_mut();
        let mut size = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if ok { addr as usize } else { 0 }
    }
}

/// Bytes from which [`advise_huge`] asks for huge pages.
const HUGE_FROM: usize = 4 << 20;
/// A transparent huge page on x86-64 and most 64-bit Linux targets.
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back the 2 MiB-aligned interior of `ptr..ptr + len` with transparent huge
/// pages (`MADV_HUGEPAGE`), for a buffer of at least 4 MiB about to be filled: under the common
/// THP mode `madvise` a fresh buffer is otherwise faulted in 4 KiB pages, one fault per page,
/// which costs more than the copy that fills it. Advice only:
/// the bytes and the allocation are unchanged, and a kernel that refuses (no THP) is ignored.
pub(crate) fn advise_huge(ptr: *const u8, len: usize) {
    if len < HUGE_FROM {
        return;
    }
    let (start, end) = (ptr as usize, ptr as usize + len);
    let lo = start.next_multiple_of(HUGE_PAGE);
    let hi = end & !(HUGE_PAGE - 1);
    if hi <= lo {
        return;
    }
    // SAFETY: `lo..hi` lies inside the caller's allocation `ptr..ptr + len` (rounded inwards to
    // whole huge pages, so whole base pages too); MADV_HUGEPAGE changes only how the kernel backs
    // those pages, never their contents or the mapping.
    let _ = unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
}

#[cfg(test)]
mod tests {
    /// Where the kernel offers transparent huge pages, an advised buffer is backed by them
    /// (`AnonHugePages` of its mapping in `/proc/self/smaps`), and its bytes are untouched.
    #[test]
    fn an_advised_large_buffer_gets_huge_pages() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        let mut v: Vec<u8> = Vec::with_capacity(16 << 20);
        v.push(42);
        super::advise_huge(v.as_ptr(), v.capacity());
        assert_eq!(v[0], 42, "the advice changed the bytes");
        v.resize(16 << 20, 1);
        if thp.is_empty() || thp.contains("[never]") {
            return; // no THP on this kernel: nothing to check beyond the bytes
        }
        // The advice splits the mapping at its 2 MiB-aligned interior: look at the middle.
        let at = v.as_ptr() as usize + (8 << 20);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        let mut huge_kb = None;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = first.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&at);
                    continue;
                }
            }
            if inside {
                if let Some(kb) = line.strip_prefix("AnonHugePages:") {
                    huge_kb = kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok();
                }
            }
        }
        let huge_kb = huge_kb.expect("the buffer's mapping in /proc/self/smaps");
        assert!(
            huge_kb >= 2048,
            "no huge page backs the advised 16 MiB buffer ({huge_kb} kB; THP: {thp})"
        );
        assert!(v.iter().skip(1).all(|&b| b == 1));
    }
}
