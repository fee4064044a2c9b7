//! Tests of streams within one process (the ring mapped by the writer). Streams between ranks and
//! hosts are tested through `gsmrun` in `examples/filecopy/tests/`.

use super::*;
use crate::{Config, WorkerId, run, spawn_on};
use std::io::{BufRead, Read, Write};

/// The bytes a seeded generator makes (xorshift), so both sides agree without sharing a buffer.
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

#[test]
fn random_lengths_arrive_byte_for_byte() {
    run(Config::default().workers(2), || {
        let w = spawn_on(WorkerId::new(1), || {
            let opts_cap = 8192u64;
            let mut w = connect(WorkerId::new(0), 1).unwrap();
            let data = pattern(42, 300_000);
            let mut at = 0;
            let mut len = 1usize;
            while at < data.len() {
                let n = len.min(data.len() - at);
                w.write_all(&data[at..at + n]).unwrap();
                at += n;
                len = (len * 7 + 3) % 20_000 + 1;
            }
            let most = w.most_in_flight();
            w.finish().unwrap();
            assert!(
                most <= opts_cap,
                "{most} bytes in flight with a ring of {opts_cap}"
            );
        });
        let mut r = accept_with(
            WorkerId::new(1),
            1,
            Options {
                capacity: 8192,
                chunk: 4096,
            },
        )
        .unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 777];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got.len(), 300_000);
        assert!(got == pattern(42, 300_000), "the bytes differ");
        w.join();
    })
    .unwrap();
}

#[test]
fn a_slow_reader_bounds_the_writer() {
    run(Config::default().workers(2), || {
        let cap = 16_384u64;
        let w = spawn_on(WorkerId::new(1), move || {
            let mut w = connect(WorkerId::new(0), 2).unwrap();
            let block = [7u8; 1000];
            for _ in 0..200 {
                w.write_all(&block).unwrap();
            }
            let most = w.most_in_flight();
            w.finish().unwrap();
            most
        });
        let mut r = accept_with(
            WorkerId::new(1),
            2,
            Options {
                capacity: cap as usize,
                chunk: 4096,
            },
        )
        .unwrap();
        let mut total = 0u64;
        loop {
            // Read slowly: the writer must wait, not buffer.
            crate::sleep(std::time::Duration::from_micros(200));
            let b = r.buffered();
            assert!(b <= cap, "{b} bytes waiting in a ring of {cap}");
            let n = r.fill_buf().unwrap().len();
            if n == 0 {
                break;
            }
            let n = n.min(3000);
            r.consume(n);
            total += n as u64;
        }
        assert_eq!(total, 200_000);
        let most = w.join();
        assert!(
            most <= cap && most >= cap / 2,
            "the writer had {most} bytes in flight (ring {cap})"
        );
    })
    .unwrap();
}

#[test]
fn several_streams_between_the_same_workers_and_lent_slots() {
    run(Config::default().workers(2), || {
        let w = spawn_on(WorkerId::new(1), || {
            let mut a = connect(WorkerId::new(0), 10).unwrap();
            let mut b = connect(WorkerId::new(0), 11).unwrap();
            for i in 0..100u32 {
                a.write_all(&i.to_le_bytes()).unwrap();
                let mut slot = b.lend(4).unwrap();
                let n = slot.len().min(4);
                slot.bytes_mut()[..n].copy_from_slice(&(i * 3).to_le_bytes()[..n]);
                slot.commit(n).unwrap();
                if n < 4 {
                    b.write_all(&(i * 3).to_le_bytes()[n..]).unwrap();
                }
            }
            a.finish().unwrap();
            b.finish().unwrap();
        });
        let mut ra = accept(WorkerId::new(1), 10).unwrap();
        let mut rb = accept(WorkerId::new(1), 11).unwrap();
        let (mut va, mut vb) = (Vec::new(), Vec::new());
        ra.read_to_end(&mut va).unwrap();
        rb.read_to_end(&mut vb).unwrap();
        for i in 0..100u32 {
            let at = i as usize * 4;
            assert_eq!(u32::from_le_bytes(va[at..at + 4].try_into().unwrap()), i);
            assert_eq!(
                u32::from_le_bytes(vb[at..at + 4].try_into().unwrap()),
                i * 3
            );
        }
        w.join();
    })
    .unwrap();
}

#[test]
fn a_writer_that_panics_aborts_the_stream_and_a_gone_reader_breaks_the_pipe() {
    run(Config::default().workers(2), || {
        let w = spawn_on(WorkerId::new(1), || {
            let mut w = connect(WorkerId::new(0), 20).unwrap();
            w.write_all(b"partial").unwrap();
            if w.position() == 7 {
                panic!("the writer dies");
            }
        });
        let mut r = accept(WorkerId::new(1), 20).unwrap();
        let mut v = Vec::new();
        let e = r.read_to_end(&mut v).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionAborted, "{e}");
        assert!(e.to_string().contains("aborted"), "{e}");
        assert_eq!(v, b"partial");
        assert!(w.try_join().is_err());

        let w = spawn_on(WorkerId::new(1), || {
            let mut w = connect(WorkerId::new(0), 21).unwrap();
            let block = [1u8; 4096];
            loop {
                if let Err(e) = w.write_all(&block) {
                    return e.kind() == std::io::ErrorKind::BrokenPipe;
                }
            }
        });
        let r = accept_with(
            WorkerId::new(1),
            21,
            Options {
                capacity: 8192,
                chunk: 4096,
            },
        )
        .unwrap();
        crate::sleep(std::time::Duration::from_millis(5));
        drop(r);
        assert!(w.join(), "the writer's error was not BrokenPipe");
    })
    .unwrap();
}

/// Many waits on a full ring, each racing a reader that takes everything at once: a writer that
/// waited for `head` to move from a value loaded after the reader had emptied the ring would
/// stall for ever (a benchmark found that race; this stress makes it likely, not certain).
#[test]
fn a_full_ring_emptied_while_the_writer_looks_does_not_stall_it() {
    run(Config::default().workers(2), || {
        let w = spawn_on(WorkerId::new(1), || {
            let mut w = connect(WorkerId::new(0), 30).unwrap();
            let block = [9u8; 4096];
            for _ in 0..3_000 {
                w.write_all(&block).unwrap();
            }
            w.finish().unwrap();
        });
        let mut r = accept_with(
            WorkerId::new(1),
            30,
            Options {
                capacity: 4096,
                chunk: 4096,
            },
        )
        .unwrap();
        let mut total = 0u64;
        loop {
            let n = r.fill_buf().unwrap().len();
            if n == 0 {
                break;
            }
            r.consume(n);
            total += n as u64;
        }
        assert_eq!(total, 3_000 * 4096);
        w.join();
    })
    .unwrap();
}

/// A `connect` whose reader never calls `accept`, and an `accept` whose writer never calls
/// `connect`, end the run as deadlocked with a report that names the stream and the call that
/// did not come (not only a 64-bit tag).
#[test]
fn a_stream_without_its_peer_is_reported_by_name() {
    let r = run(Config::default().workers(2), || {
        spawn_on(WorkerId::new(1), || {
            connect(WorkerId::new(0), 7).map(drop).is_ok()
        })
        .join()
    });
    let msg = r
        .expect_err("a connect without accept cannot finish")
        .to_string();
    assert!(
        msg.contains("the job is deadlocked")
            && msg.contains("a fiber waits for a message from worker 0")
            && msg.contains("stream 7's offer: stream::connect(reader, 7) waits for it until the reader calls stream::accept(writer, 7)"),
        "{msg}"
    );
    let r = run(Config::default().workers(2), || {
        let mut r = accept(WorkerId::new(1), 9).unwrap();
        let mut b = [0u8; 1];
        r.read(&mut b).is_ok()
    });
    let msg = r
        .expect_err("an accept without connect cannot finish")
        .to_string();
    assert!(
        msg.contains("the job is deadlocked")
            && msg.contains("1 message from worker 0 under tag 0x6000000000000009")
            && msg.contains("no fiber received it")
            && msg.contains("an offer left unreceived had no stream::connect"),
        "{msg}"
    );
}
