//! `gsm-kv`: a Redis-compatible key-value store on trusts.
//!
//! Started as any Gossamer job (`gsmrun -np N -t T gsm-kv --port P`, or alone as one rank), it
//! shards the keyspace over one hash map per worker of every rank, each the property of its
//! worker (a `Trust<Shard>`). Every rank listens on TCP and speaks RESP2, so `redis-cli`,
//! `redis-benchmark` and client libraries work unchanged; each connection is a fiber that parses
//! requests and delegates each to the shard that owns its key, without waiting between the
//! requests of a pipeline, and writes the answers in request order.
//!
//! Commands: `GET`, `SET` (`EX`, `PX`, `EXAT`, `PXAT`, `NX`, `XX`, `KEEPTTL`, `GET`), `SETEX`,
//! `PSETEX`, `DEL`, `EXISTS`, `INCR`, `DECR`, `INCRBY`, `DECRBY`, `MGET`, `MSET`, `EXPIRE`,
//! `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` (`NX`, `XX`, `GT`, `LT`), `TTL`, `PTTL`, `DBSIZE`,
//! `FLUSHALL`/`FLUSHDB`, `PING`, `ECHO`, `QUIT`, `SHUTDOWN`, `SELECT 0`, `CLIENT` (`ID`, `INFO`,
//! `LIST`, `GETNAME`, `SETNAME`, `REPLY`, `KILL`), `GETEX`, `INCRBYFLOAT`, `GETRANGE`/`SUBSTR`,
//! `SETRANGE`, `APPEND`, `STRLEN`, `TYPE`, `UNLINK`, `KEYS`, `SCAN` (`MATCH`, `COUNT`, `TYPE`),
//! `RANDOMKEY`, `PERSIST`, `GETDEL`, `GETSET`, `SETNX`, `EXPIRETIME`, `PEXPIRETIME`, the hash
//! commands (`HSET`, `HMSET`, `HSETNX`, `HGET`, `HMGET`, `HDEL`, `HLEN`, `HEXISTS`, `HSTRLEN`,
//! `HKEYS`, `HVALS`, `HGETALL`, `HINCRBY`, `HINCRBYFLOAT`, `HSCAN`, `HRANDFIELD`), `RENAME`,
//! `RENAMENX`, `COPY`, `MSETNX`, `LCS`, `OBJECT`, `MEMORY USAGE`, `TIME`, `FUNCTION FLUSH`,
//! `COMMAND` (`COUNT`, `INFO`, `LIST`, `GETKEYS`, `DOCS`), `HELLO 2`, `INFO` (with
//! `commandstats`) and `CONFIG GET`/`SET` (`SET`: the hash listpack limits). Keys and values are
//! binary-safe.
//! Nothing is persisted (no RDB, no AOF): the data lives as long as the job. There is no
//! authentication: the default `--bind` is 127.0.0.1, as Redis's protected mode.
//!
//! The modules: [`resp`] (the protocol and its limits), [`command`] (arguments to a plan, with
//! Redis's error texts), [`glob`] (patterns), [`lcs`] (`LCS`), [`pair`] (commands whose keys
//! live on several shards), [`client`] (`CLIENT` and the table of connections), [`stats`]
//! (calls per command), [`sys`] (the system calls), [`shard`] (the trustee's map), [`dispatch`]
//! (requests to shards and answers back in order), [`conn`] (a connection's fiber, its socket
//! waiting through `gossamer::reactor`), [`state`] (what a rank's fibers share: contexts, the
//! stop flag) and [`server`] (the job: shard table, listeners, signals).

pub mod client;
pub mod cluster;
pub mod command;
pub mod conn;
pub mod dispatch;
pub mod glob;
pub mod lcs;
pub mod pair;
pub mod resp;
pub mod route;
pub mod server;
pub mod shard;
pub mod slot;
pub mod state;
pub mod stats;
pub mod sys;
