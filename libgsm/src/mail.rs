//! Tagged one-way messages between workers: [`send`] a value to any worker of any rank under a
//! tag, [`recv`] it there (suspending only the receiving fiber until it arrives). This is the
//! point-to-point layer that collective operations (`gsm-collectives`) are built on.
//!
//! A message travels as a request record that wants no response, through the same rings and fabrics
//! as delegation, so it is batched with other traffic to the same worker and costs one record. The
//! record's trampoline, on the receiving worker, puts the value in that worker's mailbox
//! (`worker/mailbox.rs`) under `(sender, tag)` and wakes a fiber waiting for it. Messages from one
//! worker to another arrive in the order they were sent (one FIFO ring per ordered pair). Within a
//! process the value moves by bytes; to another rank it is serialised (`postcard`), as `apply_with`
//! arguments are.
//!
//! A sent message is staged in the sender's batch for its destination and leaves when the
//! sending worker next polls: when the fiber blocks (`recv`, `apply`, `join`), yields, or ends,
//! or when the batch fills a slot. A fiber that sends and then computes for long without
//! blocking should call [`flush`] after sending.
//!
//! A message that arrived and was never received is dropped when the run ends; if the run ended
//! well, each worker that holds such messages says so on standard error first, naming the first
//! senders and tags (a send without its matching `recv` is a bug the program would not see
//! otherwise). A run that failed says nothing of them: its error is the news.
//!
//! This module does not match messages by anything but `(sender, tag)`, does not buffer with a
//! bound (a sender that outpaces its receiver grows the receiver's mailbox; the rings'
//! back-pressure still bounds what is in flight), and does not know about teams or collectives. See
//! ARCHITECTURE.md.

use std::any::Any;

use crate::error::DelegationError;
use crate::noref::Wire;
use crate::trust::{OutArg, take_arg};
use crate::wire::codeptr;
use crate::wire::record::{Request, RequestReader, Src};
use crate::worker::WorkerId;
use crate::worker::entry::{Delegated, Of, trampoline};
use crate::worker::{NO_REPLY, WorkerCore, core_or_panic};

use crate::worker::mailbox::deposit;
pub use crate::worker::mailbox::name_tags;

/// Sends `value` to worker `to` under `tag`; returns at once (the value is on its way).
///
/// Works from fibers, delegated closures and callbacks alike (it never blocks, except for the
/// rings' back-pressure when called from a fiber).
///
/// # Panics
/// Outside a gossamer worker, if `to` does not exist, or if `value` cannot be serialised for
/// another rank.
#[track_caller]
pub fn send<T: Wire>(to: WorkerId, tag: u64, value: T) {
    let core = core_or_panic("gossamer::send");
    let w = to.index();
    core.assert_worker("gossamer::send", w);
    let me = core.id as u32;
    if w == core.id {
        deposit(core, me, tag, Box::new(value));
        return;
    }
    let code = Some(codeptr::offset_of(trampoline::<Deliver<T>>() as usize));
    match OutArg::new(core, w, value) {
        Ok(v) => core.send_request(
            w,
            code,
            0,
            0,
            NO_REPLY,
            Src::of(&tag),
            Some(v.src()),
            v.encoded(),
        ),
        Err(e) => panic!("gossamer::send to worker {w}: {e}"),
    }
}

/// The requests of `send` of a `T` to another worker's mailbox.
struct Deliver<T>(Of<(T,)>);

impl<T: Wire> Delegated for Deliver<T> {
    /// # Safety
    /// `rec` must be a record encoded by `send::<T>` (captured bytes: the `u64` tag; argument: one
    /// moved `T` or its encoding).
    #[inline(always)]
    unsafe fn serve(
        core: &WorkerCore,
        client: usize,
        rec: &Request<'_>,
        _more: &mut RequestReader<'_>,
    ) {
        let cap = rec.cap();
        if cap.len() != 8 {
            // Not what `send` writes: delivered under some made-up tag, the message would be lost
            // to its receiver, who would wait for it for ever.
            core.ring_broken(
                client,
                &format!("a message whose tag is {} bytes long, not 8", cap.len()),
            );
            return;
        }
        // SAFETY: 8 initialised bytes: `send` copied a `u64` there.
        let tag =
            u64::from_le_bytes(unsafe { std::ptr::read_unaligned(cap.as_ptr().cast::<[u8; 8]>()) });
        // SAFETY: forwarded from this function's contract.
        match unsafe { take_arg::<T>(core, client, rec) } {
            Ok(v) => deposit(core, client as u32, tag, Box::new(v)),
            Err(e) => core.outbox().respond::<()>(
                client,
                NO_REPLY,
                Err(DelegationError::Wire(format!(
                    "gossamer::send from worker {client} to worker {} under tag {tag:#x}: the message \
                     (a {}) could not be received: {e}",
                    core.id,
                    std::any::type_name::<T>()
                ))),
            ),
        }
    }
}

/// Takes the next message from worker `from` under `tag`, suspending this fiber until one
/// arrives. Messages from one sender under one tag come in the order they were sent.
///
/// # Panics
/// Outside a fiber (or inside a delegated closure or callback), if `from` does not exist, or if
/// the message has another type than `T` (the sender and receiver disagree).
#[track_caller]
pub fn recv<T: Wire>(from: WorkerId, tag: u64) -> T {
    let core = core_or_panic("gossamer::recv");
    core.assert_can_block();
    let key = (from.index() as u32, tag);
    core.assert_worker("gossamer::recv", from.index());
    loop {
        if let Some(v) = core.mail.borrow_mut().take(key) {
            return downcast(v, from, tag);
        }
        if core.nothing_ready() {
            // Nothing else will run before this worker polls: let what this fiber sent leave
            // now (in an exchange, the peer is waiting for it).
            core.flush_now();
        }
        let fiber = core.current_fiber().unwrap_or(0);
        // Registered afresh every time the wait goes on: a deposit wakes and forgets every
        // waiter of its key, and another fiber (a `try_recv`, a second `recv`) may take the
        // message before this one runs; registered only once, this fiber then slept on
        // unregistered, and the next message under the key woke nobody.
        core.wait_until(|| {
            let mut mb = core.mail.borrow_mut();
            if mb.queued.contains_key(&key) {
                return true;
            }
            let waiters = mb.waiting.entry(key).or_default();
            if !waiters.contains(&fiber) {
                waiters.push(fiber);
            }
            false
        });
    }
}

/// The next message from `from` under `tag` if one has arrived, without waiting.
///
/// # Panics
/// Outside a gossamer worker, if `from` does not exist (as for [`recv`]: a loop polling a
/// wrong id would otherwise spin for ever), or if the message has another type than `T`.
#[track_caller]
pub fn try_recv<T: Wire>(from: WorkerId, tag: u64) -> Option<T> {
    let core = core_or_panic("gossamer::try_recv");
    core.assert_worker("gossamer::try_recv", from.index());
    let v = core.mail.borrow_mut().take((from.index() as u32, tag))?;
    Some(downcast(v, from, tag))
}

/// [`recv`] without waiting: the promise of the next message from `from` under `tag`, ready at
/// once if one has arrived, else received by a fiber of its own on this worker. Two receives of
/// one sender and tag outstanding at once take its messages in the order their fibers run,
/// which is the order they were issued unless one of them is awaited on another worker.
///
/// # Panics
/// Outside a gossamer worker, or if `from` does not exist. A message of another type than `T`
/// is the promise's failure.
#[track_caller]
pub fn recv_async<T: Wire>(from: WorkerId, tag: u64) -> crate::Promise<T> {
    match try_recv(from, tag) {
        Some(v) => crate::Promise::ready(v),
        None => crate::spawn_async(move || recv(from, tag)),
    }
}

/// Publishes everything this worker has staged for other workers (messages, requests,
/// responses) now, instead of at its next poll.
///
/// # Panics
/// Outside a gossamer worker.
#[track_caller]
pub fn flush() {
    core_or_panic("gossamer::flush").flush_now();
}

/// Messages that arrived at this worker and were not received yet.
#[track_caller]
pub fn mail_pending() -> usize {
    core_or_panic("gossamer::mail_pending")
        .mail
        .borrow()
        .pending()
}

#[track_caller]
fn downcast<T: 'static>(v: Box<dyn Any>, from: WorkerId, tag: u64) -> T {
    match v.downcast::<T>() {
        Ok(b) => *b,
        Err(_) => panic!(
            "gossamer::recv: the message from worker {} under tag {tag:#x} is not a {}: sender and \
             receiver must agree on the type",
            from.index(),
            std::any::type_name::<T>()
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, WorkerId, spawn, spmd};

    #[test]
    fn messages_arrive_in_order_between_every_pair() {
        let n = 3;
        let r = spmd(Config::default().workers(n), move |w| {
            let me = w.id();
            for to in 0..n {
                for i in 0..100u64 {
                    super::send(
                        WorkerId::new(to),
                        7,
                        (me, i, vec![i as u8; (i % 5) as usize]),
                    );
                }
            }
            let mut sum = 0;
            for from in 0..n {
                for i in 0..100u64 {
                    let (f, j, v): (usize, u64, Vec<u8>) = super::recv(WorkerId::new(from), 7);
                    assert_eq!((f, j, v.len()), (from, i, (i % 5) as usize));
                    sum += j;
                }
            }
            assert_eq!(super::mail_pending(), 0);
            sum
        })
        .unwrap();
        assert_eq!(r, vec![3 * 4950; 3]);
    }

    #[test]
    fn a_waiting_fiber_does_not_block_its_worker() {
        let r = crate::run(Config::default().workers(2), || {
            let other = WorkerId::new(1);
            let waiter = spawn(|| super::recv::<String>(WorkerId::new(1), 1));
            // The waiter is suspended; this fiber keeps running and triggers the send.
            let h = crate::spawn_on(other, || {
                super::send(WorkerId::new(0), 1, String::from("late"));
            });
            h.join();
            assert!(super::try_recv::<u8>(WorkerId::new(1), 99).is_none());
            waiter.join()
        })
        .unwrap();
        assert_eq!(r, "late");
    }
}
