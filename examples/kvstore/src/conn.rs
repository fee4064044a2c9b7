//! One client connection, served by one fiber: read what the client sent, parse every whole
//! request in it, send each to its shard at once (`dispatch.rs`), wait for the batch, write the
//! replies in order, read again.
//!
//! The socket is non-blocking; when a read or a write would block the fiber clears its
//! readiness flag and waits for the reactor to set it (`reactor.rs`), so a slow client holds
//! its own fiber only. A malformed or oversized request is answered with its protocol error,
//! after the replies to the requests before it, and the connection closes; its buffer goes
//! with it. `QUIT` closes after `OK`, `SHUTDOWN` after asking every rank to stop.

use std::io::{self, Read, Write};
use std::rc::Rc;

use mio::net::TcpStream;

use crate::command::{self, Plan};
use crate::dispatch::{self, Batch};
use crate::resp;
use crate::server::{self, Ctx};

/// The most requests of one pipeline in flight at once per connection (the rest wait in the
/// read buffer until these are answered).
const MAX_BATCH: usize = 1024;
/// Bytes read per `read` call.
const READ_CHUNK: usize = 16 << 10;

/// Serves `stream` until the client closes it, breaks the protocol or the job stops.
pub fn serve(mut stream: TcpStream) {
    let Some(ctx) = server::ctx() else {
        return;
    };
    // Small replies must not wait for Nagle's timer: a client waits for each.
    let _ = stream.set_nodelay(true);
    let Ok((token, flag)) = ctx.reactor.register(&mut stream) else {
        return;
    };
    server::client_joined();
    let mut io = Io {
        stream: &mut stream,
        flag: &flag,
        scratch: vec![0; READ_CHUNK],
    };
    // An I/O error means the client is gone: there is nobody to tell.
    let _ = run(&ctx, &mut io);
    ctx.reactor.deregister(&mut stream, token);
    server::client_left();
}

/// The socket, its readiness flag and the read buffer's scratch.
struct Io<'a> {
    stream: &'a mut TcpStream,
    flag: &'a std::cell::Cell<bool>,
    scratch: Vec<u8>,
}

impl Io<'_> {
    /// Suspends the fiber until the reactor sees the socket ready (or the job stops).
    fn wait(&self) -> io::Result<()> {
        self.flag.set(false);
        gossamer::wait_for(|| self.flag.get() || server::stopping());
        if server::stopping() {
            return Err(io::ErrorKind::ConnectionAborted.into());
        }
        Ok(())
    }

    /// Appends what the client sent to `buf`; `Ok(0)` when it closed its side.
    fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        loop {
            match self.stream.read(&mut self.scratch) {
                Ok(n) => {
                    buf.extend_from_slice(&self.scratch[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait()?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.stream.write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait()?,
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

/// Takes every whole request from the front of `input` (up to [`MAX_BATCH`]) into `batch`.
fn take_requests(ctx: &Ctx, input: &mut Vec<u8>, batch: &Rc<Batch>) -> After {
    let mut used = 0;
    let mut after = After::More { full: false };
    while batch.len() < MAX_BATCH {
        let (args, n) = match resp::parse(&input[used..]) {
            Ok(Some(parsed)) => parsed,
            Ok(None) => break,
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
        match command::plan(args) {
            Plan::Reply(bytes) => batch.ready(bytes),
            Plan::One(key, op) => dispatch::one(batch, &ctx.shards, &key, op),
            Plan::Split(split) => dispatch::split(batch, &ctx.shards, split),
            Plan::Every(op, fold) => dispatch::every(batch, &ctx.shards, &op, fold),
            Plan::Quit => {
                batch.ready(b"+OK\r\n".to_vec());
                after = After::Close;
                break;
            }
            Plan::Shutdown => {
                server::shutdown(ctx);
                after = After::Close;
                break;
            }
        }
    }
    if let After::More { full } = &mut after {
        *full = batch.len() >= MAX_BATCH;
    }
    input.drain(..used);
    after
}

fn run(ctx: &Rc<Ctx>, io: &mut Io<'_>) -> io::Result<()> {
    let mut input = Vec::with_capacity(READ_CHUNK);
    let mut out = Vec::with_capacity(READ_CHUNK);
    let batch = Batch::new();
    let info = |o: &mut Vec<u8>, keys: i64| server::info(ctx, o, keys);
    loop {
        let after = take_requests(ctx, &mut input, &batch);
        dispatch::send(&batch, &ctx.shards);
        if !batch.done() {
            // The requests to other workers leave now, not at this worker's next poll.
            gossamer::flush();
            gossamer::wait_for(|| batch.done());
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
        if server::stopping() || io.read_into(&mut input)? == 0 {
            return Ok(());
        }
    }
}
