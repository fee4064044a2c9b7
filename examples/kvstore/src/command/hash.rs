//! Planning the hash commands: arity and arguments checked in Redis 7.0's order (an argument
//! that is not a number is refused before the key is looked at; a wrong type is the shard's to
//! find).

use super::{Plan, error, int_arg};
use crate::shard::strings::parse_float;
use crate::shard::{HashOp, Op};

/// The commands planned here.
pub(super) const NAMES: &[&str] = &[
    "hset",
    "hmset",
    "hsetnx",
    "hget",
    "hmget",
    "hdel",
    "hlen",
    "hexists",
    "hstrlen",
    "hkeys",
    "hvals",
    "hgetall",
    "hincrby",
    "hincrbyfloat",
    "hscan",
    "hrandfield",
];

/// The most elements `HRANDFIELD` draws with repeats (Redis has no bound: it would fill the
/// client's buffer until the connection is dropped; here the request is refused instead).
const MAX_DRAWS: u64 = 1 << 24;

fn on(key: Vec<u8>, op: HashOp) -> Plan {
    Plan::One(key.clone(), Op::Hash(key, op))
}

/// The next argument (arity was checked).
fn take(args: &mut impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    args.next().unwrap_or_default()
}

/// Whether `n` arguments (the name included) fit the command's arity.
fn arity_ok(name: &str, n: usize) -> bool {
    match name {
        "hset" | "hmset" => n >= 4 && n % 2 == 0,
        "hsetnx" | "hincrby" | "hincrbyfloat" => n == 4,
        "hget" | "hexists" | "hstrlen" => n == 3,
        "hmget" | "hdel" | "hscan" => n >= 3,
        "hrandfield" => n >= 2,
        _ => n == 2,
    }
}

/// The plan of one of [`NAMES`].
pub(super) fn plan(name: &str, mut args: Vec<Vec<u8>>) -> Plan {
    if !arity_ok(name, args.len()) {
        return super::arity(name);
    }
    let rest = args.split_off(2);
    let key = args.swap_remove(1);
    let mut rest = rest.into_iter();
    let op = match name {
        "hset" | "hmset" => {
            let mut pairs = Vec::with_capacity(rest.len() / 2);
            while let (Some(f), Some(v)) = (rest.next(), rest.next()) {
                pairs.push((f, v));
            }
            HashOp::Set(pairs, name == "hmset")
        }
        "hsetnx" => HashOp::SetNx(take(&mut rest), take(&mut rest)),
        "hget" => HashOp::Get(take(&mut rest)),
        "hexists" => HashOp::Exists(take(&mut rest)),
        "hstrlen" => HashOp::StrLen(take(&mut rest)),
        "hmget" => HashOp::MGet(rest.collect()),
        "hdel" => HashOp::Del(rest.collect()),
        "hlen" => HashOp::Len,
        "hkeys" => HashOp::Keys,
        "hvals" => HashOp::Vals,
        "hgetall" => HashOp::GetAll,
        "hincrby" => {
            let field = take(&mut rest);
            match int_arg(&take(&mut rest)) {
                Ok(by) => HashOp::IncrBy(field, by),
                Err(e) => return e,
            }
        }
        "hincrbyfloat" => {
            let (field, by) = (take(&mut rest), take(&mut rest));
            match parse_float(&by) {
                None => return error("ERR value is not a valid float"),
                Some(v) if !v.is_finite() => return error("ERR value is NaN or Infinity"),
                Some(_) => HashOp::IncrByFloat(field, by),
            }
        }
        "hscan" => match scan(rest.collect()) {
            Ok(op) => op,
            Err(e) => return e,
        },
        "hrandfield" => match rand_field(rest.collect()) {
            Ok(op) => op,
            Err(e) => return e,
        },
        _ => return super::unknown(&[name.as_bytes().to_vec()]),
    };
    on(key, op)
}

/// `HSCAN key cursor [MATCH pattern] [COUNT n]`: every field in one reply (`COUNT` is a hint
/// Redis ignores too for a small hash).
fn scan(args: Vec<Vec<u8>>) -> Result<HashOp, Plan> {
    let cursor = std::str::from_utf8(&args[0])
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| error("ERR invalid cursor"))?;
    let mut pattern = None;
    let mut i = 1;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return Err(error("ERR syntax error"));
        };
        match args[i].to_ascii_lowercase().as_slice() {
            b"count" => match int_arg(value)? {
                c if c < 1 => return Err(error("ERR syntax error")),
                _ => {}
            },
            b"match" if value.as_slice() != b"*" => pattern = Some(value.clone()),
            b"match" => {}
            _ => return Err(error("ERR syntax error")),
        }
        i += 2;
    }
    Ok(HashOp::Scan { cursor, pattern })
}

/// `HRANDFIELD key [count [WITHVALUES]]`, with Redis's range checks.
fn rand_field(args: Vec<Vec<u8>>) -> Result<HashOp, Plan> {
    let Some(count) = args.first() else {
        return Ok(HashOp::RandField {
            count: None,
            values: false,
        });
    };
    let count = int_arg(count)?;
    if count == i64::MIN {
        return Err(error(&format!(
            "ERR value is out of range, value must between {} and {}",
            -i64::MAX,
            i64::MAX
        )));
    }
    let values = match args.get(1) {
        None => false,
        Some(w) if args.len() == 2 && w.eq_ignore_ascii_case(b"withvalues") => true,
        Some(_) => return Err(error("ERR syntax error")),
    };
    if values && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return Err(error("ERR value is out of range"));
    }
    if count < 0 && count.unsigned_abs() > MAX_DRAWS {
        return Err(error("ERR value is out of range"));
    }
    Ok(HashOp::RandField {
        count: Some(count),
        values,
    })
}
