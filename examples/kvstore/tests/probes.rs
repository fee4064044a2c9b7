//! The requests that once stalled or stopped the store, each sent to `gsm-kv` and to a
//! `redis-server` started by the test: each must be answered as Redis answers it, within a few
//! milliseconds of Redis's own time (the best of a few tries, so that a busy machine's noise does
//! not decide), and must leave the store serving.

mod common;

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use common::reference::{Redis, call, connect, reply, request, same_replies};
use common::{Store, gsm_kv, start};
use gsm_tests::job::assert_exit;

/// One worker, so that a request that held its worker would hold every connection.
fn one_worker(extra: &[&str], open_files: Option<u32>) -> Store {
    let limit = open_files.map_or(String::new(), |n| format!("ulimit -n {n} && "));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "{limit}exec {} --port 0 {}",
            gsm_kv(),
            extra.join(" ")
        ))
        .env("GSM_THREADS", "1");
    start(&mut cmd, 1, None)
}

/// The best of `tries` times of `f`.
fn best(tries: usize, mut f: impl FnMut()) -> Duration {
    (0..tries)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .expect("at least one try")
}

/// Within 10 ms of Redis's time (or faster).
fn close_to_redis(what: &str, ours: Duration, theirs: Duration) {
    println!("{what}: gsm-kv {ours:?}, redis-server {theirs:?}");
    assert!(
        ours <= theirs + Duration::from_millis(10),
        "{what}: gsm-kv took {ours:?}, redis-server {theirs:?}"
    );
}

#[test]
fn config_get_with_runs_of_stars_answers_at_once() {
    let store = one_worker(&[], None);
    let redis = Redis::start(&[], None);
    let (mut ours, mut theirs) = (connect(&store.addrs[0]), connect(&redis.addr));
    // No parameter name has a `!`, so both answer an empty list after the whole search.
    let patterns = [
        format!("{}!", "*".repeat(26)),
        format!("{}!", "*".repeat(4000)),
        format!("{}!", "*a".repeat(30)),
        format!("{}[!]", "*?".repeat(30)),
    ];
    for p in &patterns {
        let args: [&[u8]; 3] = [b"CONFIG", b"GET", p.as_bytes()];
        let mut got = Vec::new();
        let t_ours = best(3, || got = call(&mut ours, &args));
        let mut want = Vec::new();
        let t_theirs = best(3, || want = call(&mut theirs, &args));
        assert_eq!(got, want, "CONFIG GET {p}");
        close_to_redis(
            &format!("CONFIG GET of {} bytes", p.len()),
            t_ours,
            t_theirs,
        );
    }
    // The worker still serves a new connection.
    let mut fresh = connect(&store.addrs[0]);
    assert_eq!(call(&mut fresh, &[b"PING"]), b"+PONG\r\n");
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}

#[test]
fn shutdown_takes_redis_arguments_and_abort_finds_nothing_to_abort() {
    let store = one_worker(&[], None);
    let redis = Redis::start(&[], None);
    let (mut ours, mut theirs) = (connect(&store.addrs[0]), connect(&redis.addr));
    same_replies(
        &mut ours,
        &mut theirs,
        &[
            "SHUTDOWN ABORT",
            "shutdown abort",
            "SHUTDOWN NOSAVE ABORT",
            "SHUTDOWN NOW ABORT",
            "SHUTDOWN SAVE NOSAVE",
            "SHUTDOWN BOGUS",
            "SHUTDOWN NOSAVE NOW FORCE BOGUS",
            "PING",
        ],
        "SHUTDOWN",
    );
    // The flags Redis accepts stop the job, cleanly.
    ours.write_all(&request(&[b"SHUTDOWN", b"NOSAVE", b"NOW", b"FORCE"]))
        .unwrap();
    assert_eq!(
        reply(&mut ours),
        b"",
        "the connection closes without a reply"
    );
    let mut store = store;
    let done = store.job.take().expect("running").wait(common::LIMIT);
    assert_exit(&done, 0, "gsm-kv after SHUTDOWN NOSAVE NOW FORCE");
}

/// A request of `n` arguments (`DEL` of `n - 1` keys of 20 bytes).
fn big_del(n: usize) -> Vec<u8> {
    let keys: Vec<Vec<u8>> = (1..n)
        .map(|i| format!("key:{i:016}").into_bytes())
        .collect();
    let mut args: Vec<&[u8]> = vec![b"DEL"];
    args.extend(keys.iter().map(Vec::as_slice));
    request(&args)
}

/// Sends `bytes` on one connection while another pings; the time to the big request's reply,
/// and the slowest ping meanwhile.
fn while_pinging(addr: &str, bytes: &[u8]) -> (Vec<u8>, Duration, Duration) {
    let mut pinger = connect(addr);
    let mut big = connect(addr);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let pings = s.spawn(|| {
            let mut worst = Duration::ZERO;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                assert_eq!(call(&mut pinger, &[b"PING"]), b"+PONG\r\n");
                worst = worst.max(t.elapsed());
                std::thread::sleep(Duration::from_millis(2));
            }
            worst
        });
        let t = Instant::now();
        let mut writer = big.try_clone().unwrap();
        let sending = s.spawn(move || writer.write_all(bytes).unwrap());
        let got = reply(&mut big);
        let took = t.elapsed();
        sending.join().unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (got, took, pings.join().unwrap())
    })
}

#[test]
fn a_large_request_is_read_in_linear_time_and_others_are_served_meanwhile() {
    let store = one_worker(&[], None);
    let redis = Redis::start(&[], None);
    // 12 MB in 300,000 arguments (read again at every read, as once, it took seconds), and
    // one 16 MiB value.
    let del = big_del(300_000);
    let value = vec![b'v'; 16 << 20];
    let set = request(&[b"SET", b"big", &value]);
    for (what, bytes, want) in [
        ("DEL of 300,000 keys", &del, &b":0\r\n"[..]),
        ("SET of 16 MiB", &set, &b"+OK\r\n"[..]),
    ] {
        // The better of two runs of each: the machine's load is not the store's.
        let run = |addr: &str| {
            let (got, a, pa) = while_pinging(addr, bytes);
            assert_eq!(got, want, "{what} on {addr}");
            let (_, b, pb) = while_pinging(addr, bytes);
            (a.min(b), pa.min(pb))
        };
        let (ours, ping_ours) = run(&store.addrs[0]);
        let (theirs, ping_theirs) = run(&redis.addr);
        println!("{what}: gsm-kv {ours:?}, redis-server {theirs:?}");
        println!("{what}: slowest PING meanwhile: gsm-kv {ping_ours:?}, redis {ping_theirs:?}");
        // A whole request's time depends on the machine's load, so the bounds catch a parse
        // that is quadratic in the bytes (seconds here) and a worker held for the whole
        // request, not a constant factor.
        assert!(
            ours <= theirs * 4 + Duration::from_millis(500),
            "{what}: {ours:?} vs {theirs:?}"
        );
        assert!(
            ping_ours <= ping_theirs * 4 + Duration::from_millis(250),
            "{what}: a PING waited {ping_ours:?} (redis-server {ping_theirs:?})"
        );
    }
    let mut s = connect(&store.addrs[0]);
    let got = call(&mut s, &[b"GET", b"big"]);
    assert_eq!(got.len(), value.len() + 13, "GET returns the 16 MiB value");
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}

const REFUSED: &[u8] = b"-ERR max number of clients reached\r\n";

/// Opens connections until one is refused (the error, then a close); the open ones and the
/// count.
fn fill(addr: &str) -> (Vec<std::net::TcpStream>, usize) {
    let mut open = Vec::new();
    for n in 0..200 {
        let mut s = connect(addr);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let got = call(&mut s, &[b"PING"]);
        if got == REFUSED {
            return (open, n);
        }
        assert_eq!(got, b"+PONG\r\n", "connection {n}");
        open.push(s);
    }
    panic!("200 connections and none refused");
}

/// CPU time (user + system, in clock ticks) of process `pid` so far.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process");
    let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn clients_over_the_limit_get_redis_error_and_the_store_stays_idle() {
    let store = one_worker(&["--maxclients", "5"], None);
    let (open, n) = fill(&store.addrs[0]);
    assert_eq!(n, 5, "--maxclients 5");
    drop(open);
    std::thread::sleep(Duration::from_millis(200));
    let (open, n) = fill(&store.addrs[0]);
    assert_eq!(n, 5, "closed connections are counted out");
    drop(open);
    std::thread::sleep(Duration::from_millis(200));
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");

    // At the descriptor limit: both lower maxclients to fit, refuse the rest with the error,
    // and do not spin while refused clients keep coming.
    let store = one_worker(&[], Some(64));
    let redis = Redis::start(&[], Some(64));
    let job = store.job.as_ref().expect("running");
    // CPU per refusal of each: a store that spins at the limit spends its time whatever the
    // number of refusals, and one that refuses costs about what Redis does per refusal.
    let mut per_refusal = Vec::new();
    for (who, addr, pid) in [
        ("gsm-kv", &store.addrs[0], job.pid()),
        ("redis-server", &redis.addr, redis.pid()),
    ] {
        let (mut open, n) = fill(addr);
        assert!(n > 0, "{who} took no client at all");
        let before = cpu_ticks(pid);
        let t = Instant::now();
        let mut refused = 0;
        while t.elapsed() < Duration::from_secs(1) {
            let mut s = connect(addr);
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let start = Instant::now();
            assert_eq!(call(&mut s, &[b"PING"]), REFUSED, "{who}");
            assert!(
                start.elapsed() < Duration::from_secs(1),
                "{who} refused slowly"
            );
            refused += 1;
        }
        let spent = cpu_ticks(pid) - before;
        println!("{who}: {n} clients, {refused} refused in 1 s for {spent} ticks of CPU");
        per_refusal.push(spent as f64 / refused as f64);
        assert_eq!(call(&mut open[0], &[b"PING"]), b"+PONG\r\n", "{who}");
        // With no client coming, a store at its limit is idle.
        let before = cpu_ticks(pid);
        std::thread::sleep(Duration::from_secs(1));
        let idle = cpu_ticks(pid) - before;
        assert!(
            idle < 20,
            "{who} spent {idle} ticks in 1 s at its limit with no client"
        );
    }
    let (ours, theirs) = (per_refusal[0], per_refusal[1]);
    assert!(
        ours <= theirs * 4.0 + 0.01,
        "CPU ticks per refusal: gsm-kv {ours:.4}, redis-server {theirs:.4}"
    );
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}
