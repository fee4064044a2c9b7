//! Signals: handlers for the fault signals (SIGSEGV, SIGBUS), installed once per process on the
//! alternate signal stack Rust gives every thread; what a handler learns of a fault (sent by a
//! process or raised by an instruction, the address, the interrupted stack pointer); the
//! async-signal-safe ways out of a handler; and writing to standard error from one. What a fault
//! means, and which way out it takes, is the caller's (`fiber.rs`).

use std::sync::OnceLock;

/// What a fault handler learns of its signal: plain data, read in the handler.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FaultInfo {
    /// Sent by a process (`kill`, `tgkill`, `sigqueue`: `si_code` ≤ 0), not raised by a fault of
    /// the interrupted instruction.
    pub(crate) sent: bool,
    /// The faulting address (`si_addr`).
    pub(crate) addr: usize,
    /// The interrupted stack pointer, on the architectures this module knows.
    pub(crate) sp: Option<usize>,
}

/// How a fault handler ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// End the process with the signal under its default action: the signal is blocked in its
    /// handler, so it is delivered, and kills, as the handler returns. For a signal sent with
    /// `kill`, which has no faulting instruction to run again: handled as a fault, it was lost,
    /// and a rank sent one went on (the first two of three `kill -SEGV`s did nothing).
    Die,
    /// Restore the default action and return: the faulting instruction runs again and faults
    /// anew, and the process dies of the signal.
    Default,
    /// Restore the action the handler replaced (Rust's own, which reports thread stack
    /// overflows) and return, so that the fault recurs there.
    Previous,
}

/// A fault handler. It runs in a signal handler: it must be async-signal-safe (no allocation,
/// no lock, nothing a signal could find half-changed).
pub(crate) type Handler = fn(&FaultInfo) -> Then;

/// The signals watched, by index: SIGSEGV, SIGBUS.
const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// The handler of each watched signal (index as in [`SIGNALS`]).
static HANDLERS: [OnceLock<Handler>; 2] = [OnceLock::new(), OnceLock::new()];

/// The action each watched signal had before (index as in [`SIGNALS`]).
static PREVIOUS: [OnceLock<libc::sigaction>; 2] = [OnceLock::new(), OnceLock::new()];

/// Makes `segv` and `bus` handle SIGSEGV and SIGBUS in this process, once (later calls change
/// nothing), with `SA_ONSTACK` so that a stack overflow can be handled. A signal whose current
/// action cannot be read is left alone.
pub(crate) fn watch_faults(segv: Handler, bus: Handler) {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        for (i, handler) in [segv, bus].into_iter().enumerate() {
            let _ = HANDLERS[i].set(handler);
            // SAFETY: sigaction with a zeroed (valid: empty mask, no flags) struct to read the
            // current action, then one that names a handler of the SA_SIGINFO signature.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(SIGNALS[i], std::ptr::null(), &mut old) != 0 {
                    continue;
                }
                let _ = PREVIOUS[i].set(old);
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = on_fault as *const () as usize;
                new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut new.sa_mask);
                libc::sigaction(SIGNALS[i], &new, std::ptr::null_mut());
            }
        }
    });
}

/// The handler installed for both signals: reads the fault, asks the caller's handler, and
/// leaves the way it says.
extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let i = usize::from(sig != libc::SIGSEGV);
    // SAFETY: the kernel passes a valid siginfo_t to a SA_SIGINFO handler.
    let fault = unsafe {
        FaultInfo {
            sent: (*info).si_code <= 0,
            addr: (*info).si_addr() as usize,
            sp: stack_pointer(ctx),
        }
    };
    let then = HANDLERS[i].get().map_or(Then::Previous, |h| h(&fault));
    // SAFETY: signal(2), raise(3) and sigaction(2) are async-signal-safe; `PREVIOUS[i]` was set
    // before this handler was installed.
    unsafe {
        match then {
            Then::Die => {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
            Then::Default => {
                libc::signal(sig, libc::SIG_DFL);
            }
            Then::Previous => {
                match PREVIOUS[i].get() {
                    Some(old) => libc::sigaction(sig, old, std::ptr::null_mut()),
                    None => libc::signal(sig, libc::SIG_DFL) as libc::c_int,
                };
            }
        }
    }
}

/// The interrupted stack pointer in a signal handler's context.
fn stack_pointer(ctx: *mut libc::c_void) -> Option<usize> {
    let uc = ctx.cast::<libc::ucontext_t>();
    if uc.is_null() {
        return None;
    }
    // SAFETY: the kernel passes a valid ucontext_t to a SA_SIGINFO handler.
    #[cfg(target_arch = "x86_64")]
    return Some(unsafe { (*uc).uc_mcontext.gregs[libc::REG_RSP as usize] } as usize);
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    return Some(unsafe { (*uc).uc_mcontext.sp } as usize);
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    None
}

/// Writes `bytes` to standard error with one `write(2)`, ignoring failure: async-signal-safe,
/// for a handler's last words.
pub(crate) fn write_stderr(bytes: &[u8]) {
    // SAFETY: write(2) is async-signal-safe; the buffer is initialised for its length.
    unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
}
