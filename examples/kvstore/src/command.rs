//! From a request's arguments to what must be done: a reply made on the spot, or operations
//! for the shards that own the keys and how their answers are put together. Argument checks and
//! their error texts follow Redis 7.0, so clients see the errors they know.
//!
//! This module decides nothing about where a shard lives or how a request reaches it
//! (`dispatch.rs` does), and it keeps no state: the replies it makes on the spot are those that
//! need no key (`PING`, `ECHO`, `COMMAND`, `CONFIG GET`, `SELECT 0`, `CLIENT ...`).

use crate::resp;
use crate::shard::{Cond, ExpireIf, NOT_INTEGER, Op, Ttl, When, now_ms, parse_i64};

/// Keys spread over shards by a multi-key command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Split {
    Del(Vec<Vec<u8>>),
    Exists(Vec<Vec<u8>>),
    MGet(Vec<Vec<u8>>),
    MSet(Vec<(Vec<u8>, Vec<u8>)>),
}

/// How the answers of every shard make one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// The sum of their integers (`DBSIZE`).
    Sum,
    /// `OK` when all said `OK` (`FLUSHALL`).
    AllOk,
    /// One array of every shard's values (`KEYS`).
    Concat,
    /// A random one of the non-nil answers (`RANDOMKEY`).
    First,
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// A reply that needs no shard, already encoded.
    Reply(Vec<u8>),
    /// One operation on the shard that owns `key`.
    One(Vec<u8>, Op),
    /// One operation on the connection's own worker's shard (cluster mode's slot queries).
    Here(Op),
    /// One operation per shard that owns some of the keys.
    Split(Split),
    /// The same operation on every shard.
    Every(Op, Fold),
    /// `INFO [section...]`: the key count of every shard goes into the text.
    Info(Vec<Vec<u8>>),
    /// `SCAN`: the keys of shard `shard` (the cursor), answered with the next cursor.
    Scan { shard: u64, op: Op },
    /// `CLIENT ...`: answered by the connection (`client.rs`).
    Client(Vec<Vec<u8>>),
    /// `QUIT`: answer `OK` and close.
    Quit,
    /// `SHUTDOWN [NOSAVE|SAVE]`: stop every rank of the job.
    Shutdown,
    /// `RENAME`, `RENAMENX`, `COPY`: one operation if both keys live on one shard, else a
    /// move between two (`pair.rs`).
    Move(Move),
    /// `MSETNX`: one operation if every key lives on one shard, else one per shard and an undo
    /// (`pair.rs`).
    MSetNx(Vec<(Vec<u8>, Vec<u8>)>),
    /// `CONFIG SET` of the parameters that can change: set on every rank, then `OK`.
    ConfigSet(Limits),
    /// `LCS` of two keys' strings, with its options or the error they earn.
    Lcs(Vec<Vec<u8>>, Result<crate::lcs::Options, String>),
}

fn error(text: &str) -> Plan {
    let mut out = Vec::new();
    resp::error(&mut out, text);
    Plan::Reply(out)
}

fn arity(name: &str) -> Plan {
    error(&format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Redis's reply to a command it does not know.
pub(super) fn unknown(args: &[Vec<u8>]) -> Plan {
    let mut rest = String::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        let text = String::from_utf8_lossy(a);
        let cut: String = text.chars().take(room).collect();
        rest.push_str(&format!("'{cut}' "));
    }
    let name: String = String::from_utf8_lossy(&args[0])
        .chars()
        .take(128)
        .collect();
    error(&format!(
        "ERR unknown command '{name}', with args beginning with: {rest}"
    ))
}

/// Redis 7.0's error for a subcommand of `command`: one it does not know, or (`known`) one
/// given the wrong number of arguments.
pub(super) fn bad_subcommand(command: &str, sub: &[u8], known: bool) -> Plan {
    let shown: String = String::from_utf8_lossy(sub).chars().take(128).collect();
    if known {
        let lower = shown.to_ascii_lowercase();
        return error(&format!(
            "ERR wrong number of arguments for '{command}|{lower}' command"
        ));
    }
    error(&unknown_subcommand(command, sub))
}

/// Redis 7.0's error text for a subcommand of `command` it does not know.
pub fn unknown_subcommand(command: &str, sub: &[u8]) -> String {
    let shown: String = String::from_utf8_lossy(sub).chars().take(128).collect();
    format!(
        "ERR unknown subcommand '{shown}'. Try {} HELP.",
        command.to_ascii_uppercase()
    )
}

fn reply(f: impl FnOnce(&mut Vec<u8>)) -> Plan {
    let mut out = Vec::new();
    f(&mut out);
    Plan::Reply(out)
}

fn int_arg(arg: &[u8]) -> Result<i64, Plan> {
    parse_i64(arg).ok_or_else(|| error(NOT_INTEGER))
}

/// The plan of one request (`args` is not empty).
pub fn plan(mut args: Vec<Vec<u8>>) -> Plan {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    if let Some(row) = table::row_of(&name) {
        crate::stats::count(row);
    }
    if strings::NAMES.contains(&name.as_str()) {
        return strings::plan(&name, args);
    }
    if keyspace::NAMES.contains(&name.as_str()) {
        return keyspace::plan(&name, args);
    }
    if hash::NAMES.contains(&name.as_str()) {
        return hash::plan(&name, args);
    }
    if moves::NAMES.contains(&name.as_str()) {
        return moves::plan(&name, args);
    }
    let n = args.len();
    let fixed = |want: usize| n == want;
    match name.as_str() {
        "get" if fixed(2) => Plan::One(args[1].clone(), Op::Get(args.swap_remove(1))),
        "set" if n >= 3 => set(args),
        "setex" | "psetex" if fixed(4) => setex(&name, args),
        "del" if n >= 2 => Plan::Split(Split::Del(args.split_off(1))),
        "exists" if n >= 2 => Plan::Split(Split::Exists(args.split_off(1))),
        "incr" | "decr" if fixed(2) => {
            let by = if name == "incr" { 1 } else { -1 };
            Plan::One(args[1].clone(), Op::IncrBy(args.swap_remove(1), by))
        }
        "incrby" | "decrby" if fixed(3) => match int_arg(&args[2]) {
            Err(e) => e,
            Ok(by) if name == "decrby" && by == i64::MIN => error("ERR decrement would overflow"),
            Ok(by) => {
                let by = if name == "incrby" { by } else { -by };
                args.truncate(2);
                Plan::One(args[1].clone(), Op::IncrBy(args.swap_remove(1), by))
            }
        },
        "mget" if n >= 2 => Plan::Split(Split::MGet(args.split_off(1))),
        "mset" if n >= 3 && n % 2 == 1 => {
            let mut it = args.into_iter().skip(1);
            let mut pairs = Vec::with_capacity(n / 2);
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Plan::Split(Split::MSet(pairs))
        }
        "msetnx" if n >= 3 && n % 2 == 1 => {
            let mut it = args.into_iter().skip(1);
            let mut pairs = Vec::with_capacity(n / 2);
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Plan::MSetNx(pairs)
        }
        "expire" | "pexpire" | "expireat" | "pexpireat" if n >= 3 => expire(&name, args),
        "ttl" | "pttl" if fixed(2) => Plan::One(
            args[1].clone(),
            Op::Ttl(args.swap_remove(1), name == "pttl"),
        ),
        "dbsize" if fixed(1) => Plan::Every(Op::DbSize, Fold::Sum),
        "flushall" | "flushdb" if n <= 2 => Plan::Every(Op::FlushAll, Fold::AllOk),
        "info" => Plan::Info(args.split_off(1)),
        "ping" if n <= 2 => reply(|o| match args.get(1) {
            Some(m) => resp::bulk(o, m),
            None => resp::simple(o, "PONG"),
        }),
        "echo" if fixed(2) => reply(|o| resp::bulk(o, &args[1])),
        "time" if fixed(1) => reply(|o| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            resp::array(o, 2);
            resp::bulk(o, t.as_secs().to_string().as_bytes());
            resp::bulk(o, t.subsec_micros().to_string().as_bytes());
        }),
        "quit" => Plan::Quit,
        "hello" => hello(&args),
        "shutdown" => shutdown(&args),
        "select" if fixed(2) => match int_arg(&args[1]) {
            Err(e) => e,
            Ok(0) => reply(|o| resp::simple(o, "OK")),
            Ok(_) => error("ERR DB index is out of range"),
        },
        "command" => table::command(&args),
        "config" if n >= 2 => config::plan(&args),
        "function" if n >= 2 => function(&args),
        // Cluster mode answers these before a request is planned (`cluster.rs`); without it,
        // Redis's answer of a standalone server.
        "cluster" if n >= 2 => error("ERR This instance has cluster support disabled"),
        "readonly" | "readwrite" if fixed(1) => {
            error("ERR This instance has cluster support disabled")
        }
        "asking" if fixed(1) => error("ERR This instance has cluster support disabled"),
        "client" if n >= 2 => Plan::Client(args),
        "get" | "set" | "del" | "exists" | "incr" | "decr" | "incrby" | "decrby" | "mget"
        | "mset" | "msetnx" | "expire" | "pexpire" | "expireat" | "pexpireat" | "setex"
        | "psetex" | "ttl" | "pttl" | "dbsize" | "flushall" | "flushdb" | "ping" | "echo"
        | "select" | "config" | "client" | "function" | "time" | "cluster" | "readonly"
        | "readwrite" | "asking" => arity(&name),
        _ => unknown(&args),
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`, with Redis's checks and answers. Nothing is
/// persisted and a shutdown is never left in progress, so every flag but `ABORT` stops the job
/// at once, and `ABORT` finds nothing to abort.
fn shutdown(args: &[Vec<u8>]) -> Plan {
    let (mut save, mut nosave, mut other, mut abort) = (false, false, false, false);
    for a in &args[1..] {
        match a.to_ascii_lowercase().as_slice() {
            b"nosave" => nosave = true,
            b"save" => save = true,
            b"now" | b"force" => other = true,
            b"abort" => abort = true,
            _ => return error("ERR syntax error"),
        }
    }
    if (abort && (save || nosave || other)) || (save && nosave) {
        return error("ERR syntax error");
    }
    if abort {
        return error("ERR No shutdown in progress.");
    }
    Plan::Shutdown
}

/// `invalid expire time in '<command>' command`
fn bad_expire(name: &str) -> Plan {
    error(&format!("ERR invalid expire time in '{name}' command"))
}

/// `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT key time [NX|XX|GT|LT]`, checked in Redis's
/// order: the options, the number, then the overflow of its unit and of its base.
fn expire(name: &str, mut args: Vec<Vec<u8>>) -> Plan {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        match opt.to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"gt" => gt = true,
            b"lt" => lt = true,
            _ => {
                return error(&format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(opt)
                ));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return error("ERR GT and LT options at the same time are not compatible");
    }
    let t = match int_arg(&args[2]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let seconds = name == "expire" || name == "expireat";
    let relative = name == "expire" || name == "pexpire";
    if seconds && !(i64::MIN / 1000..=i64::MAX / 1000).contains(&t) {
        return bad_expire(name);
    }
    let ms = if seconds { t * 1000 } else { t };
    let base = if relative { now_ms() } else { 0 };
    if ms > i64::MAX - base {
        return bad_expire(name);
    }
    let when = if relative { When::In(ms) } else { When::At(ms) };
    let cond = match (nx, xx, gt, lt) {
        (true, ..) => ExpireIf::None,
        (_, _, true, _) => ExpireIf::Later,
        (_, true, _, true) => ExpireIf::SoonerSome,
        (_, _, _, true) => ExpireIf::Sooner,
        (_, true, ..) => ExpireIf::Some,
        _ => ExpireIf::Always,
    };
    args.truncate(2);
    let key = args.swap_remove(1);
    Plan::One(key.clone(), Op::Expire(key, when, cond))
}

/// An expiry option's unit and base, as Redis's `EX`/`PX`/`EXAT`/`PXAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// The expiry an option's number gives, with Redis's checks: positive, and neither the unit's
/// nor the clock's addition overflows.
fn expiry(name: &str, unit: Unit, arg: &[u8]) -> Result<When, Plan> {
    let t = int_arg(arg)?;
    let seconds = matches!(unit, Unit::Ex | Unit::ExAt);
    if t <= 0 || (seconds && t > i64::MAX / 1000) {
        return Err(bad_expire(name));
    }
    let ms = if seconds { t * 1000 } else { t };
    match unit {
        Unit::Ex | Unit::Px if ms > i64::MAX - now_ms() => Err(bad_expire(name)),
        Unit::Ex | Unit::Px => Ok(When::In(ms)),
        Unit::ExAt | Unit::PxAt => Ok(When::At(ms)),
    }
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]`, options read as Redis
/// reads them: the same option again is accepted (the last number wins), a conflicting one is
/// a syntax error, and the number is checked after every option was read.
fn set(args: Vec<Vec<u8>>) -> Plan {
    let mut cond = Cond::Always;
    let mut keep = false;
    let mut get = false;
    let mut expire: Option<(Unit, usize)> = None;
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        let has_next = i + 1 < args.len();
        let unit = expire.map(|e| e.0);
        let only = |u: Unit| !keep && unit.is_none_or(|x| x == u) && has_next;
        match opt.as_slice() {
            b"NX" if cond != Cond::Present => cond = Cond::Absent,
            b"XX" if cond != Cond::Absent => cond = Cond::Present,
            b"GET" => get = true,
            b"KEEPTTL" if unit.is_none() => keep = true,
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
        Some((unit, at)) => match expiry("set", unit, &args[at]) {
            Ok(when) => Ttl::Expire(when),
            Err(e) => return e,
        },
        None if keep => Ttl::Keep,
        None => Ttl::Clear,
    };
    let mut it = args.into_iter().skip(1);
    let (key, value) = (it.next().unwrap_or_default(), it.next().unwrap_or_default());
    Plan::One(
        key.clone(),
        Op::Set {
            key,
            value,
            ttl,
            cond,
            get,
        },
    )
}

/// `SETEX key seconds value`, `PSETEX key milliseconds value`.
fn setex(name: &str, args: Vec<Vec<u8>>) -> Plan {
    let unit = if name == "setex" { Unit::Ex } else { Unit::Px };
    let when = match expiry(name, unit, &args[2]) {
        Ok(w) => w,
        Err(e) => return e,
    };
    let mut it = args.into_iter();
    let (key, value) = (it.nth(1).unwrap_or_default(), it.nth(1).unwrap_or_default());
    Plan::One(
        key.clone(),
        Op::Set {
            key,
            value,
            ttl: Ttl::Expire(when),
            cond: Cond::Always,
            get: false,
        },
    )
}

/// `HELLO [protover]`: protocol 2 (this store speaks RESP2 only, so 3 is refused as Redis
/// refuses a version it does not speak, and clients fall back to 2). Authentication and
/// `SETNAME` options are not taken.
fn hello(args: &[Vec<u8>]) -> Plan {
    if let Some(v) = args.get(1) {
        match parse_i64(v) {
            Some(2) => {}
            Some(_) => return error("NOPROTO unsupported protocol version"),
            None => return error("ERR Protocol version is not an integer or out of range"),
        }
    }
    if let Some(opt) = args.get(2) {
        return error(&format!(
            "ERR Syntax error in HELLO option '{}'",
            String::from_utf8_lossy(opt)
        ));
    }
    reply(|o| {
        let fields: [(&str, &str); 6] = [
            ("server", "redis"),
            ("version", "7.0.0"),
            ("proto", ""),
            ("id", ""),
            ("mode", "standalone"),
            ("role", "master"),
        ];
        resp::array(o, 14);
        for (k, v) in fields {
            resp::bulk(o, k.as_bytes());
            match k {
                "proto" => resp::integer(o, 2),
                "id" => resp::integer(o, 0),
                _ => resp::bulk(o, v.as_bytes()),
            }
        }
        resp::bulk(o, b"modules");
        resp::array(o, 0);
    })
}

/// `FUNCTION FLUSH [ASYNC|SYNC]` and `FUNCTION LIST`: no functions are kept (there is no
/// scripting), so there is never one to flush or list; loading one is refused.
fn function(args: &[Vec<u8>]) -> Plan {
    let sub = args[1].to_ascii_lowercase();
    let mode = args.get(2).map(|m| m.to_ascii_lowercase());
    match (sub.as_slice(), args.len()) {
        (b"flush", 2) => reply(|o| resp::simple(o, "OK")),
        (b"flush", 3) if matches!(mode.as_deref(), Some(b"async" | b"sync")) => {
            reply(|o| resp::simple(o, "OK"))
        }
        (b"flush", 3) => error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
        (b"list", 2) => reply(|o| resp::array(o, 0)),
        (b"flush" | b"list", _) => bad_subcommand("function", &args[1], true),
        (b"load", _) => error("ERR FUNCTION LOAD is not supported by gsm-kv"),
        _ => bad_subcommand("function", &args[1], false),
    }
}

mod config;
mod hash;
mod keyspace;
mod moves;
mod strings;
mod table;

pub use config::{Limits, set_listen};
pub use moves::{Move, MoveKind};
pub use table::{keys_of, name_of};
#[cfg(test)]
mod tests;
