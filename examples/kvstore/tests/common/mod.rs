//! What the store's tests share: starting `gsm-kv` alone or as a `gsmrun` job, finding the
//! ports its ranks print, a client of the `redis` crate, raw RESP over a socket, and the checks
//! every deployment must pass.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

pub mod reference;

use gsm_tests::process::{Finished, Running, spawn};
use redis::Commands;

/// How long a store may take to start, and a whole test to end.
pub const START: Duration = Duration::from_secs(30);
pub const LIMIT: Duration = Duration::from_secs(60);

/// A running store and the addresses of its ranks (`host:port`, by rank).
pub struct Store {
    pub job: Option<Running>,
    pub addrs: Vec<String>,
}

/// `gsm-kv` itself.
pub fn gsm_kv() -> &'static str {
    env!("CARGO_BIN_EXE_gsm-kv")
}

/// Starts `command` (a `gsm-kv` or a `gsmrun` job of it on port 0) and waits until `ranks` ranks
/// said where they listen; `host` replaces the bound address in each (for `--bind 0.0.0.0`,
/// by rank).
pub fn start(command: &mut Command, ranks: usize, hosts: Option<&[String]>) -> Store {
    let mut job = spawn(command);
    let ready = job.wait_for_stdout(START, |lines| {
        lines
            .iter()
            .filter(|l| l.text.contains(" listening on "))
            .count()
            == ranks
    });
    let lines = job.stdout_lines();
    if !ready {
        let done = job.wait(Duration::from_secs(1));
        panic!("the store did not start {ranks} ranks\n{}", done.report());
    }
    let mut addrs = vec![String::new(); ranks];
    for l in lines.iter().filter(|l| l.text.contains(" listening on ")) {
        // "gsm-kv: rank R of N listening on ADDR:PORT (W workers in the job)"
        let words: Vec<&str> = l.text.split_whitespace().collect();
        let rank: usize = words[2].parse().expect("a rank number");
        let addr = words[7];
        let port = addr.rsplit(':').next().expect("a port");
        addrs[rank] = match hosts {
            Some(h) => format!("{}:{port}", h[rank]),
            None => addr.to_string(),
        };
    }
    Store {
        job: Some(job),
        addrs,
    }
}

impl Store {
    pub fn client(&self, rank: usize) -> redis::Connection {
        let url = format!("redis://{}/", self.addrs[rank]);
        let client = redis::Client::open(url).expect("a valid url");
        let con = client
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connects to the store");
        con.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        con
    }

    pub fn raw(&self, rank: usize) -> TcpStream {
        let s = TcpStream::connect(&self.addrs[rank]).expect("connects");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }

    /// `SHUTDOWN` through rank `rank`, then the job's end (which must be a clean exit).
    pub fn shutdown(mut self, rank: usize) -> Finished {
        let mut s = self.raw(rank);
        s.write_all(b"SHUTDOWN NOSAVE\r\n").unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        let job = self.job.take().expect("a running job");
        job.wait(LIMIT)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            drop(job.wait(Duration::from_millis(1)));
        }
    }
}

/// Sends `bytes` and reads until the server closes the connection or `want` bytes came.
pub fn exchange(s: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
    s.write_all(bytes).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("read failed after {:?}: {e}", String::from_utf8_lossy(&got)),
        }
    }
}

/// Sends `bytes` and reads exactly the reply of `lines` lines (simple replies only).
pub fn ask(s: &mut TcpStream, bytes: &[u8], lines: usize) -> String {
    s.write_all(bytes).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1];
    while got.iter().filter(|&&b| b == b'\n').count() < lines {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => got.push(buf[0]),
            Err(e) => panic!("read failed after {:?}: {e}", String::from_utf8_lossy(&got)),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Every command, through one client, with binary keys and values.
pub fn every_command(con: &mut redis::Connection, tag: &str) {
    let k = |s: &str| format!("{tag}:{s}").into_bytes();
    let _: () = con.set(k("a"), b"1").unwrap();
    assert_eq!(
        con.get::<_, Option<Vec<u8>>>(k("a")).unwrap(),
        Some(b"1".to_vec())
    );
    assert_eq!(con.get::<_, Option<Vec<u8>>>(k("none")).unwrap(), None);
    // Binary-safe keys and values: NUL, CR LF, high bytes, an empty value.
    let bkey = [tag.as_bytes(), b"\x00\r\n\xff key"].concat();
    let bval = b"\r\n$3\r\n\x00\x01\xfe".to_vec();
    let _: () = con.set(&bkey, &bval).unwrap();
    assert_eq!(con.get::<_, Vec<u8>>(&bkey).unwrap(), bval);
    let _: () = con.set(k("empty"), b"").unwrap();
    assert_eq!(con.get::<_, Vec<u8>>(k("empty")).unwrap(), b"");
    // SET's options.
    let nx: Option<String> = redis::cmd("SET")
        .arg(k("a"))
        .arg("2")
        .arg("NX")
        .query(con)
        .unwrap();
    assert_eq!(nx, None);
    let xx: Option<String> = redis::cmd("SET")
        .arg(k("b"))
        .arg("2")
        .arg("XX")
        .query(con)
        .unwrap();
    assert_eq!(xx, None);
    let ok: String = redis::cmd("SET")
        .arg(k("b"))
        .arg("2")
        .arg("NX")
        .arg("EX")
        .arg(100)
        .query(con)
        .unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(con.ttl::<_, i64>(k("b")).unwrap(), 100);
    let _: () = redis::cmd("SET")
        .arg(k("c"))
        .arg("3")
        .arg("PX")
        .arg(150)
        .query(con)
        .unwrap();
    assert!(con.exists::<_, bool>(k("c")).unwrap());
    std::thread::sleep(Duration::from_millis(250));
    assert!(!con.exists::<_, bool>(k("c")).unwrap(), "PX 150 expired");
    // INCR / INCRBY.
    assert_eq!(con.incr::<_, _, i64>(k("n"), 1).unwrap(), 1);
    assert_eq!(con.incr::<_, _, i64>(k("n"), 41).unwrap(), 42);
    let e = redis::cmd("INCR")
        .arg(k("empty"))
        .query::<i64>(con)
        .unwrap_err();
    assert!(e.to_string().contains("not an integer"), "{e}");
    // MSET / MGET across shards (keys spread over every shard of the job).
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..40)
        .map(|i| (k(&format!("m{i}")), format!("v{i}").into_bytes()))
        .collect();
    let _: () = con.mset(&pairs).unwrap();
    let mut keys: Vec<Vec<u8>> = pairs.iter().map(|p| p.0.clone()).collect();
    keys.insert(7, k("missing"));
    let got: Vec<Option<Vec<u8>>> = con.mget(&keys).unwrap();
    assert_eq!(got.len(), 41);
    assert_eq!(got[7], None);
    assert_eq!(got[0].as_deref(), Some(&b"v0"[..]));
    assert_eq!(got[40].as_deref(), Some(&b"v39"[..]));
    // DEL / EXISTS with many keys.
    assert_eq!(con.exists::<_, i64>(&keys).unwrap(), 40);
    assert_eq!(con.del::<_, i64>(&keys[..11]).unwrap(), 10);
    assert_eq!(con.exists::<_, i64>(&keys).unwrap(), 30);
    // EXPIRE / TTL.
    assert_eq!(con.ttl::<_, i64>(k("a")).unwrap(), -1);
    assert_eq!(con.ttl::<_, i64>(k("nothing")).unwrap(), -2);
    assert!(con.expire::<_, bool>(k("a"), 50).unwrap());
    assert_eq!(con.ttl::<_, i64>(k("a")).unwrap(), 50);
    assert!(!con.expire::<_, bool>(k("nothing"), 50).unwrap());
    // PING, ECHO, INFO, CONFIG GET, COMMAND.
    assert_eq!(redis::cmd("PING").query::<String>(con).unwrap(), "PONG");
    let echo: Vec<u8> = redis::cmd("ECHO").arg(&bval).query(con).unwrap();
    assert_eq!(echo, bval);
    let info: String = redis::cmd("INFO").query(con).unwrap();
    assert!(
        info.contains("redis_version:") && info.contains("db0:keys="),
        "{info}"
    );
    let cfg: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query(con)
        .unwrap();
    assert_eq!(cfg, ["save", ""]);
}

/// A pipeline of `n` commands goes out at once and its answers come back in order.
pub fn pipelined(con: &mut redis::Connection, tag: &str, n: usize) {
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("SET").arg(format!("{tag}:p{i}")).arg(i).ignore();
    }
    for i in 0..n {
        p.cmd("GET").arg(format!("{tag}:p{i}"));
    }
    let got: Vec<usize> = p.query(con).unwrap();
    assert_eq!(got, (0..n).collect::<Vec<_>>());
}

/// `threads` clients at once, each incrementing a shared counter `each` times and writing its
/// own keys; every increment counts, every key reads back.
pub fn concurrent(store: &Store, tag: &str, threads: usize, each: usize) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut con = store.client(t % store.addrs.len());
                for i in 0..each {
                    let _: i64 = con.incr(format!("{tag}:counter"), 1).unwrap();
                    let _: () = con.set(format!("{tag}:t{t}:{i}"), i).unwrap();
                }
                for i in 0..each {
                    let v: usize = con.get(format!("{tag}:t{t}:{i}")).unwrap();
                    assert_eq!(v, i);
                }
            });
        }
    });
    let mut con = store.client(0);
    let total: usize = con.get(format!("{tag}:counter")).unwrap();
    assert_eq!(total, threads * each);
}

/// What every rank answers about the same keys is the same.
pub fn same_answers(store: &Store, tag: &str) {
    let mut writer = store.client(0);
    let pairs: Vec<(String, String)> = (0..64)
        .map(|i| (format!("{tag}:s{i}"), format!("{i}")))
        .collect();
    let _: () = writer.mset(&pairs).unwrap();
    let keys: Vec<&String> = pairs.iter().map(|p| &p.0).collect();
    let mut seen = Vec::new();
    for r in 0..store.addrs.len() {
        let mut con = store.client(r);
        let values: Vec<Option<String>> = con.mget(&keys).unwrap();
        let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        seen.push((values, size));
    }
    // A write through each rank is seen through every other.
    for r in 0..store.addrs.len() {
        let _: () = store.client(r).set(format!("{tag}:from{r}"), r).unwrap();
    }
    for r in 0..store.addrs.len() {
        let mut con = store.client(r);
        for w in 0..store.addrs.len() {
            let v: usize = con.get(format!("{tag}:from{w}")).unwrap();
            assert_eq!(v, w, "rank {r} reads the key written through rank {w}");
        }
    }
    assert!(
        seen.windows(2).all(|w| w[0] == w[1]),
        "ranks disagree: {seen:?}"
    );
    assert!(seen[0].0.iter().all(Option::is_some));
}
