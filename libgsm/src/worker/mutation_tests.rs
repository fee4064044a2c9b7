//! A seeded mutation test of the dispatcher: valid request and response batches, as another
//! process's staging code writes them, corrupted 100,000 ways and served or completed as batches
//! from another process. None may panic, none may reach code but an exact delegation entry, and
//! each is either refused (the job's failure, a protocol or count error naming the peer) or
//! served through the entries it names. The readers' own mutation test is in `wire`.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::entry::{Delegated, trampoline};
use super::{CONTROL_RELEASE, Trampoline, WorkerCore, status};
use crate::wire::codeptr;
use crate::wire::record::{Byte, OutQueue, Request, RequestReader, SER, SER_STATUS, Sink, Src};
use crate::{Config, Error};

/// Batches fed, in all.
const BATCHES: usize = 100_000;
/// The seed; a failure prints the batch's number, from which its corruption is made again.
const SEED: u64 = 0x6773_6d5f_6d75_7461;

static PROBE_CALLS: AtomicU64 = AtomicU64::new(0);
static DECOY_RAN: AtomicBool = AtomicBool::new(false);

struct Probe;

impl Delegated for Probe {
    unsafe fn serve(_: &WorkerCore, _: usize, rec: &Request<'_>, more: &mut RequestReader<'_>) {
        // Touch every byte the reader handed out: they must lie inside the batch.
        let sum: u32 = rec
            .cap()
            .iter()
            .chain(rec.arg())
            .map(|b| {
                // SAFETY: the reader hands out only bytes of the batch, which the test initialised.
                u32::from(unsafe { b.assume_init() })
            })
            .sum();
        std::hint::black_box(sum);
        while let Some((_, cap)) = more.next_continuation() {
            std::hint::black_box(cap.len());
        }
        PROBE_CALLS.fetch_add(1, Ordering::Relaxed);
    }
}

struct ArgProbe;

impl Delegated for ArgProbe {
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        _: &mut RequestReader<'_>,
    ) {
        // SAFETY: the valid batches carry a `u64`'s encoding; a corrupted one is refused or
        // decoded with every check `postcard` makes.
        let _ = unsafe { crate::trust::take_arg::<Vec<u64>>(core, client, rec) };
        PROBE_CALLS.fetch_add(1, Ordering::Relaxed);
    }
}

/// A function of the trampoline's shape that is no entry: corrupted offsets must never reach it.
unsafe fn decoy(_: &WorkerCore, _: usize, _: &Request<'_>, _: &mut RequestReader<'_>) {
    DECOY_RAN.store(true, Ordering::SeqCst);
}

fn offset(t: Trampoline) -> u64 {
    codeptr::offset_of(t as usize)
}

fn sealed(mut q: OutQueue) -> Vec<u8> {
    q.seal();
    let b = q.queued.pop_front().expect("a sealed batch");
    // SAFETY: the staging code initialises every byte of a sealed batch it wrote.
    b.iter().map(|x| unsafe { x.assume_init() }).collect()
}

/// Valid batches from another rank: requests (runs of one kind, two kinds, an argument, a
/// reference-counting record) and responses (an encoded result, a failure).
fn valid_batches() -> Vec<(Vec<u8>, bool)> {
    let (probe, arg) = (
        offset(trampoline::<Probe>()),
        offset(trampoline::<ArgProbe>()),
    );
    let mut out = Vec::new();
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    for req in 0..6 {
        q.push_request(Some(probe), 3, 1, req, Src::of(&[req as u8; 8]), None, 0);
    }
    out.push((sealed(q), true));
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    let enc = postcard::to_allocvec(&vec![7u64, 8, 9]).expect("encodes");
    for req in 0..4 {
        q.push_request(Some(probe), 1, 2, req, Src::of(&7u32), None, 0);
        q.push_request(
            Some(arg),
            1,
            2,
            req,
            Src::of(&()),
            Some(Src::slice(&enc)),
            SER,
        );
    }
    out.push((sealed(q), true));
    // A record naming a function that is no entry: the batch is refused before any record
    // runs, and no corruption of it may reach the function.
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    q.push_request(Some(probe), 0, 0, 1, Src::of(&1u64), None, 0);
    q.push_request(Some(offset(decoy)), 0, 0, 2, Src::of(&2u64), None, 0);
    out.push((sealed(q), true));
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    let mut words = [0u8; 16];
    words[..8].copy_from_slice(&42u64.to_le_bytes());
    q.push_request(None, 0, 0, CONTROL_RELEASE, Src::slice(&words), None, 0);
    q.push_request(Some(probe), 0, 0, 9, Src::of(&()), None, 0);
    out.push((sealed(q), true));
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    let body = postcard::to_allocvec(&(1u64, String::from("answer"))).expect("encodes");
    q.push_response(1, status::OK | SER_STATUS, Src::slice(&body));
    q.push_response(2, status::PANICKED, Src::slice(b"gossamer: a message"));
    q.push_response(3, status::DEAD, Src::slice(&[]));
    out.push((sealed(q), false));
    out
}

/// xorshift64*: the test's only randomness, from [`SEED`].
struct Rng(Cell<u64>);

impl Rng {
    fn next(&self) -> u64 {
        let mut x = self.0.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One corruption of `b`: bit flips, a byte or a 32-bit field overwritten (with a boundary value
/// or a random one), the batch cut short or extended, or two bytes swapped.
fn corrupt(rng: &Rng, b: &mut Vec<u8>) {
    match rng.below(7) {
        0 => {
            for _ in 0..=rng.below(4) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
        }
        1 => {
            let i = rng.below(b.len());
            b[i] = rng.next() as u8;
        }
        2 => {
            let i = rng.below(b.len().saturating_sub(3));
            let v = [
                0u32,
                1,
                0x7fff_ffff,
                u32::MAX,
                b.len() as u32,
                rng.next() as u32,
            ];
            let v = v[rng.below(v.len())];
            b[i..i + 4].copy_from_slice(&v.to_le_bytes());
        }
        3 => b.truncate(rng.below(b.len())),
        4 => b.extend((0..=rng.below(64)).map(|_| rng.next() as u8)),
        5 => {
            let (i, j) = (rng.below(b.len()), rng.below(b.len()));
            b.swap(i, j);
        }
        _ => {
            // The batch's own length word, the first thing a reader trusts.
            let v = rng.next() as u32 % (2 * b.len() as u32 + 8);
            b[..4].copy_from_slice(&v.to_le_bytes());
        }
    }
}

#[test]
fn corrupted_batches_from_another_process_are_refused_or_served_never_run_astray() {
    let counts = std::sync::Arc::new(std::sync::Mutex::new(None));
    let out = counts.clone();
    let outcome = crate::run(Config::default().workers(1), move || {
        let core = super::core().expect("on a worker");
        let valid = valid_batches();
        let rng = Rng(Cell::new(SEED));
        let (mut refused, mut served, mut panics) = (0usize, 0usize, Vec::new());
        for n in 0..BATCHES {
            let (base, requests) = &valid[n % valid.len()];
            let mut b = base.clone();
            corrupt(&rng, &mut b);
            let bytes: Vec<Byte> = b.iter().map(|&x| std::mem::MaybeUninit::new(x)).collect();
            let before = core.shared.failures();
            let r = catch_unwind(AssertUnwindSafe(|| {
                if *requests {
                    core.inbox.serve_batch(core, 0, &bytes, false);
                } else {
                    core.inbox.complete_batch(core, 0, &bytes, false);
                }
            }));
            if r.is_err() {
                panics.push(n);
            } else if core.shared.failures() > before {
                refused += 1;
            } else {
                served += 1;
            }
            // Whatever the batches staged for their client (this worker) is dropped unsent.
            for requests in [true, false] {
                let q = core.outbox().queue_for_tests(0, requests);
                let mut q = q.borrow_mut();
                q.seal();
                q.queued.clear();
            }
        }
        *out.lock().expect("not poisoned") = Some((refused, served, panics));
    });
    // Refusals end the run with the first of them as its error.
    match outcome {
        Ok(()) | Err(Error::Protocol { .. } | Error::TrustCount { .. }) => {}
        Err(e) => panic!("seed {SEED:#x}: the run failed otherwise: {e}"),
    }
    let (refused, served, panics) = counts
        .lock()
        .expect("not poisoned")
        .take()
        .expect("the run's main ran to its end");
    assert!(
        panics.is_empty(),
        "seed {SEED:#x}: batches {panics:?} panicked"
    );
    assert!(
        !DECOY_RAN.load(Ordering::SeqCst),
        "seed {SEED:#x}: a non-entry was called"
    );
    assert_eq!(refused + served, BATCHES);
    assert!(
        refused > BATCHES / 4,
        "most corruptions are refused ({refused} of {BATCHES})"
    );
    assert!(
        PROBE_CALLS.load(Ordering::Relaxed) > 0,
        "some corruptions still serve"
    );
}
