//! The hash commands on a shard (`HSET`, `HGET`, `HMGET`, `HDEL`, `HGETALL`, `HINCRBY`,
//! `HINCRBYFLOAT`, `HLEN`, `HEXISTS`, `HKEYS`, `HVALS`, `HSETNX`, `HSTRLEN`, `HSCAN`,
//! `HRANDFIELD`), with Redis 7.0's answers: a hash that loses its last field is deleted, and a
//! hash command on a string key answers `WRONGTYPE`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::strings::{format_float, parse_float};
use super::{Answer, Entry, Shard, Value, WRONGTYPE, parse_i64};
use crate::glob::Pattern;

/// Redis's `hash-max-listpack-entries` and `hash-max-listpack-value` (defaults 128 and 64),
/// one pair per process, which `CONFIG SET` changes on every rank.
static LISTPACK_ENTRIES: AtomicU64 = AtomicU64::new(128);
static LISTPACK_VALUE: AtomicU64 = AtomicU64::new(64);

/// The listpack limits: most fields, longest field or value.
pub fn limits() -> (u64, u64) {
    (
        LISTPACK_ENTRIES.load(Ordering::Relaxed),
        LISTPACK_VALUE.load(Ordering::Relaxed),
    )
}

/// Changes the listpack limits of this process (`None`: unchanged); hashes already past them
/// stay tables, and the others convert at their next write, as in Redis.
pub fn set_limits(entries: Option<u64>, value: Option<u64>) {
    if let Some(n) = entries {
        LISTPACK_ENTRIES.store(n, Ordering::Relaxed);
    }
    if let Some(n) = value {
        LISTPACK_VALUE.store(n, Ordering::Relaxed);
    }
}

/// A hash's fields: in insertion order while within Redis's listpack limits (so that `HGETALL`
/// lists them as Redis does, and a lookup scans at most that many, as Redis's does), then in a
/// hash map, for good, as Redis converts to a hash table and never back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hash {
    Small(Vec<(Vec<u8>, Vec<u8>)>),
    Table(HashMap<Vec<u8>, Vec<u8>>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Small(Vec::new())
    }
}

impl Hash {
    fn get(&self, field: &[u8]) -> Option<&Vec<u8>> {
        match self {
            Hash::Small(pairs) => pairs.iter().find(|p| p.0 == field).map(|p| &p.1),
            Hash::Table(map) => map.get(field),
        }
    }

    /// Sets `field`; whether it is new.
    fn insert(&mut self, field: Vec<u8>, value: Vec<u8>) -> bool {
        if let Hash::Small(pairs) = self {
            let (entries, longest) = limits();
            let big = field.len() as u64 > longest || value.len() as u64 > longest;
            if let Some(p) = pairs.iter_mut().find(|p| p.0 == field) {
                if !big {
                    p.1 = value;
                    return false;
                }
            } else if !big && (pairs.len() as u64) < entries {
                pairs.push((field, value));
                return true;
            }
            *self = Hash::Table(std::mem::take(pairs).into_iter().collect());
        }
        match self {
            Hash::Table(map) => map.insert(field, value).is_none(),
            Hash::Small(_) => unreachable!("converted above"),
        }
    }

    /// Removes `field`; whether it was there.
    fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Small(pairs) => match pairs.iter().position(|p| p.0 == field) {
                Some(i) => {
                    pairs.remove(i);
                    true
                }
                None => false,
            },
            Hash::Table(map) => map.remove(field).is_some(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Hash::Small(pairs) => pairs.len(),
            Hash::Table(map) => map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every field and its value, in the hash's order.
    pub fn pairs(&self) -> Vec<(&Vec<u8>, &Vec<u8>)> {
        match self {
            Hash::Small(pairs) => pairs.iter().map(|(f, v)| (f, v)).collect(),
            Hash::Table(map) => map.iter().collect(),
        }
    }

    /// What `OBJECT ENCODING` answers.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Small(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    /// Fields and values, flat.
    fn flat(&self, fields: bool, values: bool) -> Vec<Option<Vec<u8>>> {
        let mut out = Vec::with_capacity(self.len() * 2);
        for (f, v) in self.pairs() {
            if fields {
                out.push(Some(f.clone()));
            }
            if values {
                out.push(Some(v.clone()));
            }
        }
        out
    }
}

/// One hash command on one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HashOp {
    /// `HSET` (answers the new fields) or `HMSET` (`true`: answers `OK`).
    Set(Vec<(Vec<u8>, Vec<u8>)>, bool),
    SetNx(Vec<u8>, Vec<u8>),
    Get(Vec<u8>),
    MGet(Vec<Vec<u8>>),
    Del(Vec<Vec<u8>>),
    Len,
    Exists(Vec<u8>),
    StrLen(Vec<u8>),
    Keys,
    Vals,
    GetAll,
    IncrBy(Vec<u8>, i64),
    /// By a number the planner checked.
    IncrByFloat(Vec<u8>, Vec<u8>),
    /// `HSCAN key cursor [MATCH pattern]`: every field at once, as Redis does for a small hash.
    Scan {
        cursor: u64,
        pattern: Option<Vec<u8>>,
    },
    /// `HRANDFIELD key [count [WITHVALUES]]`.
    RandField {
        count: Option<i64>,
        values: bool,
    },
}

fn wrongtype() -> Answer {
    Answer::Error(WRONGTYPE.into())
}

fn values(vs: Vec<Option<Vec<u8>>>) -> Answer {
    Answer::Values(vs)
}

impl Shard {
    /// The live hash of `key` (`Ok(None)`: no key; `Err`: another type).
    fn live_hash(&mut self, key: &[u8], now: i64) -> Result<Option<&mut Hash>, Answer> {
        match self.live(key, now) {
            None => Ok(None),
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => Ok(Some(h)),
            Some(_) => Err(wrongtype()),
        }
    }

    /// The hash of `key`, made empty if there is none.
    fn hash_or_new(&mut self, key: Vec<u8>, now: i64) -> Result<&mut Hash, Answer> {
        if self.live_hash(&key, now)?.is_none() {
            let value = Value::Hash(Box::default());
            self.map.insert(
                key.clone(),
                Entry {
                    value,
                    expires: None,
                },
            );
        }
        match self.map.get_mut(&key) {
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => Ok(h),
            _ => Err(wrongtype()),
        }
    }

    /// Runs one hash command on `key`.
    pub(super) fn hash(&mut self, key: Vec<u8>, op: HashOp, now: i64) -> Answer {
        match op {
            HashOp::Set(..) | HashOp::SetNx(..) | HashOp::IncrBy(..) | HashOp::IncrByFloat(..) => {
                match self.hash_or_new(key, now) {
                    Ok(h) => write(h, op),
                    Err(e) => e,
                }
            }
            HashOp::Del(fields) => {
                let h = match self.live_hash(&key, now) {
                    Ok(Some(h)) => h,
                    Ok(None) => return Answer::Int(0),
                    Err(e) => return e,
                };
                let n = fields.iter().filter(|f| h.remove(f)).count();
                if h.is_empty() {
                    self.map.remove(&key);
                }
                Answer::Int(n as i64)
            }
            op => match self.live_hash(&key, now) {
                Ok(h) => read(h.map(|h| &*h), op),
                Err(e) => e,
            },
        }
    }
}

/// The commands that may create the hash.
fn write(h: &mut Hash, op: HashOp) -> Answer {
    match op {
        HashOp::Set(pairs, hmset) => {
            let n = pairs
                .into_iter()
                .map(|(f, v)| h.insert(f, v))
                .filter(|new| *new)
                .count();
            if hmset {
                Answer::Ok
            } else {
                Answer::Int(n as i64)
            }
        }
        HashOp::SetNx(f, v) => match h.get(&f).is_some() {
            true => Answer::Int(0),
            false => Answer::Int(i64::from(h.insert(f, v))),
        },
        HashOp::IncrBy(f, by) => {
            let current = match h.get(&f) {
                None => 0,
                Some(v) => match parse_i64(v) {
                    Some(n) => n,
                    None => return Answer::Error("ERR hash value is not an integer".into()),
                },
            };
            let Some(next) = current.checked_add(by) else {
                return Answer::Error("ERR increment or decrement would overflow".into());
            };
            h.insert(f, next.to_string().into_bytes());
            Answer::Int(next)
        }
        HashOp::IncrByFloat(f, by) => {
            let Some(by) = parse_float(&by) else {
                return Answer::Error("ERR value is not a valid float".into());
            };
            let current = match h.get(&f) {
                None => 0.0,
                Some(v) => match parse_float(v) {
                    Some(n) => n,
                    None => return Answer::Error("ERR hash value is not a float".into()),
                },
            };
            let next = current + by;
            if !next.is_finite() {
                return Answer::Error("ERR increment would produce NaN or Infinity".into());
            }
            let text = format_float(next).into_bytes();
            h.insert(f, text.clone());
            Answer::Bulk(text)
        }
        _ => Answer::Error("ERR not a writing hash command".into()),
    }
}

/// The commands that only read (`h` is `None` when the key does not exist).
fn read(h: Option<&Hash>, op: HashOp) -> Answer {
    let field = |f: &[u8]| h.and_then(|h| h.get(f));
    match op {
        HashOp::Get(f) => field(&f).map_or(Answer::Nil, |v| Answer::Bulk(v.clone())),
        HashOp::MGet(fs) => values(fs.iter().map(|f| field(f).cloned()).collect()),
        HashOp::Len => Answer::Int(h.map_or(0, Hash::len) as i64),
        HashOp::Exists(f) => Answer::Int(i64::from(field(&f).is_some())),
        HashOp::StrLen(f) => Answer::Int(field(&f).map_or(0, Vec::len) as i64),
        HashOp::Keys => values(h.map_or_else(Vec::new, |h| h.flat(true, false))),
        HashOp::Vals => values(h.map_or_else(Vec::new, |h| h.flat(false, true))),
        HashOp::GetAll => values(h.map_or_else(Vec::new, |h| h.flat(true, true))),
        HashOp::Scan { cursor, pattern } => {
            let pattern = pattern.map(|p| Pattern::new(&p, false));
            let mut out = Vec::new();
            if let (Some(h), 0) = (h, cursor) {
                for (f, v) in h.pairs() {
                    if pattern.as_ref().is_none_or(|p| p.matches(f)) {
                        out.push(Some(f.clone()));
                        out.push(Some(v.clone()));
                    }
                }
            }
            Answer::Array(vec![Answer::Bulk(b"0".to_vec()), Answer::Values(out)])
        }
        HashOp::RandField { count, values } => rand_field(h, count, values),
        _ => Answer::Error("ERR not a reading hash command".into()),
    }
}

/// `HRANDFIELD`: one field (or nil); `count` > 0 distinct fields, at most all; `count` < 0
/// that many drawn with repeats.
fn rand_field(h: Option<&Hash>, count: Option<i64>, with_values: bool) -> Answer {
    let mut rng = rand::thread_rng();
    let all: Vec<(&Vec<u8>, &Vec<u8>)> = h.map_or_else(Vec::new, Hash::pairs);
    let Some(count) = count else {
        if all.is_empty() {
            return Answer::Nil;
        }
        return Answer::Bulk(all[rng.gen_range(0..all.len())].0.clone());
    };
    let picked: Vec<(&Vec<u8>, &Vec<u8>)> = if all.is_empty() || count == 0 {
        Vec::new()
    } else if count < 0 {
        (0..count.unsigned_abs())
            .map(|_| all[rng.gen_range(0..all.len())])
            .collect()
    } else if count as usize >= all.len() {
        all
    } else {
        let want = count as usize;
        rand::seq::index::sample(&mut rng, all.len(), want)
            .into_iter()
            .map(|i| all[i])
            .collect()
    };
    let mut out = Vec::with_capacity(picked.len() * 2);
    for (f, v) in picked {
        out.push(Some(f.clone()));
        if with_values {
            out.push(Some(v.clone()));
        }
    }
    values(out)
}
