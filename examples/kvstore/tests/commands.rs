//! The commands added for real clients (strings, keyspace, `HELLO`), compared with a
//! `redis-server` started by the test: the same bytes for each reply, or the same set of keys
//! where the order is the server's own (`KEYS`, `SCAN`).

mod common;

use std::collections::BTreeSet;
use std::net::TcpStream;
use std::process::Command;

use common::reference::{Redis, call, connect, same_replies};
use common::{Store, gsm_kv, start};
use gsm_tests::job::assert_exit;

fn store() -> Store {
    let mut cmd = Command::new(gsm_kv());
    cmd.args(["--port", "0"]).env("GSM_THREADS", "3");
    start(&mut cmd, 1, None)
}

const STRINGS: &[&str] = &[
    "SET s hello",
    "APPEND s _world",
    "APPEND fresh abc",
    "STRLEN s",
    "STRLEN nokey",
    "GETRANGE s 0 4",
    "GETRANGE s -5 -1",
    "GETRANGE s -1 -5",
    "GETRANGE s 5 100",
    "GETRANGE s 100 200",
    "GETRANGE nokey 0 -1",
    "GETRANGE s x 1",
    "SUBSTR s 1 3",
    "SETRANGE s 6 WORLD",
    "GET s",
    "SETRANGE pad 5 x",
    "GET pad",
    "SETRANGE none 3 ",
    "EXISTS none",
    "SETRANGE s -1 x",
    "SETRANGE s 536870912 x",
    "SETRANGE s 2 ",
    "SET f 10.5",
    "INCRBYFLOAT f 0.1",
    "INCRBYFLOAT f -5",
    // Redis adds in `long double`: sums whose text shows its rounding (5.6 + 5.0e3 gives
    // 5005.60000000000000009), or go past a double's range, are not compared.
    "INCRBYFLOAT f2 5.0e3",
    "INCRBYFLOAT f2 -0.25",
    "INCRBYFLOAT newf 0.1",
    "INCRBYFLOAT newf 0.2",
    "INCRBYFLOAT f abc",
    "INCRBYFLOAT s 1",
    "INCRBYFLOAT f nan",
    "SET g v",
    "GETEX g",
    "GETEX g EX 100",
    "TTL g",
    "GETEX g PERSIST",
    "TTL g",
    "GETEX g PX 5000 PX 9000",
    "PTTL nokey",
    "GETEX g EX 10 PX 10",
    "GETEX g PERSIST EX 10",
    "GETEX g EX 0",
    "GETEX g EX 9223372036854775807",
    "GETEX g FOO",
    "GETEX nokey EX 10",
    "GETEX g PXAT 1",
    "EXISTS g",
    "TYPE s",
    "TYPE nokey",
    "UNLINK s pad nokey",
    "UNLINK",
    "EXISTS s pad",
    "HELLO 2",
    "HELLO 1",
    "HELLO x",
    "HELLO 2 FOO",
    "SET t v EX 100",
    "PERSIST t",
    "PERSIST t",
    "TTL t",
    "PERSIST nokey",
    "EXPIRETIME t",
    "EXPIRETIME nokey",
    "PEXPIREAT t 99999999999999",
    "PEXPIRETIME t",
    "EXPIRETIME t",
    "EXPIREAT t 99999999999",
    "EXPIRETIME t",
    "GETDEL t",
    "GETDEL t",
    "EXISTS t",
    "GETSET t one",
    "GETSET t two",
    "SETNX t three",
    "SETNX u four",
    "GET u",
    "GETSET t",
    "SETNX u",
    "DEL f f2 g newf fresh t u",
    "RANDOMKEY",
    "SET only one",
    "RANDOMKEY",
];

#[test]
fn string_and_keyspace_commands_answer_as_redis_does() {
    let store = store();
    let redis = Redis::start(&[], None);
    let (mut ours, mut theirs) = (connect(&store.addrs[0]), connect(&redis.addr));
    let hello_masked = |s: &mut TcpStream| {
        let got = call(s, &[b"HELLO", b"2"]);
        String::from_utf8_lossy(&got).replace("$6\r\n7.0.15", "$5\r\n7.0.0")
    };
    // The replies that name the server's version and client id differ by design.
    let (a, b) = (hello_masked(&mut ours), hello_masked(&mut theirs));
    let strip_id = |t: &str| {
        t.split("$2\r\nid\r\n")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(strip_id(&a), strip_id(&b));
    let script: Vec<&str> = STRINGS
        .iter()
        .copied()
        .filter(|c| *c != "HELLO 2")
        .collect();
    // RESP3 is not spoken: refused as Redis refuses a version it does not know.
    assert_eq!(
        call(&mut ours, &[b"HELLO", b"3"]),
        b"-NOPROTO unsupported protocol version\r\n"
    );
    same_replies(&mut ours, &mut theirs, &["FLUSHALL"], "flush");
    same_replies(&mut ours, &mut theirs, &script, "strings");
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}

/// The keys of a `KEYS` or `SCAN` reply (an array of bulks, or `[cursor, array]`), and the
/// cursor if any.
fn keys_in(reply: &[u8]) -> (Option<u64>, BTreeSet<String>) {
    let text = String::from_utf8_lossy(reply);
    let mut lines = text.split("\r\n");
    let mut cursor = None;
    let mut keys = BTreeSet::new();
    let mut bulks = Vec::new();
    while let Some(l) = lines.next() {
        if l.starts_with('$') {
            bulks.push(lines.next().unwrap_or_default().to_string());
        }
    }
    if text.starts_with("*2\r\n$") && !bulks.is_empty() {
        cursor = bulks[0].parse().ok();
        bulks.remove(0);
    }
    keys.extend(bulks);
    (cursor, keys)
}

fn scan_all(s: &mut TcpStream, extra: &[&[u8]]) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    let mut cursor = 0u64;
    for _ in 0..100_000 {
        let c = cursor.to_string();
        let mut args: Vec<&[u8]> = vec![b"SCAN", c.as_bytes()];
        args.extend_from_slice(extra);
        let (next, keys) = keys_in(&call(s, &args));
        let next = next.expect("a cursor");
        for k in keys {
            assert!(all.insert(k.clone()), "{k} returned twice");
        }
        if next == 0 {
            return all;
        }
        cursor = next;
    }
    panic!("SCAN did not end");
}

#[test]
fn keys_and_scan_return_the_same_keys_as_redis() {
    let store = store();
    let redis = Redis::start(&[], None);
    let (mut ours, mut theirs) = (connect(&store.addrs[0]), connect(&redis.addr));
    for s in [&mut ours, &mut theirs] {
        for i in 0..300 {
            let k = format!("user:{i}");
            call(s, &[b"SET", k.as_bytes(), b"x"]);
            let k = format!("item:{i}");
            call(s, &[b"SET", k.as_bytes(), b"x"]);
        }
    }
    for pattern in ["*", "user:*", "user:1?", "*[0-2]", "item:\\*", "*:*:*"] {
        let args: [&[u8]; 2] = [b"KEYS", pattern.as_bytes()];
        let (_, a) = keys_in(&call(&mut ours, &args));
        let (_, b) = keys_in(&call(&mut theirs, &args));
        assert_eq!(a, b, "KEYS {pattern}");
    }
    let extras: [&[&[u8]]; 4] = [
        &[],
        &[b"MATCH", b"user:2*", b"COUNT", b"5"],
        &[b"TYPE", b"string"],
        &[b"TYPE", b"hash"],
    ];
    for extra in extras {
        assert_eq!(
            scan_all(&mut ours, extra),
            scan_all(&mut theirs, extra),
            "{extra:?}"
        );
    }
    same_replies(
        &mut ours,
        &mut theirs,
        &[
            "SCAN x",
            "SCAN 0 COUNT 0",
            "SCAN 0 COUNT x",
            "SCAN 0 FOO bar",
            "SCAN 0 MATCH",
            "KEYS",
        ],
        "SCAN errors",
    );
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}

/// The section titles of an `INFO` reply (without gsm-kv's own `Gossamer`).
fn titles(reply: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(reply)
        .lines()
        .filter(|l| l.starts_with("# ") && *l != "# Gossamer")
        .map(str::to_string)
        .collect()
}

#[test]
fn info_shows_the_sections_asked_for() {
    let store = store();
    let redis = Redis::start(&[], None);
    let (mut ours, mut theirs) = (connect(&store.addrs[0]), connect(&redis.addr));
    let asks: [&[&[u8]]; 5] = [
        &[],
        &[b"keyspace"],
        &[b"SERVER", b"clients"],
        &[b"default"],
        &[b"bogus"],
    ];
    for ask in asks {
        let mut args: Vec<&[u8]> = vec![b"INFO"];
        args.extend_from_slice(ask);
        let (a, b) = (call(&mut ours, &args), call(&mut theirs, &args));
        assert_eq!(titles(&a), titles(&b), "INFO {ask:?}");
        if ask.is_empty() || ask == [b"bogus"] {
            continue;
        }
        assert!(!titles(&a).is_empty(), "INFO {ask:?}");
    }
    assert_eq!(
        call(&mut ours, &[b"INFO", b"bogus"]),
        call(&mut theirs, &[b"INFO", b"bogus"])
    );
    // Calls are counted on every worker and summed; only `all` and `everything` show them.
    for _ in 0..5 {
        call(&mut ours, &[b"SET", b"k", b"v"]);
    }
    let stats = String::from_utf8_lossy(&call(&mut ours, &[b"INFO", b"commandstats"])).to_string();
    assert!(stats.contains("cmdstat_set:calls=5,"), "{stats}");
    let all = String::from_utf8_lossy(&call(&mut ours, &[b"INFO", b"all"])).to_string();
    for field in [
        "rejected_calls",
        "used_cpu_user",
        "used_memory",
        "master_repl_offset",
    ] {
        assert!(all.contains(field), "INFO all lacks {field}");
    }
    let default = String::from_utf8_lossy(&call(&mut ours, &[b"INFO"])).to_string();
    assert!(!default.contains("rejected_calls"), "{default}");
    let text = call(&mut ours, &[b"INFO", b"keyspace"]);
    assert!(
        String::from_utf8_lossy(&text).contains("db0:keys=1,"),
        "{}",
        String::from_utf8_lossy(&text)
    );
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}

/// Keys on every pair of the store's three shards (and on one), renamed and copied.
const MOVES: &[&str] = &[
    "SET a 1",
    "EXPIRE a 100",
    "RENAME a b",
    "TTL b",
    "EXISTS a",
    "GET b",
    "RENAME b c",
    "RENAME c d",
    "RENAME d e",
    "RENAME e f",
    "GET f",
    "TTL f",
    "RENAME nokey x",
    "RENAMENX nokey x",
    "RENAME f f",
    "RENAMENX f f",
    "SET g 2",
    "RENAMENX f g",
    "RENAMENX f h",
    "RENAMENX h i",
    "RENAMENX i j",
    "GET j",
    "RENAME j g",
    "GET g",
    "HSET hh x 1 y 2",
    "RENAME hh h2",
    "RENAME h2 h3",
    "HGETALL h3",
    "TYPE h3",
    "COPY h3 h4",
    "COPY h3 h5",
    "COPY h3 h4",
    "HSET h4 z 3",
    "HGETALL h3",
    "COPY h4 h3 REPLACE",
    "HGETALL h3",
    "COPY g g",
    "COPY nokey k",
    "COPY g k DB 0",
    "COPY g k3 DB x",
    "COPY g k4 FOO",
    "COPY g k5 DB 0 REPLACE",
    "GET k5",
    "SET exp v PX 100000",
    "COPY exp exp2",
    "COPY exp exp3",
    "TTL exp2",
    "RENAME",
    "RENAME a",
    "COPY a",
    "KEYS *",
];

const OBJECT_LCS_COMMAND: &[&str] = &[
    "SET n 1234",
    "SET m 123456789012",
    "SET s hello",
    "SET l 0123456789012345678901234567890123456789012345678901234567890123456789",
    "OBJECT ENCODING n",
    "OBJECT ENCODING m",
    "OBJECT ENCODING s",
    "OBJECT ENCODING l",
    "OBJECT ENCODING nokey",
    "SETRANGE n 0 2",
    "OBJECT ENCODING n",
    "SET n 1234",
    "SETRANGE n 0 ",
    "OBJECT ENCODING n",
    "APPEND n 5",
    "OBJECT ENCODING n",
    "APPEND fresh 12",
    "OBJECT ENCODING fresh",
    "SET n 1234",
    "OBJECT REFCOUNT n",
    "OBJECT REFCOUNT m",
    "OBJECT REFCOUNT nokey",
    "OBJECT IDLETIME nokey",
    "OBJECT FREQ s",
    "OBJECT FOO s",
    "OBJECT ENCODING",
    "OBJECT",
    "OBJECT HELP",
    "HSET h f v",
    "OBJECT ENCODING h",
    "SET a ohmytext",
    "SET b mynewtext",
    "LCS a b",
    "LCS a b LEN",
    "LCS a b IDX",
    "LCS a b IDX MINMATCHLEN 4",
    "LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN",
    "LCS a b IDX WITHMATCHLEN",
    "LCS a b LEN IDX",
    "LCS a b FOO",
    "LCS a b MINMATCHLEN",
    "LCS a b MINMATCHLEN x",
    "LCS a nokey",
    "LCS nokey nokey2 IDX",
    "LCS a a",
    "LCS a h",
    "LCS h a FOO",
    "LCS a",
    "COMMAND INFO nosuch",
    "COMMAND FOO",
    "COMMAND COUNT x",
    "COMMAND LIST x",
    "COMMAND GETKEYS get a",
    "COMMAND GETKEYS mset a 1 b 2",
    "COMMAND GETKEYS lcs a b",
    "COMMAND GETKEYS nosuch a",
    "COMMAND GETKEYS get",
    "COMMAND GETKEYS ping",
    "CONFIG FOO",
    "CONFIG GET",
    "CONFIG RESETSTAT x",
    "CLUSTER INFO",
    "CLUSTER KEYSLOT a",
    "CLUSTER",
];

#[test]
fn moves_objects_lcs_and_command_answer_as_redis_does() {
    let store = store();
    let redis = Redis::start(&[], None);
    let (mut ours, mut theirs) = (connect(&store.addrs[0]), connect(&redis.addr));
    same_replies(&mut ours, &mut theirs, &["FLUSHALL"], "flush");
    let moves: Vec<&str> = MOVES.iter().copied().filter(|c| *c != "KEYS *").collect();
    same_replies(&mut ours, &mut theirs, &moves, "moves");
    // One database: another is out of range, as in a Redis started with `databases 1`.
    assert_eq!(
        call(&mut ours, &[b"COPY", b"g", b"k2", b"DB", b"1"]),
        b"-ERR DB index is out of range\r\n"
    );
    let (_, a) = keys_in(&call(&mut ours, &[b"KEYS", b"*"]));
    let (_, b) = keys_in(&call(&mut theirs, &[b"KEYS", b"*"]));
    assert_eq!(a, b, "the keys after the moves");
    same_replies(&mut ours, &mut theirs, &["FLUSHALL"], "flush");
    same_replies(
        &mut ours,
        &mut theirs,
        OBJECT_LCS_COMMAND,
        "object, lcs, command",
    );
    // `COMMAND INFO`: name, arity, flags and key positions as Redis's; the ACL categories,
    // tips, key specifications and subcommands after them are given empty.
    for name in [
        "get", "mset", "del", "lcs", "hset", "object", "ping", "rename",
    ] {
        let args: [&[u8]; 3] = [b"COMMAND", b"INFO", name.as_bytes()];
        let (a, b) = (call(&mut ours, &args), call(&mut theirs, &args));
        let a = String::from_utf8_lossy(&a);
        let head = a
            .strip_suffix("*0\r\n*0\r\n*0\r\n*0\r\n")
            .unwrap_or_else(|| panic!("COMMAND INFO {name}: {a:?}"));
        assert!(
            String::from_utf8_lossy(&b).starts_with(head),
            "COMMAND INFO {name}: {a:?} against {:?}",
            String::from_utf8_lossy(&b)
        );
    }
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}

#[test]
fn randomkey_reaches_every_shard_and_client_list_shows_the_request_and_time_ticks() {
    let store = store();
    let mut s = connect(&store.addrs[0]);
    // Keys on each of the three shards (FNV-1a of these names differ modulo 3).
    let keys: Vec<String> = (0..12).map(|i| format!("key:{i}")).collect();
    for k in &keys {
        call(&mut s, &[b"SET", k.as_bytes(), b"v"]);
    }
    let mut seen = BTreeSet::new();
    for _ in 0..400 {
        let got = call(&mut s, &[b"RANDOMKEY"]);
        let text = String::from_utf8_lossy(&got).to_string();
        seen.insert(text.lines().nth(1).unwrap_or_default().to_string());
    }
    assert!(seen.len() >= 6, "RANDOMKEY gave only {seen:?}");
    // `qbuf` is the request's own length, as Redis's tests check: 26 bytes for CLIENT LIST.
    let list = String::from_utf8_lossy(&call(&mut s, &[b"CLIENT", b"LIST"])).to_string();
    assert!(list.contains(" qbuf=26 "), "{list}");
    let time = |s: &mut TcpStream| {
        let t = String::from_utf8_lossy(&call(s, &[b"TIME"])).to_string();
        let v: Vec<u64> = t.lines().filter_map(|l| l.parse().ok()).collect();
        assert_eq!(v.len(), 2, "{t}");
        v[0] * 1_000_000 + v[1]
    };
    let (a, b) = (time(&mut s), time(&mut s));
    assert!(b >= a && a > 1_600_000_000_000_000, "{a} {b}");
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}
