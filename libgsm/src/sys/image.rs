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

/// This program's executable file (`/proc/self/exe`, the file this process runs, even if it was
/// renamed or removed since), mapped read-only: a reader touches only the pages it reads (the
/// symbol table is a small part of a large binary). The kernel refuses to write a file that a
/// process runs (`ETXTBSY`), so the bytes cannot change under the mapping.
#[derive(Debug)]
pub(crate) struct OwnImage {
    base: std::ptr::NonNull<u8>,
    len: usize,
}

impl OwnImage {
    pub(crate) fn map() -> std::io::Result<OwnImage> {
        use rustix::mm::{MapFlags, ProtFlags};
        let file = std::fs::File::open("/proc/self/exe")?;
        let len = usize::try_from(file.metadata()?.len()).map_err(std::io::Error::other)?;
        if len == 0 {
            return Err(std::io::Error::other("the program's file is empty"));
        }
        // SAFETY: a fresh private read-only mapping chosen by the kernel (null hint), aliasing
        // no Rust object; the file stays unwritten while this process runs (see the type).
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ,
                MapFlags::PRIVATE,
                &file,
                0,
            )?
        };
        let base = std::ptr::NonNull::new(p.cast::<u8>())
            .ok_or_else(|| std::io::Error::other("null map"))?;
        Ok(OwnImage { base, len })
    }

    /// The file's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `len` readable bytes at `base`, mapped for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.len) }
    }
}

impl Drop for OwnImage {
    fn drop(&mut self) {
        // SAFETY: exactly what `mmap` returned, unmapped once, after every borrow of `bytes`.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
