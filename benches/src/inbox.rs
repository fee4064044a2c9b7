//! `gsm-bench inbox`: the wire's multi-producer inbox (`wire/inbox.rs`) against one slot ring per
//! producer (`wire/ring.rs`, how the runtime connects workers today), with 1, 2 and 4 producer
//! threads and one consumer, records per second.
//!
//! ```text
//! gsm-bench inbox [--runs N] [--budget-ms B] [--producers 1,2,4] [--batch 8] [--json FILE]
//! ```
//!
//! Both sides move the same records: 64-byte slots, one record per slot, published in batches of
//! `--batch` slots. The inbox reserves each whole batch with one compare-and-swap, waiting for room
//! for all of it; a ring producer publishes as many of the batch's slots as its ring has room for,
//! one by one, with no atomic. Both get about the same slots: an inbox of `16 × producers` slots
//! (rounded up to a power of two) against `producers` rings of 16. The consumer takes
//! every record it can (the inbox in order, the rings round robin), checks each record's source
//! and sequence number, and counts them; a repetition lasts `--budget-ms`, and its figure is the
//! records consumed over that time. With more threads than cores (4 producers and the consumer
//! on 2 cores) the figure says how each behaves oversubscribed as well.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gossamer::wire::inbox::{InboxLayout, InboxMemory};
use gossamer::wire::ring::{Consumer, RingLayout, RingMemory};

use crate::case::{Case, Figure};
use crate::stats::summarize;

/// Payload bytes of a slot (one record each).
const SLOT: u32 = 64;
/// Slots of each ring; the inbox has this many per producer.
const SLOTS_PER_PRODUCER: u32 = 16;

/// Options of `gsm-bench inbox`.
#[derive(Debug, Clone)]
pub struct Options {
    pub runs: usize,
    pub budget: Duration,
    pub producers: Vec<u32>,
    pub batch: u32,
}

/// A record: the producer's source and its sequence number.
fn record(source: u32, seq: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r[8..12].copy_from_slice(&source.to_le_bytes());
    r
}

/// Checks a record against the sequence expected of its source; the source.
fn check(bytes: &[u8], source: Option<u32>, expected: &mut [u64]) -> anyhow::Result<()> {
    anyhow::ensure!(bytes.len() == 16, "a record of {} bytes", bytes.len());
    let seq = u64::from_le_bytes(bytes[..8].try_into()?);
    let s = u32::from_le_bytes(bytes[8..12].try_into()?);
    anyhow::ensure!(
        source.is_none_or(|src| src == s) && (s as usize) < expected.len(),
        "a record of source {s} arrived as source {source:?}"
    );
    anyhow::ensure!(
        seq == expected[s as usize],
        "source {s}: record {seq} arrived where {} was due",
        expected[s as usize]
    );
    expected[s as usize] += 1;
    Ok(())
}

/// One repetition through an inbox; records per second.
fn inbox_once(producers: u32, batch: u32, budget: Duration) -> anyhow::Result<f64> {
    let slots = (SLOTS_PER_PRODUCER * producers).next_power_of_two();
    let layout = InboxLayout::new(slots, SLOT, producers)?;
    let mem = Arc::new(InboxMemory::new_heap(layout));
    let mut consumer = mem.consumer()?;
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..producers)
        .map(|s| {
            let mut p = mem.producer(s)?;
            let stop = Arc::clone(&stop);
            Ok(std::thread::spawn(move || -> anyhow::Result<()> {
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    match p.try_reserve(batch)? {
                        Some(mut run) => {
                            while run.push(&record(s, seq)) {
                                seq += 1;
                            }
                        }
                        None => std::thread::yield_now(),
                    }
                }
                Ok(())
            }))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut expected = vec![0u64; producers as usize];
    let (start, mut count) = (Instant::now(), 0u64);
    while start.elapsed() < budget {
        let mut got = 0;
        while let Some(r) = consumer.try_poll()? {
            check(r.bytes(), Some(r.source()), &mut expected)?;
            got += 1;
        }
        if got == 0 {
            std::thread::yield_now();
        }
        count += got;
    }
    let elapsed = start.elapsed();
    finish(&stop, threads, || while consumer.poll().is_some() {})?;
    Ok(count as f64 / elapsed.as_secs_f64())
}

/// One repetition through a ring per producer; records per second.
fn rings_once(producers: u32, batch: u32, budget: Duration) -> anyhow::Result<f64> {
    let layout = RingLayout::new(SLOTS_PER_PRODUCER, SLOT)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut consumers: Vec<Consumer> = Vec::new();
    let mut threads = Vec::new();
    for s in 0..producers {
        let (mut p, c) = Arc::new(RingMemory::new_heap(layout)).split();
        consumers.push(c);
        let stop = Arc::clone(&stop);
        threads.push(std::thread::spawn(move || -> anyhow::Result<()> {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // As much of a batch as the ring has room for, as a worker flushes.
                let mut sent = 0;
                while sent < batch {
                    let Some(mut w) = p.try_reserve() else { break };
                    w.buf()[..16].copy_from_slice(&record(s, seq));
                    w.publish(16);
                    seq += 1;
                    sent += 1;
                }
                if sent == 0 {
                    std::thread::yield_now();
                }
            }
            Ok(())
        }));
    }
    let mut expected = vec![0u64; producers as usize];
    let (start, mut count) = (Instant::now(), 0u64);
    while start.elapsed() < budget {
        let mut got = 0;
        for c in consumers.iter_mut() {
            while let Some(r) = c.try_poll()? {
                check(r.bytes(), None, &mut expected)?;
                got += 1;
            }
        }
        if got == 0 {
            std::thread::yield_now();
        }
        count += got;
    }
    let elapsed = start.elapsed();
    finish(&stop, threads, || {
        for c in consumers.iter_mut() {
            while c.poll().is_some() {}
        }
    })?;
    Ok(count as f64 / elapsed.as_secs_f64())
}

/// Stops the producers, draining while they finish (a producer waiting for room must get it).
fn finish(
    stop: &AtomicBool,
    threads: Vec<std::thread::JoinHandle<anyhow::Result<()>>>,
    mut drain: impl FnMut(),
) -> anyhow::Result<()> {
    stop.store(true, Ordering::Relaxed);
    while threads.iter().any(|t| !t.is_finished()) {
        drain();
        std::thread::yield_now();
    }
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("a producer thread panicked"))??;
    }
    Ok(())
}

/// Runs every case; the cases with their figures in Mrecords/s.
pub fn run(opts: &Options) -> anyhow::Result<Vec<Case>> {
    anyhow::ensure!(
        opts.producers.iter().all(|&p| (1..=64).contains(&p)),
        "--producers: each count must be 1..=64"
    );
    anyhow::ensure!(
        (1..=SLOTS_PER_PRODUCER).contains(&opts.batch),
        "--batch must be 1..={SLOTS_PER_PRODUCER}"
    );
    let mut cases = Vec::new();
    for &p in &opts.producers {
        let (mut inbox, mut rings) = (Vec::new(), Vec::new());
        for run in 0..opts.runs {
            crate::report::run_progress(&format!("inbox, {p} producers"), run, opts.runs);
            // Alternate which goes first, so a slow phase of the machine lands on both.
            if run % 2 == 0 {
                inbox.push(inbox_once(p, opts.batch, opts.budget)? / 1e6);
                rings.push(rings_once(p, opts.batch, opts.budget)? / 1e6);
            } else {
                rings.push(rings_once(p, opts.batch, opts.budget)? / 1e6);
                inbox.push(inbox_once(p, opts.batch, opts.budget)? / 1e6);
            }
        }
        cases.push(Case {
            case: format!(
                "{p} producer{} -> 1 consumer, batches of {}",
                if p == 1 { "" } else { "s" },
                opts.batch
            ),
            unit: "Mrecords/s".into(),
            higher_is_better: true,
            gsm: summarize(&inbox),
            peers: vec![Figure {
                name: format!("a slot ring per producer ({SLOTS_PER_PRODUCER} slots each)"),
                summary: summarize(&rings),
            }],
        });
    }
    crate::report::progress_done();
    Ok(cases)
}
