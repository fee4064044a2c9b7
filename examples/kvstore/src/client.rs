//! `CLIENT`: the connections of a rank as Redis shows them (`ID`, `INFO`, `LIST`, `GETNAME`,
//! `SETNAME`, `REPLY`, `KILL`), answered by the connection that asks, with Redis 7.0's texts.
//!
//! Each connection registers itself in a table of its rank (a mutex, taken when a connection
//! comes, goes, is named, listed or killed, never per request). A connection killed from another
//! worker has its socket shut down, under the table's lock while its entry (and so its
//! descriptor) still exists; its own fiber then reads the end and closes it. Connections of
//! other ranks are not seen: each rank is a server of its own to its clients.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::{resp, sys};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static TABLE: Mutex<BTreeMap<u64, Entry>> = Mutex::new(BTreeMap::new());

/// What the table knows of one connection.
#[derive(Debug)]
struct Entry {
    addr: String,
    laddr: String,
    fd: RawFd,
    name: Vec<u8>,
    since: Instant,
    /// Shut down by a kill, not yet gone: no longer listed or killed again.
    killed: bool,
}

/// One connection's own state; dropping it takes the connection out of the table (before its
/// socket closes, so that a kill never shuts down a descriptor reused by another).
#[derive(Debug)]
pub struct Client {
    pub id: u64,
    /// `CLIENT REPLY OFF`: no reply is sent.
    pub off: bool,
    /// The reply of the command being run is not sent (it followed `CLIENT REPLY SKIP`).
    pub skip: bool,
    /// `CLIENT REPLY SKIP`: the next command's reply is not sent.
    pub skip_next: bool,
    /// Killed by itself: close once the reply is written.
    pub close: bool,
    /// The bytes of the request being run (its `qbuf` in `CLIENT LIST`).
    pub qbuf: usize,
}

impl Client {
    pub fn join(stream: &TcpStream) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let addr =
            |a: std::io::Result<std::net::SocketAddr>| a.map_or(String::new(), |a| a.to_string());
        let entry = Entry {
            addr: addr(stream.peer_addr()),
            laddr: addr(stream.local_addr()),
            fd: stream.as_raw_fd(),
            name: Vec::new(),
            since: Instant::now(),
            killed: false,
        };
        lock().insert(id, entry);
        Self {
            id,
            off: false,
            skip: false,
            skip_next: false,
            close: false,
            qbuf: 0,
        }
    }
}

impl Client {
    /// A command begins: a skip asked for by the one before applies to it.
    pub fn begin(&mut self) {
        self.skip = std::mem::take(&mut self.skip_next);
    }

    /// The command ended: whether its reply is to be dropped.
    pub fn end(&mut self) -> bool {
        std::mem::take(&mut self.skip) || self.off
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        lock().remove(&self.id);
    }
}

fn lock() -> std::sync::MutexGuard<'static, BTreeMap<u64, Entry>> {
    TABLE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn error(out: &mut Vec<u8>, text: &str) {
    resp::error(out, text);
}

/// Redis's line for one client in `CLIENT LIST`/`INFO` (the figures it does not keep are
/// those of an idle connection).
fn line(id: u64, e: &Entry, cmd: &str, qbuf: usize) -> String {
    format!(
        "id={id} addr={} laddr={} fd={} name={} age={} idle=0 flags=N db=0 sub=0 psub=0 ssub=0 \
         multi=-1 qbuf={qbuf} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem=0 \
         tot-mem=0 events=r cmd={cmd} user=default redir=-1 resp=2\n",
        e.addr,
        e.laddr,
        e.fd,
        String::from_utf8_lossy(&e.name),
        e.since.elapsed().as_secs(),
    )
}

/// The subcommands and their arity (negative: at least), as Redis's command table has them.
const ARITY: &[(&str, i64)] = &[
    ("id", 2),
    ("info", 2),
    ("list", -2),
    ("kill", -3),
    ("getname", 2),
    ("setname", 3),
    ("reply", 3),
    ("help", 2),
    ("no-evict", 3),
    ("unpause", 2),
];

/// Answers `CLIENT ...` (`args[0]` is `CLIENT`) for `me` into `out` (nothing for `REPLY OFF`
/// and `SKIP`, which change what `me` sends).
pub fn command(me: &mut Client, args: &[Vec<u8>], out: &mut Vec<u8>) {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let n = args.len() as i64;
    match ARITY.iter().find(|(name, _)| *name == sub) {
        None => {
            let shown: String = String::from_utf8_lossy(&args[1])
                .chars()
                .take(128)
                .collect();
            return error(
                out,
                &format!("ERR unknown subcommand '{shown}'. Try CLIENT HELP."),
            );
        }
        Some(&(_, a)) if (a > 0 && n != a) || (a < 0 && n < -a) => {
            return error(
                out,
                &format!("ERR wrong number of arguments for 'client|{sub}' command"),
            );
        }
        Some(_) => {}
    }
    match sub.as_str() {
        "id" => resp::integer(out, me.id as i64),
        "info" => match lock().get(&me.id) {
            Some(e) => resp::bulk(out, line(me.id, e, "client|info", me.qbuf).as_bytes()),
            None => resp::nil(out),
        },
        "list" => list(me, &args[2..], out),
        "getname" => match lock().get(&me.id) {
            Some(e) if !e.name.is_empty() => resp::bulk(out, &e.name),
            _ => resp::nil(out),
        },
        "setname" => {
            if args[2].iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
                return error(
                    out,
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            if let Some(e) = lock().get_mut(&me.id) {
                e.name = args[2].clone();
            }
            resp::simple(out, "OK");
        }
        "reply" => match args[2].to_ascii_lowercase().as_slice() {
            b"on" => {
                (me.off, me.skip) = (false, false);
                resp::simple(out, "OK");
            }
            b"off" => me.off = true,
            b"skip" => me.skip_next = !me.off,
            _ => error(out, "ERR syntax error"),
        },
        "kill" => kill(me, &args[2..], out),
        "no-evict" | "unpause" => resp::simple(out, "OK"),
        _ => help(out),
    }
}

fn help(out: &mut Vec<u8>) {
    let lines = [
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are: ID, TYPE, USER, ADDR, LADDR, SKIPME.",
        "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID <id> [<id> ...]]",
        "    Return information about client connections.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "HELP",
        "    Print this help.",
    ];
    resp::array(out, lines.len());
    for l in lines {
        resp::simple(out, l);
    }
}

/// `CLIENT LIST [TYPE type] [ID id...]`
fn list(me: &Client, args: &[Vec<u8>], out: &mut Vec<u8>) {
    let mut ids: Option<Vec<u64>> = None;
    match args {
        [] => {}
        [t, kind] if t.eq_ignore_ascii_case(b"type") => {
            match kind.to_ascii_lowercase().as_slice() {
                b"normal" => {}
                b"master" | b"replica" | b"slave" | b"pubsub" => ids = Some(Vec::new()),
                _ => {
                    return error(
                        out,
                        &format!(
                            "ERR Unknown client type '{}'",
                            String::from_utf8_lossy(kind)
                        ),
                    );
                }
            }
        }
        [i, rest @ ..] if i.eq_ignore_ascii_case(b"id") && !rest.is_empty() => {
            let mut wanted = Vec::new();
            for r in rest {
                match crate::shard::parse_i64(r) {
                    Some(id) if id > 0 => wanted.push(id as u64),
                    _ => return error(out, "ERR Invalid client ID"),
                }
            }
            ids = Some(wanted);
        }
        _ => return error(out, "ERR syntax error"),
    }
    let table = lock();
    let mut text = String::new();
    for (&id, e) in table.iter() {
        if !e.killed && ids.as_ref().is_none_or(|w| w.contains(&id)) {
            let (cmd, qbuf) = match id == me.id {
                true => ("client|list", me.qbuf),
                false => ("NULL", 0),
            };
            text.push_str(&line(id, e, cmd, qbuf));
        }
    }
    resp::bulk(out, text.as_bytes());
}

/// `CLIENT KILL addr` (the old form: `OK` or an error) or `CLIENT KILL filter value ...` (the
/// count killed; `SKIPME yes` unless told otherwise).
fn kill(me: &mut Client, args: &[Vec<u8>], out: &mut Vec<u8>) {
    if let [addr] = args {
        let found = kill_where(me, true, |_, e| e.addr.as_bytes() == addr.as_slice(), false);
        match found {
            0 => error(out, "ERR No such client"),
            _ => resp::simple(out, "OK"),
        }
        return;
    }
    if args.len() % 2 != 0 {
        return error(out, "ERR syntax error");
    }
    let (mut id, mut addr, mut laddr, mut skipme) = (None, None, None, true);
    let mut none = false;
    for pair in args.chunks(2) {
        let value = &pair[1];
        match pair[0].to_ascii_lowercase().as_slice() {
            b"id" => match crate::shard::parse_i64(value) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return error(out, "ERR client-id should be greater than 0"),
            },
            b"addr" => addr = Some(value.clone()),
            b"laddr" => laddr = Some(value.clone()),
            // Only the default user exists (there is no ACL).
            b"user" if value.as_slice() != b"default" => {
                let shown = String::from_utf8_lossy(value);
                return error(out, &format!("ERR No such user '{shown}'"));
            }
            b"user" => {}
            b"type" => match value.to_ascii_lowercase().as_slice() {
                b"normal" => {}
                b"master" | b"replica" | b"slave" | b"pubsub" => none = true,
                _ => {
                    return error(
                        out,
                        &format!(
                            "ERR Unknown client type '{}'",
                            String::from_utf8_lossy(value)
                        ),
                    );
                }
            },
            b"skipme" => match value.to_ascii_lowercase().as_slice() {
                b"yes" => skipme = true,
                b"no" => skipme = false,
                _ => return error(out, "ERR syntax error"),
            },
            _ => return error(out, "ERR syntax error"),
        }
    }
    let killed = if none {
        0
    } else {
        kill_where(
            me,
            !skipme,
            |i, e| {
                id.is_none_or(|x| x == i)
                    && addr
                        .as_ref()
                        .is_none_or(|a| a.as_slice() == e.addr.as_bytes())
                    && laddr
                        .as_ref()
                        .is_none_or(|a| a.as_slice() == e.laddr.as_bytes())
            },
            true,
        )
    };
    resp::integer(out, killed as i64);
}

/// Kills the connections `which` selects (`me` too when `include_me`: it closes after its
/// reply); how many. The old form counts at most one.
fn kill_where(
    me: &mut Client,
    include_me: bool,
    which: impl Fn(u64, &Entry) -> bool,
    all: bool,
) -> usize {
    let mut table = lock();
    let mut killed = 0;
    for (&id, e) in table.iter_mut() {
        if e.killed || !which(id, e) || (id == me.id && !include_me) {
            continue;
        }
        e.killed = true;
        if id == me.id {
            me.close = true;
        } else {
            sys::shut_down(e.fd);
        }
        killed += 1;
        if !all {
            break;
        }
    }
    killed
}
