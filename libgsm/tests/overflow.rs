//! A fiber that overflows its stack hits the guard page: the process dies of SIGSEGV instead of
//! corrupting memory, and says first which worker's fiber overflowed, its stack size and how to
//! raise it (Rust's own report covers only thread stacks: the process died without a word).
//! A delegated closure that an idle worker serves runs on the worker thread's own stack, which
//! follows the fibers' stack size, so raising it is the remedy there too, and an overflow there
//! says so. Runs itself as a child process.

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

/// Recurses `depth` frames of at least 1 KiB each; returns a value that depends on all of them.
#[inline(never)]
fn recurse_to(depth: u64, buf: &mut [u8; 1024]) -> u64 {
    let mut local = [0u8; 1024];
    local[0] = buf[(depth % 1024) as usize].wrapping_add(1);
    if depth == 0 {
        return u64::from(std::hint::black_box(local[0]));
    }
    recurse_to(depth - 1, &mut local) + u64::from(std::hint::black_box(local[0]))
}

/// Runs this test binary's test `name` as a child with `GSM_OVERFLOW_CHILD` set.
fn child(name: &str) -> std::process::Output {
    child_with(name, &[])
}

/// [`child`] with `env` set too.
fn child_with(name: &str, env: &[(&str, &str)]) -> std::process::Output {
    let exe = std::env::current_exe().unwrap();
    Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("GSM_OVERFLOW_CHILD", "1")
        .env_remove("RUST_MIN_STACK")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// Uses 16 KiB of stack, then panics.
#[inline(never)]
fn panic_after_16_kib() -> u32 {
    let buf = std::hint::black_box([0u8; 16 << 10]);
    if buf[100] == 0 {
        panic!("deliberate panic in a fiber");
    }
    u32::from(buf[7])
}

/// The smallest stack size accepted still lets a fiber's panic be reported with its backtrace
/// (capturing and printing it takes 20-30 KiB of stack): with 16 KiB, once accepted, the
/// process died of SIGSEGV under `RUST_BACKTRACE=1` instead.
#[test]
fn a_panic_in_a_fiber_of_the_smallest_stack_is_reported_with_its_backtrace() {
    if std::env::var_os("GSM_OVERFLOW_CHILD").is_some() {
        let smallest = (1..=64)
            .map(|k| k << 10)
            .find(|&size| {
                let config = gossamer::Config::default().workers(1).stack_size(size);
                !matches!(
                    gossamer::run(config, || ()),
                    Err(gossamer::Error::Config(_))
                )
            })
            .expect("no stack size up to 64 KiB accepted");
        let r = gossamer::run(
            gossamer::Config::default().workers(1).stack_size(smallest),
            || {
                gossamer::spawn(panic_after_16_kib)
                    .try_join()
                    .map_err(|e| e.to_string())
            },
        );
        println!("stack of {smallest} bytes: {r:?}");
        return;
    }
    let out = child_with(
        "a_panic_in_a_fiber_of_the_smallest_stack_is_reported_with_its_backtrace",
        &[("RUST_BACKTRACE", "full")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && stdout.contains("Ok(Err(")
            && stdout.contains("deliberate panic in a fiber")
            && stderr.contains("stack backtrace:"),
        "status {:?}, stdout: {stdout}, stderr: {stderr}",
        out.status
    );
}

#[test]
fn a_deep_closure_an_idle_worker_serves_fits_the_stack_size_asked_for() {
    if std::env::var_os("GSM_OVERFLOW_CHILD").is_some() {
        // Worker 1 runs no fiber, so it serves the closure on its thread's own stack: 3000
        // frames of over 1 KiB, more than Rust's 2 MiB default, well within 8 MiB.
        let r = gossamer::run(
            gossamer::Config::default().workers(2).stack_size(8 << 20),
            || {
                let t = gossamer::entrust_on(gossamer::WorkerId::new(1), || 0u64);
                t.apply(|_| {
                    let mut b = [0u8; 1024];
                    recurse_to(3000, &mut b)
                })
            },
        );
        println!("deep closure answered {r:?}");
        return;
    }
    let out = child("a_deep_closure_an_idle_worker_serves_fits_the_stack_size_asked_for");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("deep closure answered Ok("),
        "the closure must run to its end; status {:?}, stdout: {stdout}, stderr: {stderr}",
        out.status
    );
}

#[test]
fn an_overflow_of_a_worker_threads_stack_says_what_raises_it() {
    if std::env::var_os("GSM_OVERFLOW_CHILD").is_some() {
        let _ = gossamer::run(
            gossamer::Config::default().workers(2).stack_size(64 * 1024),
            || {
                let t = gossamer::entrust_on(gossamer::WorkerId::new(1), || 0u64);
                t.apply(|_| {
                    let mut b = [0u8; 1024];
                    recurse(0, &mut b)
                })
            },
        );
        unreachable!("the overflow must kill the process");
    }
    let out = child("an_overflow_of_a_worker_threads_stack_says_what_raises_it");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.signal(), Some(6 | 11)),
        "expected death by SIGABRT or SIGSEGV, got {:?}; stderr: {stderr}",
        out.status
    );
    assert!(
        stderr.contains(
            "gossamer: worker 1 overflowed its thread's stack of 2097152 bytes serving a \
             delegated closure or an apply_then callback with no fiber running (raise \
             GSM_STACK_SIZE or Config::stack_size: a worker thread's stack is that plus 64 KiB, \
             at least 2 MiB)\n"
        ),
        "the overflow must be reported; stderr: {stderr}"
    );
    assert!(
        stderr.contains("thread 'gsm-worker-1'") && stderr.contains("has overflowed its stack"),
        "Rust's own report must follow; stderr: {stderr}"
    );
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

/// A SIGSEGV or SIGBUS sent to a running job's process with `kill` ends it, dying of that
/// signal: the fault handlers gave a signal back to the default action by returning, for the
/// fault to recur, and a sent one does not recur, so it was lost (the process ran on).
#[test]
fn a_sigsegv_or_sigbus_sent_with_kill_ends_the_process() {
    if let Ok(sig) = std::env::var("GSM_SENT_SIGNAL") {
        let sig: libc::c_int = sig.parse().unwrap();
        gossamer::run(gossamer::Config::default().workers(2), move || {
            // SAFETY: kill(2) on this process.
            unsafe { libc::kill(libc::getpid(), sig) };
            gossamer::sleep(std::time::Duration::from_secs(5));
        })
        .unwrap();
        println!("the process outlived the signal");
        return;
    }
    for sig in [libc::SIGSEGV, libc::SIGBUS] {
        let text = sig.to_string();
        let out = child_with(
            "a_sigsegv_or_sigbus_sent_with_kill_ends_the_process",
            &[("GSM_SENT_SIGNAL", &text)],
        );
        assert_eq!(
            out.status.signal(),
            Some(sig),
            "signal {sig}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
