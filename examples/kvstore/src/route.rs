//! Which shard holds a key, and which shards a command over the whole keyspace covers.
//!
//! Standalone, a key goes to shard FNV-1a(key) modulo the shards (64 bits, the same on every
//! rank), and `DBSIZE`, `KEYS`, `SCAN`, `FLUSHALL`, `RANDOMKEY` and `INFO`'s key count cover
//! every shard. In cluster mode (`cluster.rs`) a key goes to the owner of its hash slot, and
//! those commands cover the worker's own shard only, as each node of a Redis Cluster answers
//! for its own keys. This module reaches no shard; `dispatch.rs` does.

use std::ops::{Deref, Range};

use gossamer::Trust;

use crate::shard::Shard;
use crate::slot;

/// How keys map to shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// FNV-1a of the key modulo the shards.
    Hash,
    /// The owner of the key's hash slot; `me` is the worker whose connections these are.
    Slots { me: usize },
}

/// Every shard of the job (by worker id) and the rule that maps keys to them.
#[derive(Debug)]
pub struct Shards {
    trusts: Vec<Trust<Shard>>,
    rule: Rule,
}

impl Shards {
    pub fn new(trusts: Vec<Trust<Shard>>, rule: Rule) -> Self {
        Self { trusts, rule }
    }

    /// The shard that owns `key`.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        match self.rule {
            Rule::Hash => hashed(key, self.trusts.len()),
            Rule::Slots { .. } => slot::owner(slot::key_slot(key), self.trusts.len()),
        }
    }

    /// The shards a command over the whole keyspace covers.
    pub fn scope(&self) -> Range<usize> {
        match self.rule {
            Rule::Hash => 0..self.trusts.len(),
            Rule::Slots { me } => me..me + 1,
        }
    }
}

impl Deref for Shards {
    type Target = [Trust<Shard>];

    fn deref(&self) -> &[Trust<Shard>] {
        &self.trusts
    }
}

/// FNV-1a (64 bits) of `key` modulo `n`.
pub fn hashed(key: &[u8], n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % n as u64) as usize
}
