//! Memory: how much this machine has, and where the calling thread's stack lies. Fiber stacks
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
