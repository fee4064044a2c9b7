//! `gsm-segcheck [MODE]`: the multi-rank check of `gossamer::segment` and `gossamer::stream`, run
//! by `examples/filecopy/tests/` under `gsmrun -np 2` (on one host, over tcp, and across two
//! namespace hosts). Each check prints `segcheck: NAME ok` on rank 0; any failure panics, which
//! ends the job with a report.
//!
//! MODE `all` (the default) runs every check; `writer-dies` has rank 0's stream writer end its
//! process in the middle of a stream, and `reader-dies` rank 1's reader, to check that the job
//! ends with a report rather than hangs. With `GSM_SEGCHECK_RMA` set (the ofi run), every rank
//! must have done some segment operations by RMA.

#[path = "segcheck/typed.rs"]
mod typed;

use std::io::{Read, Write};

use gossamer::segment::{self, Access, Right, Rights, SegmentError, SegmentRef};
use gossamer::{Config, WorkerId, rank, recv, send, spawn_on, stream, workers_of_rank};

const WORKERS: usize = 2;

fn first(r: usize) -> WorkerId {
    WorkerId::new(workers_of_rank(r).start)
}

fn say(what: &str) {
    if rank() == 0 {
        println!("segcheck: {what} ok");
    }
}

/// Rank 0 sends `h` to rank 1 under `tag`; rank 1 gets it.
fn share(tag: u64, h: Option<SegmentRef>) -> SegmentRef {
    if rank() == 0 {
        send(first(1), tag, h.unwrap());
        gossamer::flush();
        h.unwrap()
    } else {
        recv(first(0), tag)
    }
}

/// Waits for the other rank to reach the same point.
fn barrier(tag: u64) {
    let other = 1 - rank();
    send(first(other), tag, 0u8);
    let _: u8 = recv(first(other), tag);
}

fn each_operation() {
    let sym = segment::alloc_symmetric(&[0, 1], 1 << 20, Rights::ALL).unwrap();
    let peer = sym.on(1 - rank());
    let me = rank() as u8;
    let data: Vec<u8> = (0..100_000u32).map(|i| (i as u8) ^ me).collect();
    peer.put(4096, &data).unwrap();
    peer.put_slice(8, &[0u64, 0]).unwrap();
    barrier(1);
    let mut back = vec![0u8; 100_000];
    sym.on(rank()).get(4096, &mut back).unwrap();
    let other = 1 - me;
    assert!(
        back.iter()
            .enumerate()
            .all(|(i, &b)| b == (i as u8) ^ other),
        "the other rank's put"
    );
    peer.get(4096, &mut back).unwrap();
    assert!(back == data, "get of my own put on the peer");
    let mut v = [0u64; 2];
    peer.get_slice(8, &mut v).unwrap();
    // Atomics on word 0 of rank 0's segment from both ranks.
    let w = sym.on(0);
    w.fetch_add(0, 1 + rank() as u64).unwrap();
    barrier(2);
    assert_eq!(w.fetch_add(0, 0).unwrap(), 3);
    barrier(3);
    if rank() == 1 {
        assert_eq!(w.compare_exchange(0, 3, 10).unwrap(), Ok(3));
        assert_eq!(w.compare_exchange(0, 3, 11).unwrap(), Err(10));
        assert_eq!(w.swap(0, 20).unwrap(), 10);
        let p: Vec<_> = (0..8u64)
            .map(|i| peer.put_nb(200_000 + i * 1000, vec![i as u8; 1000]))
            .collect();
        let g = peer.get_nb(4096, 16);
        segment::wait_all();
        for x in p {
            x.wait().unwrap();
        }
        assert_eq!(g.wait().unwrap(), data[..16]);
        let mut b = [0u8; 1000];
        peer.get(207_000, &mut b).unwrap();
        assert_eq!(b, [7u8; 1000]);
    }
    barrier(4);
    assert_eq!(w.swap(0, 20).unwrap(), 20);
    barrier(5); // before either rank frees its segment
    say("each operation across ranks");
}

fn violations() {
    let seg = (rank() == 0).then(|| segment::export(4096, Rights::READ, Access::All).unwrap());
    if let Some(s) = &seg {
        s.handle().put(0, &[5u8; 4096]).unwrap();
    }
    let h = share(10, seg.as_ref().map(|s| s.handle()));
    if rank() == 1 {
        let e = h.put(0, b"no").unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::Denied {
                    right: Right::Write,
                    offset: 0,
                    rank: 1,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("write") && e.to_string().contains("offset 0"),
            "{e}"
        );
        let e = h.fetch_add(8, 1).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::Denied {
                    right: Right::Atomic,
                    ..
                }
            ),
            "{e}"
        );
        let e = h.get(4000, &mut [0u8; 200]).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::OutOfBounds {
                    offset: 4000,
                    len: 200,
                    size: 4096,
                    right: Right::Read,
                    ..
                }
            ),
            "{e}"
        );
        let mut b = [0u8; 16];
        h.get(4080, &mut b).unwrap();
        assert_eq!(b, [5u8; 16]);
    }
    barrier(11);
    // A segment for rank 0 only: rank 1 may not even read; a misaligned atomic is refused too.
    let only =
        (rank() == 0).then(|| segment::export(64, Rights::ALL, Access::Ranks(&[0])).unwrap());
    let atomics = (rank() == 0).then(|| segment::export(64, Rights::ATOMIC, Access::All).unwrap());
    let h2 = share(12, only.as_ref().map(|s| s.handle()));
    let h3 = share(13, atomics.as_ref().map(|s| s.handle()));
    if rank() == 1 {
        let e = h2.get(0, &mut [0u8; 8]).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::Denied {
                    right: Right::Read,
                    ..
                }
            ),
            "{e}"
        );
        let e = h3.fetch_add(4, 1).unwrap_err();
        assert!(
            matches!(e, SegmentError::Misaligned { offset: 4, .. }),
            "{e}"
        );
        assert_eq!(h3.fetch_add(8, 1).unwrap(), 0);
    }
    barrier(14);
    // Revocation, then freeing: the old handles are stale.
    let fresh = seg.as_ref().map(|s| s.revoke());
    barrier(15);
    if rank() == 1 {
        let e = h.get(0, &mut [0u8; 8]).unwrap_err();
        assert!(matches!(e, SegmentError::Stale { current: 2, .. }), "{e}");
    }
    let fresh = share(16, fresh);
    if rank() == 1 {
        fresh.get(0, &mut [0u8; 8]).unwrap();
    }
    barrier(17);
    if let Some(s) = seg {
        let mut b = [0u8; 4096];
        s.read(0, &mut b).unwrap();
        assert_eq!(b, [5u8; 4096], "refused operations touched the data");
        let mut w = [0u8; 8];
        atomics.as_ref().unwrap().read(8, &mut w).unwrap();
        assert_eq!(u64::from_le_bytes(w), 1);
        drop(s);
    }
    barrier(18);
    if rank() == 1 {
        let e = fresh.get(0, &mut [0u8; 8]).unwrap_err();
        assert!(matches!(e, SegmentError::Stale { current: 0, .. }), "{e}");
        assert!(e.to_string().contains("freed"), "{e}");
    }
    barrier(19);
    say("violations from another rank");
}

fn concurrent_fetch_add() {
    const PER: u64 = 2000;
    let sym = segment::alloc_symmetric(&[0, 1], 64, Rights::ALL).unwrap();
    let target = sym.on(0);
    let fibers: Vec<_> = workers_of_rank(rank())
        .map(|w| {
            spawn_on(WorkerId::new(w), move || {
                for _ in 0..PER {
                    target.fetch_add(8, 1).unwrap();
                }
            })
        })
        .collect();
    for f in fibers {
        f.join();
    }
    barrier(20);
    let total = PER * (2 * WORKERS) as u64;
    assert_eq!(
        target.fetch_add(8, 0).unwrap(),
        total,
        "fetch_adds from every worker of every rank"
    );
    barrier(21);
    say("concurrent fetch_add from every worker of every rank");
}

fn notifications() {
    let seg = (rank() == 0).then(|| segment::export(1 << 16, Rights::ALL, Access::All).unwrap());
    let h = share(30, seg.as_ref().map(|s| s.handle()));
    if rank() == 1 {
        for i in 0..32u64 {
            h.put_notify(i * 2000, &vec![i as u8 + 1; 2000], 100 + i)
                .unwrap();
        }
    } else if let Some(s) = &seg {
        for i in 0..32u64 {
            let n = s.next_notification();
            assert_eq!(
                (n.source, n.offset, n.len, n.word),
                (1, i * 2000, 2000, 100 + i)
            );
            let mut b = vec![0u8; 2000];
            s.read(n.offset, &mut b).unwrap();
            assert!(
                b.iter().all(|&x| x == i as u8 + 1),
                "notification {i} before its data"
            );
        }
    }
    barrier(31);
    say("notifications after their data");
}

fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn streams() {
    const N: usize = 3_000_000;
    if rank() == 0 {
        let a = spawn_on(first(0), || {
            let mut w = stream::connect(first(1), 1).unwrap();
            let d = pattern(1, N);
            let (mut at, mut len) = (0, 1usize);
            while at < N {
                let n = len.min(N - at);
                w.write_all(&d[at..at + n]).unwrap();
                (at, len) = (at + n, (len * 13 + 5) % 70_000 + 1);
            }
            let most = w.most_in_flight();
            w.finish().unwrap();
            most
        });
        let mut w2 = stream::connect(first(1), 2).unwrap();
        w2.write_all(&pattern(2, N / 3)).unwrap();
        w2.finish().unwrap();
        let most = a.join();
        assert!(
            most <= (1 << 20) + (128 << 10),
            "the writer had {most} bytes in flight"
        );
    } else {
        let mut r1 = stream::accept(first(0), 1).unwrap();
        let mut r2 = stream::accept(first(0), 2).unwrap();
        let mut v2 = Vec::new();
        r2.read_to_end(&mut v2).unwrap();
        let mut v1 = Vec::new();
        r1.read_to_end(&mut v1).unwrap();
        assert!(v1 == pattern(1, N), "stream 1 differs");
        assert!(v2 == pattern(2, N / 3), "stream 2 differs");
    }
    barrier(40);
    say("two streams at once, random lengths, byte for byte");
}

fn writer_dies() {
    if rank() == 0 {
        let mut w = stream::connect(first(1), 9).unwrap();
        w.write_all(&[1u8; 100_000]).unwrap();
        w.flush().unwrap();
        gossamer::sleep(std::time::Duration::from_millis(100));
        println!("segcheck: writer exits");
        std::process::exit(3);
    } else {
        let mut r = stream::accept(first(0), 9).unwrap();
        let mut v = Vec::new();
        let e = r.read_to_end(&mut v);
        println!(
            "segcheck: reader saw {:?} after {} bytes",
            e.as_ref().map_err(|e| e.kind()),
            v.len()
        );
        gossamer::fail_job(format!("the stream's writer died: {e:?}"));
    }
}

fn reader_dies() {
    if rank() == 1 {
        let _r = stream::accept(first(0), 8).unwrap();
        gossamer::sleep(std::time::Duration::from_millis(100));
        println!("segcheck: reader exits");
        std::process::exit(4);
    } else {
        let mut w = stream::connect(first(1), 8).unwrap();
        let block = [2u8; 65536];
        let e = loop {
            if let Err(e) = w.write_all(&block) {
                break e;
            }
        };
        println!("segcheck: writer saw {:?}: {e}", e.kind());
        gossamer::fail_job(format!("the stream's reader died: {e}"));
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let r = gossamer::run(Config::default().workers(WORKERS), move || {
        assert_eq!(gossamer::rank_count(), 2, "run gsm-segcheck as 2 ranks");
        match mode.as_str() {
            "all" => {
                each_operation();
                violations();
                concurrent_fetch_add();
                typed::typed_atomics(share, barrier);
                say("typed atomics of every type and operation across ranks");
                notifications();
                streams();
                if std::env::var_os("GSM_SEGCHECK_RMA").is_some() {
                    // Over ofi, segments must have used RMA, not only delegated requests.
                    let n = segment::rma_operations();
                    assert!(n > 0, "rank {}: no segment operation went by RMA", rank());
                    say(&format!("{n} operations by RMA"));
                }
            }
            "writer-dies" => writer_dies(),
            "reader-dies" => reader_dies(),
            m => gossamer::fail_job(format!("gsm-segcheck: unknown mode {m}")),
        }
    });
    if let Err(e) = r {
        gossamer::eprint_line(format!("gsm-segcheck: {e}"));
        std::process::exit(1);
    }
}
