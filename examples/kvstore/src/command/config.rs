//! `CONFIG GET`, `CONFIG SET`, `CONFIG RESETSTAT`: the parameters tools ask for, and the
//! hash's listpack limits, which `CONFIG SET` changes on every rank (Redis's own tests set them).
//! Errors are Redis 7.0's texts.

use super::{Plan, bad_subcommand, error, reply};
use crate::shard::hash;
use crate::{glob, resp};

/// Parameters that read a fixed value: what tools ask before they start (`redis-benchmark`
/// asks for `save` and `appendonly`); nothing is persisted and there is no replication.
const FIXED: &[(&str, &str)] = &[
    ("save", ""),
    ("appendonly", "no"),
    ("databases", "1"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("proto-max-bulk-len", "16777216"),
    ("maxmemory-samples", "5"),
    ("maxmemory-clients", "0"),
    ("replicaof", ""),
    ("slaveof", ""),
];

/// The address and port this rank listens on (`bind`, `port`), once it does.
static LISTEN: std::sync::OnceLock<(String, u16)> = std::sync::OnceLock::new();

/// Records where this rank listens, for `CONFIG GET bind` and `port`.
pub fn set_listen(bind: String, port: u16) {
    let _ = LISTEN.set((bind, port));
}

/// The parameters `CONFIG SET` changes, under their names and Redis's older aliases.
const LIMITS: &[(&str, bool)] = &[
    ("hash-max-listpack-entries", true),
    ("hash-max-ziplist-entries", true),
    ("hash-max-listpack-value", false),
    ("hash-max-ziplist-value", false),
];

/// New hash listpack limits (`None`: unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub entries: Option<u64>,
    pub value: Option<u64>,
}

/// Every parameter with its current value.
fn all() -> Vec<(&'static str, String)> {
    let (entries, value) = hash::limits();
    let mut v: Vec<(&str, String)> = FIXED.iter().map(|(k, v)| (*k, v.to_string())).collect();
    if let Some((bind, port)) = LISTEN.get() {
        v.push(("bind", bind.clone()));
        v.push(("port", port.to_string()));
    }
    for (name, is_entries) in LIMITS {
        v.push((name, if *is_entries { entries } else { value }.to_string()));
    }
    v
}

/// `CONFIG ...` (`args[1]` is the subcommand).
pub(super) fn plan(args: &[Vec<u8>]) -> Plan {
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"get" if args.len() >= 3 => {
            let patterns: Vec<_> = args[2..]
                .iter()
                .map(|p| glob::Pattern::new(p, true))
                .collect();
            let found: Vec<_> = all()
                .into_iter()
                .filter(|(name, _)| patterns.iter().any(|p| p.matches(name.as_bytes())))
                .collect();
            reply(|o| {
                resp::array(o, found.len() * 2);
                for (name, value) in found {
                    resp::bulk(o, name.as_bytes());
                    resp::bulk(o, value.as_bytes());
                }
            })
        }
        b"resetstat" if args.len() == 2 => reply(|o| resp::simple(o, "OK")),
        b"set" if args.len() >= 4 && args.len() % 2 == 0 => set(&args[2..]),
        b"set" if args.len() >= 4 => error("ERR syntax error"),
        b"get" | b"resetstat" | b"set" => bad_subcommand("config", &args[1], true),
        _ => bad_subcommand("config", &args[1], false),
    }
}

fn failed(name: &str, why: &str) -> Plan {
    error(&format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

/// `CONFIG SET name value [name value ...]`: all or nothing, as Redis applies them.
fn set(pairs: &[Vec<u8>]) -> Plan {
    let mut limits = Limits::default();
    let mut seen: Vec<String> = Vec::new();
    for pair in pairs.chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
        let value = String::from_utf8_lossy(&pair[1]);
        let limit = LIMITS.iter().find(|(n, _)| *n == name);
        let fixed = FIXED.iter().find(|(n, _)| *n == name);
        if limit.is_none() && fixed.is_none() {
            return error(&format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            ));
        }
        // Redis counts a name twice as a duplicate, not a name and its alias.
        if seen.contains(&name) {
            return failed(&name, "duplicate parameter");
        }
        seen.push(name.clone());
        if let Some((_, current)) = fixed {
            if *current != value {
                return failed(&name, "gsm-kv cannot change it");
            }
            continue;
        }
        if let Some((_, true)) = limit {
            let Ok(n) = value.parse::<i64>() else {
                return failed(&name, "argument couldn't be parsed into an integer");
            };
            if n < 0 {
                return failed(
                    &name,
                    "argument must be between 0 and 9223372036854775807 inclusive",
                );
            }
            limits.entries = Some(n as u64);
        } else {
            let Some(n) = memory_value(&value) else {
                return failed(&name, "argument must be a memory value");
            };
            limits.value = Some(n);
        }
    }
    Plan::ConfigSet(limits)
}

/// A memory value as Redis reads one: a count of bytes, or with `k`, `kb`, `m`, `mb`, `g` or
/// `gb` (any case; the `b` forms are powers of 1024).
fn memory_value(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let units: [(&str, u64); 6] = [
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
    ];
    let (digits, unit) = units
        .iter()
        .find_map(|(u, m)| lower.strip_suffix(u).map(|d| (d, *m)))
        .unwrap_or((lower.as_str(), 1));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(unit)
}
