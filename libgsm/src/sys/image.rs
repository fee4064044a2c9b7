//! This program's own image: where its code lies in memory, and its file's bytes.

/// The bounds `[lo, hi)` of the loaded executable segment (`PT_LOAD` with `PF_X`) that holds
/// address `addr`, found with `dl_iterate_phdr`; `None` if no segment holds it.
pub(crate) fn text_segment_of(addr: usize) -> Option<(usize, usize)> {
    let mut found = (addr, 0usize, usize::MAX);
    unsafe extern "C" fn cb(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid `dl_phdr_info`, and `data` is the
        // `(usize, usize, usize)` below, alive for the whole call.
        let (info, out) = unsafe { (&*info, &mut *(data as *mut (usize, usize, usize))) };
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: `dlpi_phdr` has `dlpi_phnum` entries.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
                let lo = info.dlpi_addr as usize + ph.p_vaddr as usize;
                let hi = lo + ph.p_memsz as usize;
                if (lo..hi).contains(&out.0) {
                    (out.1, out.2) = (lo, hi);
                    return 1;
                }
            }
        }
        0
    }
    // SAFETY: the callback only reads the program headers the loader hands it, and `data`
    // points to `found`, a live local of the right type, for the duration of the call.
    unsafe {
        libc::dl_iterate_phdr(Some(cb), (&raw mut found).cast());
    }
    (found.2 != usize::MAX).then_some((found.1, found.2))
}

/// The bytes of this program's executable file (`/proc/self/exe`: the file this process runs,
/// even if it was replaced or removed on disk since).
pub(crate) fn own_executable() -> std::io::Result<Vec<u8>> {
    std::fs::read("/proc/self/exe")
}
