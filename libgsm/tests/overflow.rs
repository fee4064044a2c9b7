//! A fiber that overflows its stack hits the guard page: the process dies of SIGSEGV instead of
//! corrupting memory, and says first which worker's fiber overflowed, its stack size and how to
//! raise it (Rust's own report covers only thread stacks: the process died without a word).
//! Runs itself as a child process.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

#[inline(never)]
fn recurse(n: u64, buf: &mut [u8; 1024]) -> u64 {
    let mut local = [0u8; 1024];
    local[0] = buf[(n % 1024) as usize].wrapping_add(1);
    if n == u64::MAX {
        return 0;
    }
    recurse(n + 1, &mut local) + u64::from(std::hint::black_box(local[0]))
}

#[test]
fn stack_overflow_in_a_fiber_hits_the_guard_page() {
    if std::env::var_os("GSM_OVERFLOW_CHILD").is_some() {
        let _ = gossamer::run(
            gossamer::Config::default().workers(1).stack_size(64 * 1024),
            || {
                let mut b = [0u8; 1024];
                recurse(0, &mut b)
            },
        );
        unreachable!("the overflow must kill the process");
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "stack_overflow_in_a_fiber_hits_the_guard_page",
            "--nocapture",
        ])
        .env("GSM_OVERFLOW_CHILD", "1")
        .output()
        .unwrap();
    let sig = out.status.signal();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        sig,
        Some(libc_sigsegv()),
        "expected death by SIGSEGV, got {:?}; stderr: {stderr}",
        out.status
    );
    assert!(
        stderr.contains(
            "gossamer: a fiber on worker 0 overflowed its stack of 65536 bytes (raise \
             GSM_STACK_SIZE or Config::stack_size; closures delegated to a worker and apply_then \
             callbacks run on the stack of the fiber that was running there)\n"
        ),
        "the overflow must be reported; stderr: {stderr}"
    );
}

fn libc_sigsegv() -> i32 {
    11
}
