//! Planning the string commands beyond `GET`/`SET`/`INCRBY`: `GETEX`, `INCRBYFLOAT`,
//! `GETRANGE`, `SETRANGE`, `APPEND`, `STRLEN`, with Redis 7.0's checks in its order.

use super::{Plan, Unit, error, expiry, int_arg};
use crate::shard::strings::parse_float;
use crate::shard::{Op, Ttl};

/// `GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]`: the same option again is accepted (the last
/// number wins), two different ones are a syntax error.
pub(super) fn get_ex(mut args: Vec<Vec<u8>>) -> Plan {
    let mut persist = false;
    let mut expire: Option<(Unit, usize)> = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        let has_next = i + 1 < args.len();
        let unit = expire.map(|e| e.0);
        let only = |u: Unit| !persist && unit.is_none_or(|x| x == u) && has_next;
        match opt.as_slice() {
            b"PERSIST" if unit.is_none() => persist = true,
            b"EX" if only(Unit::Ex) => expire = Some((Unit::Ex, i + 1)),
            b"PX" if only(Unit::Px) => expire = Some((Unit::Px, i + 1)),
            b"EXAT" if only(Unit::ExAt) => expire = Some((Unit::ExAt, i + 1)),
            b"PXAT" if only(Unit::PxAt) => expire = Some((Unit::PxAt, i + 1)),
            _ => return error("ERR syntax error"),
        }
        i += if expire.is_some_and(|e| e.1 == i + 1) {
            2
        } else {
            1
        };
    }
    let ttl = match expire {
        Some((unit, at)) => match expiry("getex", unit, &args[at]) {
            Ok(when) => Some(Ttl::Expire(when)),
            Err(e) => return e,
        },
        None if persist => Some(Ttl::Clear),
        None => None,
    };
    args.truncate(2);
    let key = args.swap_remove(1);
    Plan::One(key.clone(), Op::GetEx(key, ttl))
}

/// The commands planned here.
pub(super) const NAMES: &[&str] = &[
    "incrbyfloat",
    "getrange",
    "substr",
    "setrange",
    "append",
    "strlen",
    "getex",
    "getdel",
    "getset",
    "setnx",
];

/// The plan of one of [`NAMES`], arity checked.
pub(super) fn plan(name: &str, mut args: Vec<Vec<u8>>) -> Plan {
    let n = args.len();
    let arity = || super::arity(name);
    match name {
        "incrbyfloat" if n != 3 => arity(),
        "incrbyfloat" => match parse_float(&args[2]) {
            Some(_) => {
                let by = args.pop().unwrap_or_default();
                let key = args.swap_remove(1);
                Plan::One(key.clone(), Op::IncrByFloat(key, by))
            }
            None => error("ERR value is not a valid float"),
        },
        "getrange" | "substr" if n != 4 => arity(),
        "getrange" | "substr" => match (int_arg(&args[2]), int_arg(&args[3])) {
            (Err(e), _) | (_, Err(e)) => e,
            (Ok(start), Ok(end)) => {
                let key = args.swap_remove(1);
                Plan::One(key.clone(), Op::GetRange(key, start, end))
            }
        },
        "setrange" if n != 4 => arity(),
        "setrange" => match int_arg(&args[2]) {
            Err(e) => e,
            Ok(offset) if offset < 0 => error("ERR offset is out of range"),
            Ok(offset) => {
                let value = args.pop().unwrap_or_default();
                let key = args.swap_remove(1);
                Plan::One(key.clone(), Op::SetRange(key, offset as u64, value))
            }
        },
        "append" if n != 3 => arity(),
        "append" => {
            let value = args.pop().unwrap_or_default();
            let key = args.swap_remove(1);
            Plan::One(key.clone(), Op::Append(key, value))
        }
        "strlen" if n != 2 => arity(),
        "strlen" => {
            let key = args.swap_remove(1);
            Plan::One(key.clone(), Op::StrLen(key))
        }
        "getdel" if n != 2 => arity(),
        "getdel" => {
            let key = args.swap_remove(1);
            Plan::One(key.clone(), Op::GetDel(key))
        }
        "getset" | "setnx" if n != 3 => arity(),
        "getset" | "setnx" => {
            let value = args.pop().unwrap_or_default();
            let key = args.swap_remove(1);
            let op = if name == "setnx" {
                Op::SetNx(key.clone(), value)
            } else {
                Op::Set {
                    key: key.clone(),
                    value,
                    ttl: Ttl::Clear,
                    cond: crate::shard::Cond::Always,
                    get: true,
                }
            };
            Plan::One(key, op)
        }
        "getex" if n < 2 => arity(),
        "getex" => get_ex(args),
        _ => super::unknown(&args),
    }
}
