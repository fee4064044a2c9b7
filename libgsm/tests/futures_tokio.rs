//! Gossamer's promises driven by another executor, tokio's: a tokio task on a thread that is no
//! worker awaits promises of remote applies issued on a worker (their wakers are called from the
//! worker's thread), and a tokio program with no worker issues applies through a `Bridge` served
//! by a fiber. Each fails if a wake is lost (the test then hangs until its time limit ends it)
//! or a result is wrong.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use gossamer::{Bridge, Config, Promise, WorkerId, entrust_on, sleep, spawn_async};

/// Waits in the calling fiber for `thread`, for at most 60 s (sleeping, so that the run is not
/// taken for deadlocked while only the thread works).
fn join_thread<R>(thread: std::thread::JoinHandle<R>) -> R {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !thread.is_finished() && Instant::now() < deadline {
        sleep(Duration::from_millis(1));
    }
    assert!(
        thread.is_finished(),
        "the tokio thread did not finish within 60 s"
    );
    thread.join().expect("the tokio thread panicked")
}

/// Awaits `p`, counting whether its first poll was pending.
async fn counted<T>(p: Promise<T>, pending: &mut u32) -> T {
    let mut p = pin!(p);
    let first = poll_fn(|cx| Poll::Ready(p.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(v) => v,
        Poll::Pending => {
            *pending += 1;
            p.await
        }
    }
}

#[test]
fn a_tokio_task_awaits_remote_applies() {
    let (sum, pending) = gossamer::run(Config::default().workers(2), || {
        let counter = entrust_on(WorkerId::new(1), || 0u64);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Promise<u64>>();
        let tokio_thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a tokio runtime");
            rt.block_on(async move {
                let (mut sum, mut pending) = (0u64, 0u32);
                while let Some(p) = rx.recv().await {
                    sum += counted(p, &mut pending).await;
                }
                (sum, pending)
            })
        });
        // A slow one first, so that the tokio task surely waits for a wake from this worker.
        tx.send(spawn_async(|| {
            gossamer::sleep(Duration::from_millis(50));
            1000u64
        }))
        .expect("the tokio task listens");
        for k in 1..=300u64 {
            tx.send(counter.apply_async(move |c| {
                *c += k;
                k
            }))
            .expect("the tokio task listens");
        }
        drop(tx);
        let r = join_thread(tokio_thread);
        assert_eq!(counter.apply(|c| *c), 300 * 301 / 2);
        r
    })
    .expect("the run ends normally");
    assert_eq!(sum, 1000 + 300 * 301 / 2);
    assert!(pending >= 1, "no promise was pending when first polled");
}

#[test]
fn a_tokio_program_issues_through_a_bridge() {
    let total = gossamer::run(Config::default().workers(2), || {
        let counter = Arc::new(entrust_on(WorkerId::new(1), || 0u64));
        let bridge = Bridge::new();
        let (b, c) = (bridge.clone(), counter.clone());
        let tokio_thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a tokio runtime");
            let got = rt.block_on(async {
                let tasks: Vec<_> = (1..=50u64)
                    .map(|k| {
                        let (b, c) = (b.clone(), c.clone());
                        tokio::spawn(async move {
                            b.submit(move || {
                                c.apply_async(move |n| {
                                    *n += k;
                                    k
                                })
                            })
                            .await
                        })
                    })
                    .collect();
                let mut sum = 0;
                for t in tasks {
                    sum += t.await.expect("a tokio task");
                }
                b.close();
                sum
            });
            // The trust handles go back to be dropped on a worker.
            (got, c)
        });
        bridge.serve();
        let (got, _c) = join_thread(tokio_thread);
        assert_eq!(counter.apply(|n| *n), 50 * 51 / 2);
        got
    })
    .expect("the run ends normally");
    assert_eq!(total, 50 * 51 / 2);
}
