//! Code identities that can travel: a trampoline is named by its address minus the address of a
//! base function of this binary, and turned back into a function pointer only after checking that
//! the offset lands inside the executable segment that holds the base function.
//!
//! The range is found once with `dl_iterate_phdr` (the `PT_LOAD` segment with `PF_X` that contains
//! the base), so it works for executables, PIE or not, and with or without address-space
//! randomisation. It does not prove that the offset is the *start* of a trampoline of the right
//! type: within one process offsets only come from this crate's own encoder; across processes the
//! binary-identity check of the bootstrap (issue 4) makes both sides agree on the text.

use std::sync::OnceLock;

/// The anchor all offsets are relative to.
#[inline(never)]
pub(crate) extern "C" fn base_anchor() -> usize {
    0x6773_6d00
}

#[derive(Debug, Clone, Copy)]
struct Text {
    base: usize,
    lo: usize,
    hi: usize,
}

static TEXT: OnceLock<Text> = OnceLock::new();

fn text() -> Text {
    *TEXT.get_or_init(|| {
        let base = base_anchor as *const () as usize;
        let mut found = (0usize, usize::MAX);
        // SAFETY: the callback only reads the program headers the loader hands it, and `data`
        // points to `found`, a live local of the right type, for the duration of the call.
        unsafe {
            libc::dl_iterate_phdr(Some(cb), (&mut found as *mut (usize, usize)).cast());
        }
        unsafe extern "C" fn cb(
            info: *mut libc::dl_phdr_info,
            _size: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: the loader passes a valid `dl_phdr_info` and `data` is our `(usize, usize)`.
            let (info, out) = unsafe { (&*info, &mut *(data as *mut (usize, usize))) };
            let base = base_anchor as *const () as usize;
            for i in 0..info.dlpi_phnum as usize {
                // SAFETY: `dlpi_phdr` has `dlpi_phnum` entries.
                let ph = unsafe { &*info.dlpi_phdr.add(i) };
                if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
                    let lo = info.dlpi_addr as usize + ph.p_vaddr as usize;
                    let hi = lo + ph.p_memsz as usize;
                    if (lo..hi).contains(&base) {
                        *out = (lo, hi);
                        return 1;
                    }
                }
            }
            0
        }
        let (lo, hi) = if found.1 == usize::MAX {
            (base, base)
        } else {
            found
        };
        Text { base, lo, hi }
    })
}

/// The offset that names function address `addr`.
#[inline]
pub(crate) fn offset_of(addr: usize) -> u64 {
    addr.wrapping_sub(base_anchor as *const () as usize) as u64
}

/// The address an offset names, if it lies in the binary's text.
#[inline]
pub(crate) fn address_of(offset: u64) -> Option<usize> {
    let t = text();
    let a = t.base.wrapping_add(offset as usize);
    (a >= t.lo && a < t.hi).then_some(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn own_functions_round_trip_and_garbage_is_refused() {
        let f = offset_of as fn(usize) -> u64 as *const () as usize;
        assert_eq!(address_of(offset_of(f)), Some(f));
        let t = text();
        assert!(t.lo < t.hi, "text range not found");
        assert_eq!(address_of(1 << 60), None);
        assert_eq!(address_of(offset_of(t.hi)), None);
        assert_eq!(address_of(offset_of(t.lo - 1)), None);
        assert_eq!(address_of(offset_of(t.lo)), Some(t.lo));
    }
}
