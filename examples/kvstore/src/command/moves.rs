//! Planning the commands on two keys or on a key's object: `RENAME`, `RENAMENX`, `COPY`,
//! `LCS` and `OBJECT`, with Redis 7.0's checks in its order.

use super::{Plan, error, int_arg};
use crate::lcs;
use crate::shard::{ObjectAsk, Op};

/// The commands planned here.
pub(super) const NAMES: &[&str] = &["rename", "renamenx", "copy", "lcs", "object", "memory"];

/// What moves a value from `src` to `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveKind {
    /// `RENAME` (`false`) or `RENAMENX` (`true`).
    Rename(bool),
    /// `COPY` (`true`: `REPLACE`).
    Copy(bool),
}

/// `RENAME`, `RENAMENX` or `COPY` of `src` to `dst`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub src: Vec<u8>,
    pub dst: Vec<u8>,
    pub kind: MoveKind,
}

impl Move {
    /// The one operation that does it when both keys live on one shard.
    pub fn op(self) -> Op {
        match self.kind {
            MoveKind::Rename(nx) => Op::Rename(self.src, self.dst, nx),
            MoveKind::Copy(replace) => Op::Copy(self.src, self.dst, replace),
        }
    }
}

/// The plan of one of [`NAMES`].
pub(super) fn plan(name: &str, mut args: Vec<Vec<u8>>) -> Plan {
    let n = args.len();
    match name {
        "rename" | "renamenx" if n != 3 => super::arity(name),
        "rename" | "renamenx" => {
            let dst = args.pop().unwrap_or_default();
            let src = args.pop().unwrap_or_default();
            Plan::Move(Move {
                src,
                dst,
                kind: MoveKind::Rename(name == "renamenx"),
            })
        }
        "copy" if n < 3 => super::arity(name),
        "copy" => copy(args),
        "lcs" if n < 3 => super::arity(name),
        "lcs" => {
            let options = lcs::Options::parse(&args[3..]);
            args.truncate(3);
            Plan::Lcs(args.split_off(1), options)
        }
        "object" | "memory" if n < 2 => super::arity(name),
        "memory" => memory(&args),
        _ => object(&args),
    }
}

/// `COPY source destination [DB db] [REPLACE]`: only db 0 exists.
fn copy(args: Vec<Vec<u8>>) -> Plan {
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_lowercase();
        if opt == b"replace" {
            replace = true;
        } else if opt == b"db" && i + 1 < args.len() {
            match int_arg(&args[i + 1]) {
                Err(e) => return e,
                Ok(db) if !(i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&db) => {
                    return error(&format!(
                        "ERR value is out of range, value must between {} and {}",
                        i32::MIN,
                        i32::MAX
                    ));
                }
                Ok(0) => {}
                Ok(_) => return error("ERR DB index is out of range"),
            }
            i += 1;
        } else {
            return error("ERR syntax error");
        }
        i += 1;
    }
    if args[1] == args[2] {
        return error("ERR source and destination objects are the same");
    }
    let mut it = args.into_iter().skip(1);
    let (src, dst) = (it.next().unwrap_or_default(), it.next().unwrap_or_default());
    Plan::Move(Move {
        src,
        dst,
        kind: MoveKind::Copy(replace),
    })
}

/// `MEMORY USAGE key [SAMPLES count]`: an estimate of the bytes the key takes.
fn memory(args: &[Vec<u8>]) -> Plan {
    if !args[1].eq_ignore_ascii_case(b"usage") {
        return super::bad_subcommand("memory", &args[1], false);
    }
    if args.len() < 3 {
        return super::bad_subcommand("memory", &args[1], true);
    }
    match &args[3..] {
        [] => {}
        [opt, n] if opt.eq_ignore_ascii_case(b"samples") => {
            if let Err(e) = int_arg(n) {
                return e;
            }
        }
        _ => return error("ERR syntax error"),
    }
    let key = args[2].clone();
    Plan::One(key.clone(), Op::Object(key, ObjectAsk::Memory))
}

/// The lines of `OBJECT HELP`.
const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// `OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key`, `OBJECT HELP`.
fn object(args: &[Vec<u8>]) -> Plan {
    let sub = args[1].to_ascii_lowercase();
    let ask = match (sub.as_slice(), args.len()) {
        (b"help", 2) => {
            let mut out = Vec::new();
            crate::resp::array(&mut out, OBJECT_HELP.len());
            for line in OBJECT_HELP {
                crate::resp::simple(&mut out, line);
            }
            return Plan::Reply(out);
        }
        (b"encoding", 3) => ObjectAsk::Encoding,
        (b"refcount", 3) => ObjectAsk::RefCount,
        (b"idletime", 3) => ObjectAsk::IdleTime,
        (b"freq", 3) => ObjectAsk::Freq,
        (b"help" | b"encoding" | b"refcount" | b"idletime" | b"freq", _) => {
            return super::bad_subcommand("object", &args[1], true);
        }
        _ => return super::bad_subcommand("object", &args[1], false),
    };
    let key = args[2].clone();
    Plan::One(key.clone(), Op::Object(key, ask))
}
