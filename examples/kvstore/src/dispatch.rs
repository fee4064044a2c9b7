//! Requests to the shards that own their keys, and their answers back in request order.
//!
//! A connection's fiber puts the requests it has read into a [`Batch`]: each request gets a
//! slot, and its operations are queued by shard; [`send`] then sends each shard one request with
//! all of its operations of the batch, in request order, with `Trust::try_apply_with_then`
//! (inline when the shard is this worker's, through the request rings otherwise), whose callback
//! fills the parts of the slots. So the requests of a pipeline are all in flight together, to
//! many shards, and the fiber waits once, for the batch, then writes the replies in the order
//! of the requests. A multi-key command sends each shard one operation with its keys and puts
//! the parts together (`MGET` by position, `DEL`/`EXISTS` summed); it is atomic per shard, not
//! across shards (Redis's `MSET` is atomic as a whole).
//!
//! Which shard owns a key is `route.rs`'s rule. This module does not read or write sockets.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::command::{Fold, Split};
use crate::resp;
use crate::route::Shards;
use crate::shard::{Answer, Op, Shard};

/// Writes the `INFO` text of the sections asked for, with the key count.
/// and the calls of each command (by row of the command table).
pub type InfoText<'a> = dyn Fn(&mut Vec<u8>, &[Vec<u8>], i64, &[u64]) + 'a;

/// How the parts of a slot make its reply.
#[derive(Debug)]
enum How {
    /// Encoded already.
    Ready(Vec<u8>),
    /// The one part's answer as it is.
    Single,
    /// Integers summed.
    Sum,
    /// `OK` if every part is.
    AllOk,
    /// `MGET`: part `p` holds the values of positions `positions[p]` of `n`.
    Values {
        positions: Vec<Vec<usize>>,
        n: usize,
    },
    /// `INFO` of these sections with the summed key count.
    Info(Vec<Vec<u8>>),
    /// One array of the values of every part (`KEYS`).
    Concat,
    /// A random part of those that are not nil (`RANDOMKEY`).
    First,
    /// `SCAN`: the next cursor, then the part's keys.
    Scan(u64),
    /// `LCS`: the two strings as `Values` puts them together, then the reply its options ask.
    Lcs {
        positions: Vec<Vec<usize>>,
        options: Result<crate::lcs::Options, String>,
    },
}

#[derive(Debug)]
struct Slot {
    how: How,
    parts: Vec<Option<Answer>>,
    /// Its reply is not sent (`CLIENT REPLY OFF` or `SKIP`).
    silent: bool,
}

/// The operations of a batch for one shard, not sent yet, and the slot parts they answer.
#[derive(Debug)]
struct Group {
    shard: usize,
    targets: Vec<(usize, usize)>,
    ops: Vec<Op>,
}

/// The requests of one read of a connection, in flight.
#[derive(Debug, Default)]
pub struct Batch {
    slots: RefCell<Vec<Slot>>,
    missing: Cell<usize>,
    queued: RefCell<Vec<Group>>,
    /// Notified by the callback that brings the last answer (see [`wait`](Batch::wait)).
    answered: gossamer::Notify,
}

impl Batch {
    pub fn new() -> Rc<Self> {
        Rc::new(Self::default())
    }

    /// Whether every answer is in.
    pub fn done(&self) -> bool {
        self.missing.get() == 0
    }

    /// Suspends the calling fiber until every answer is in. The answers' callbacks wake it
    /// (`gossamer::Notify`), not a condition tested at every turn of the worker's loop, so that
    /// the worker can sleep meanwhile.
    pub fn wait(&self) {
        while !self.done() {
            self.answered.wait();
        }
    }

    /// Requests in the batch.
    pub fn len(&self) -> usize {
        self.slots.borrow().len()
    }

    /// Whether the batch holds no request.
    pub fn is_empty(&self) -> bool {
        self.slots.borrow().is_empty()
    }

    fn push(&self, how: How, parts: usize) -> usize {
        let mut slots = self.slots.borrow_mut();
        slots.push(Slot {
            how,
            parts: (0..parts).map(|_| None).collect(),
            silent: false,
        });
        slots.len() - 1
    }

    /// A reply that needs no shard.
    pub fn ready(&self, bytes: Vec<u8>) {
        self.push(How::Ready(bytes), 0);
    }

    /// Drops the reply of the last request pushed (it is still run).
    pub fn silence_last(&self) {
        if let Some(slot) = self.slots.borrow_mut().last_mut() {
            slot.silent = true;
        }
    }

    /// Encodes every reply in order into `out` and empties the batch (all answers are in).
    /// `info` writes the `INFO` text for a key count.
    pub fn drain_into(&self, out: &mut Vec<u8>, info: &InfoText<'_>) {
        debug_assert!(self.done());
        for slot in self.slots.borrow_mut().drain(..).filter(|s| !s.silent) {
            encode(slot, out, info);
        }
    }
}

/// Queues `op` for shard `shard`; its answer will fill part `part` of slot `slot`.
fn issue(batch: &Rc<Batch>, _shards: &Shards, slot: usize, part: usize, shard: usize, op: Op) {
    let mut queued = batch.queued.borrow_mut();
    let group = match queued.iter().position(|g| g.shard == shard) {
        Some(i) => &mut queued[i],
        None => {
            queued.push(Group {
                shard,
                targets: Vec::new(),
                ops: Vec::new(),
            });
            queued.last_mut().expect("just pushed")
        }
    };
    group.targets.push((slot, part));
    group.ops.push(op);
}

/// Sends every queued operation: one request per shard, carrying that shard's operations of
/// the batch in request order (so two requests on one key run in the order they came).
pub fn send(batch: &Rc<Batch>, shards: &Shards) {
    let groups = std::mem::take(&mut *batch.queued.borrow_mut());
    for Group {
        shard,
        targets,
        ops,
    } in groups
    {
        batch.missing.set(batch.missing.get() + 1);
        let b = batch.clone();
        shards[shard].try_apply_with_then(
            ops,
            |s: &mut Shard, ops: Vec<Op>| ops.into_iter().map(|op| s.run(op)).collect(),
            move |r: Result<Vec<Answer>, _>| {
                let failed =
                    |why: String| Answer::Error(format!("ERR shard {shard} failed: {why}"));
                let mut answers = match r {
                    Ok(a) if a.len() == targets.len() => a.into_iter().map(Some).collect(),
                    Ok(a) => vec![
                        Some(failed(format!(
                            "{} answers to {} requests",
                            a.len(),
                            targets.len()
                        )));
                        targets.len()
                    ],
                    Err(e) => vec![Some(failed(e.to_string())); targets.len()],
                };
                let mut slots = b.slots.borrow_mut();
                for ((slot, part), answer) in targets.into_iter().zip(answers.drain(..)) {
                    slots[slot].parts[part] = answer;
                }
                b.missing.set(b.missing.get() - 1);
                if b.done() {
                    b.answered.notify();
                }
            },
        );
    }
}

/// One operation on the shard that owns `key`.
pub fn one(batch: &Rc<Batch>, shards: &Shards, key: &[u8], op: Op) {
    on(batch, shards, shards.shard_of(key), op);
}

/// One operation on shard `shard`.
pub fn on(batch: &Rc<Batch>, shards: &Shards, shard: usize, op: Op) {
    let slot = batch.push(How::Single, 1);
    issue(batch, shards, slot, 0, shard, op);
}

/// The same operation on every shard.
pub fn every(batch: &Rc<Batch>, shards: &Shards, op: &Op, fold: Fold) {
    let how = match fold {
        Fold::Sum => How::Sum,
        Fold::AllOk => How::AllOk,
        Fold::Concat => How::Concat,
        Fold::First => How::First,
    };
    let scope = shards.scope();
    let slot = batch.push(how, scope.len());
    for (part, s) in scope.enumerate() {
        issue(batch, shards, slot, part, s, op.clone());
    }
}

/// `INFO`: every shard's key count, for the text of `sections`.
pub fn info(batch: &Rc<Batch>, shards: &Shards, sections: Vec<Vec<u8>>) {
    let scope = shards.scope();
    let slot = batch.push(How::Info(sections), scope.len());
    for (part, s) in scope.enumerate() {
        issue(batch, shards, slot, part, s, Op::Info);
    }
}

/// `SCAN`'s step: the keys of the `shard`th shard of the scope (the cursor), and the next
/// cursor (0 after the last shard, or for a cursor past them).
pub fn scan(batch: &Rc<Batch>, shards: &Shards, shard: u64, op: Op) {
    let scope = shards.scope();
    let n = scope.len() as u64;
    if shard >= n {
        let slot = batch.push(How::Scan(0), 1);
        batch.slots.borrow_mut()[slot].parts[0] = Some(Answer::Values(Vec::new()));
        return;
    }
    let next = if shard + 1 < n { shard + 1 } else { 0 };
    let slot = batch.push(How::Scan(next), 1);
    issue(batch, shards, slot, 0, scope.start + shard as usize, op);
}

/// Keys grouped by owner: per shard that owns any, the positions and the items.
fn group<T>(
    items: Vec<T>,
    key: impl Fn(&T) -> &[u8],
    shards: &Shards,
) -> Vec<(usize, Vec<usize>, Vec<T>)> {
    let mut by: Vec<(usize, Vec<usize>, Vec<T>)> = Vec::new();
    for (pos, item) in items.into_iter().enumerate() {
        let s = shards.shard_of(key(&item));
        match by.iter_mut().find(|g| g.0 == s) {
            Some(g) => {
                g.1.push(pos);
                g.2.push(item);
            }
            None => by.push((s, vec![pos], vec![item])),
        }
    }
    by
}

fn key_of(k: &Vec<u8>) -> &[u8] {
    k
}

fn pair_key(p: &(Vec<u8>, Vec<u8>)) -> &[u8] {
    &p.0
}

/// A multi-key command: one operation per shard that owns some of its keys.
pub fn split(batch: &Rc<Batch>, shards: &Shards, split: Split) {
    let (how, parts): (How, Vec<(usize, Op)>) = match split {
        Split::Del(keys) => (
            How::Sum,
            group(keys, key_of, shards)
                .into_iter()
                .map(|(s, _, k)| (s, Op::Del(k)))
                .collect(),
        ),
        Split::Exists(keys) => (
            How::Sum,
            group(keys, key_of, shards)
                .into_iter()
                .map(|(s, _, k)| (s, Op::Exists(k)))
                .collect(),
        ),
        Split::MGet(keys) => {
            let total = keys.len();
            let groups = group(keys, key_of, shards);
            let positions = groups.iter().map(|g| g.1.clone()).collect();
            let ops = groups
                .into_iter()
                .map(|(s, _, k)| (s, Op::MGet(k)))
                .collect();
            (
                How::Values {
                    positions,
                    n: total,
                },
                ops,
            )
        }
        Split::MSet(pairs) => (
            How::AllOk,
            group(pairs, pair_key, shards)
                .into_iter()
                .map(|(s, _, p)| (s, Op::MSet(p)))
                .collect(),
        ),
    };
    let slot = batch.push(how, parts.len());
    for (part, (s, op)) in parts.into_iter().enumerate() {
        issue(batch, shards, slot, part, s, op);
    }
}

/// `LCS` of two keys: each shard that owns one reads its strings (`WRONGTYPE` for another
/// type), and the reply is computed here, on the connection's worker.
pub fn lcs(
    batch: &Rc<Batch>,
    shards: &Shards,
    keys: Vec<Vec<u8>>,
    options: Result<crate::lcs::Options, String>,
) {
    let groups = group(keys, key_of, shards);
    let positions = groups.iter().map(|g| g.1.clone()).collect();
    let slot = batch.push(How::Lcs { positions, options }, groups.len());
    for (part, (s, _, k)) in groups.into_iter().enumerate() {
        issue(batch, shards, slot, part, s, Op::Strings(k));
    }
}

fn lcs_reply(
    parts: Vec<Option<Answer>>,
    positions: Vec<Vec<usize>>,
    options: Result<crate::lcs::Options, String>,
    out: &mut Vec<u8>,
) {
    if let Some(e) = first_error(&parts) {
        // A key of another type; a failed shard's own text otherwise.
        let text = if e == crate::shard::WRONGTYPE {
            "ERR The specified keys must contain string values"
        } else {
            e
        };
        return resp::error(out, text);
    }
    let options = match options {
        Ok(o) => o,
        Err(e) => return resp::error(out, &e),
    };
    let mut values: [Vec<u8>; 2] = Default::default();
    for (part, pos) in parts.into_iter().zip(positions) {
        if let Some(Answer::Values(vs)) = part {
            for (v, p) in vs.into_iter().zip(pos) {
                values[p.min(1)] = v.unwrap_or_default();
            }
        }
    }
    crate::lcs::reply(out, &values[0], &values[1], options);
}

/// The first error among the parts, if any.
fn first_error(parts: &[Option<Answer>]) -> Option<&str> {
    parts.iter().find_map(|p| match p {
        Some(Answer::Error(e)) => Some(e.as_str()),
        _ => None,
    })
}

fn encode(slot: Slot, out: &mut Vec<u8>, info: &InfoText<'_>) {
    if let How::Lcs { positions, options } = slot.how {
        return lcs_reply(slot.parts, positions, options, out);
    }
    if let Some(e) = first_error(&slot.parts) {
        resp::error(out, e);
        return;
    }
    let sum = || {
        slot.parts
            .iter()
            .map(|p| match p {
                Some(Answer::Int(n)) => *n,
                _ => 0,
            })
            .sum::<i64>()
    };
    match slot.how {
        How::Ready(bytes) => out.extend_from_slice(&bytes),
        How::Lcs { .. } => {}
        How::Sum => resp::integer(out, sum()),
        How::Info(sections) => {
            let (mut keys, mut calls) = (0, Vec::new());
            for part in slot.parts.iter().flatten() {
                let Answer::Array(items) = part else { continue };
                if let [Answer::Int(n), Answer::Array(counts)] = items.as_slice() {
                    keys += n;
                    if calls.len() < counts.len() {
                        calls.resize(counts.len(), 0);
                    }
                    for (total, c) in calls.iter_mut().zip(counts) {
                        if let Answer::Int(c) = c {
                            *total += *c as u64;
                        }
                    }
                }
            }
            info(out, &sections, keys, &calls);
        }
        How::AllOk => resp::simple(out, "OK"),
        How::Single => match slot.parts.into_iter().next().flatten() {
            Some(a) => answer(out, a),
            None => resp::error(out, "ERR no answer from the shard"),
        },
        How::Concat => {
            let values = slot
                .parts
                .into_iter()
                .flat_map(|p| match p {
                    Some(Answer::Values(vs)) => vs,
                    _ => Vec::new(),
                })
                .collect();
            answer(out, Answer::Values(values));
        }
        How::First => {
            let mut keys: Vec<Answer> = slot
                .parts
                .into_iter()
                .flatten()
                .filter(|a| matches!(a, Answer::Bulk(_)))
                .collect();
            let any = match keys.len() {
                0 => Answer::Nil,
                n => keys.swap_remove(rand::Rng::gen_range(&mut rand::thread_rng(), 0..n)),
            };
            answer(out, any);
        }
        How::Scan(next) => {
            resp::array(out, 2);
            resp::bulk(out, next.to_string().as_bytes());
            match slot.parts.into_iter().next().flatten() {
                Some(a @ Answer::Values(_)) => answer(out, a),
                _ => resp::array(out, 0),
            }
        }
        How::Values { positions, n } => {
            let mut values: Vec<Option<Vec<u8>>> = vec![None; n];
            for (part, pos) in slot.parts.into_iter().zip(positions) {
                if let Some(Answer::Values(vs)) = part {
                    for (v, p) in vs.into_iter().zip(pos) {
                        values[p] = v;
                    }
                }
            }
            answer(out, Answer::Values(values));
        }
    }
}

/// One shard answer as RESP.
pub fn answer(out: &mut Vec<u8>, a: Answer) {
    match a {
        Answer::Ok => resp::simple(out, "OK"),
        Answer::Nil => resp::nil(out),
        Answer::Int(n) => resp::integer(out, n),
        Answer::Bulk(b) => resp::bulk(out, &b),
        Answer::Error(e) => resp::error(out, &e),
        Answer::Status(s) => resp::simple(out, &s),
        Answer::Values(vs) => {
            resp::array(out, vs.len());
            for v in vs {
                match v {
                    Some(b) => resp::bulk(out, &b),
                    None => resp::nil(out),
                }
            }
        }
        // A dump is read by the connection's fiber (`pair.rs`), never sent to a client.
        Answer::Stored(_) => resp::error(out, "ERR a dumped value has no reply"),
        Answer::Array(items) => {
            resp::array(out, items.len());
            for a in items {
                answer(out, a);
            }
        }
    }
}
