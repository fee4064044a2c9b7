//! The same commands to `gsm-kv` (two workers, so that keys live on either) and to a
//! `redis-server` started by the test: the replies must be the same bytes. Each script starts
//! from an empty keyspace on both.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;

use common::reference::{Redis, call, connect, reply, request, same_replies};
use common::{Store, gsm_kv, start};
use gsm_tests::job::assert_exit;

fn store() -> Store {
    let mut cmd = Command::new(gsm_kv());
    cmd.args(["--port", "0"]).env("GSM_THREADS", "2");
    start(&mut cmd, 1, None)
}

/// Runs each script on a flushed keyspace of both servers.
fn compare(scripts: &[(&str, &[&str])]) {
    let store = store();
    let redis = Redis::start(&[], None);
    let (mut ours, mut theirs) = (connect(&store.addrs[0]), connect(&redis.addr));
    for (what, script) in scripts {
        same_replies(&mut ours, &mut theirs, &["FLUSHALL"], what);
        same_replies(&mut ours, &mut theirs, script, what);
    }
    drop(ours);
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}

#[test]
fn expire_overflows_are_refused_and_never_delete() {
    compare(&[
        (
            "overflow",
            &[
                "SET foo bar",
                "EXPIRE foo 9223370399119966",
                "PEXPIRE foo 9223372036854770000",
                "EXPIRE foo -9223372036854776",
                "EXPIRE foo 9223372036854775807",
                "PEXPIRE foo -9223372036854775808",
                "EXPIREAT foo 9223372036854776",
                "PEXPIREAT foo 9223372036854775807",
                "EXPIRE nokey 9223370399119966",
                "EXISTS foo",
                "TTL foo",
                "EXPIRE foo 100",
                "TTL foo",
                "EXPIRE foo -1",
                "EXISTS foo",
                "SET foo bar",
                "PEXPIREAT foo 1",
                "EXISTS foo",
                "SET foo bar",
                "EXPIREAT foo 99999999999",
                "TTL foo",
                "EXPIRE foo abc",
            ],
        ),
        (
            "options",
            &[
                "SET k v",
                "EXPIRE k 100 XX",
                "EXPIRE k 100 NX",
                "TTL k",
                "EXPIRE k 50 NX",
                "EXPIRE k 50 GT",
                "EXPIRE k 200 GT",
                "TTL k",
                "EXPIRE k 300 LT",
                "EXPIRE k 30 LT",
                "TTL k",
                "EXPIRE k 10 NX XX",
                "EXPIRE k 10 GT LT",
                "EXPIRE k 10 FOO",
                "EXPIRE k 10 xx gt",
                "SET p v",
                "EXPIRE p 10 GT",
                "EXPIRE p 10 LT",
                "TTL p",
                "EXPIRE nokey 10 NX",
                "SET q v",
                "EXPIRE q 200 LT XX",
                "EXPIRE q 200 GT XX",
                "TTL q",
                "EXPIRE q 200 XX",
                "EXPIRE q 100 LT XX",
                "EXPIRE q 300 LT XX",
                "TTL q",
            ],
        ),
    ]);
}

#[test]
fn set_options_repeat_and_conflict_as_redis_reads_them() {
    compare(&[(
        "SET",
        &[
            "SET k v PX 9223372036854775807",
            "SET k v EX 9223372036854775",
            "SET k v EX 9223372036854776",
            "SET k v EX -1",
            "SET k v PX 0",
            "SET k v KEEPTTL KEEPTTL",
            "SET k v NX NX",
            "GET k",
            "SET k w XX XX",
            "SET k w GET GET",
            "SET k v EX 10 EX 20",
            "TTL k",
            "SET k v EX abc EX 30",
            "TTL k",
            "SET k v EX 10 PX 100",
            "SET k v EX 10 KEEPTTL",
            "SET k v KEEPTTL EX 10",
            "SET k v NX XX",
            "SET k v XX NX",
            "SET k v EX",
            "SET k v EXAT 99999999999",
            "TTL k",
            "SET k v PXAT 1",
            "EXISTS k",
            "SET k v EXAT 0",
            "SET k v FOO",
            "SETEX k 100 v",
            "TTL k",
            "SETEX k 0 v",
            "SETEX k 9223372036854775807 v",
            "PSETEX k 9223372036854775807 v",
            "PSETEX k -5 v",
            "SETEX k x v",
            "SETEX k 1",
        ],
    )]);
}

#[test]
fn client_subcommands_answer_as_redis_does() {
    compare(&[(
        "CLIENT",
        &[
            "CLIENT GETNAME",
            "CLIENT SETNAME my-name",
            "CLIENT GETNAME",
            "CLIENT SETNAME",
            "CLIENT SETNAME two\x20words",
            "CLIENT SETNAME \n",
            "CLIENT ID x",
            "CLIENT FOO",
            "CLIENT KILL 1.2.3.4:5",
            "CLIENT KILL ID x",
            "CLIENT KILL ID 999999",
            "CLIENT KILL FOO bar",
            "CLIENT KILL ID",
            "CLIENT KILL ADDR 1.2.3.4:5 SKIPME yes",
            "CLIENT KILL SKIPME maybe",
            "CLIENT KILL TYPE normal",
            "CLIENT KILL TYPE foo",
            "CLIENT KILL USER wrong_user",
            "CLIENT KILL USER default SKIPME yes",
            "CLIENT LIST TYPE foo",
            "CLIENT REPLY maybe",
            "CLIENT REPLY ON",
            "CLIENT SETNAME",
            "CLIENT NO-EVICT on",
            "CLIENT UNPAUSE",
            "PING",
        ],
    )]);
}

/// The `name=` and `id=` of every line of a `CLIENT LIST` reply.
fn names_in(list: &[u8]) -> Vec<(u64, String)> {
    String::from_utf8_lossy(list)
        .lines()
        .filter(|l| l.starts_with("id="))
        .map(|l| {
            let field = |f: &str| {
                l.split(' ')
                    .find_map(|w| w.strip_prefix(f))
                    .unwrap_or_default()
                    .to_string()
            };
            (field("id=").parse().unwrap(), field("name="))
        })
        .collect()
}

fn id_of(s: &mut TcpStream) -> u64 {
    let got = call(s, &[b"CLIENT", b"ID"]);
    let text = String::from_utf8_lossy(&got);
    text.strip_prefix(':')
        .and_then(|t| t.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("CLIENT ID answered {text:?}"))
}

#[test]
fn client_id_list_reply_and_kill_work_across_workers() {
    let store = store();
    let addr = &store.addrs[0];
    // Connections go round robin to the two workers.
    let mut a = connect(addr);
    let mut b = connect(addr);
    let mut c = connect(addr);
    let (ia, ib, ic) = (id_of(&mut a), id_of(&mut b), id_of(&mut c));
    assert!(ia != ib && ib != ic && ia != ic, "{ia} {ib} {ic}");
    assert_eq!(call(&mut b, &[b"CLIENT", b"SETNAME", b"bee"]), b"+OK\r\n");
    let list = call(&mut a, &[b"CLIENT", b"LIST"]);
    let seen = names_in(&list);
    assert!(seen.contains(&(ib, "bee".into())), "{seen:?}");
    assert!(seen.contains(&(ia, String::new())), "{seen:?}");
    let info = call(&mut b, &[b"CLIENT", b"INFO"]);
    assert_eq!(names_in(&info), [(ib, "bee".to_string())]);
    // REPLY OFF: nothing until ON; SKIP: the next reply only.
    a.write_all(&request(&[b"CLIENT", b"REPLY", b"OFF"]))
        .unwrap();
    a.write_all(&request(&[b"SET", b"quiet", b"1"])).unwrap();
    a.write_all(&request(&[b"CLIENT", b"REPLY", b"ON"]))
        .unwrap();
    assert_eq!(reply(&mut a), b"+OK\r\n");
    a.write_all(&request(&[b"CLIENT", b"REPLY", b"SKIP"]))
        .unwrap();
    a.write_all(&request(&[b"GET", b"quiet"])).unwrap();
    assert_eq!(call(&mut a, &[b"PING"]), b"+PONG\r\n");
    // KILL by id from another connection (likely another worker): it is closed.
    let killed = call(
        &mut a,
        &[b"CLIENT", b"KILL", b"ID", ib.to_string().as_bytes()],
    );
    assert_eq!(killed, b":1\r\n");
    assert_eq!(
        call(&mut b, &[b"PING"]),
        b"",
        "the killed connection is closed"
    );
    let killed = call(
        &mut a,
        &[b"CLIENT", b"KILL", b"ID", ib.to_string().as_bytes()],
    );
    assert_eq!(killed, b":0\r\n");
    // Killing oneself: the reply, then the close.
    let me = call(
        &mut c,
        &[
            b"CLIENT",
            b"KILL",
            b"ID",
            ic.to_string().as_bytes(),
            b"SKIPME",
            b"no",
        ],
    );
    assert_eq!(me, b":1\r\n");
    assert_eq!(call(&mut c, &[b"PING"]), b"");
    assert_eq!(call(&mut a, &[b"PING"]), b"+PONG\r\n");
    drop(a);
    assert_exit(&store.shutdown(0), 0, "gsm-kv after SHUTDOWN");
}

#[test]
fn hashes_answer_as_redis_does_and_keep_their_type() {
    compare(&[
        (
            "hash commands",
            &[
                "HSET h a 1 b 2 c 3",
                "HSET h a 10 d 4",
                "HGETALL h",
                "HGET h a",
                "HGET h zz",
                "HGET nokey a",
                "HMGET h a zz b",
                "HMGET nokey a b",
                "HLEN h",
                "HLEN nokey",
                "HEXISTS h a",
                "HEXISTS h zz",
                "HKEYS h",
                "HVALS h",
                "HSTRLEN h a",
                "HSTRLEN h zz",
                "HSETNX h a 99",
                "HSETNX h e 5",
                "HGET h e",
                "HDEL h a zz a",
                "HKEYS h",
                "HINCRBY h n 5",
                "HINCRBY h n -7",
                "HINCRBY h e 9223372036854775807",
                "HINCRBY h b x",
                "HSET h s abc",
                "HINCRBY h s 1",
                "HINCRBYFLOAT h f 1.5",
                "HINCRBYFLOAT h f -0.25",
                "HINCRBYFLOAT h s 1",
                "HINCRBYFLOAT h f abc",
                "HINCRBYFLOAT h f inf",
                "HMSET h x 1 y 2",
                "HMSET h x",
                "HSET h x",
                "HSET h",
                "HGETALL h",
                "HSCAN h 0",
                "HSCAN h 0 MATCH [xy] COUNT 100",
                "HSCAN h x",
                "HSCAN h 0 COUNT 0",
                "HSCAN nokey 0",
                "HRANDFIELD nokey",
                "HRANDFIELD nokey 5",
                "HRANDFIELD h 0",
                "HRANDFIELD h -9223372036854775808",
                "HRANDFIELD h -9223372036854770000 WITHVALUES",
                "HRANDFIELD h 3 FOO",
                "HRANDFIELD h 100",
                "HRANDFIELD h 100 WITHVALUES",
                "TYPE h",
                "TYPE nokey",
                "HDEL h b c d e n s f x y",
                "EXISTS h",
                "HDEL h b",
                "HGETALL h",
            ],
        ),
        (
            "wrong types",
            &[
                "SET s v",
                "HSET h f v",
                "HGET s f",
                "HSET s f v",
                "HLEN s",
                "HGETALL s",
                "HINCRBY s f 1",
                "HINCRBY s f x",
                "HSCAN s 0",
                "HRANDFIELD s",
                "HDEL s f",
                "GET h",
                "INCR h",
                "APPEND h x",
                "STRLEN h",
                "GETRANGE h 0 1",
                "SETRANGE h 0 x",
                "GETEX h",
                "GETDEL h",
                "INCRBYFLOAT h 1",
                "SET h v GET",
                "GETSET h v",
                "MGET h s nokey",
                "TYPE h",
                "SETNX h v",
                "EXPIRE h 100",
                "TTL h",
                "PERSIST h",
                "SET h v",
                "TYPE h",
                "GET h",
                "HSET s2 f v",
                "MSET s2 x",
                "TYPE s2",
            ],
        ),
        (
            "a big hash",
            &[
                "HSET big f1 v1 f2 v2",
                "HSET big long_field_long_field_long_field_long_field_long_field_long_field_1 v",
                "HLEN big",
                "HGET big f2",
                "HDEL big f1",
                "HSTRLEN big long_field_long_field_long_field_long_field_long_field_long_field_1",
                "HEXISTS big f1",
                "OBJECT ENCODING big",
                "MEMORY USAGE nokey",
                "MEMORY USAGE big SAMPLES x",
            ],
        ),
    ]);
}

#[test]
fn msetnx_and_the_listpack_limits_answer_as_redis_does() {
    compare(&[
        (
            "msetnx",
            &[
                "MSETNX a 1 b 2 c 3 d 4 e 5",
                "MGET a b c d e",
                "MSETNX f 6 g 7 h 8 e 9",
                "EXISTS f g h",
                "GET e",
                "MSETNX x 1 x 2",
                "GET x",
                "MSETNX x 1 x 3",
                "GET x",
                "HSET hh f v",
                "MSETNX y 1 hh 2",
                "EXISTS y",
                "MSETNX y",
                "MSETNX y 1 z",
                "MSETNX",
            ],
        ),
        (
            "listpack limits",
            &[
                "CONFIG SET hash-max-listpack-value 4",
                "CONFIG GET hash-max-ziplist-value",
                "HSET e f 1234",
                "OBJECT ENCODING e",
                "HSET e f 12345",
                "OBJECT ENCODING e",
                "CONFIG SET hash-max-ziplist-entries 1",
                "HSET e2 a 1",
                "OBJECT ENCODING e2",
                "HSET e2 b 1",
                "OBJECT ENCODING e2",
                "CONFIG SET hash-max-listpack-value x",
                "CONFIG SET hash-max-listpack-value -1",
                "CONFIG SET hash-max-listpack-entries -1",
                "CONFIG SET hash-max-listpack-entries 1k",
                "CONFIG SET hash-max-listpack-value 2kb",
                "CONFIG GET hash-max-listpack-value",
                "CONFIG SET nosuch 1",
                "CONFIG SET hash-max-listpack-value 1 hash-max-ziplist-value 2",
                "CONFIG SET hash-max-listpack-value 1 hash-max-listpack-entries",
                "CONFIG SET hash-max-listpack-value 64 hash-max-listpack-entries 128",
                // One name at a time: Redis lists a pattern's matches in its dict's order.
                "CONFIG GET hash-max-listpack-entries",
                "CONFIG GET hash-max-listpack-value",
            ],
        ),
    ]);
}
