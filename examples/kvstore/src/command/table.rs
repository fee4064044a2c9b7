//! The table of the commands this store knows, as `COMMAND` reports them (name, arity, flags,
//! first key, last key, key step, as Redis 7.0 gives them), and the `COMMAND` command: `COUNT`,
//! `INFO`, `LIST`, and `DOCS` answered empty (clients such as `redis-cli` then use their own
//! help).

use super::{Plan, error, reply};
use crate::resp;

/// One command: name, arity (negative: at least), flags, first key, last key, step.
type Row = (&'static str, i64, &'static str, i64, i64, i64);

const W: &str = "write denyoom";
const WF: &str = "write denyoom fast";
const R: &str = "readonly";
const RF: &str = "readonly fast";
const D: &str = "write";
const DF: &str = "write fast";
const N: &str = "";
const NF: &str = "fast";

/// Every command, with Redis's arity and key positions.
const COMMANDS: &[Row] = &[
    ("get", 2, RF, 1, 1, 1),
    ("set", -3, W, 1, 1, 1),
    ("setex", 4, W, 1, 1, 1),
    ("psetex", 4, W, 1, 1, 1),
    ("setnx", 3, WF, 1, 1, 1),
    ("getset", 3, WF, 1, 1, 1),
    ("getdel", 2, DF, 1, 1, 1),
    ("getex", -2, DF, 1, 1, 1),
    ("del", -2, D, 1, -1, 1),
    ("unlink", -2, DF, 1, -1, 1),
    ("exists", -2, RF, 1, -1, 1),
    ("incr", 2, WF, 1, 1, 1),
    ("decr", 2, WF, 1, 1, 1),
    ("incrby", 3, WF, 1, 1, 1),
    ("decrby", 3, WF, 1, 1, 1),
    ("incrbyfloat", 3, WF, 1, 1, 1),
    ("mget", -2, RF, 1, -1, 1),
    ("mset", -3, W, 1, -1, 2),
    ("msetnx", -3, W, 1, -1, 2),
    ("append", 3, WF, 1, 1, 1),
    ("strlen", 2, RF, 1, 1, 1),
    ("getrange", 4, R, 1, 1, 1),
    ("substr", 4, R, 1, 1, 1),
    ("setrange", 4, W, 1, 1, 1),
    ("lcs", -3, R, 1, 2, 1),
    ("expire", -3, DF, 1, 1, 1),
    ("pexpire", -3, DF, 1, 1, 1),
    ("expireat", -3, DF, 1, 1, 1),
    ("pexpireat", -3, DF, 1, 1, 1),
    ("expiretime", 2, RF, 1, 1, 1),
    ("pexpiretime", 2, RF, 1, 1, 1),
    ("persist", 2, DF, 1, 1, 1),
    ("ttl", 2, RF, 1, 1, 1),
    ("pttl", 2, RF, 1, 1, 1),
    ("type", 2, RF, 1, 1, 1),
    ("keys", 2, R, 0, 0, 0),
    ("scan", -2, R, 0, 0, 0),
    ("randomkey", 1, R, 0, 0, 0),
    ("rename", 3, D, 1, 2, 1),
    ("renamenx", 3, DF, 1, 2, 1),
    ("copy", -3, W, 1, 2, 1),
    ("object", -2, N, 0, 0, 0),
    ("memory", -2, N, 0, 0, 0),
    ("hset", -4, WF, 1, 1, 1),
    ("hmset", -4, WF, 1, 1, 1),
    ("hsetnx", 4, WF, 1, 1, 1),
    ("hget", 3, RF, 1, 1, 1),
    ("hmget", -3, RF, 1, 1, 1),
    ("hdel", -3, DF, 1, 1, 1),
    ("hlen", 2, RF, 1, 1, 1),
    ("hexists", 3, RF, 1, 1, 1),
    ("hstrlen", 3, RF, 1, 1, 1),
    ("hkeys", 2, R, 1, 1, 1),
    ("hvals", 2, R, 1, 1, 1),
    ("hgetall", 2, R, 1, 1, 1),
    ("hincrby", 4, WF, 1, 1, 1),
    ("hincrbyfloat", 4, WF, 1, 1, 1),
    ("hscan", -3, R, 1, 1, 1),
    ("hrandfield", -2, R, 1, 1, 1),
    ("dbsize", 1, RF, 0, 0, 0),
    ("flushall", -1, D, 0, 0, 0),
    ("flushdb", -1, D, 0, 0, 0),
    ("info", -1, N, 0, 0, 0),
    ("ping", -1, NF, 0, 0, 0),
    ("echo", 2, NF, 0, 0, 0),
    ("time", 1, NF, 0, 0, 0),
    ("quit", -1, N, 0, 0, 0),
    ("shutdown", -1, N, 0, 0, 0),
    ("select", 2, NF, 0, 0, 0),
    ("hello", -1, NF, 0, 0, 0),
    ("command", -1, N, 0, 0, 0),
    ("config", -2, N, 0, 0, 0),
    ("client", -2, N, 0, 0, 0),
    ("function", -2, N, 0, 0, 0),
    ("cluster", -2, N, 0, 0, 0),
    ("asking", 1, NF, 0, 0, 0),
    ("readonly", 1, NF, 0, 0, 0),
    ("readwrite", 1, NF, 0, 0, 0),
];

fn row(out: &mut Vec<u8>, r: &Row) {
    let (name, arity, flags, first, last, step) = *r;
    resp::array(out, 10);
    resp::bulk(out, name.as_bytes());
    resp::integer(out, arity);
    let flags: Vec<&str> = flags.split_whitespace().collect();
    resp::array(out, flags.len());
    for f in flags {
        resp::simple(out, f);
    }
    for n in [first, last, step] {
        resp::integer(out, n);
    }
    // ACL categories, tips, key specifications, subcommands: none given.
    for _ in 0..4 {
        resp::array(out, 0);
    }
}

/// The row of the command `name` (lower case), to count its calls.
pub fn row_of(name: &str) -> Option<usize> {
    COMMANDS.iter().position(|r| r.0 == name)
}

/// The name of the command at `row`.
pub fn name_of(row: usize) -> Option<&'static str> {
    COMMANDS.get(row).map(|r| r.0)
}

fn find(name: &[u8]) -> Option<&'static Row> {
    COMMANDS
        .iter()
        .find(|r| r.0.as_bytes().eq_ignore_ascii_case(name))
}

/// `COMMAND [COUNT | INFO [name...] | LIST | DOCS [name...]]`.
pub(super) fn command(args: &[Vec<u8>]) -> Plan {
    let Some(sub) = args.get(1).map(|s| s.to_ascii_lowercase()) else {
        return reply(|o| {
            resp::array(o, COMMANDS.len());
            COMMANDS.iter().for_each(|r| row(o, r));
        });
    };
    match (sub.as_slice(), args.len()) {
        (b"count", 2) => reply(|o| resp::integer(o, COMMANDS.len() as i64)),
        (b"list", 2) => reply(|o| {
            resp::array(o, COMMANDS.len());
            COMMANDS.iter().for_each(|r| resp::bulk(o, r.0.as_bytes()));
        }),
        (b"info", 2) => command(&args[..1]),
        (b"info", _) => reply(|o| {
            resp::array(o, args.len() - 2);
            for name in &args[2..] {
                match find(name) {
                    Some(r) => row(o, r),
                    None => resp::nil(o),
                }
            }
        }),
        (b"docs", _) => reply(|o| resp::array(o, 0)),
        (b"getkeys", n) if n >= 4 => get_keys(&args[2..]),
        (b"list", _) => error("ERR syntax error"),
        (b"count" | b"getkeys", _) => super::bad_subcommand("command", &args[1], true),
        _ => super::bad_subcommand("command", &args[1], false),
    }
}

/// `COMMAND GETKEYS command arg...`: the keys among the arguments, by the table's positions.
fn get_keys(argv: &[Vec<u8>]) -> Plan {
    let Some(&(_, arity, _, first, last, step)) = find(&argv[0]) else {
        return error("ERR Invalid command specified");
    };
    let n = argv.len() as i64;
    if (arity > 0 && n != arity) || n < -arity {
        return error("ERR Invalid number of arguments specified for command");
    }
    if first == 0 {
        return error("ERR The command has no key arguments");
    }
    let last = if last < 0 { n + last } else { last };
    let keys: Vec<&Vec<u8>> = (first..=last)
        .step_by(step.max(1) as usize)
        .filter_map(|i| argv.get(i as usize))
        .collect();
    reply(|o| {
        resp::array(o, keys.len());
        keys.iter().for_each(|k| resp::bulk(o, k));
    })
}

/// The keys of a request (`args` not empty) by the table's positions, as a cluster routes
/// it; `OBJECT` and `MEMORY USAGE` name theirs after a subcommand. `None` for a command not in
/// the table or of the wrong arity (planning then answers the error).
pub fn keys_of(args: &[Vec<u8>]) -> Option<Vec<&[u8]>> {
    let &(name, arity, _, first, last, step) = find(&args[0])?;
    let n = args.len() as i64;
    if (arity > 0 && n != arity) || n < -arity {
        return None;
    }
    let (first, last, step) = match name {
        "object" | "memory" if n >= 3 => (2, 2, 1),
        _ => (first, last, step),
    };
    if first == 0 {
        return Some(Vec::new());
    }
    let last = if last < 0 { n + last } else { last.min(n - 1) };
    Some(
        (first..=last)
            .step_by(step.max(1) as usize)
            .filter_map(|i| args.get(i as usize).map(Vec::as_slice))
            .collect(),
    )
}

/// Whether `name` is a command of the table (`COMMAND INFO` knows it).
#[cfg(test)]
pub(super) fn known(name: &str) -> bool {
    find(name.as_bytes()).is_some()
}
