//! One worker's mailbox: the messages that arrived for it under `(sender, tag)` and the
//! fibers waiting for them, and what tags are called in reports. The API that sends and
//! receives is `crate::mail`.

use std::any::Any;
use std::collections::{HashMap, VecDeque};

use super::WorkerCore;
use crate::property::KeyHasher;

pub(crate) type Key = (u32, u64);
type Build = std::hash::BuildHasherDefault<KeyHasher>;

/// One worker's undelivered messages and the fibers waiting for them.
#[derive(Default)]
pub(crate) struct Mailbox {
    pub(crate) queued: HashMap<Key, VecDeque<Box<dyn Any>>, Build>,
    pub(crate) waiting: HashMap<Key, Vec<u32>, Build>,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox")
            .field("keys", &self.queued.len())
            .field("waiting", &self.waiting.len())
            .finish()
    }
}

impl Mailbox {
    pub(crate) fn take(&mut self, key: Key) -> Option<Box<dyn Any>> {
        let q = self.queued.get_mut(&key)?;
        let v = q.pop_front();
        if q.is_empty() {
            self.queued.remove(&key);
        }
        v
    }

    /// Messages not yet received (a diagnostic).
    pub(crate) fn pending(&self) -> usize {
        self.queued.values().map(VecDeque::len).sum()
    }

    /// What the fibers waiting here wait for, the first few by sender and tag ("a fiber waits for
    /// a message from worker 1 under tag 0x7"), with how many fibers wait in all, and the first
    /// few messages that arrived and wait for a receiver (a deadlock report).
    pub(crate) fn waits(&self) -> Vec<String> {
        const NAMED: usize = 4;
        let mut keys: Vec<(&Key, usize)> = self.waiting.iter().map(|(k, f)| (k, f.len())).collect();
        keys.sort_unstable();
        let mut out: Vec<String> = keys
            .iter()
            .take(NAMED)
            .map(|((from, tag), n)| {
                let who = if *n == 1 {
                    "a fiber waits".to_string()
                } else {
                    format!("{n} fibers wait")
                };
                format!(
                    "{who} for a message from worker {from} under tag {}",
                    tag_text(*tag)
                )
            })
            .collect();
        let more = keys.len().saturating_sub(NAMED);
        if more > 0 {
            out.push(format!("and {more} more sender/tag pairs"));
        }
        // Messages that came and that nobody takes often name the call that is missing (a
        // stream's offer without its `connect`), so a deadlock report lists them too.
        let mut queued: Vec<(&Key, usize)> =
            self.queued.iter().map(|(k, q)| (k, q.len())).collect();
        queued.sort_unstable();
        out.extend(queued.iter().take(NAMED).map(|((from, tag), n)| {
            format!(
                "{n} message{} from worker {from} under tag {} arrived and no fiber received it",
                if *n == 1 { "" } else { "s" },
                tag_text(*tag)
            )
        }));
        out
    }

    /// Fibers waiting here for a message.
    pub(crate) fn waiters(&self) -> usize {
        self.waiting.values().map(Vec::len).sum()
    }

    /// The warning for messages left here when a run ended well, naming the first senders and
    /// tags in order, or `None` when every message was received.
    pub(crate) fn unreceived_warning(&self, worker: usize) -> Option<String> {
        const NAMED: usize = 4;
        let total = self.pending();
        if total == 0 {
            return None;
        }
        let mut keys: Vec<(&Key, usize)> = self.queued.iter().map(|(k, q)| (k, q.len())).collect();
        keys.sort_unstable();
        let named: Vec<String> = keys
            .iter()
            .take(NAMED)
            .map(|((from, tag), n)| format!("{n} from worker {from} under tag {}", tag_text(*tag)))
            .collect();
        let more = keys.len().saturating_sub(NAMED);
        Some(format!(
            "gossamer: warning: worker {worker} ended its run with {total} message{} it never \
             received, now dropped: {}{} (a send without its recv?)",
            if total == 1 { "" } else { "s" },
            named.join(", "),
            if more == 0 {
                String::new()
            } else {
                format!(
                    ", and {more} more sender/tag pair{}",
                    if more == 1 { "" } else { "s" }
                )
            }
        ))
    }
}

/// Puts `value` in this worker's mailbox under `(from, tag)` and wakes its waiter.
pub(crate) fn deposit(core: &WorkerCore, from: u32, tag: u64, value: Box<dyn Any>) {
    let waiter = {
        let mut mb = core.mail.borrow_mut();
        mb.queued.entry((from, tag)).or_default().push_back(value);
        mb.waiting.remove(&(from, tag))
    };
    for f in waiter.into_iter().flatten() {
        core.wake_fiber(f);
    }
}

/// A function that says what a message tag stands for ([`name_tags`]).
type TagNamer = fn(u64) -> Option<String>;

/// The installed [`TagNamer`]s.
static TAG_NAMERS: std::sync::Mutex<Vec<TagNamer>> = std::sync::Mutex::new(Vec::new());

/// Installs `namer` to say what a tag stands for in the runtime's reports of messages waited
/// for (the deadlock report) or never received: a library that reserves tags for its own
/// messages (`gsm-collectives` takes those with the top bit set) names its operation there
/// instead of leaving the user a 64-bit number. `namer` returns `None` for tags it does not
/// know; it runs on the worker whose fibers wait (so it may read that thread's state), after
/// the fibers have stopped, and must not block. Installing the same function again does
/// nothing.
pub fn name_tags(namer: TagNamer) {
    let mut namers = TAG_NAMERS.lock().unwrap_or_else(|p| p.into_inner());
    if !namers.iter().any(|&f| std::ptr::fn_addr_eq(f, namer)) {
        namers.push(namer);
    }
}

/// `tag` in hex, with what an installed namer says of it.
fn tag_text(tag: u64) -> String {
    let namers = TAG_NAMERS.lock().unwrap_or_else(|p| p.into_inner());
    match namers.iter().find_map(|f| f(tag)) {
        Some(name) => format!("{tag:#x} ({name})"),
        None => format!("{tag:#x}"),
    }
}
