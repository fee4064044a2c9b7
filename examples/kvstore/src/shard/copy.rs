//! A shard's half of the commands that take a value from one key to another (`RENAME`,
//! `RENAMENX`, `COPY`: whole on one shard, or as dump, restore and delete-if-unchanged when
//! the keys live on two), of `OBJECT` and of reading strings for `LCS`.

use serde::{Deserialize, Serialize};

use super::{Answer, Entry, Shard, Value, WRONGTYPE, parse_i64};

/// A dumped key: its value and the milliseconds it has left to live, relative so that a shard
/// on a host whose clock differs keeps the same time to live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    pub value: Value,
    pub ttl: Option<i64>,
}

/// What `OBJECT` asks of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectAsk {
    Encoding,
    RefCount,
    IdleTime,
    Freq,
    /// `MEMORY USAGE`: an estimate in bytes.
    Memory,
}

/// Redis's refcount of a shared object (the small integers).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Strings up to this length are `embstr` in Redis.
const EMBSTR_MAX: usize = 44;

/// What an entry costs beyond its key and value: the map's slot and the value's header.
const ENTRY_BYTES: i64 = 64;

/// The bytes a value holds (fields and values with a small header each for a hash).
fn size_of(v: &Value) -> i64 {
    match v {
        Value::Str(s) | Value::Raw(s) => s.len() as i64,
        Value::Hash(h) => h
            .pairs()
            .iter()
            .map(|(f, v)| 16 + f.len() as i64 + v.len() as i64)
            .sum(),
    }
}

/// The encoding Redis would report for a string value.
fn string_encoding(v: &[u8]) -> &'static str {
    if v.len() <= 20 && parse_i64(v).is_some() {
        "int"
    } else if v.len() <= EMBSTR_MAX {
        "embstr"
    } else {
        "raw"
    }
}

impl Shard {
    pub(super) fn dump(&mut self, key: &[u8], now: i64) -> Option<Stored> {
        let e = self.live(key, now)?;
        Some(Stored {
            value: e.value.clone(),
            ttl: e.expires.map(|t| (t - now).max(1)),
        })
    }

    /// Puts `stored` at `key`; over an existing key only with `replace`.
    pub(super) fn restore(
        &mut self,
        key: Vec<u8>,
        stored: Stored,
        replace: bool,
        now: i64,
    ) -> Answer {
        if !replace && self.live(&key, now).is_some() {
            return Answer::Int(0);
        }
        let expires = stored.ttl.map(|ms| now.saturating_add(ms));
        self.with_ttl += usize::from(expires.is_some());
        let value = stored.value;
        self.map.insert(key, Entry { value, expires });
        Answer::Int(1)
    }

    pub(super) fn del_if(&mut self, key: &[u8], value: &Value, now: i64) -> Answer {
        match self.live(key, now) {
            Some(e) if e.value == *value => {
                self.map.remove(key);
                Answer::Int(1)
            }
            _ => Answer::Int(0),
        }
    }

    /// `RENAME`/`RENAMENX` within this shard, with Redis's answers.
    pub(super) fn rename(&mut self, src: Vec<u8>, dst: Vec<u8>, nx: bool, now: i64) -> Answer {
        if self.live(&src, now).is_none() {
            return Answer::Error("ERR no such key".into());
        }
        if src == dst {
            return if nx { Answer::Int(0) } else { Answer::Ok };
        }
        if nx && self.live(&dst, now).is_some() {
            return Answer::Int(0);
        }
        if let Some(e) = self.map.remove(&src) {
            self.map.insert(dst, e);
        }
        if nx { Answer::Int(1) } else { Answer::Ok }
    }

    /// `COPY` within this shard (the planner refused a key copied onto itself).
    pub(super) fn copy(&mut self, src: &[u8], dst: Vec<u8>, replace: bool, now: i64) -> Answer {
        match self.dump(src, now) {
            Some(stored) => self.restore(dst, stored, replace, now),
            None => Answer::Int(0),
        }
    }

    pub(super) fn object(&mut self, key: &[u8], ask: ObjectAsk, now: i64) -> Answer {
        let Some(e) = self.live(key, now) else {
            return Answer::Nil;
        };
        match (ask, &e.value) {
            (ObjectAsk::Encoding, Value::Str(v)) => {
                Answer::Bulk(string_encoding(v).as_bytes().to_vec())
            }
            (ObjectAsk::Encoding, Value::Raw(_)) => Answer::Bulk(b"raw".to_vec()),
            (ObjectAsk::Encoding, Value::Hash(h)) => Answer::Bulk(h.encoding().as_bytes().to_vec()),
            (ObjectAsk::RefCount, Value::Str(v))
                if parse_i64(v).is_some_and(|n| (0..10_000).contains(&n)) =>
            {
                Answer::Int(SHARED_REFCOUNT)
            }
            (ObjectAsk::RefCount, _) => Answer::Int(1),
            (ObjectAsk::Memory, v) => Answer::Int(ENTRY_BYTES + key.len() as i64 + size_of(v)),
            // Access times are not kept: every key counts as just used.
            (ObjectAsk::IdleTime, _) => Answer::Int(0),
            (ObjectAsk::Freq, _) => Answer::Error(
                "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
                 Please note that when switching between policies at runtime LRU and LFU data \
                 will take some time to adjust."
                    .into(),
            ),
        }
    }

    pub(super) fn strings(&mut self, keys: &[Vec<u8>], now: i64) -> Answer {
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            match self.live_str(k, now) {
                Ok(v) => out.push(v.cloned()),
                Err(_) => return Answer::Error(WRONGTYPE.into()),
            }
        }
        Answer::Values(out)
    }
}
