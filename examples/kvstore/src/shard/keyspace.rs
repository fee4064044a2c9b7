//! The keyspace commands on a shard: `TYPE`, `KEYS`, one shard's part of `SCAN` and a random
//! key, patterns matched in bounded time (`glob.rs`).

use super::{Answer, Shard};
use crate::glob::Pattern;

/// How far into a shard's map `RANDOMKEY` may start its walk.
const RANDOM_REACH: usize = 1024;

impl Shard {
    pub(super) fn key_type(&mut self, key: &[u8], now: i64) -> Answer {
        Answer::Status(
            self.live(key, now)
                .map_or("none", |e| e.value.type_name())
                .into(),
        )
    }

    /// The live keys that `pattern` matches (every one for `None`); with `kind`, only keys of
    /// that type.
    pub(super) fn keys(&mut self, pattern: Option<&[u8]>, kind: Option<&[u8]>, now: i64) -> Answer {
        let pattern = pattern
            .filter(|p| *p != b"*")
            .map(|p| Pattern::new(p, false));
        let keys = self
            .map
            .iter()
            .filter(|(_, e)| e.expires.is_none_or(|t| t > now))
            .filter(|(_, e)| {
                kind.is_none_or(|k| k.eq_ignore_ascii_case(e.value.type_name().as_bytes()))
            })
            .filter(|(k, _)| pattern.as_ref().is_none_or(|p| p.matches(k)))
            .map(|(k, _)| Some(k.clone()))
            .collect();
        Answer::Values(keys)
    }

    /// How many live keys of this shard hash to `slot` (`count` `None`), or up to `count` of
    /// them: a pass over the map, as Redis's own count is of its own keys.
    pub(super) fn slot_keys(&mut self, slot: usize, count: Option<usize>, now: i64) -> Answer {
        let mut keys = self
            .map
            .iter()
            .filter(|(_, e)| e.expires.is_none_or(|t| t > now))
            .filter(|(k, _)| crate::slot::key_slot(k) == slot)
            .map(|(k, _)| k);
        match count {
            None => Answer::Int(keys.count() as i64),
            Some(n) => Answer::Values(keys.by_ref().take(n).map(|k| Some(k.clone())).collect()),
        }
    }

    /// A live key of this shard, or nil: the first live one from a random place among the
    /// first [`RANDOM_REACH`] of the map (a hash map has no random access, and a longer walk
    /// would hold the worker on a large shard), so not a uniform draw.
    pub(super) fn random_key(&mut self, now: i64) -> Answer {
        let n = self.map.len().min(RANDOM_REACH);
        if n == 0 {
            return Answer::Nil;
        }
        let skip = rand::Rng::gen_range(&mut rand::thread_rng(), 0..n);
        let live = |e: &&super::Entry| e.expires.is_none_or(|t| t > now);
        self.map
            .iter()
            .skip(skip)
            .chain(self.map.iter().take(skip))
            .find(|(_, e)| live(e))
            .map_or(Answer::Nil, |(k, _)| Answer::Bulk(k.clone()))
    }
}
