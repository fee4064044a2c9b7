//! The hostfile and `-H` parser: runs the pest grammar (`grammar.pest`) and turns its tree into
//! merged [`Host`]s, checking what the grammar cannot (duplicated keys, counts, `max_slots`).
//! It does not read files or the environment.

use super::grammar::{Grammar, Rule};
use super::hostlist;
use super::report::{self, Source, edit_distance};
use super::{Host, HostsError};
use pest::Parser as _;
use pest::iterators::Pair;
use std::collections::HashMap;

/// Most host names one input may name in total, counting repeats (16 × [`hostlist::MAX_EXPANSION`]).
pub const MAX_TOTAL_NAMES: u64 = 16 * hostlist::MAX_EXPANSION;

/// Keys for the slot count: Open MPI 4.1's `slots`, `count`, `cpu`, plus `cpus`, which Open MPI
/// rejects but people type.
pub const SLOTS_KEYS: &[&str] = &["slots", "count", "cpu", "cpus"];
/// Keys for the hard limit: every spelling Open MPI 4.1's lexer knows.
pub const MAX_KEYS: &[&str] = &[
    "max_slots",
    "max-slots",
    "slots_max",
    "slots-max",
    "max_count",
    "max-count",
    "count_max",
    "count-max",
    "max_cpu",
    "max-cpu",
    "cpu_max",
    "cpu-max",
];
/// Keys for the remote user: Open MPI's `username` spellings and Hydra's `user`.
pub const USER_KEYS: &[&str] = &["user", "username", "user-name", "user_name"];
/// Open MPI topology hints that gsmrun does not use, refused rather than silently ignored.
pub const TOPOLOGY_KEYS: &[&str] = &[
    "boards",
    "sockets",
    "sockets_per_board",
    "sockets-per-board",
    "cores",
    "cores_per_socket",
    "cores-per-socket",
    "cpu_set",
    "cpu-set",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Slots,
    Max,
    User,
}

/// One `[user@]host[:N]` item after expansion.
struct Item {
    at: usize,
    width: usize,
    user: Option<String>,
    names: Vec<String>,
    count: Option<(u32, usize)>,
}

/// Hosts in order of first appearance, merged by name ignoring ASCII case.
struct Merger<'s> {
    src: Source<'s>,
    hosts: Vec<Host>,
    /// Host index by lowercased name: DNS names are case-insensitive, and Open MPI, which compares
    /// them exactly, refuses `Localhost slots=1` and `localhost slots=1` in one hostfile.
    index: HashMap<String, usize>,
    /// Byte offset of each host's first item (its line is computed only for a report).
    first_at: Vec<usize>,
    total: u64,
}

impl<'s> Merger<'s> {
    fn new(src: Source<'s>) -> Self {
        Merger {
            src,
            hosts: Vec::new(),
            index: HashMap::new(),
            first_at: Vec::new(),
            total: 0,
        }
    }

    /// Merge rule: names equal but for ASCII case are one host, spelled as it first appears; slots
    /// add up; `max_slots` add up when every line naming the host gives one, and a line without
    /// `max_slots` (no limit) makes the merged host unlimited; a user given on one line applies to
    /// the host, and two different users for one host are an error. Different names of one
    /// machine (`127.0.0.1` and `localhost`) stay different hosts: names are not resolved.
    fn add(&mut self, item: &Item, slots: u32, max: Option<u32>) -> Result<(), HostsError> {
        self.total = self.total.saturating_add(item.names.len() as u64);
        if self.total > MAX_TOTAL_NAMES {
            return Err(self.src.error(
                item.at,
                item.width,
                &format!("more than {MAX_TOTAL_NAMES} host names in total"),
                "this is not a real cluster; check the ranges",
            ));
        }
        for name in &item.names {
            let key = name.to_ascii_lowercase();
            match self.index.get(&key) {
                None => {
                    self.index.insert(key, self.hosts.len());
                    self.first_at.push(item.at);
                    self.hosts.push(Host {
                        name: name.clone(),
                        user: item.user.clone(),
                        slots,
                        max_slots: max,
                    });
                }
                Some(&h) => {
                    let host = &mut self.hosts[h];
                    let Some(total) = host.slots.checked_add(slots) else {
                        return Err(self.src.error(
                            item.at,
                            item.width,
                            &format!("host `{name}` has more than {} slots in total", u32::MAX),
                            "give each host a realistic number of slots",
                        ));
                    };
                    host.slots = total;
                    host.max_slots = match (host.max_slots, max) {
                        (Some(a), Some(b)) => Some(a.saturating_add(b)),
                        _ => None,
                    };
                    match (&host.user, &item.user) {
                        (Some(a), Some(b)) if a != b => {
                            let first = &host.name;
                            let spelled = if first == name {
                                String::new()
                            } else {
                                format!(" (as `{first}`)")
                            };
                            return Err(self.src.error(
                                item.at,
                                item.width,
                                &format!(
                                    "host `{name}` has user `{b}` here but `{a}` on line {}{spelled}",
                                    self.src.text[..self.first_at[h]].matches('\n').count() + 1
                                ),
                                "use one user per host",
                            ));
                        }
                        (None, Some(b)) => host.user = Some(b.clone()),
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }
}

/// Parse a whole hostfile (BOM already stripped) into merged hosts.
pub(crate) fn hostfile(src: Source<'_>) -> Result<Vec<Host>, HostsError> {
    let mut pairs =
        Grammar::parse(Rule::hostfile, src.text).map_err(|e| src.syntax(Rule::hostfile, &e))?;
    let mut merger = Merger::new(src);
    let Some(file) = pairs.next() else {
        return Ok(Vec::new());
    };
    for p in file.into_inner() {
        match p.as_rule() {
            Rule::unclosed_comment => {
                return Err(src.error(
                    p.as_span().start(),
                    2,
                    "this `/*` comment is never closed",
                    "end the comment with `*/`",
                ));
            }
            Rule::entry => entry(&src, p, &mut merger)?,
            _ => {}
        }
    }
    Ok(merger.hosts)
}

/// Parse the value of `-H/--host`. An empty value (`-H ''`, `-H "$HOSTS"` with the variable
/// unset) is named as such rather than reported as a syntax error at column 1.
pub(crate) fn host_option(src: Source<'_>) -> Result<Vec<Host>, HostsError> {
    if src.text.trim().is_empty() {
        return Err(report::plain(
            &format!("{}: the host list is empty", src.label),
            "give at least one host, e.g. `-H node1:2,node2`, or leave out -H to use this machine",
        ));
    }
    let mut pairs = Grammar::parse(Rule::host_option, src.text)
        .map_err(|e| src.syntax(Rule::host_option, &e))?;
    let mut merger = Merger::new(src);
    let Some(opt) = pairs.next() else {
        return Ok(Vec::new());
    };
    for p in opt.into_inner() {
        if p.as_rule() == Rule::item {
            let it = item(&src, p)?;
            let slots = it.count.map_or(1, |(n, _)| n);
            merger.add(&it, slots, None)?;
        }
    }
    Ok(merger.hosts)
}

/// Expand a Slurm node list such as `n[01-04,07],login1` (no slots, duplicates kept).
pub(crate) fn nodelist(src: Source<'_>) -> Result<Vec<String>, HostsError> {
    let mut pairs =
        Grammar::parse(Rule::nodelist, src.text).map_err(|e| src.syntax(Rule::nodelist, &e))?;
    let mut out = Vec::new();
    let Some(list) = pairs.next() else {
        return Ok(out);
    };
    for p in list.into_inner() {
        if p.as_rule() == Rule::pattern {
            out.extend(hostlist::expand(&src, p)?);
            if out.len() as u64 > MAX_TOTAL_NAMES {
                return Err(src.error(
                    0,
                    1,
                    "too many nodes in the node list",
                    "check the variable",
                ));
            }
        }
    }
    Ok(out)
}

fn entry(
    src: &Source<'_>,
    pair: Pair<'_, Rule>,
    merger: &mut Merger<'_>,
) -> Result<(), HostsError> {
    let mut items = Vec::new();
    let mut slots: Option<(u32, usize)> = None;
    let mut max: Option<(u32, usize, usize)> = None;
    let mut user: Option<(String, usize)> = None;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::item => items.push(item(src, p)?),
            Rule::attr => {
                let (key, at, kw, value) = attr(src, p)?;
                match key {
                    Key::Slots => {
                        if slots.is_some() || items.iter().any(|i| i.count.is_some()) {
                            return Err(src.error(
                                at,
                                kw,
                                "the slot count is given twice on this line",
                                "keep one `slots=N` (or `host:N`); to add slots, name the host on another line",
                            ));
                        }
                        let (v, vat, vw) = value;
                        slots = Some((count(src, &v, vat, vw, "slots")?, at));
                    }
                    Key::Max => {
                        if max.is_some() {
                            return Err(src.error(
                                at,
                                kw,
                                "`max_slots` is given twice on this line",
                                "keep one `max_slots=M`",
                            ));
                        }
                        let (v, vat, vw) = value;
                        max = Some((count(src, &v, vat, vw, "max_slots")?, at, kw));
                    }
                    Key::User => {
                        if user.is_some() || items.iter().any(|i| i.user.is_some()) {
                            return Err(src.error(
                                at,
                                kw,
                                "the user is given twice on this line",
                                "keep one `user@host` or `user=NAME`",
                            ));
                        }
                        let (v, vat, _) = value;
                        user = Some((user_name(src, v, vat)?, at));
                    }
                }
            }
            _ => {}
        }
    }
    let count_n = slots
        .map(|(n, _)| n)
        .or_else(|| items.iter().find_map(|i| i.count.map(|(n, _)| n)));
    if let Some((m, at, kw)) = max {
        if let Some(n) = count_n {
            // A per-item `host:N` can differ between items; check each.
            let worst = items
                .iter()
                .filter_map(|i| i.count.map(|(c, _)| c))
                .chain(slots.map(|(n, _)| n))
                .max()
                .unwrap_or(n);
            if m < worst {
                return Err(src.error(
                    at,
                    kw,
                    &format!("max_slots={m} is below slots={worst}"),
                    "raise max_slots to at least slots, or lower slots",
                ));
            }
        }
    }
    for mut it in items {
        if let Some((u, _)) = &user {
            it.user = Some(u.clone());
        }
        // Open MPI: with max_slots alone, slots = max_slots; with neither, 1.
        let n = slots
            .map(|(n, _)| n)
            .or(it.count.map(|(n, _)| n))
            .or(max.map(|(m, _, _)| m))
            .unwrap_or(1);
        merger.add(&it, n, max.map(|(m, _, _)| m))?;
    }
    Ok(())
}

/// An attribute: its key kind, key offset and width, and (value, value offset, value width).
type Attr = (Key, usize, usize, (String, usize, usize));

fn attr(src: &Source<'_>, pair: Pair<'_, Rule>) -> Result<Attr, HostsError> {
    let span = pair.as_span();
    let mut inner = pair.into_inner();
    let Some(key_pair) = inner.next() else {
        return Err(src.error(span.start(), 1, "expected `key=value`", "write `slots=N`"));
    };
    let key = key_pair.as_str();
    let at = key_pair.as_span().start();
    let kw = key.chars().count();
    let has_eq = span.as_str().contains('=');
    if !has_eq {
        if key.bytes().all(|b| b.is_ascii_digit()) {
            return Err(src.error(
                at,
                kw,
                &format!("bare number `{key}`"),
                &format!("write `slots={key}`"),
            ));
        }
        return Err(src.error(
            at,
            kw,
            &format!("`{key}` is not `key=value`"),
            &format!("one host per line: put `{key}` on its own line, or write `slots=N`"),
        ));
    }
    let kind = if SLOTS_KEYS.contains(&key) {
        Key::Slots
    } else if MAX_KEYS.contains(&key) {
        Key::Max
    } else if USER_KEYS.contains(&key) {
        Key::User
    } else if TOPOLOGY_KEYS.contains(&key) {
        return Err(src.error(
            at,
            kw,
            &format!("`{key}` is an Open MPI topology hint that gsmrun does not use"),
            &format!("remove `{key}=...`; gsmrun places ranks by slots only"),
        ));
    } else {
        return Err(src.error(at, kw, &format!("unknown key `{key}`"), &key_help(key)));
    };
    let Some(v) = inner.next() else {
        return Err(src.error(
            at,
            kw,
            &format!("`{key}=` has no value"),
            &format!("write `{key}=N`"),
        ));
    };
    let vs = v.as_span().start();
    Ok((
        kind,
        at,
        kw,
        (v.as_str().to_string(), vs, v.as_str().chars().count()),
    ))
}

/// What to write instead of an unknown key. Keys are case-sensitive (Open MPI's lexer is), so a
/// known key in another case (`SLOTS`, `Max_Slots`) is named in lower case; otherwise the nearest
/// known key is suggested, comparing without case (`SLOT` → `slots`) and preferring the usual
/// spelling (`max_slots`, not `max-slots`) among equally near ones.
fn key_help(key: &str) -> String {
    let lower = key.to_ascii_lowercase();
    let known = [SLOTS_KEYS, MAX_KEYS, USER_KEYS].concat();
    if known.contains(&lower.as_str()) {
        return format!("keys are lower case: write `{lower}`");
    }
    // The usual spellings first: `min_by_key` keeps the first of equally near keys.
    let preferred = ["slots", "max_slots", "user"];
    let best = preferred
        .iter()
        .chain(known.iter().filter(|k| !preferred.contains(k)))
        .map(|k| (edit_distance(&lower, k), *k))
        .min_by_key(|&(d, _)| d);
    match best {
        Some((d, k)) if d <= 2 || (d <= 3 && key.len() > 6) => format!("did you mean `{k}`?"),
        _ => "known keys are `slots` (or `count`, `cpu`), `max_slots` and `user`".to_string(),
    }
}

/// A slot count: a positive decimal number that fits in 32 bits.
/// The value of `user=NAME`, held to the characters of `user@host`'s user (letters, digits, `_`,
/// `-`, `.`). Anything else reached the launcher's own hostfile parser: Open MPI's `mpirun`
/// reported a parse error in gsmrun's generated hostfile for `user=a=b`, and crashed (SIGSEGV)
/// on `user=x@y`.
fn user_name(src: &Source<'_>, v: String, at: usize) -> Result<String, HostsError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    match v.char_indices().find(|&(_, c)| !allowed(c)) {
        None => Ok(v),
        Some((i, c)) => Err(src.error(
            at + i,
            1,
            &format!(
                "the user name `{}` has `{}`, which a user name cannot have",
                v.escape_debug(),
                c.escape_debug()
            ),
            "a user name has only letters, digits, `_`, `-` and `.`",
        )),
    }
}

fn count(
    src: &Source<'_>,
    v: &str,
    at: usize,
    width: usize,
    what: &str,
) -> Result<u32, HostsError> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(src.error(
            at,
            width,
            &format!("{what} `{v}` is not a number"),
            &if what == "slot count" {
                "write a positive whole number, e.g. `host:4`".to_string()
            } else {
                format!("write a positive whole number, e.g. `{what}=4`")
            },
        ));
    }
    let digits = v.trim_start_matches('0');
    if digits.is_empty() {
        return Err(src.error(
            at,
            width,
            &format!("{what} is 0: no rank could run there"),
            "give at least 1, or remove the host",
        ));
    }
    digits.parse::<u32>().map_err(|_| {
        src.error(
            at,
            width,
            &format!("{what} `{v}` is too large"),
            &format!("the most is {}", u32::MAX),
        )
    })
}

/// The error for a host written with two or more `:` (the grammar's `ipv6` rule). No launcher
/// gsmrun drives can start a rank at an IPv6 literal: Open MPI's `mpirun` refuses any node name
/// outside letters, digits, `.` and `-` (with a page of text), Hydra reads its hostfile's
/// `::1:2` as host `1` with 2 slots and hangs in ssh to it, and Slurm's node names are names. So
/// the host is refused here, where the user's text is, whether or not it is a valid address
/// (`a:2:3` is most likely a `host:N` with one field too many).
fn ipv6_host(src: &Source<'_>, text: &str, at: usize, width: usize) -> HostsError {
    if text.parse::<std::net::Ipv6Addr>().is_ok() {
        src.error(
            at,
            width,
            &format!(
                "`{text}` is an IPv6 address, and the MPI launchers cannot start ranks at one"
            ),
            "name the host instead (Open MPI refuses addresses with `:` and Hydra misreads them); \
             an /etc/hosts line such as `::1 node6` gives an address a name",
        )
    } else {
        src.error(
            at,
            width,
            &format!("`{text}` is neither `host:N` nor an IPv6 address"),
            "write `host:N`, with one `:` before the slot count",
        )
    }
}

/// One `[user@]host[:N]` item of a hostfile line or of `-H`.
fn item(src: &Source<'_>, pair: Pair<'_, Rule>) -> Result<Item, HostsError> {
    let span = pair.as_span();
    let mut it = Item {
        at: span.start(),
        width: span.as_str().chars().count(),
        user: None,
        names: Vec::new(),
        count: None,
    };
    for p in pair.into_inner() {
        let at = p.as_span().start();
        let w = p.as_str().chars().count();
        match p.as_rule() {
            Rule::excluded => {
                return Err(src.error(
                    at,
                    1,
                    "Open MPI's `^host` exclusion is not supported",
                    "delete the host from the file instead",
                ));
            }
            Rule::user => it.user = Some(p.as_str().to_string()),
            Rule::ipv6 => return Err(ipv6_host(src, p.as_str(), at, w)),
            Rule::pattern => it.names = hostlist::expand(src, p)?,
            Rule::count => it.count = Some((count(src, p.as_str(), at, w, "slot count")?, at)),
            // `host:` with nothing after the `:` (the count rule needs a character).
            Rule::extra if it.count.is_none() && w == 0 => {
                return Err(src.error(
                    at.saturating_sub(1),
                    1,
                    "nothing after `:`: the slot count is missing",
                    "write `host:N` with the number of slots, or leave out the `:`",
                ));
            }
            Rule::extra => {
                return Err(src.error(
                    at.saturating_sub(1),
                    w + 1,
                    "a second `:` field after `host:N` is not supported",
                    "write `host:N`",
                ));
            }
            _ => {}
        }
    }
    Ok(it)
}
