//! The owner of a batch's keys writes its replies to the client itself.
//!
//! A connection's fiber publishes its socket here under a [`Conn`] name (a process-wide table
//! of `Arc<TcpStream>`). When the requests of one read need, besides this worker's own shard,
//! only one shard of another worker *of the same process*, the fiber runs its own part inline
//! and sends that owner the whole batch (`dispatch::send`): the owner runs its operations,
//! encodes every reply in request order and writes them to the socket with [`write`], so the
//! client's answer does not wait for the connection's worker to be scheduled again. The fiber
//! still waits for the owner's answer (what the socket did not take, to write itself) before
//! it reads or writes anything more, so one writer at a time keeps the replies in order.
//!
//! What it does not do: cross a process. A [`Conn`] names a socket of one rank; [`write`] on
//! another rank, or after the connection is gone, writes nothing and hands every byte back
//! (the fiber then writes them itself). It never blocks: a socket that takes only part of the
//! replies leaves the rest to the fiber, which waits for room through the reactor.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use serde::{Deserialize, Serialize};

/// The sockets of this process's connections, by id.
static SOCKETS: LazyLock<Mutex<HashMap<u64, Arc<TcpStream>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
/// The next connection id of this process.
static NEXT: AtomicU64 = AtomicU64::new(1);
/// Batches whose replies an owner wrote (all of them, or the part the socket took), for
/// `INFO`'s `gsm_owner_writes`.
static OWNER_WRITES: AtomicU64 = AtomicU64::new(0);

/// A published connection's name: its rank and its id there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conn {
    rank: u32,
    id: u64,
}

/// A socket published under a [`Conn`]; dropping it withdraws it (an owner that holds it at
/// that moment finishes its write, and the socket closes after).
#[derive(Debug)]
pub struct Published {
    conn: Conn,
}

impl Published {
    /// Publishes `stream`, a socket of rank `rank` (the caller's).
    pub fn new(stream: Arc<TcpStream>, rank: usize) -> Self {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        SOCKETS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, stream);
        Self {
            conn: Conn {
                rank: rank as u32,
                id,
            },
        }
    }

    pub fn conn(&self) -> Conn {
        self.conn
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        SOCKETS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.conn.id);
    }
}

/// Writes to `conn`'s socket as much of `bytes` as it takes now, from any worker of its rank
/// (`rank` is the caller's); returns what is left to write: nothing when all went out, every
/// byte when `conn` is not of this rank or is gone, the rest when the socket was full or failed
/// (the connection's fiber then writes it, or meets the error itself).
pub fn write(conn: Conn, rank: usize, bytes: &[u8]) -> Vec<u8> {
    if conn.rank as usize != rank {
        return bytes.to_vec();
    }
    let stream = SOCKETS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&conn.id)
        .cloned();
    let Some(stream) = stream else {
        return bytes.to_vec();
    };
    let mut at = 0;
    while at < bytes.len() {
        match (&*stream).write(&bytes[at..]) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    OWNER_WRITES.fetch_add(1, Ordering::Relaxed);
    bytes[at..].to_vec()
}

/// Batches whose replies an owner wrote, in this process so far.
pub fn owner_writes() -> u64 {
    OWNER_WRITES.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests;
