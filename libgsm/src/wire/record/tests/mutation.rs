//! The seeded mutation test of the readers: valid request and response batches and slot streams,
//! staged by the real `OutQueue`, are corrupted (bit flips, byte overwrites, truncations,
//! extensions, length words overwritten or swapped, ranges copied over others) and fed through
//! `wire::fuzzing`, which reads each to the end as a worker reads a peer's batch and checks that
//! every record lies inside its batch. None may panic; each is refused or read within bounds.
//!
//! `GSM_FUZZ_SEED=N` runs another seed; a failure names the seed, the case and the input.
//! `GSM_WIRE_CORPUS=DIR` also writes the valid inputs there, as seeds for the fuzz targets.

use crate::wire::fuzzing::{self, Summary};
use crate::wire::record::{OutQueue, SER, SER_STATUS, Sink, Src};

use super::all_batches;

/// Corrupted inputs fed through the readers per run.
const CASES: u64 = 120_000;
const DEFAULT_SEED: u64 = 0x6773_6d5f_7769_7265;

/// SplitMix64 (Steele, Lea and Flood): small, seedable, the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Lane {
    Requests,
    Responses,
    RequestSlots,
    ResponseSlots,
}

struct Template {
    name: String,
    lane: Lane,
    bytes: Vec<u8>,
}

fn read(lane: Lane, b: &[u8]) -> Result<Summary, &'static str> {
    match lane {
        Lane::Requests => fuzzing::read_requests(b),
        Lane::Responses => fuzzing::read_responses(b),
        Lane::RequestSlots => fuzzing::read_slots(b, true),
        Lane::ResponseSlots => fuzzing::read_slots(b, false),
    }
}

/// Requests of every kind the encoder writes inline: runs of plain records (continuations),
/// captures of 0 to 40 bytes, arguments, the serialised flag, control and release records, two
/// codes in turn and a third.
fn stage_requests(q: &mut OutQueue) {
    let data: Vec<u8> = (0..200u8).collect();
    for round in 0..4u32 {
        for i in 0..6u32 {
            q.push_request(
                Some(0x100),
                1,
                2,
                round * 100 + i,
                Src::slice(&data[..8]),
                None,
                0,
            );
        }
        q.push_request(
            Some(0x100),
            3,
            2,
            round * 100 + 10,
            Src::slice(&data[..8]),
            None,
            0,
        );
        let arg = Src::slice(&data[..(round as usize * 13) % 40]);
        q.push_request(
            Some(0x200),
            4,
            5,
            round * 100 + 11,
            Src::slice(&data[..3]),
            Some(arg),
            SER,
        );
        q.push_request(
            Some(0x300),
            6,
            7,
            round * 100 + 12,
            Src::slice(&[]),
            None,
            0,
        );
        q.push_request(
            Some(0x200),
            6,
            7,
            round * 100 + 13,
            Src::slice(&data[..40]),
            None,
            0,
        );
        q.push_request(
            None,
            1,
            2,
            0,
            Src::slice(&u64::from(round).to_le_bytes()),
            None,
            0,
        );
        q.push_request(
            Some(0x300),
            6,
            7,
            round * 100 + 14,
            Src::slice(&[]),
            None,
            0,
        );
        q.push_request(
            Some(0x300),
            6,
            7,
            round * 100 + 15,
            Src::slice(&[]),
            None,
            0,
        );
        q.push_release(u64::from(round) + 1);
    }
}

fn stage_responses(q: &mut OutQueue) {
    let data: Vec<u8> = (0..200u8).collect();
    for round in 0..4u32 {
        for i in 0..5u32 {
            q.push_response(round * 100 + i, 0, Src::slice(&data[..8]));
        }
        q.push_response(round * 100 + 10, 3, Src::slice(b"boom"));
        q.push_response(
            round * 100 + 11,
            SER_STATUS,
            Src::slice(&data[..(round as usize * 17) % 64]),
        );
        q.push_response(round * 100 + 12, 0, Src::slice(&[]));
        q.push_response(round * 100 + 13, 0, Src::slice(&[]));
        let group: Vec<(u32, std::mem::ManuallyDrop<u64>)> = (0..6)
            .map(|i| {
                (
                    round * 100 + 20 + i,
                    std::mem::ManuallyDrop::new(u64::from(i)),
                )
            })
            .collect();
        q.push_value_responses(0, &group);
    }
}

fn templates() -> Vec<Template> {
    let mut out = Vec::new();
    let mut add = |name: &str, lane: Lane, batches: Vec<Vec<u8>>| {
        for (i, bytes) in batches.into_iter().enumerate() {
            out.push(Template {
                name: format!("{name} #{i}"),
                lane,
                bytes,
            });
        }
    };
    let big = vec![0xA5u8; 1000];
    let huge = vec![0x5Au8; 512 << 10];

    // Within a process, slots of 512 bytes (batches fill and seal); the last batch also holds a
    // pointer-carrying large record, which a reader refuses from another process.
    let mut q = OutQueue::new(512, Sink::Loopback, false);
    stage_requests(&mut q);
    add("requests", Lane::Requests, all_batches(&mut q));
    q.push_request(
        Some(0x100),
        1,
        2,
        9,
        Src::slice(&[1; 4]),
        Some(Src::slice(&big)),
        0,
    );
    add(
        "requests with a pointer",
        Lane::Requests,
        all_batches(&mut q),
    );
    let mut q = OutQueue::new(512, Sink::Loopback, false);
    stage_responses(&mut q);
    add("responses", Lane::Responses, all_batches(&mut q));
    q.push_response(9, 0, Src::slice(&big));
    add(
        "responses with a pointer",
        Lane::Responses,
        all_batches(&mut q),
    );

    // To another rank that can read this process: large bodies are parked (`FAR`).
    let mut q = OutQueue::new(4096, Sink::Loopback, true);
    q.allow_far(false);
    stage_requests(&mut q);
    q.push_request(
        Some(0x400),
        1,
        2,
        77,
        Src::slice(&[2; 8]),
        Some(Src::slice(&huge)),
        SER,
    );
    stage_requests(&mut q);
    add(
        "requests with a parked body",
        Lane::Requests,
        all_batches(&mut q),
    );
    let mut r = OutQueue::new(4096, Sink::Loopback, true);
    r.allow_far(true);
    stage_responses(&mut r);
    r.push_response(78, SER_STATUS, Src::slice(&huge));
    stage_responses(&mut r);
    add(
        "responses with a parked body",
        Lane::Responses,
        all_batches(&mut r),
    );

    // To another rank, streamed through slots of 256 bytes: batches around a large record.
    let mut s = OutQueue::new(256, Sink::Loopback, true);
    s.push_request(Some(0x100), 1, 2, 1, Src::slice(&[3; 8]), None, 0);
    s.push_request(Some(0x100), 1, 2, 2, Src::slice(&[3; 8]), None, 0);
    s.push_request(
        Some(0x500),
        1,
        2,
        3,
        Src::slice(&[4; 5]),
        Some(Src::slice(&big)),
        SER,
    );
    s.push_request(None, 1, 2, 0, Src::slice(&7u64.to_le_bytes()), None, 0);
    s.push_request(
        Some(0x500),
        1,
        2,
        4,
        Src::slice(&[4; 5]),
        Some(Src::slice(&big[..700])),
        0,
    );
    let slots = all_batches(&mut s);
    assert!(
        slots.len() > 6,
        "the large records should take several slots"
    );
    add(
        "request slots",
        Lane::RequestSlots,
        vec![fuzzing::frame_slots(&slots)],
    );
    let mut s = OutQueue::new(256, Sink::Loopback, true);
    s.push_response(1, 0, Src::slice(&[5; 8]));
    s.push_response(2, SER_STATUS, Src::slice(&big));
    s.push_response(3, 0, Src::slice(&[5; 8]));
    s.push_response(4, 0, Src::slice(&big[..300]));
    let slots = all_batches(&mut s);
    add(
        "response slots",
        Lane::ResponseSlots,
        vec![fuzzing::frame_slots(&slots)],
    );
    out
}

/// A value a length word may be corrupted to: near the input's own lengths, or extreme.
fn length_like(rng: &mut Rng, len: usize) -> u32 {
    match rng.below(6) {
        0 => rng.below(len + 16) as u32,
        1 => (len as u32)
            .wrapping_add(rng.below(9) as u32)
            .wrapping_sub(4),
        2 => u32::from(u16::MAX) - rng.below(4) as u32,
        3 => u32::MAX - rng.below(4) as u32,
        4 => (1 << 31) | rng.below(64) as u32,
        _ => rng.below(64) as u32,
    }
}

/// Applies one to three corruptions to `b`.
fn mutate(rng: &mut Rng, b: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        let len = b.len();
        match rng.below(9) {
            0 if len > 0 => {
                let at = rng.below(len);
                b[at] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let at = rng.below(len);
                b[at] = [0, 0xFF, 0xFD, 0xFE, 0x80, 0x40, 0x20, rng.next() as u8][rng.below(8)];
            }
            2 => b.truncate(rng.below(len + 1)),
            3 => {
                for _ in 0..1 + rng.below(64) {
                    b.push(rng.next() as u8);
                }
            }
            4 if len >= 4 => {
                // A length word anywhere: a record's capture, argument or body length.
                let at = rng.below(len - 1);
                let v = length_like(rng, len);
                let n = if rng.below(2) == 0 { 2 } else { 4 }.min(len - at);
                b[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
            }
            5 if len >= 4 => {
                // The batch's end word: the records end elsewhere.
                let v = length_like(rng, len);
                b[..4].copy_from_slice(&v.to_le_bytes());
            }
            6 if len >= 8 => {
                // Two words swapped (two records' lengths, a length and an id).
                let n = if rng.below(2) == 0 { 2 } else { 4 };
                let (x, y) = (rng.below(len - n), rng.below(len - n));
                for k in 0..n {
                    b.swap(x + k, y + k);
                }
            }
            7 if len >= 2 => {
                // A range copied over another: a record or slot repeated, or cut in two.
                let n = 1 + rng.below(len.min(64));
                let (from, to) = (rng.below(len - n + 1), rng.below(len - n + 1));
                b.copy_within(from..from + n, to);
            }
            _ if len > 0 => {
                let at = rng.below(len);
                b.insert(at, rng.next() as u8);
            }
            _ => b.push(rng.next() as u8),
        }
    }
}

/// Writes the valid inputs as seeds for the fuzz targets (`libgsm/fuzz/`): one folder per target,
/// named as it is, the `slots` inputs with their lane byte first.
fn write_corpus(dir: &std::path::Path, templates: &[Template]) {
    for (i, t) in templates.iter().enumerate() {
        let (target, bytes) = match t.lane {
            Lane::Requests => ("requests", t.bytes.clone()),
            Lane::Responses => ("responses", t.bytes.clone()),
            Lane::RequestSlots => ("slots", [&[1u8][..], &t.bytes].concat()),
            Lane::ResponseSlots => ("slots", [&[0u8][..], &t.bytes].concat()),
        };
        let d = dir.join(target);
        std::fs::create_dir_all(&d).expect("the corpus folder");
        std::fs::write(d.join(format!("seed-{i}")), bytes).expect("a corpus file");
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn corrupted_batches_are_refused_or_read_within_their_bounds_never_a_panic() {
    let seed = std::env::var("GSM_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let templates = templates();
    if let Some(dir) = std::env::var_os("GSM_WIRE_CORPUS") {
        write_corpus(std::path::Path::new(&dir), &templates);
    }
    // The valid inputs read back whole, except the records that carry a pointer.
    for t in &templates {
        let r = read(t.lane, &t.bytes);
        if t.name.contains("pointer") {
            let e = r.expect_err("a pointer from another process was taken");
            assert!(e.contains("carries a pointer"), "{}: {e}", t.name);
            continue;
        }
        let s = r.unwrap_or_else(|e| panic!("the valid {} was refused: {e}", t.name));
        assert!(s.records > 0 && !s.unfinished, "{}: {s:?}", t.name);
    }
    let lanes = [
        Lane::Requests,
        Lane::Responses,
        Lane::RequestSlots,
        Lane::ResponseSlots,
    ];
    assert!(lanes.iter().all(|l| templates.iter().any(|t| t.lane == *l)));
    let (mut read_whole, mut refused) = (0u64, 0u64);
    let mut input = Vec::new();
    for case in 0..CASES {
        let mut rng = Rng(seed ^ case.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        let t = &templates[rng.below(templates.len())];
        input.clear();
        input.extend_from_slice(&t.bytes);
        mutate(&mut rng, &mut input);
        let got = std::panic::catch_unwind(|| read(t.lane, &input));
        match got {
            Ok(Ok(_)) => read_whole += 1,
            Ok(Err(_)) => refused += 1,
            Err(_) => panic!(
                "GSM_FUZZ_SEED={seed} case {case}: reading a corrupted copy of {} ({:?}) \
                 panicked (above); the input:\n{}",
                t.name,
                t.lane,
                hex(&input)
            ),
        }
    }
    // Both verdicts are common, or the corruptions miss what they are meant to hit.
    assert!(
        read_whole > CASES / 10 && refused > CASES / 10,
        "seed {seed}: {read_whole} read whole, {refused} refused"
    );
}
