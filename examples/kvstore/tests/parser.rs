//! The request parser under random, truncated and hostile bytes, fed as a connection feeds it
//! (in pieces of random sizes, keeping what it did not take): it never panics, refuses with a
//! protocol error, never holds more than a bounded number of bytes it has not taken, reads the
//! same requests whatever the pieces, and costs time linear in the bytes.

use std::time::{Duration, Instant};

use gsm_kv::resp::{self, MAX_BULK, MAX_INLINE, Parser};

/// A small deterministic generator (xorshift64*), so that a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What feeding `bytes` in pieces gave: the requests, and the error that ended it, if any.
type Outcome = (Vec<Vec<Vec<u8>>>, Option<String>);

/// Feeds `bytes` in pieces of at most `piece` bytes, as a connection does; checks the bound on
/// the bytes held but not taken at every step.
fn feed(bytes: &[u8], rng: &mut Rng, piece: usize) -> Outcome {
    let mut parser = Parser::default();
    let mut held: Vec<u8> = Vec::new();
    let mut requests = Vec::new();
    let mut at = 0;
    loop {
        loop {
            match parser.feed(&held) {
                Ok((Some(args), used)) => {
                    assert!(used > 0 && used <= held.len());
                    held.drain(..used);
                    requests.push(args);
                }
                Ok((None, used)) => {
                    assert!(used <= held.len());
                    held.drain(..used);
                    break;
                }
                Err(e) => {
                    assert!(e.0.starts_with("ERR Protocol error: "), "{e}");
                    return (requests, Some(e.0));
                }
            }
        }
        // Untaken: at most a header or inline line, or one bulk the parser waits for whole.
        assert!(
            held.len() <= (MAX_INLINE + 2).max(parser.wanted()),
            "{} bytes held, {} wanted",
            held.len(),
            parser.wanted()
        );
        if at == bytes.len() {
            return (requests, None);
        }
        let n = 1 + rng.below(piece).min(bytes.len() - at - 1);
        held.extend_from_slice(&bytes[at..at + n]);
        at += n;
    }
}

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    resp::array(&mut out, args.len());
    for a in args {
        resp::bulk(&mut out, a);
    }
    out
}

/// Valid requests, then bytes changed, cut or inserted at random.
fn hostile(rng: &mut Rng) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let args: Vec<Vec<u8>> = (0..1 + rng.below(5))
            .map(|_| (0..rng.below(40)).map(|_| rng.next() as u8).collect())
            .collect();
        bytes.extend(encode(&args));
        if rng.below(4) == 0 {
            bytes.extend_from_slice(b"PING a b\r\n");
        }
    }
    let headers: [&[u8]; 8] = [
        b"*-1\r\n",
        b"*99999999999999999999\r\n",
        b"$-5\r\n",
        b"*1\r\n$17000000\r\n",
        b"*3\r\n$1\r\na\r\n",
        b"*2\r\n$1\r\nab\r\n",
        b"\r\n",
        b"*1\r\n$x\r\n",
    ];
    for _ in 0..rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(4) {
            0 => {
                let last = bytes.len() - 1;
                bytes[at.min(last)] = rng.next() as u8;
            }
            1 => bytes.truncate(at),
            2 => {
                let h = headers[rng.below(headers.len())];
                drop(bytes.splice(at..at, h.iter().copied()));
            }
            _ => {
                let junk: Vec<u8> = (0..rng.below(8)).map(|_| rng.next() as u8).collect();
                drop(bytes.splice(at..at, junk));
            }
        }
        if bytes.is_empty() {
            break;
        }
    }
    bytes
}

#[test]
fn random_truncated_and_hostile_bytes_get_an_error_or_requests_never_a_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut errors = 0;
    for round in 0..20_000 {
        let bytes = if round % 5 == 0 {
            (0..rng.below(200)).map(|_| rng.next() as u8).collect()
        } else {
            hostile(&mut rng)
        };
        let whole = feed(&bytes, &mut rng, bytes.len().max(1));
        let pieces = feed(&bytes, &mut rng, 7);
        assert_eq!(
            whole,
            pieces,
            "round {round}: {:?}",
            String::from_utf8_lossy(&bytes)
        );
        errors += usize::from(whole.1.is_some());
        // What was read re-encodes to bytes that read back the same.
        for args in whole.0.iter().filter(|a| !a.is_empty()) {
            let (back, _) = resp::parse(&encode(args)).unwrap().unwrap();
            assert_eq!(&back, args);
        }
    }
    assert!(
        errors > 1000,
        "the hostile inputs reached the errors: {errors}"
    );
}

#[test]
fn announced_lengths_past_the_limits_are_refused_before_their_bytes() {
    let mut rng = Rng(7);
    let over = format!("*2\r\n$3\r\nSET\r\n${}\r\n", MAX_BULK + 1);
    let (_, e) = feed(over.as_bytes(), &mut rng, 3);
    assert_eq!(
        e.as_deref(),
        Some("ERR Protocol error: invalid bulk length")
    );
    // Five bulks of 16 MiB announced: refused at the fifth header, with nothing sent after.
    let mut many = b"*9\r\n".to_vec();
    for _ in 0..5 {
        many.extend(format!("${MAX_BULK}\r\n").as_bytes());
        many.extend(vec![b'x'; MAX_BULK]);
        many.extend(b"\r\n");
    }
    let (_, e) = feed(&many, &mut rng, 1 << 20);
    assert_eq!(
        e.as_deref(),
        Some("ERR Protocol error: request larger than 64 MiB")
    );
    let long_line = vec![b'a'; MAX_INLINE + 10];
    let (_, e) = feed(&long_line, &mut rng, 4096);
    assert_eq!(
        e.as_deref(),
        Some("ERR Protocol error: too big inline request")
    );
}

#[test]
fn a_request_of_a_million_arguments_in_small_pieces_costs_linear_time() {
    let args: Vec<Vec<u8>> = (0..1_000_000)
        .map(|i: u32| i.to_le_bytes().to_vec())
        .collect();
    let bytes = encode(&args);
    let mut rng = Rng(11);
    let start = Instant::now();
    let (got, e) = feed(&bytes, &mut rng, 16 << 10);
    // Rescanning the request at each piece would take minutes.
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(e, None);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0], args);
}
