//! `gsm-bench curves --what kv`: open-loop `GET`s against `gsm-kv` (1 worker) and one
//! `redis-server`, each pinned to CPU 0, from this process (see `curves.rs` for the method).
//!
//! The client is one thread over [`CONNECTIONS`] non-blocking sockets: at each intended time it
//! writes the next `GET` to the next connection (round robin) whether or not earlier ones were
//! answered, and reads whatever answers have come, matching them to their intended times in
//! order (a connection answers in order). `redis-benchmark` cannot do this: it is closed-loop.
//! The keyspace is loaded first with `redis-benchmark` (untimed). Systems alternate at each
//! offered rate, each server started for its point and stopped after it.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::{Args, Arrivals, Point, STRIKES, histogram, point, rates, show};
use crate::kv::{KEYSPACE, Options, Servers, System};

/// Client connections.
pub const CONNECTIONS: usize = 16;

/// One client connection: its socket, bytes not yet written, answers awaited and read bytes.
struct Conn {
    sock: TcpStream,
    out: Vec<u8>,
    waiting: VecDeque<u64>,
    input: Vec<u8>,
}

/// How many whole replies (`$-1\r\n` or `$n\r\n...\r\n`, or a one-line reply) start `buf`, and
/// the bytes they take.
fn replies(buf: &[u8]) -> (usize, usize) {
    let (mut n, mut at) = (0, 0);
    while at < buf.len() {
        let Some(eol) = buf[at..].windows(2).position(|w| w == b"\r\n") else {
            break;
        };
        let line = &buf[at..at + eol];
        let mut end = at + eol + 2;
        if line.first() == Some(&b'$') {
            let len: i64 = std::str::from_utf8(&line[1..])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(-1);
            if len >= 0 {
                end += len as usize + 2;
            }
        }
        if end > buf.len() {
            break;
        }
        n += 1;
        at = end;
    }
    (n, at)
}

fn get_request(key: u64) -> Vec<u8> {
    let k = format!("key:{key:012}");
    format!("*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n", k.len()).into_bytes()
}

fn flush(c: &mut Conn) -> anyhow::Result<()> {
    while !c.out.is_empty() {
        match c.sock.write(&c.out) {
            Ok(n) => {
                c.out.drain(..n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// One point against the server on `port`.
fn point_at(port: u16, rate: f64, load: Duration, name: &str) -> anyhow::Result<Point> {
    let mut conns = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        let sock = TcpStream::connect(("127.0.0.1", port))?;
        sock.set_nodelay(true)?;
        sock.set_nonblocking(true)?;
        conns.push(Conn {
            sock,
            out: Vec::new(),
            waiting: VecDeque::new(),
            input: Vec::new(),
        });
    }
    let mut arrivals = Arrivals::new(rate, 0x5eed ^ rate as u64);
    let mut hist = histogram();
    let end = load.as_nanos() as u64;
    let mut due = arrivals.next();
    let mut next_conn = 0;
    let mut key = 0x9e37_79b9u64;
    let mut buf = vec![0u8; 64 << 10];
    let start = Instant::now();
    let deadline = start + load + Duration::from_secs(10);
    let mut last = 0u64;
    loop {
        let now = start.elapsed().as_nanos() as u64;
        while due <= now && due < end {
            let c = &mut conns[next_conn % CONNECTIONS];
            next_conn += 1;
            key = key.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            c.out
                .extend_from_slice(&get_request((key >> 33) % KEYSPACE));
            c.waiting.push_back(due);
            due = arrivals.next();
        }
        let mut pending = due < end;
        for c in &mut conns {
            flush(c)?;
            match c.sock.read(&mut buf) {
                Ok(0) => anyhow::bail!("{name} closed a connection"),
                Ok(n) => c.input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
            let (n, used) = replies(&c.input);
            c.input.drain(..used);
            let t = start.elapsed().as_nanos() as u64;
            for _ in 0..n {
                if let Some(intended) = c.waiting.pop_front() {
                    let _ = hist.record(t.saturating_sub(intended).max(1));
                    last = t;
                }
            }
            pending |= !c.waiting.is_empty();
        }
        if !pending || Instant::now() > deadline {
            break;
        }
    }
    Ok(Point::new(
        name,
        rate,
        &hist,
        Duration::from_nanos(last.max(1)),
    ))
}

/// `--what kv`.
pub fn run(common: &crate::Common, args: &Args) -> anyhow::Result<bool> {
    let opts = Options {
        runs: 1,
        gsm_kv: args
            .gsm_kv
            .clone()
            .unwrap_or_else(|| crate::launch::sibling("gsm-kv")),
        redis_server: "redis-server".into(),
        redis_benchmark: "redis-benchmark".into(),
        port: args.port,
        scale: 1,
    };
    let load = point(args);
    let mut curves: [Vec<Point>; 2] = [Vec::new(), Vec::new()];
    let mut going = [STRIKES, STRIKES];
    for (step, rate) in rates(args).enumerate() {
        if going == [0, 0] {
            break;
        }
        let order = if step % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            if going[i] == 0 {
                continue;
            }
            let system = [System::Gsm, System::Redis][i];
            let servers = Servers::start(&opts, system, 1, Some("0"))?;
            crate::kv::drive(&opts, &servers.ports, None, "set", 16, KEYSPACE * 2)?;
            let p = point_at(servers.ports[0], rate, load, system.name());
            servers.stop();
            let p = p?;
            show(&p);
            going[i] = if p.saturated() { going[i] - 1 } else { STRIKES };
            curves[i].push(p);
        }
    }
    let [gsm, redis] = curves;
    if let Some(dir) = &common.plot {
        let all: Vec<Point> = gsm.iter().chain(&redis).cloned().collect();
        super::plot(dir, "kv", "gsm-kv (1 worker) vs redis-server, GET", &all)?;
    }
    crate::report::emit(
        &super::cases("kv GET", &gsm, &redis, "redis-server"),
        common.json.as_deref(),
    )?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_replies_are_counted_and_partial_ones_wait() {
        let buf = b"$-1\r\n$3\r\nabc\r\n+OK\r\n$5\r\nab";
        assert_eq!(replies(buf), (3, 19));
        assert_eq!(replies(b"$3\r\nab"), (0, 0));
    }
}
