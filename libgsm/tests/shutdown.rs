//! Shutdown drains: when the roots return, every request already issued is still
//! served and answered, its callbacks run and its clone/drop toggles are applied, before `run`
//! returns; leftover properties are dropped exactly once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use gossamer::{Config, WorkerId, entrust_on};

fn cfg(n: usize) -> Config {
    Config::default().workers(n)
}

#[test]
fn apply_then_issued_right_before_main_returns_all_complete() {
    static CALLBACKS: AtomicU64 = AtomicU64::new(0);
    static FINAL: AtomicU64 = AtomicU64::new(0);
    struct Counter(u64);
    impl Drop for Counter {
        fn drop(&mut self) {
            FINAL.store(self.0, Ordering::SeqCst);
        }
    }
    const N: u64 = 100_000;
    gossamer::run(cfg(2), || {
        let t = entrust_on(WorkerId::new(1), || Counter(0));
        for _ in 0..N {
            t.apply_then(
                |c| {
                    c.0 += 1;
                    c.0
                },
                |_| {
                    CALLBACKS.fetch_add(1, Ordering::SeqCst);
                },
            );
        }
        // Return at once: nothing waits for the answers.
    })
    .unwrap();
    assert_eq!(CALLBACKS.load(Ordering::SeqCst), N, "every callback ran");
    assert_eq!(FINAL.load(Ordering::SeqCst), N, "every request was served");
}

#[test]
fn a_property_whose_last_trust_goes_at_the_end_is_freed_once() {
    static DROPS: AtomicU64 = AtomicU64::new(0);
    static CALLBACK_RAN: AtomicU64 = AtomicU64::new(0);
    struct P;
    impl Drop for P {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    gossamer::run(cfg(2), || {
        let t = entrust_on(WorkerId::new(1), || P);
        let c = t.clone();
        let last = t.clone();
        drop(t);
        // The last trust is dropped by a callback that runs only after main returned.
        c.apply_then(
            |_| 1u8,
            move |_| {
                drop(last);
                CALLBACK_RAN.fetch_add(1, Ordering::SeqCst);
            },
        );
        drop(c);
    })
    .unwrap();
    assert_eq!(CALLBACK_RAN.load(Ordering::SeqCst), 1);
    assert_eq!(DROPS.load(Ordering::SeqCst), 1, "freed exactly once");
}

#[test]
fn spmd_drains_requests_between_all_workers() {
    static DONE: AtomicU64 = AtomicU64::new(0);
    const N: u64 = 20_000;
    gossamer::spmd(cfg(3), |w| {
        let next = WorkerId::new((w.id() + 1) % w.count());
        let t = entrust_on(next, || 0u64);
        for _ in 0..N {
            t.apply_then(
                |c| *c += 1,
                |_| {
                    DONE.fetch_add(1, Ordering::SeqCst);
                },
            );
        }
    })
    .unwrap();
    assert_eq!(DONE.load(Ordering::SeqCst), 3 * N);
}

/// Worker 0 sends `n` one-way messages to worker 1 and returns; a fiber on worker 1 whose
/// handle was dropped receives them. Returns how many it received and whether it finished.
fn detached_receiver(cfg: Config, n: u64) -> (u64, bool) {
    static RECEIVED: AtomicU64 = AtomicU64::new(0);
    static FINISHED: AtomicBool = AtomicBool::new(false);
    RECEIVED.store(0, Ordering::SeqCst);
    FINISHED.store(false, Ordering::SeqCst);
    gossamer::spmd(cfg, move |w| {
        if w.id() == 0 {
            for i in 0..n {
                gossamer::send(WorkerId::new(1), 7, i);
            }
        } else {
            drop(gossamer::spawn(move || {
                for _ in 0..n {
                    let _: u64 = gossamer::recv(WorkerId::new(0), 7);
                    RECEIVED.fetch_add(1, Ordering::SeqCst);
                }
                FINISHED.store(true, Ordering::SeqCst);
            }));
        }
    })
    .unwrap();
    (
        RECEIVED.load(Ordering::SeqCst),
        FINISHED.load(Ordering::SeqCst),
    )
}

#[test]
fn one_way_messages_that_waited_for_room_are_all_delivered_before_the_job_ends() {
    // The sender's last batches wait for room in the full ring and go out in a poll that serves
    // nothing: the job must not end before the receiver has had them (it ended early in most
    // runs when publishing did not count as work).
    let small = cfg(2).slot_size(256).slots_per_ring(2);
    for (config, n, runs) in [(small, 2_000u64, 60), (cfg(2), 200_000, 10)] {
        for run in 0..runs {
            assert_eq!(
                detached_receiver(config.clone(), n),
                (n, true),
                "run {run} with {config:?}: the job ended before every message was received"
            );
        }
    }
}

#[test]
fn a_panic_in_a_property_destructor_at_teardown_is_reported() {
    static DROPS: AtomicU64 = AtomicU64::new(0);
    struct Boom;
    impl Drop for Boom {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
            panic!("boom in a destructor");
        }
    }
    // Its trust is leaked, so the property stays until the runtime's teardown drops it.
    let r = gossamer::run(cfg(2), || {
        std::mem::forget(entrust_on(WorkerId::new(1), || Boom));
    });
    assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    match r {
        Err(gossamer::Error::Panicked {
            worker, message, ..
        }) => {
            assert_eq!(worker, 1, "{message}");
            assert!(message.contains("boom in a destructor"), "{message}");
        }
        other => panic!("expected the destructor's panic to be reported, got {other:?}"),
    }
}
