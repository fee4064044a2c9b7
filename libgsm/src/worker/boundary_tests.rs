//! The trust boundary of a trustee (`libgsm/TRUST_BOUNDARY.md`): a batch from another
//! process runs only exact delegation entries, and takes arguments and results only from their
//! encodings. Each test feeds a batch as one from another process would arrive
//! (`pointers == false`) and checks that it is served, or refused as a protocol error naming the
//! peer, without the forged code or bytes ever being used.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::entry::{Delegated, trampoline};
use super::{Trampoline, WorkerCore, status};
use crate::wire::codeptr;
use crate::wire::record::{Byte, OutQueue, Request, RequestReader, SER, Sink, Src};
use crate::{Config, Error};

static PROBE_RAN: AtomicBool = AtomicBool::new(false);
static DECOY_RAN: AtomicBool = AtomicBool::new(false);
/// What the argument probe took: 0 nothing yet, 1 + the value when it took one, 1 for a refusal.
static ARG_TAKEN: AtomicU64 = AtomicU64::new(0);

/// A delegation kind of this test: its entry is in the binary's table like any other.
struct Probe;

impl Delegated for Probe {
    unsafe fn serve(_: &WorkerCore, _: usize, _: &Request<'_>, _: &mut RequestReader<'_>) {
        PROBE_RAN.store(true, Ordering::SeqCst);
    }
}

/// A kind that takes a `u64` argument, as `apply_with` does.
struct ArgProbe;

impl Delegated for ArgProbe {
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        _: &mut RequestReader<'_>,
    ) {
        // SAFETY: the tests below write a `u64` or its encoding as the argument.
        let taken = unsafe { crate::trust::take_arg::<u64>(core, client, rec) };
        ARG_TAKEN.store(taken.map_or(1, |v| v + 1), Ordering::SeqCst);
    }
}

/// A function of the trampoline's shape inside this binary's text, but no delegation entry:
/// what a forged offset could name.
unsafe fn decoy(_: &WorkerCore, _: usize, _: &Request<'_>, _: &mut RequestReader<'_>) {
    DECOY_RAN.store(true, Ordering::SeqCst);
}

fn offset(t: Trampoline) -> u64 {
    codeptr::offset_of(t as usize)
}

/// One request batch with one record naming code `code`, as the staging code writes it for
/// another rank.
fn request(code: u64, arg: Option<&[u8]>, flags: u8) -> Vec<Byte> {
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    q.push_request(
        Some(code),
        0,
        0,
        0,
        Src::of(&()),
        arg.map(Src::slice),
        flags,
    );
    q.seal();
    q.queued.pop_front().expect("a sealed batch")
}

/// One response batch answering request 0 with `status` and `body`.
fn response(status: u8, body: &[u8]) -> Vec<Byte> {
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    q.push_response(0, status, Src::slice(body));
    q.seal();
    q.queued.pop_front().expect("a sealed batch")
}

/// Runs a 1-worker job that serves (`requests`) or completes `bytes` as a batch from another
/// process; returns the job's outcome.
fn feed_foreign(bytes: Vec<Byte>, requests: bool) -> Result<(), Error> {
    crate::run(Config::default().workers(1), move || {
        let core = super::core().expect("on a worker");
        if requests {
            core.inbox.serve_batch(core, 0, &bytes, false);
        } else {
            core.inbox.complete_batch(core, 0, &bytes, false);
        }
    })
}

fn protocol_error_saying(r: Result<(), Error>, want: &str) {
    match r {
        Err(Error::Protocol {
            rank: 0, detail, ..
        }) => {
            assert!(detail.contains(want), "{detail:?} should say {want:?}")
        }
        other => panic!("expected a protocol error saying {want:?}, got {other:?}"),
    }
}

#[test]
fn a_batch_from_another_process_runs_only_exact_delegation_entries() {
    let probe = offset(trampoline::<Probe>());
    feed_foreign(request(probe, None, 0), true).expect("an entry is served");
    assert!(PROBE_RAN.load(Ordering::SeqCst), "the entry ran");

    // In the text, of the right shape, but no entry; and one byte into an entry.
    for code in [offset(decoy), probe + 1] {
        let r = feed_foreign(request(code, None, 0), true);
        protocol_error_saying(r, "which is no delegation entry of this program");
    }
    assert!(
        !DECOY_RAN.load(Ordering::SeqCst),
        "a forged offset was called"
    );
}

#[test]
fn an_argument_from_another_process_is_taken_only_from_its_encoding() {
    let code = offset(trampoline::<ArgProbe>());
    let encoded = postcard::to_allocvec(&41u64).expect("encodes");
    feed_foreign(request(code, Some(&encoded), SER), true).expect("an encoding is taken");
    assert_eq!(
        ARG_TAKEN.swap(0, Ordering::SeqCst),
        42,
        "the encoded 41 was taken"
    );

    // The bytes of a `u64`: plain data, but the receiver never reads another process's bytes
    // as a value of its type, whatever the type (a `Vec` would carry a pointer).
    let r = feed_foreign(request(code, Some(&7u64.to_ne_bytes()), 0), true);
    protocol_error_saying(r, "as the bytes of its type, not an encoding");
    assert_eq!(ARG_TAKEN.load(Ordering::SeqCst), 1, "refused, not taken");
}

#[test]
fn a_result_from_another_process_as_the_bytes_of_its_type_is_refused() {
    let r = feed_foreign(response(status::OK, &5u64.to_ne_bytes()), false);
    protocol_error_saying(r, "whose result is the bytes of its type");
}

static SECRET: [u8; 8] = *b"secret!!";
static FAR_PROBE_RAN: AtomicBool = AtomicBool::new(false);

struct FarProbe;

impl Delegated for FarProbe {
    unsafe fn serve(_: &WorkerCore, _: usize, _: &Request<'_>, _: &mut RequestReader<'_>) {
        FAR_PROBE_RAN.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_record_parked_by_a_rank_this_rank_does_not_read_is_refused_unread() {
    use crate::wire::record::{FAR, HEADER, KIND_BATCH, LARGE};
    // One record whose body is "parked" at the address of a value of this process: read
    // through the pid the job gives for the sender, it would be this process's own memory.
    let mut rec = vec![0u8, LARGE | FAR];
    rec.extend_from_slice(&8u16.to_le_bytes());
    rec.extend_from_slice(&[0; 12]);
    rec.extend_from_slice(&(SECRET.as_ptr() as u64).to_le_bytes());
    rec.extend_from_slice(&8u64.to_le_bytes());
    rec.extend_from_slice(&1u64.to_le_bytes());
    rec.extend_from_slice(&0u64.to_le_bytes());
    let mut b = ((HEADER + rec.len()) as u32).to_le_bytes().to_vec();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&KIND_BATCH.to_le_bytes());
    b.extend_from_slice(&rec);
    b.extend_from_slice(&offset(trampoline::<FarProbe>()).to_le_bytes());
    let bytes = b.into_iter().map(std::mem::MaybeUninit::new).collect();
    let r = feed_foreign(bytes, true);
    protocol_error_saying(r, "which this rank does not read from that rank");
    assert!(
        !FAR_PROBE_RAN.load(Ordering::SeqCst),
        "the parked body was read and served"
    );
}

static FORGED_TAKEN: AtomicBool = AtomicBool::new(false);

#[test]
fn only_the_worker_a_request_went_to_may_answer_it() {
    let r = crate::run(Config::default().workers(2), || {
        let core = super::core().expect("on a worker");
        let t = crate::entrust_on(crate::WorkerId::new(1), || 5u64);
        // Request 0 goes to worker 1; worker 0 (a stand-in for any other peer) answers it first.
        t.apply_then(
            |n| *n,
            |v| {
                if v == 77 {
                    FORGED_TAKEN.store(true, Ordering::SeqCst);
                }
            },
        );
        let mut q = OutQueue::new(4096, Sink::Loopback, false);
        for req in 0..4 {
            q.push_response(req, status::OK, Src::of(&77u64));
        }
        q.seal();
        let forged = q.queued.pop_front().expect("a sealed batch");
        core.inbox.complete_batch(core, 0, &forged, true);
    });
    protocol_error_saying(r.map(|_| ()), "which is not waiting for one from it");
    assert!(
        !FORGED_TAKEN.load(Ordering::SeqCst),
        "a forged answer completed the request"
    );
}

#[test]
fn a_code_table_longer_than_a_batch_can_index_is_refused() {
    use crate::wire::record::{HEADER, KIND_BATCH, MAX_TABLE};
    let probe = offset(trampoline::<Probe>());
    let mut rec = vec![0u8, 0];
    rec.extend_from_slice(&0u16.to_le_bytes());
    rec.extend_from_slice(&[0; 12]);
    for n in [MAX_TABLE, MAX_TABLE + 1, usize::from(u16::MAX)] {
        let mut b = ((HEADER + rec.len()) as u32).to_le_bytes().to_vec();
        b.extend_from_slice(&(n as u16).to_le_bytes());
        b.extend_from_slice(&KIND_BATCH.to_le_bytes());
        b.extend_from_slice(&rec);
        for _ in 0..n {
            b.extend_from_slice(&probe.to_le_bytes());
        }
        let r = feed_foreign(
            b.into_iter().map(std::mem::MaybeUninit::new).collect(),
            true,
        );
        if n <= MAX_TABLE {
            r.expect("a table a batch can index is served");
        } else {
            protocol_error_saying(r, "more than a batch can index");
        }
    }
}
