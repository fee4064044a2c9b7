//! Cluster mode (`--cluster`): every worker of every rank answers as one Redis Cluster shard,
//! on its own port, and the keyspace's 16384 hash slots are split among the workers in
//! contiguous ranges, worker order. A key's slot is Redis's (CRC16/XMODEM of the key, or of its
//! first non-empty `{...}` hash tag, modulo 16384), and its owner is the worker whose range holds
//! the slot, so a client that routes by slot (`redis-cli -c`, `redis-benchmark --cluster`,
//! cluster client libraries) reaches the worker whose own shard holds the key, and the
//! operation runs there without delegation.
//!
//! A command whose keys are not all of one slot is answered `CROSSSLOT`, and one whose slot
//! another worker owns `MOVED slot ip:port`, both before it runs, as Redis Cluster answers (after
//! the arity check, `CROSSSLOT` before `MOVED`). The slots never move while the job runs, so
//! there is no `ASK` (`ASKING` is accepted and changes nothing). `CLUSTER` answers `SLOTS`,
//! `SHARDS`, `NODES`, `INFO`, `MYID`, `KEYSLOT`, `COUNTKEYSINSLOT` and `GETKEYSINSLOT` (these
//! two from the worker's own shard, as Redis counts its own keys), and refuses the commands that
//! change a cluster. This module keeps the table of nodes and makes those replies; it does not
//! read sockets or reach shards.

use serde::{Deserialize, Serialize};

use crate::command::{keys_of, unknown_subcommand};
use crate::resp;
use crate::slot::{SLOTS, first_slot, key_slot, owner};

/// Where a shard listens, as clients are told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub ip: String,
    pub port: u16,
}

impl Node {
    fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

/// The cluster as one worker sees it: every shard's address, its own place, and the job's
/// name that node ids are made of.
#[derive(Debug, Clone)]
pub struct Cluster {
    nodes: Vec<Node>,
    me: usize,
    job: u64,
}

/// What a request becomes in cluster mode, before it is planned.
#[derive(Debug, PartialEq, Eq)]
pub enum Routed {
    /// It runs here, as in a standalone store.
    Here,
    /// Answered at once (a redirection, an error, or a `CLUSTER` reply).
    Reply(Vec<u8>),
    /// `COUNTKEYSINSLOT` (`None`) or `GETKEYSINSLOT` (`Some(count)`) on this worker's shard.
    SlotKeys(usize, Option<usize>),
}

fn error(text: &str) -> Routed {
    let mut out = Vec::new();
    resp::error(&mut out, text);
    Routed::Reply(out)
}

fn reply(f: impl FnOnce(&mut Vec<u8>)) -> Routed {
    let mut out = Vec::new();
    f(&mut out);
    Routed::Reply(out)
}

impl Cluster {
    /// The cluster of `nodes` (by worker id) seen from worker `me`, in the job named `job`.
    pub fn new(nodes: Vec<Node>, me: usize, job: u64) -> Self {
        assert!(me < nodes.len() && nodes.len() <= SLOTS);
        Self { nodes, me, job }
    }

    /// Node `i`'s id: 40 hex digits, the job's name then the worker's number.
    pub fn node_id(&self, i: usize) -> String {
        format!("{:016x}{:024x}", self.job, i)
    }

    pub fn slots_of(&self, i: usize) -> (usize, usize) {
        let n = self.nodes.len();
        (first_slot(i, n), first_slot(i + 1, n) - 1)
    }

    /// Where `args` (a request, not empty) is to run, and the reply when not here.
    pub fn route(&self, args: &[Vec<u8>]) -> Routed {
        let name = args[0].as_slice();
        if name.eq_ignore_ascii_case(b"cluster") && args.len() >= 2 {
            return self.command(args);
        }
        let accepted = [&b"asking"[..], b"readonly", b"readwrite"];
        if args.len() == 1 && accepted.iter().any(|c| name.eq_ignore_ascii_case(c)) {
            return reply(|o| resp::simple(o, "OK"));
        }
        let Some(keys) = keys_of(args) else {
            return Routed::Here;
        };
        let Some(first) = keys.first() else {
            return Routed::Here;
        };
        let slot = key_slot(first);
        if keys.iter().any(|k| key_slot(k) != slot) {
            return error("CROSSSLOT Keys in request don't hash to the same slot");
        }
        let at = owner(slot, self.nodes.len());
        if at == self.me {
            return Routed::Here;
        }
        error(&format!("MOVED {slot} {}", self.nodes[at].addr()))
    }

    /// `CLUSTER subcommand ...`.
    fn command(&self, args: &[Vec<u8>]) -> Routed {
        let sub = args[1].to_ascii_lowercase();
        let n = args.len();
        let wrong = || {
            error(&format!(
                "ERR wrong number of arguments for 'cluster|{}' command",
                String::from_utf8_lossy(&sub)
            ))
        };
        match (sub.as_slice(), n) {
            (b"slots", 2) => reply(|o| self.slots(o)),
            (b"shards", 2) => reply(|o| self.shards(o)),
            (b"nodes", 2) => reply(|o| resp::bulk(o, self.nodes_text().as_bytes())),
            (b"info", 2) => reply(|o| resp::bulk(o, self.info().as_bytes())),
            (b"myid", 2) => reply(|o| resp::bulk(o, self.node_id(self.me).as_bytes())),
            (b"keyslot", 3) => reply(|o| resp::integer(o, key_slot(&args[2]) as i64)),
            (b"countkeysinslot", 3) => match slot_arg(&args[2]) {
                Some(slot) => Routed::SlotKeys(slot, None),
                None => error("ERR Invalid slot"),
            },
            (b"getkeysinslot", 4) => {
                let count = crate::shard::parse_i64(&args[3]);
                match (slot_arg(&args[2]), count) {
                    (Some(slot), Some(c)) if c >= 0 => Routed::SlotKeys(slot, Some(c as usize)),
                    _ => error("ERR Invalid slot or number of keys"),
                }
            }
            (
                b"slots" | b"shards" | b"nodes" | b"info" | b"myid" | b"keyslot"
                | b"countkeysinslot" | b"getkeysinslot",
                _,
            ) => wrong(),
            (
                b"addslots" | b"addslotsrange" | b"delslots" | b"delslotsrange" | b"setslot"
                | b"meet" | b"forget" | b"replicate" | b"reset" | b"failover" | b"flushslots"
                | b"bumpepoch" | b"set-config-epoch" | b"saveconfig",
                _,
            ) => error(&format!(
                "ERR CLUSTER {} is not supported by gsm-kv: the job fixes its shards and slots",
                String::from_utf8_lossy(&args[1]).to_ascii_uppercase()
            )),
            _ => error(&unknown_subcommand("cluster", &args[1])),
        }
    }

    /// `CLUSTER SLOTS`: per range, its first and last slot and its node (ip, port, id, and
    /// an empty array of metadata, as Redis 7.0 gives them).
    fn slots(&self, out: &mut Vec<u8>) {
        resp::array(out, self.nodes.len());
        for (i, node) in self.nodes.iter().enumerate() {
            let (first, last) = self.slots_of(i);
            resp::array(out, 3);
            resp::integer(out, first as i64);
            resp::integer(out, last as i64);
            resp::array(out, 4);
            resp::bulk(out, node.ip.as_bytes());
            resp::integer(out, i64::from(node.port));
            resp::bulk(out, self.node_id(i).as_bytes());
            resp::array(out, 0);
        }
    }

    /// `CLUSTER SHARDS`: per shard, its slots and its one node, as Redis 7.0 gives them.
    fn shards(&self, out: &mut Vec<u8>) {
        resp::array(out, self.nodes.len());
        for (i, node) in self.nodes.iter().enumerate() {
            let (first, last) = self.slots_of(i);
            resp::array(out, 4);
            resp::bulk(out, b"slots");
            resp::array(out, 2);
            resp::integer(out, first as i64);
            resp::integer(out, last as i64);
            resp::bulk(out, b"nodes");
            resp::array(out, 1);
            resp::array(out, 14);
            let text = |out: &mut Vec<u8>, k: &str, v: &str| {
                resp::bulk(out, k.as_bytes());
                resp::bulk(out, v.as_bytes());
            };
            text(out, "id", &self.node_id(i));
            resp::bulk(out, b"port");
            resp::integer(out, i64::from(node.port));
            text(out, "ip", &node.ip);
            text(out, "endpoint", &node.ip);
            text(out, "role", "master");
            resp::bulk(out, b"replication-offset");
            resp::integer(out, 0);
            text(out, "health", "online");
        }
    }

    /// `CLUSTER NODES`: a line per node, `id ip:port@cport flags master ping pong epoch
    /// link slots`; the bus port is given as Redis's default (port + 10000) though no bus runs.
    pub fn nodes_text(&self) -> String {
        let mut text = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let (first, last) = self.slots_of(i);
            let flags = if i == self.me {
                "myself,master"
            } else {
                "master"
            };
            text.push_str(&format!(
                "{} {}@{} {flags} - 0 0 {} connected {first}-{last}\n",
                self.node_id(i),
                node.addr(),
                u32::from(node.port) + 10_000,
                i + 1,
            ));
        }
        text
    }

    /// `CLUSTER INFO`.
    fn info(&self) -> String {
        let n = self.nodes.len();
        format!(
            "cluster_state:ok\r\ncluster_slots_assigned:{SLOTS}\r\ncluster_slots_ok:{SLOTS}\r\n\
             cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{n}\r\n\
             cluster_size:{n}\r\ncluster_current_epoch:{n}\r\ncluster_my_epoch:{}\r\n\
             cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n\
             total_cluster_links_buffer_limit_exceeded:0\r\n",
            self.me + 1
        )
    }
}

/// A slot number as Redis reads one (0..16384).
fn slot_arg(arg: &[u8]) -> Option<usize> {
    crate::shard::parse_i64(arg)
        .and_then(|s| usize::try_from(s).ok())
        .filter(|&s| s < SLOTS)
}

#[cfg(test)]
mod tests;
