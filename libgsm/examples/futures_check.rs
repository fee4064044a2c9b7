//! `futures_check`: the non-blocking forms (`gossamer::future`) across ranks, checked end to
//! end, for `tests/tests/futures.rs` in `gsm-tests`. Run it under `gsmrun -np N` (any N ≥ 1, any
//! fabric, 2 workers per rank); every rank runs the checks against the next rank (itself when
//! alone) and prints `ok <check> (rank R)`:
//!
//! - `apply`: 200 `apply_async`s to a counter on the next rank's first worker, all issued before
//!   any is waited for, their results in order through `when_all` (each sees every earlier
//!   one), then `apply_with_async` and `join_all` over `async` blocks;
//! - `failure`: a `try_apply_async` whose closure panics there answers `Panicked` with its
//!   message, and `apply_async` to the poisoned property fails its promise, not the run;
//! - `post`: 100 `post_with`s to the next rank inside `finish`, each of which posts back to a
//!   counter here; when `finish` returns, every one has come back (read with no request);
//! - `recv`: a `recv_async` issued before the previous rank sends;
//! - `join`: `join_async` of a fiber on another rank's worker;
//! - `segment`: `put_async`, `get_async`, `fetch_add_async`, `swap_async` and
//!   `compare_exchange_async` on the next rank's part of a symmetric allocation, the previous
//!   rank's updates then read here.
//!
//! Output ends with `futures_check: rank R of N passed` on every rank.

use gossamer::segment::{Rights, alloc_symmetric};
use gossamer::{
    Config, DelegationError, Trust, WorkerId, entrust, entrust_on, finish, join_all, rank,
    rank_count, recv, recv_async, send, spawn_on, when_all, workers_of_rank,
};

const TAG: u64 = 0xf0_7e5;
const SYNC: u64 = 0xf0_7e6;

fn first(r: usize) -> WorkerId {
    WorkerId::new(workers_of_rank(r).start)
}

fn ok(check: &str) {
    println!("ok {check} (rank {})", rank());
}

/// Waits until the previous rank has said it is done with this rank's data, and tells the next.
fn handshake(next: usize, prev: usize) {
    send(first(next), SYNC, ());
    let () = recv(first(prev), SYNC);
}

fn main() {
    let mut config = Config::from_env().expect("configuration");
    if std::env::var_os("GSM_THREADS").is_none() {
        config = config.workers(2);
    }
    gossamer::run(config, || {
        let (me, n) = (rank(), rank_count());
        let next = (me + 1) % n;
        let prev = (me + n - 1) % n;

        // apply
        let t: Trust<u64> = entrust_on(first(next), || 0u64);
        let promises: Vec<_> = (1..=200u64)
            .map(|k| {
                t.apply_async(move |c| {
                    *c += k;
                    *c
                })
            })
            .collect();
        let got = when_all(promises).wait();
        let want: Vec<u64> = (1..=200u64).map(|k| k * (k + 1) / 2).collect();
        assert_eq!(got, want, "apply_async results out of order or wrong");
        let len = t.apply_with_async(vec![1u8; 1000], |c, v: Vec<u8>| *c + v.len() as u64);
        let both = gossamer::block_on(join_all([
            Box::pin(len) as std::pin::Pin<Box<dyn std::future::Future<Output = u64>>>,
            Box::pin(async { t.apply_async(|c| *c).await }),
        ]));
        assert_eq!(both, vec![20_100 + 1000, 20_100]);
        ok("apply");

        // failure
        let bad: Trust<u64> = entrust_on(first(next), || 0u64);
        let r = bad
            .try_apply_async(|_| -> u64 { panic!("futures_check panics on purpose") })
            .wait();
        match r {
            Err(DelegationError::Panicked(m)) if m.contains("on purpose") => {}
            other => panic!("a panicking closure answered {other:?}"),
        }
        let p = bad.apply_async(|c| *c);
        let caught = gossamer::spawn(move || p.wait()).try_join();
        assert!(
            caught.is_err_and(|e| e.to_string().contains("apply_async failed")),
            "awaiting a failed apply_async did not fail"
        );
        ok("failure");

        // post
        let back = entrust(0u64);
        let there: Trust<u64> = entrust_on(first(next), || 0u64);
        finish(|| {
            for k in 1..=100u64 {
                there.post_with(back.clone(), move |c, back: Trust<u64>| {
                    *c += k;
                    back.post(|b| *b += 1);
                });
            }
        });
        // Inline on this worker: no request overtakes anything.
        assert_eq!(
            back.apply(|b| *b),
            100,
            "finish returned before every post came back"
        );
        assert_eq!(there.apply(|c| *c), 5050);
        ok("post");

        // recv
        let p = recv_async::<u64>(first(prev), TAG);
        send(first(next), TAG, me as u64);
        assert_eq!(p.wait(), prev as u64);
        ok("recv");

        // join
        let h = spawn_on(WorkerId::new(workers_of_rank(next).end - 1), move || me * 3);
        assert_eq!(h.join_async().wait(), me * 3);
        ok("join");

        // segment
        let all: Vec<usize> = (0..n).collect();
        let sym = alloc_symmetric(&all, 64, Rights::ALL).expect("alloc_symmetric");
        let s = sym.on(next);
        s.put_async(8, vec![me as u8 + 1; 8])
            .wait()
            .expect("put_async");
        let b = s.get_async(8, 8).wait().expect("get_async");
        assert_eq!(b, vec![me as u8 + 1; 8]);
        let old = s.fetch_add_async(16, 5).wait().expect("fetch_add_async");
        assert_eq!(old, 0);
        let old = s.swap_async(16, 40).wait().expect("swap_async");
        assert_eq!(old, 5);
        let cas = s.compare_exchange_async(16, 40, 41).wait().expect("cas");
        assert_eq!(cas, Ok(40));
        let cas = s.compare_exchange_async(16, 40, 42).wait().expect("cas");
        assert_eq!(cas, Err(41));
        handshake(next, prev);
        let mut mine = [0u8; 16];
        sym.local().read(8, &mut mine).expect("read");
        assert_eq!(&mine[..8], &[prev as u8 + 1; 8]);
        assert_eq!(u64::from_ne_bytes(mine[8..].try_into().unwrap()), 41);
        handshake(next, prev);
        ok("segment");

        println!("futures_check: rank {me} of {n} passed");
    })
    .expect("the run ends normally");
}
