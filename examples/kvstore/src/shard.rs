//! One shard of the keyspace: a hash map of binary keys to binary values with optional expiry,
//! owned by one worker (its trustee) and changed only by the operations delegated to it.
//!
//! An [`Op`] travels to the shard as the argument of `Trust::apply_with` and its [`Answer`]
//! comes back, so within a rank both move by bytes and between ranks they are `postcard`-encoded
//! (nothing here points into the client's memory). Expiry times are Unix milliseconds of the
//! trustee's own clock, as Redis keeps them: a relative time (`EX`, `EXPIRE`) is made absolute
//! where the shard lives, so ranks on hosts whose clocks differ agree on it. Expired keys are dropped when a command touches them and by
//! [`Shard::purge_expired`], which the worker runs every 100 ms while it has keys with a time to
//! live. Nothing is persisted: a shard lives as long as its worker.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use copy::{ObjectAsk, Stored};
pub use hash::HashOp;

/// What a key holds: a string or a hash (Redis's types; the others are not kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Value {
    Str(Vec<u8>),
    /// A string changed in place (`APPEND` to a key, `SETRANGE`), which Redis then holds in its
    /// `raw` encoding whatever its content.
    Raw(Vec<u8>),
    Hash(Box<hash::Hash>),
}

impl Value {
    /// The name `TYPE` answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) | Value::Raw(_) => "string",
            Value::Hash(_) => "hash",
        }
    }
}

/// An entry: the value and, when it has one, when it expires (Unix milliseconds).
#[derive(Debug, Clone)]
struct Entry {
    value: Value,
    expires: Option<i64>,
}

impl Entry {
    fn string(value: Vec<u8>) -> Self {
        Self {
            value: Value::Str(value),
            expires: None,
        }
    }
}

/// The trustee's clock in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A time to expire: relative to the trustee's clock, or absolute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum When {
    /// This many milliseconds from now (the planner checked that it does not overflow).
    In(i64),
    /// At this Unix time in milliseconds.
    At(i64),
}

impl When {
    fn resolve(self, now: i64) -> i64 {
        match self {
            When::In(ms) => now.saturating_add(ms),
            When::At(t) => t,
        }
    }
}

/// `EXPIRE`'s condition on the key's current expiry (`NX`, `XX`, `GT`, `LT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExpireIf {
    Always,
    /// Only if it has none.
    None,
    /// Only if it has one.
    Some,
    /// Only if the new one is later (no expiry counts as infinite).
    Later,
    /// Only if the new one is sooner.
    Sooner,
    /// Only if it has one and the new one is sooner (`XX LT`; `XX GT` is `Later`, which needs
    /// one already).
    SoonerSome,
}

/// `SET`'s condition on the key's existence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cond {
    Always,
    /// `NX`: only if the key does not exist.
    Absent,
    /// `XX`: only if it does.
    Present,
}

/// The time to live `SET` gives a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ttl {
    /// No `EX`/`PX`/`KEEPTTL`: the key loses any time to live.
    Clear,
    /// `KEEPTTL`: an existing key keeps its time to live.
    Keep,
    /// `EX`/`PX`/`EXAT`/`PXAT`.
    Expire(When),
}

/// One operation on the keys of this shard (a multi-key command sends each shard its keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    Get(Vec<u8>),
    Set {
        key: Vec<u8>,
        value: Vec<u8>,
        ttl: Ttl,
        cond: Cond,
        /// `GET`: answer the old value instead of `OK`.
        get: bool,
    },
    Del(Vec<Vec<u8>>),
    Exists(Vec<Vec<u8>>),
    IncrBy(Vec<u8>, i64),
    MGet(Vec<Vec<u8>>),
    MSet(Vec<(Vec<u8>, Vec<u8>)>),
    /// `MSETNX`'s part on this shard: 1 if none of the keys existed and all were set, else 0.
    MSetNx(Vec<(Vec<u8>, Vec<u8>)>),
    /// `EXPIRE` and its kin: a time at or before now deletes.
    Expire(Vec<u8>, When, ExpireIf),
    /// `TTL` (`false`) or `PTTL` (`true`).
    Ttl(Vec<u8>, bool),
    DbSize,
    /// `INFO`'s part: the key count, then the calls counted by the shard's worker.
    Info,
    FlushAll,
    /// `GETEX`: the value, with its time to live changed (`None`: unchanged; `Clear`: `PERSIST`).
    GetEx(Vec<u8>, Option<Ttl>),
    /// `INCRBYFLOAT` by a number the planner checked.
    IncrByFloat(Vec<u8>, Vec<u8>),
    GetRange(Vec<u8>, i64, i64),
    /// `SETRANGE` at an offset the planner checked (not negative).
    SetRange(Vec<u8>, u64, Vec<u8>),
    Append(Vec<u8>, Vec<u8>),
    StrLen(Vec<u8>),
    Type(Vec<u8>),
    /// `KEYS pattern`, or one shard's whole part of `SCAN` (`MATCH`, `TYPE`).
    Keys {
        pattern: Option<Vec<u8>>,
        kind: Option<Vec<u8>>,
    },
    RandomKey,
    /// `PERSIST`: 1 if the key lost its time to live.
    Persist(Vec<u8>),
    /// `GETDEL`: the value, and the key deleted.
    GetDel(Vec<u8>),
    /// `SETNX`: 1 if the key was set.
    SetNx(Vec<u8>, Vec<u8>),
    /// `EXPIRETIME` (`false`) or `PEXPIRETIME` (`true`): when the key expires.
    ExpireTime(Vec<u8>, bool),
    /// A hash command on one key.
    Hash(Vec<u8>, HashOp),
    /// The value of a key and its time to live, for a copy on another shard.
    Dump(Vec<u8>),
    /// Stores a dumped value (`true`: over an existing key); 1 if stored.
    Restore(Vec<u8>, Stored, bool),
    /// Deletes the key if it still holds this value (the second half of a move); 1 if deleted.
    DelIf(Vec<u8>, Value),
    /// `RENAME` (`false`) or `RENAMENX` (`true`) of two keys of this shard.
    Rename(Vec<u8>, Vec<u8>, bool),
    /// `COPY` of two keys of this shard (`true`: `REPLACE`).
    Copy(Vec<u8>, Vec<u8>, bool),
    /// `OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key`.
    Object(Vec<u8>, ObjectAsk),
    /// The values of string keys (nil for none), or `WRONGTYPE` if one holds another type.
    Strings(Vec<Vec<u8>>),
    /// `CLUSTER COUNTKEYSINSLOT` (`None`) or `GETKEYSINSLOT` (at most this many keys) of a
    /// hash slot.
    SlotKeys(usize, Option<usize>),
}

/// What a shard answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    Ok,
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Values(Vec<Option<Vec<u8>>>),
    /// A status reply (`+string`).
    Status(String),
    /// An error reply's text (`ERR ...`).
    Error(String),
    /// An array of answers (`HSCAN`'s cursor and fields, and other nested replies).
    Array(Vec<Answer>),
    /// A dumped key (`None`: there was none).
    Stored(Option<Stored>),
}

/// Redis's text for a command on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Redis's text for a value that is not a 64-bit integer.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

/// One shard.
#[derive(Debug)]
pub struct Shard {
    map: HashMap<Vec<u8>, Entry>,
    /// Keys with a time to live (an upper bound: keys deleted or overwritten are not counted
    /// down), so that the purge runs only when there can be something to purge.
    with_ttl: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Self::new()
    }
}

impl Shard {
    pub fn new() -> Self {
        Self {
            map: HashMap::new(),
            with_ttl: 0,
        }
    }

    /// The live entry of `key`, dropping it first if it has expired.
    fn live(&mut self, key: &[u8], now: i64) -> Option<&mut Entry> {
        if self.with_ttl == 0 {
            // No key has an expiry: one lookup.
            return self.map.get_mut(key);
        }
        if self
            .map
            .get(key)
            .is_some_and(|e| e.expires.is_some_and(|t| t <= now))
        {
            self.map.remove(key);
        }
        self.map.get_mut(key)
    }

    /// The live string of `key`: `Ok(None)` if there is none, `WRONGTYPE` if it holds another
    /// type.
    fn live_str(&mut self, key: &[u8], now: i64) -> Result<Option<&mut Vec<u8>>, Answer> {
        match self.live(key, now) {
            None => Ok(None),
            Some(Entry {
                value: Value::Str(v) | Value::Raw(v),
                ..
            }) => Ok(Some(v)),
            Some(_) => Err(Answer::Error(WRONGTYPE.into())),
        }
    }

    /// Runs `op` (the trustee's half of every command).
    pub fn run(&mut self, op: Op) -> Answer {
        // The clock is read only when some key has an expiry or this one sets one (`live`
        // compares with `now` only for keys with an expiry).
        let needs_clock = self.with_ttl > 0
            || matches!(
                op,
                Op::Set {
                    ttl: Ttl::Expire(_),
                    ..
                } | Op::Expire(..)
                    | Op::GetEx(_, Some(Ttl::Expire(_)))
                    | Op::Dump(_)
                    | Op::Restore(..)
                    | Op::Keys { .. }
                    | Op::SlotKeys(..)
                    | Op::RandomKey
            );
        let now = if needs_clock { now_ms() } else { 0 };
        match op {
            Op::Get(key) => match self.live_str(&key, now) {
                Ok(Some(v)) => Answer::Bulk(v.clone()),
                Ok(None) => Answer::Nil,
                Err(e) => e,
            },
            Op::Set {
                key,
                value,
                ttl,
                cond,
                get,
            } => self.set(key, value, ttl, cond, get, now),
            Op::Del(keys) => {
                let n = keys
                    .iter()
                    .filter(|k| {
                        self.live(k, now).is_some() && self.map.remove(k.as_slice()).is_some()
                    })
                    .count();
                Answer::Int(n as i64)
            }
            Op::Exists(keys) => {
                let n = keys.iter().filter(|k| self.live(k, now).is_some()).count();
                Answer::Int(n as i64)
            }
            Op::IncrBy(key, by) => self.incr_by(key, by, now),
            Op::MGet(keys) => Answer::Values(
                keys.iter()
                    .map(|k| self.live_str(k, now).ok().flatten().map(|v| v.clone()))
                    .collect(),
            ),
            Op::MSet(pairs) => {
                for (key, value) in pairs {
                    self.map.insert(key, Entry::string(value));
                }
                Answer::Ok
            }
            Op::MSetNx(pairs) => {
                if pairs.iter().any(|(k, _)| self.live(k, now).is_some()) {
                    return Answer::Int(0);
                }
                for (key, value) in pairs {
                    self.map.insert(key, Entry::string(value));
                }
                Answer::Int(1)
            }
            Op::Expire(key, when, cond) => self.expire(key, when.resolve(now), cond, now),
            Op::Ttl(key, millis) => match self.live(&key, now) {
                None => Answer::Int(-2),
                Some(Entry { expires: None, .. }) => Answer::Int(-1),
                Some(Entry {
                    expires: Some(t), ..
                }) => {
                    let left = t.saturating_sub(now).max(0);
                    // Redis rounds seconds to the nearest (`(ttl + 500) / 1000`).
                    Answer::Int(if millis { left } else { (left + 500) / 1000 })
                }
            },
            Op::DbSize => {
                self.purge_expired();
                Answer::Int(self.map.len() as i64)
            }
            Op::Info => {
                self.purge_expired();
                let calls = crate::stats::calls().into_iter();
                Answer::Array(vec![
                    Answer::Int(self.map.len() as i64),
                    Answer::Array(calls.map(|n| Answer::Int(n as i64)).collect()),
                ])
            }
            Op::GetEx(key, ttl) => self.get_ex(&key, ttl, now),
            Op::IncrByFloat(key, by) => match strings::parse_float(&by) {
                Some(by) => self.incr_by_float(key, by, now),
                None => Answer::Error("ERR value is not a valid float".into()),
            },
            Op::GetRange(key, start, end) => self.get_range(&key, start, end, now),
            Op::SetRange(key, offset, value) => self.set_range(key, offset as usize, &value, now),
            Op::Append(key, value) => self.append(key, &value, now),
            Op::StrLen(key) => self.str_len(&key, now),
            Op::Type(key) => self.key_type(&key, now),
            Op::Keys { pattern, kind } => self.keys(pattern.as_deref(), kind.as_deref(), now),
            Op::RandomKey => self.random_key(now),
            Op::SlotKeys(slot, count) => self.slot_keys(slot, count, now),
            Op::Persist(key) => match self.live(&key, now) {
                Some(e) if e.expires.is_some() => {
                    e.expires = None;
                    Answer::Int(1)
                }
                _ => Answer::Int(0),
            },
            Op::GetDel(key) => match self.live_str(&key, now) {
                Ok(Some(v)) => {
                    let v = std::mem::take(v);
                    self.map.remove(&key);
                    Answer::Bulk(v)
                }
                Ok(None) => Answer::Nil,
                Err(e) => e,
            },
            Op::SetNx(key, value) => match self.live(&key, now).is_some() {
                true => Answer::Int(0),
                false => {
                    self.map.insert(key, Entry::string(value));
                    Answer::Int(1)
                }
            },
            Op::ExpireTime(key, millis) => match self.live(&key, now) {
                None => Answer::Int(-2),
                Some(Entry { expires: None, .. }) => Answer::Int(-1),
                Some(Entry {
                    expires: Some(t), ..
                }) => Answer::Int(if millis { *t } else { (*t + 500) / 1000 }),
            },
            Op::Hash(key, op) => self.hash(key, op, now),
            Op::Dump(key) => Answer::Stored(self.dump(&key, now)),
            Op::Restore(key, stored, replace) => self.restore(key, stored, replace, now),
            Op::DelIf(key, value) => self.del_if(&key, &value, now),
            Op::Rename(src, dst, nx) => self.rename(src, dst, nx, now),
            Op::Copy(src, dst, replace) => self.copy(&src, dst, replace, now),
            Op::Object(key, ask) => self.object(&key, ask, now),
            Op::Strings(keys) => self.strings(&keys, now),
            Op::FlushAll => {
                self.map = HashMap::new();
                self.with_ttl = 0;
                Answer::Ok
            }
        }
    }

    fn set(
        &mut self,
        key: Vec<u8>,
        value: Vec<u8>,
        ttl: Ttl,
        cond: Cond,
        get: bool,
        now: i64,
    ) -> Answer {
        let old = self.live(&key, now);
        let exists = old.is_some();
        let old_expiry = old.as_ref().and_then(|e| e.expires);
        // `GET` needs the old value to be a string, whatever the condition says.
        if get
            && old
                .as_ref()
                .is_some_and(|e| matches!(e.value, Value::Hash(_)))
        {
            return Answer::Error(WRONGTYPE.into());
        }
        if (cond == Cond::Absent && exists) || (cond == Cond::Present && !exists) {
            return match (get, old) {
                (
                    true,
                    Some(Entry {
                        value: Value::Str(v) | Value::Raw(v),
                        ..
                    }),
                ) => Answer::Bulk(v.clone()),
                _ => Answer::Nil,
            };
        }
        let expires = match ttl {
            Ttl::Clear => None,
            Ttl::Keep => old_expiry,
            Ttl::Expire(when) => Some(when.resolve(now)),
        };
        self.with_ttl += usize::from(expires.is_some());
        let value = Value::Str(value);
        let old = self.map.insert(key, Entry { value, expires });
        match (get, old) {
            (false, _) => Answer::Ok,
            (
                true,
                Some(Entry {
                    value: Value::Str(v) | Value::Raw(v),
                    ..
                }),
            ) => Answer::Bulk(v),
            (true, _) => Answer::Nil,
        }
    }

    fn incr_by(&mut self, key: Vec<u8>, by: i64, now: i64) -> Answer {
        let current = match self.live_str(&key, now) {
            Ok(None) => 0,
            Ok(Some(v)) => match parse_i64(v) {
                Some(n) => n,
                None => return Answer::Error(NOT_INTEGER.into()),
            },
            Err(e) => return e,
        };
        let Some(next) = current.checked_add(by) else {
            return Answer::Error("ERR increment or decrement would overflow".into());
        };
        self.put_keeping_ttl(key, next.to_string().into_bytes());
        Answer::Int(next)
    }

    /// Sets `key` to expire at `at` (Unix ms) if `cond` holds, as Redis's `EXPIRE`: a time
    /// not after now deletes the key.
    fn expire(&mut self, key: Vec<u8>, at: i64, cond: ExpireIf, now: i64) -> Answer {
        let Some(current) = self.live(&key, now).map(|e| e.expires) else {
            return Answer::Int(0);
        };
        let allowed = match (cond, current) {
            (ExpireIf::Always, _) => true,
            (ExpireIf::None, current) => current.is_none(),
            (ExpireIf::Some, current) => current.is_some(),
            (ExpireIf::Later, current) => current.is_some_and(|t| at > t),
            (ExpireIf::Sooner, current) => current.is_none_or(|t| at < t),
            (ExpireIf::SoonerSome, current) => current.is_some_and(|t| at < t),
        };
        if !allowed {
            return Answer::Int(0);
        }
        if at <= now {
            self.map.remove(&key);
        } else if let Some(e) = self.map.get_mut(&key) {
            e.expires = Some(at);
            self.with_ttl += 1;
        }
        Answer::Int(1)
    }

    /// Drops every expired key (a pass over the map, only when keys with a time to live may
    /// be left).
    pub fn purge_expired(&mut self) {
        if self.with_ttl == 0 {
            return;
        }
        let now = now_ms();
        self.map.retain(|_, e| e.expires.is_none_or(|t| t > now));
        self.with_ttl = self.map.values().filter(|e| e.expires.is_some()).count();
    }

    /// Keys stored (expired ones not yet purged included).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the shard holds no key.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// A value as Redis reads an integer: optional `-`, decimal digits, no spaces, no `+`, no
/// leading zeros, within `i64`.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && text != "-0";
    if !canonical {
        return None;
    }
    text.parse().ok()
}

mod copy;
pub mod hash;
mod keyspace;
pub mod strings;
#[cfg(test)]
mod tests;
