//! Planning the keyspace commands: `TYPE`, `UNLINK`, `KEYS`, `SCAN`, `RANDOMKEY`.
//!
//! `SCAN`'s cursor is the index of the next shard to read: each call returns one shard's
//! matching keys whole (Redis allows a call to return more than `COUNT`), so a key present for
//! the whole iteration is returned exactly once, however the shards change meanwhile.

use super::{Fold, Plan, Split, error, int_arg};
use crate::shard::Op;

/// The commands planned here.
pub(super) const NAMES: &[&str] = &[
    "type",
    "unlink",
    "keys",
    "randomkey",
    "scan",
    "persist",
    "expiretime",
    "pexpiretime",
];

/// The plan of one of [`NAMES`], arity checked.
pub(super) fn plan(name: &str, mut args: Vec<Vec<u8>>) -> Plan {
    let n = args.len();
    let arity = || super::arity(name);
    match name {
        "type" if n != 2 => arity(),
        "type" => {
            let key = args.swap_remove(1);
            Plan::One(key.clone(), Op::Type(key))
        }
        "unlink" if n < 2 => arity(),
        "unlink" => Plan::Split(Split::Del(args.split_off(1))),
        "keys" if n != 2 => arity(),
        "keys" => Plan::Every(
            Op::Keys {
                pattern: Some(args.swap_remove(1)),
                kind: None,
            },
            Fold::Concat,
        ),
        "randomkey" if n != 1 => arity(),
        "randomkey" => Plan::Every(Op::RandomKey, Fold::First),
        "persist" | "expiretime" | "pexpiretime" if n != 2 => arity(),
        "persist" => {
            let key = args.swap_remove(1);
            Plan::One(key.clone(), Op::Persist(key))
        }
        "expiretime" | "pexpiretime" => {
            let key = args.swap_remove(1);
            Plan::One(key.clone(), Op::ExpireTime(key, name == "pexpiretime"))
        }
        "scan" if n < 2 => arity(),
        "scan" => scan(&args),
        _ => super::unknown(&args),
    }
}

/// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]`
fn scan(args: &[Vec<u8>]) -> Plan {
    let cursor = match std::str::from_utf8(&args[1])
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
    {
        Some(c) => c,
        None => return error("ERR invalid cursor"),
    };
    let (mut pattern, mut kind) = (None, None);
    let mut i = 2;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return error("ERR syntax error");
        };
        match args[i].to_ascii_lowercase().as_slice() {
            b"count" => match int_arg(value) {
                Err(e) => return e,
                Ok(c) if c < 1 => return error("ERR syntax error"),
                Ok(_) => {}
            },
            b"match" => pattern = Some(value.clone()),
            b"type" => kind = Some(value.clone()),
            _ => return error("ERR syntax error"),
        }
        i += 2;
    }
    Plan::Scan {
        shard: cursor,
        op: Op::Keys { pattern, kind },
    }
}
