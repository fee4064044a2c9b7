//! `gsm-kv` driven by the `redis` client crate over loopback: one rank alone, and a job of two
//! ranks through `gsmrun`, each with two workers, so that keys live on other workers and ranks
//! than the connection's.

mod common;

use std::process::Command;

use common::{Store, ask, exchange, gsm_kv, start};
use gsm_tests::job::{assert_exit, gsmrun};

fn alone() -> Store {
    let mut cmd = Command::new(gsm_kv());
    cmd.args(["--port", "0"]).env("GSM_THREADS", "2");
    start(&mut cmd, 1, None)
}

#[test]
fn one_rank_serves_every_command_pipelines_and_concurrent_clients() {
    let store = alone();
    let mut con = store.client(0);
    common::every_command(&mut con, "one");
    common::pipelined(&mut con, "one", 500);
    common::concurrent(&store, "one", 8, 100);
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert!(size > 800, "{size}");
    let ok: String = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    assert_eq!(ok, "OK");
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(size, 0);
    let done = store.shutdown(0);
    assert_exit(&done, 0, "gsm-kv after SHUTDOWN");
}

#[test]
fn bad_input_gets_redis_errors_and_closes_only_its_connection() {
    let store = alone();
    let mut keep = store.raw(0);
    assert_eq!(ask(&mut keep, b"SET kept 1\r\n", 1), "+OK\r\n");
    // Unknown commands and wrong arities: Redis's texts; the connection stays.
    let mut s = store.raw(0);
    assert_eq!(
        ask(&mut s, b"*2\r\n$5\r\nFLUSH\r\n$3\r\nnow\r\n", 1),
        "-ERR unknown command 'FLUSH', with args beginning with: 'now' \r\n"
    );
    assert_eq!(
        ask(&mut s, b"GET\r\n", 1),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(ask(&mut s, b"PING\r\n", 1), "+PONG\r\n");
    // A bulk over the limit: the error at once, before its bytes, and the connection closes.
    let mut s = store.raw(0);
    let got = exchange(&mut s, b"*2\r\n$3\r\nGET\r\n$999999999\r\n");
    assert_eq!(got, b"-ERR Protocol error: invalid bulk length\r\n");
    // Malformed framing, after a good request in the same pipeline: its reply, then the error.
    let mut s = store.raw(0);
    let got = exchange(&mut s, b"PING\r\n*1\r\n#3\r\n");
    assert_eq!(
        got,
        b"+PONG\r\n-ERR Protocol error: expected '$', got '#'\r\n"
    );
    let mut s = store.raw(0);
    let got = exchange(&mut s, b"QUIT\r\nPING\r\n");
    assert_eq!(got, b"+OK\r\n");
    // Nothing else was affected.
    assert_eq!(ask(&mut keep, b"GET kept\r\n", 2), "$1\r\n1\r\n");
    let done = store.shutdown(0);
    assert_exit(&done, 0, "gsm-kv after SHUTDOWN");
}

#[test]
fn two_ranks_give_every_client_the_same_answers() {
    let mut cmd = gsmrun(["-np", "2", "-t", "2", "--oversubscribe"]);
    cmd.arg(gsm_kv()).args(["--port", "0"]);
    let store = start(&mut cmd, 2, None);
    for r in 0..2 {
        let mut con = store.client(r);
        common::every_command(&mut con, &format!("r{r}"));
        common::pipelined(&mut con, &format!("r{r}"), 300);
    }
    common::same_answers(&store, "same");
    common::concurrent(&store, "two", 6, 60);
    let done = store.shutdown(1);
    assert_exit(
        &done,
        0,
        "gsmrun -np 2 gsm-kv after SHUTDOWN through rank 1",
    );
}

#[test]
fn sigterm_stops_a_lone_store_cleanly() {
    let mut store = alone();
    let mut con = store.client(0);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let job = store.job.take().expect("running");
    job.signal(libc::SIGTERM);
    let done = job.wait(common::LIMIT);
    assert_exit(&done, 0, "gsm-kv after SIGTERM");
}

/// Sends `script` on a fresh connection and reads until the server closes it (the script ends
/// with a malformed request, so both servers close).
fn replay(addr: &str, script: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    String::from_utf8_lossy(&exchange(&mut s, script)).into_owned()
}

#[test]
fn replies_and_errors_are_byte_for_byte_redis_servers() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut redis = Command::new("redis-server");
    redis
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"]);
    let mut redis = gsm_tests::process::spawn(&mut redis);
    assert!(
        redis.wait_for_stdout(common::START, |l| l
            .iter()
            .any(|l| l.text.contains("Ready to accept"))),
        "redis-server (scripts/install-deps installs it) did not start"
    );
    let store = alone();
    let script: &[u8] = b"FOO a b\r\nGET\r\nSET k v EX 0\r\nSET k v NX XX\r\nSET k abc\r\n\
        INCR k\r\nMSET a\r\nEXPIRE k 10 BOGUS\r\nTTL nokey\r\nCONFIG GET save\r\n\
        SET n 9223372036854775807\r\nINCR n\r\nINCRBY n x\r\nDECRBY n 7\r\nDEL k n zz\r\n\
        SET k v NX GET\r\nSET k w XX GET\r\nMGET k zz k\r\nEXISTS k k zz\r\nECHO hi\r\nPING\r\n\
        PING a\r\n*1\r\n$999999999999\r\n";
    let theirs = replay(&format!("127.0.0.1:{port}"), script);
    let ours = replay(&store.addrs[0], script);
    redis.signal(libc::SIGTERM);
    drop(redis.wait(common::LIMIT));
    assert_eq!(ours, theirs);
    let done = store.shutdown(0);
    assert_exit(&done, 0, "gsm-kv after SHUTDOWN");
}
