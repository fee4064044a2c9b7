use super::*;
use crate::shard::When;

fn argv(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn error_text(p: Plan) -> String {
    match p {
        Plan::Reply(bytes) => String::from_utf8(bytes).unwrap(),
        other => panic!("not a reply: {other:?}"),
    }
}

#[test]
fn unknown_commands_get_redis_text() {
    assert_eq!(
        error_text(plan(argv(&["FOO", "a", "b"]))),
        "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(
        error_text(plan(argv(&["nope"]))),
        "-ERR unknown command 'nope', with args beginning with: \r\n"
    );
}

#[test]
fn arity_and_syntax_errors() {
    assert_eq!(
        error_text(plan(argv(&["GET"]))),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        error_text(plan(argv(&["mset", "a"]))),
        "-ERR wrong number of arguments for 'mset' command\r\n"
    );
    assert_eq!(
        error_text(plan(argv(&["set", "k", "v", "NX", "XX"]))),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        error_text(plan(argv(&["set", "k", "v", "EX", "0"]))),
        "-ERR invalid expire time in 'set' command\r\n"
    );
    assert_eq!(
        error_text(plan(argv(&["set", "k", "v", "EX", "x"]))),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        error_text(plan(argv(&["set", "k", "v", "EX"]))),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        error_text(plan(argv(&["incrby", "k", "1.5"]))),
        "-ERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn set_options_are_read() {
    assert_eq!(
        plan(argv(&["SeT", "k", "v", "px", "1500", "nx", "get"])),
        Plan::One(
            b"k".to_vec(),
            Op::Set {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
                ttl: Ttl::Expire(When::In(1500)),
                cond: Cond::Absent,
                get: true,
            }
        )
    );
}

#[test]
fn config_get_matches_globs() {
    let out = error_text(plan(argv(&["CONFIG", "GET", "save"])));
    assert_eq!(out, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
    let out = error_text(plan(argv(&["config", "get", "app*"])));
    assert_eq!(out, "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
    let out = error_text(plan(argv(&["config", "get", "nothing"])));
    assert_eq!(out, "*0\r\n");
}

#[test]
fn every_command_planned_is_in_the_command_table() {
    let core = [
        "get",
        "set",
        "setex",
        "psetex",
        "del",
        "exists",
        "incr",
        "decr",
        "incrby",
        "decrby",
        "mget",
        "mset",
        "msetnx",
        "expire",
        "pexpire",
        "expireat",
        "pexpireat",
        "ttl",
        "pttl",
        "dbsize",
        "flushall",
        "flushdb",
        "info",
        "ping",
        "echo",
        "quit",
        "hello",
        "shutdown",
        "select",
        "command",
        "config",
        "client",
        "function",
        "time",
        "cluster",
    ];
    let lists = [
        strings::NAMES,
        keyspace::NAMES,
        hash::NAMES,
        moves::NAMES,
        &core[..],
    ];
    for name in lists.iter().flat_map(|l| l.iter()) {
        assert!(table::known(name), "{name} is not in COMMAND's table");
        // And it is planned: not answered as an unknown command.
        let planned = plan(vec![name.as_bytes().to_vec()]);
        if let Plan::Reply(bytes) = planned {
            let text = String::from_utf8_lossy(&bytes);
            assert!(!text.contains("unknown command"), "{name}: {text}");
        }
    }
}
