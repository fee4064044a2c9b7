//! One client connection, served by one fiber: read what the client sent, parse every whole
//! request in it, send each to its shard at once (`dispatch.rs`), wait for the batch, write the
//! replies in order, read again.
//!
//! The socket is non-blocking and registered with the worker's reactor (`gossamer::reactor`);
//! when a read or a write would block the fiber waits for the socket's next event, so a slow
//! client holds its own fiber only. A read that fills less than the buffer took everything the
//! socket had, so the next read first waits for an event rather than trying (and failing) a
//! read: one `read` and one `write` per batch of requests, as in Redis's event loop. A malformed
//! or oversized request is answered with its protocol error, after the replies to the requests
//! before it, and the connection closes; its buffer goes with it. `QUIT` closes after `OK`,
//! `SHUTDOWN` after asking every rank to stop.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::rc::Rc;

use gossamer::reactor::Registered;

use crate::client::{self, Client};
use crate::cluster::Routed;
use crate::command::{self, Plan};
use crate::dispatch::{self, Batch};
use crate::pair;
use crate::resp;
use crate::shard::Op;
use crate::state::{self, Ctx};

/// The most requests of one pipeline in flight at once per connection (the rest wait in the
/// read buffer until these are answered).
const MAX_BATCH: usize = 1024;
/// Bytes read per `read` call at least (the buffer grows for a request larger than that).
const READ_CHUNK: usize = 16 << 10;

/// Serves `stream` until the client closes it, breaks the protocol or the job stops; the
/// connection was counted in (`state::client_joined`) and is counted out here.
pub fn serve(stream: TcpStream) {
    serve_counted(stream);
    state::client_left();
}

fn serve_counted(stream: TcpStream) {
    let Some(ctx) = state::ctx() else {
        return;
    };
    // Small replies must not wait for Nagle's timer: a client waits for each.
    let _ = stream.set_nodelay(true);
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(reg) = Registered::new(stream) else {
        return;
    };
    let mut io = Io {
        reg,
        drained: false,
    };
    // An I/O error means the client is gone (or the job stops): there is nobody to tell.
    let mut me = Client::join(io.reg.get_ref());
    let _ = run(&ctx, &mut io, &mut me);
}

/// The registered socket, and whether the last read emptied it.
struct Io {
    reg: Registered<TcpStream>,
    drained: bool,
}

/// What the client sent and was not taken yet: `bytes[start..end]`.
struct Input {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl Input {
    fn pending(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
            // A large request's buffer goes when it has been read: an idle connection keeps
            // the usual size only.
            if self.bytes.len() > 4 * READ_CHUNK {
                self.bytes = vec![0; 2 * READ_CHUNK];
            }
        }
    }

    /// Room for at least [`READ_CHUNK`] bytes after `end`, and for `wanted` bytes past the
    /// pending ones (the rest of a large bulk, so that it is read in place, not moved again at
    /// every read): the pending bytes move to the front only when room lacks, then the buffer
    /// grows.
    fn room(&mut self, wanted: usize) -> &mut [u8] {
        let need = READ_CHUNK.max(wanted.saturating_sub(self.end - self.start));
        if self.bytes.len() - self.end < need {
            if self.start > 0 {
                self.bytes.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            }
            if self.bytes.len() - self.end < need {
                self.bytes.resize(self.end + need, 0);
            }
        }
        &mut self.bytes[self.end..]
    }
}

impl Io {
    /// Appends what the client sent to `input`; `Ok(0)` when it closed its side.
    fn read_into(&mut self, input: &mut Input, wanted: usize) -> io::Result<usize> {
        if self.drained {
            self.reg.wait()?;
        }
        loop {
            // Cleared before the read: an event for bytes that come after it is kept.
            self.reg.clear();
            let room = input.room(wanted);
            let want = room.len();
            match self.reg.get_mut().read(room) {
                Ok(n) => {
                    self.drained = n < want;
                    input.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.reg.wait()?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.reg.get_mut().write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The event this consumes may have been the socket's next read's.
                    self.drained = false;
                    self.reg.wait()?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// What became of the requests taken from the buffer.
enum After {
    /// Read more (or go on parsing, when the batch was full).
    More { full: bool },
    /// Close once the replies are written.
    Close,
}

/// The plan of a request; in cluster mode a redirection, or a `CLUSTER` reply, comes first.
fn plan(ctx: &Ctx, args: Vec<Vec<u8>>) -> Plan {
    let Some(cluster) = &ctx.cluster else {
        return command::plan(args);
    };
    match cluster.route(&args) {
        Routed::Here => command::plan(args),
        Routed::Reply(bytes) => Plan::Reply(bytes),
        Routed::SlotKeys(slot, count) => Plan::Here(Op::SlotKeys(slot, count)),
    }
}

/// Takes every whole request from the front of `input` (up to [`MAX_BATCH`]) into `batch`.
fn take_requests(
    ctx: &Ctx,
    me: &mut Client,
    parser: &mut resp::Parser,
    input: &mut Input,
    batch: &Rc<Batch>,
) -> After {
    let mut used = 0;
    let mut after = After::More { full: false };
    while batch.len() < MAX_BATCH {
        let (args, n) = match parser.feed(&input.pending()[used..]) {
            Ok((Some(args), n)) => (args, n),
            Ok((None, n)) => {
                used += n;
                break;
            }
            Err(e) => {
                let mut reply = Vec::new();
                resp::error(&mut reply, &e.0);
                batch.ready(reply);
                after = After::Close;
                break;
            }
        };
        used += n;
        if args.is_empty() {
            continue;
        }
        me.begin();
        me.qbuf = n;
        let before = batch.len();
        match plan(ctx, args) {
            Plan::Reply(bytes) => batch.ready(bytes),
            Plan::One(key, op) => dispatch::one(batch, &ctx.shards, &key, op),
            Plan::Here(op) => dispatch::on(batch, &ctx.shards, ctx.worker, op),
            Plan::Split(split) => dispatch::split(batch, &ctx.shards, split),
            Plan::Every(op, fold) => dispatch::every(batch, &ctx.shards, &op, fold),
            Plan::Info(sections) => dispatch::info(batch, &ctx.shards, sections),
            Plan::Scan { shard, op } => dispatch::scan(batch, &ctx.shards, shard, op),
            Plan::Client(args) => {
                let mut reply = Vec::new();
                client::command(me, &args, &mut reply);
                batch.ready(reply);
            }
            Plan::Quit => {
                batch.ready(b"+OK\r\n".to_vec());
                after = After::Close;
            }
            Plan::Shutdown => {
                state::shutdown(ctx);
                after = After::Close;
            }
            Plan::ConfigSet(limits) => {
                // The requests before it run under the old settings.
                dispatch::send(batch, &ctx.shards);
                if !batch.done() {
                    gossamer::flush();
                    batch.wait();
                }
                state::config_set(ctx, limits);
                batch.ready(b"+OK\r\n".to_vec());
            }
            Plan::MSetNx(pairs) => {
                let first = ctx.shards.shard_of(&pairs[0].0);
                if pairs.iter().all(|(k, _)| ctx.shards.shard_of(k) == first) {
                    let key = pairs[0].0.clone();
                    dispatch::one(batch, &ctx.shards, &key, Op::MSetNx(pairs));
                } else {
                    dispatch::send(batch, &ctx.shards);
                    if !batch.done() {
                        gossamer::flush();
                        batch.wait();
                    }
                    batch.ready(pair::msetnx(&ctx.shards, pairs));
                }
            }
            Plan::Lcs(keys, options) => dispatch::lcs(batch, &ctx.shards, keys, options),
            Plan::Move(m) => {
                if ctx.shards.shard_of(&m.src) == ctx.shards.shard_of(&m.dst) {
                    let key = m.src.clone();
                    dispatch::one(batch, &ctx.shards, &key, m.op());
                } else {
                    // The requests before it run first, on every shard they went to.
                    dispatch::send(batch, &ctx.shards);
                    if !batch.done() {
                        gossamer::flush();
                        batch.wait();
                    }
                    batch.ready(pair::run(&ctx.shards, m));
                }
            }
        }
        if me.end() && batch.len() > before {
            batch.silence_last();
        }
        if me.close {
            after = After::Close;
        }
        if matches!(after, After::Close) {
            break;
        }
    }
    if let After::More { full } = &mut after {
        *full = batch.len() >= MAX_BATCH;
    }
    input.consume(used);
    after
}

fn run(ctx: &Rc<Ctx>, io: &mut Io, me: &mut Client) -> io::Result<()> {
    let mut input = Input {
        bytes: vec![0; 2 * READ_CHUNK],
        start: 0,
        end: 0,
    };
    let mut out = Vec::with_capacity(READ_CHUNK);
    let batch = Batch::new();
    let mut parser = resp::Parser::default();
    let info = |o: &mut Vec<u8>, sections: &[Vec<u8>], keys: i64, calls: &[u64]| {
        state::info(ctx, o, sections, keys, calls);
    };
    loop {
        let after = take_requests(ctx, me, &mut parser, &mut input, &batch);
        dispatch::send(&batch, &ctx.shards);
        if !batch.done() {
            // The requests to other workers leave now, not at this worker's next poll.
            gossamer::flush();
            batch.wait();
        }
        batch.drain_into(&mut out, &info);
        if !out.is_empty() {
            io.write_all(&out)?;
            out.clear();
        }
        match after {
            After::Close => return Ok(()),
            After::More { full: true } => continue,
            After::More { full: false } => {}
        }
        if parser.in_progress() {
            // A large request takes many reads: the other connections of this worker are
            // served between them, as Redis's event loop serves them between its reads.
            gossamer::yield_now();
        }
        if state::stopping() || io.read_into(&mut input, parser.wanted())? == 0 {
            return Ok(());
        }
    }
}
