use super::*;
use crate::{
    Bridge, Config, DelegationError, WorkerId, entrust, entrust_on, finish, spawn, spawn_async,
    spawn_on,
};
use std::sync::atomic::AtomicU64;

fn two() -> Config {
    Config::default().workers(2)
}

/// Promises of requests to another worker, all issued before any is waited for, come back in
/// order through `when_all`; one to this worker is ready at once.
#[test]
fn apply_async_results_in_order() {
    let got = crate::run(two(), || {
        let t = entrust_on(WorkerId::new(1), || 0u64);
        let ps: Vec<_> = (1..=500u64)
            .map(|k| {
                t.apply_async(move |c| {
                    *c += k;
                    *c
                })
            })
            .collect();
        let here = entrust(5u32);
        let p = here.apply_async(|v| *v * 2);
        assert!(p.is_ready(), "an apply_async on this worker runs inline");
        assert_eq!(p.wait(), 10);
        when_all(ps).wait()
    })
    .unwrap();
    assert_eq!(
        got,
        (1..=500u64).map(|k| k * (k + 1) / 2).collect::<Vec<_>>()
    );
}

/// A failure is the promise's, as an error with the `try_` form and as a panic at the wait
/// otherwise; the run goes on.
#[test]
fn failures_reach_the_waiter() {
    crate::run(two(), || {
        let t = entrust_on(WorkerId::new(1), || 0u64);
        let r = t
            .try_apply_async(|_| -> u64 { panic!("boom on purpose") })
            .wait();
        assert!(matches!(r, Err(DelegationError::Panicked(m)) if m.contains("boom on purpose")));
        let p = t.apply_async(|c| *c);
        let e = spawn(move || p.wait()).try_join().unwrap_err();
        assert!(e.to_string().contains("Trust::apply_async failed"), "{e}");
    })
    .unwrap();
}

static HANDED: Mutex<Option<Promise<u64>>> = Mutex::new(None);

/// A promise made on worker 1 is awaited by a fiber of worker 0 (`block_on`, woken from the
/// other thread) and by `join_all` of `async` blocks.
#[test]
fn promises_of_another_worker_and_join_all() {
    let got = crate::run(two(), || {
        spawn_on(WorkerId::new(1), || {
            // Issued on worker 1: it completes there.
            let p = crate::spawn_async(|| {
                crate::sleep(std::time::Duration::from_millis(20));
                41u64
            });
            *HANDED.lock().unwrap() = Some(p);
        })
        .join();
        let p = HANDED.lock().unwrap().take().unwrap();
        assert!(!p.is_ready(), "the fiber on worker 1 sleeps first");
        let v = p.wait();
        let t = entrust_on(WorkerId::new(1), || 7u64);
        let both = block_on(join_all([
            Box::pin(async { t.apply_async(|c| *c + 1).await })
                as Pin<Box<dyn Future<Output = u64>>>,
            Box::pin(async { t.apply_async(|c| *c + 2).await * 10 }),
        ]));
        (v, both)
    })
    .unwrap();
    assert_eq!(got, (41, vec![8, 90]));
}

static POSTED: AtomicU64 = AtomicU64::new(0);

/// `post` has no callback, and `finish` waits for it: when the scope returns, every posted
/// closure has run on the trustee (read with no request behind them).
#[test]
fn finish_waits_for_posts() {
    crate::run(two(), || {
        POSTED.store(0, Ordering::Relaxed);
        let t = entrust_on(WorkerId::new(1), || 0u64);
        finish(|| {
            for k in 0..2000u64 {
                t.post(move |c| {
                    *c += k;
                    POSTED.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
        assert_eq!(POSTED.load(Ordering::Relaxed), 2000);
        assert_eq!(t.apply(|c| *c), 1999 * 2000 / 2);
    })
    .unwrap();
}

/// A panic in a posted closure is the scope's failure, raised by `finish`.
#[test]
fn a_failed_post_fails_its_scope() {
    crate::run(two(), || {
        let t = entrust_on(WorkerId::new(1), || 0u64);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            finish(|| t.post(|_| panic!("post fails on purpose")))
        }));
        let m = crate::worker::panic_message(&*r.unwrap_err());
        assert!(m.contains("post fails on purpose"), "{m}");
    })
    .unwrap();
}

/// `recv_async` before the send, `join_async`, and a panicking `spawn_async`.
#[test]
fn recv_join_and_spawn_async() {
    crate::run(two(), || {
        let me = crate::current_worker();
        let p = crate::recv_async::<u64>(WorkerId::new(1), 9);
        spawn_on(WorkerId::new(1), move || crate::send(me, 9, 77u64));
        assert_eq!(p.wait(), 77);
        assert_eq!(spawn(|| 3).join_async().wait(), 3);
        let bad = spawn_async(|| -> u8 { panic!("spawned on purpose") });
        let e = spawn(move || bad.wait()).try_join().unwrap_err();
        assert!(e.to_string().contains("spawned on purpose"), "{e}");
    })
    .unwrap();
}

/// Stream reads and writes as promises, between two workers.
#[test]
fn stream_reads_and_writes_async() {
    let got = crate::run(two(), || {
        let me = crate::current_worker();
        let writer = spawn_on(WorkerId::new(1), move || {
            let w = crate::stream::connect(me, 3).expect("connect");
            let (w, r) = w.write_all_async(vec![5u8; 100_000]).wait();
            r.expect("write");
            w.finish_async().wait().expect("finish");
        });
        let r = crate::stream::accept(WorkerId::new(1), 3).expect("accept");
        let (r, head) = r.read_exact_async(10).wait();
        let (_, rest) = r.read_to_end_async().wait();
        writer.join();
        (head.unwrap().len(), rest.unwrap().len())
    })
    .unwrap();
    assert_eq!(got, (10, 99_990));
}

/// A bridge lets a thread that is no worker issue an apply and get its promise.
#[test]
fn a_bridge_serves_another_thread() {
    let got = crate::run(two(), || {
        let t = entrust_on(WorkerId::new(1), || 1u64);
        let bridge = Bridge::new();
        let b = bridge.clone();
        let t = std::sync::Arc::new(t);
        let user = std::thread::spawn(move || {
            let ps: Vec<_> = (0..10u64)
                .map(|k| {
                    let t = t.clone();
                    b.submit(move || t.apply_async(move |c| *c + k))
                })
                .collect();
            while !ps.iter().all(Promise::is_ready) {
                std::thread::yield_now();
            }
            b.close();
            // The trust goes back to drop on a worker.
            (ps, t)
        });
        bridge.serve();
        let (ps, _t) = user.join().unwrap();
        ps.into_iter().map(Promise::wait).sum::<u64>()
    })
    .unwrap();
    assert_eq!(got, 10 + 45);
}
