//! `RENAME`, `RENAMENX`, `COPY` and `MSETNX` when their keys live on several shards.
//!
//! `RENAME`, `RENAMENX` and `COPY` of keys on two shards: the connection's
//! fiber dumps the source (its value and time to live), restores it at the destination, and
//! for a rename deletes the source if it still holds the value it had. The fiber waits for each
//! step (the worker serves others meanwhile), so the reply comes when all is done.
//!
//! What another client may see: the value is never absent from both keys, but between the
//! second and the third step it is at both, which Redis's single thread never shows. A write to
//! the source between the first and third step is kept (the rename then took the older value),
//! as if the rename had run just before that write. Keys on one shard are moved by a single
//! operation there (`Op::Rename`, `Op::Copy`), atomically as in Redis.

use gossamer::Trust;

use crate::command::{Move, MoveKind};
use crate::dispatch::answer;
use crate::route::Shards;
use crate::shard::{Answer, Op, Shard};

/// Keys and their values.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// `MSETNX` over several shards: each sets its keys if none of them exists; if one shard
/// found a key, the others' keys are deleted again (those still holding the value set) and the
/// answer is 0. Another client may see some of the keys set meanwhile, which Redis never shows.
pub fn msetnx(shards: &Shards, pairs: Pairs) -> Vec<u8> {
    let mut by: Vec<(usize, Pairs)> = Vec::new();
    for (k, v) in pairs {
        let s = shards.shard_of(&k);
        match by.iter_mut().find(|g| g.0 == s) {
            Some(g) => g.1.push((k, v)),
            None => by.push((s, vec![(k, v)])),
        }
    }
    let mut set = Vec::new();
    let mut refused = None;
    for (s, group) in by {
        match call(&shards[s], Op::MSetNx(group.clone())) {
            Answer::Int(1) => set.push((s, group)),
            other => {
                refused = Some(other);
                break;
            }
        }
    }
    let mut out = Vec::new();
    let Some(refused) = refused else {
        answer(&mut out, Answer::Int(1));
        return out;
    };
    for (s, group) in set {
        for (k, v) in group {
            call(&shards[s], Op::DelIf(k, crate::shard::Value::Str(v)));
        }
    }
    answer(
        &mut out,
        match refused {
            e @ Answer::Error(_) => e,
            _ => Answer::Int(0),
        },
    );
    out
}

/// One operation on `shard`, the fiber waiting for its answer.
fn call(shard: &Trust<Shard>, op: Op) -> Answer {
    shard
        .try_apply_with(op, |s: &mut Shard, op: Op| s.run(op))
        .unwrap_or_else(|e| Answer::Error(format!("ERR a shard failed: {e}")))
}

/// Moves or copies `m.src` to `m.dst` (on different shards); the reply, encoded.
pub fn run(shards: &Shards, m: Move) -> Vec<u8> {
    let (from, to) = (
        &shards[shards.shard_of(&m.src)],
        &shards[shards.shard_of(&m.dst)],
    );
    let mut out = Vec::new();
    let done = match step(from, to, m) {
        Ok(a) | Err(a) => a,
    };
    answer(&mut out, done);
    out
}

fn step(from: &Trust<Shard>, to: &Trust<Shard>, m: Move) -> Result<Answer, Answer> {
    let stored = match call(from, Op::Dump(m.src.clone())) {
        Answer::Stored(Some(s)) => s,
        Answer::Stored(None) => {
            return Err(match m.kind {
                MoveKind::Rename(_) => Answer::Error("ERR no such key".into()),
                MoveKind::Copy(_) => Answer::Int(0),
            });
        }
        other => return Err(other),
    };
    let replace = match m.kind {
        MoveKind::Rename(nx) => !nx,
        MoveKind::Copy(replace) => replace,
    };
    let value = match m.kind {
        MoveKind::Rename(_) => Some(stored.value.clone()),
        MoveKind::Copy(_) => None,
    };
    match call(to, Op::Restore(m.dst, stored, replace)) {
        Answer::Int(1) => {}
        Answer::Int(_) => return Ok(Answer::Int(0)),
        other => return Err(other),
    }
    let Some(value) = value else {
        return Ok(Answer::Int(1));
    };
    if let e @ Answer::Error(_) = call(from, Op::DelIf(m.src, value)) {
        return Err(e);
    }
    Ok(match m.kind {
        MoveKind::Rename(true) => Answer::Int(1),
        _ => Answer::Ok,
    })
}
