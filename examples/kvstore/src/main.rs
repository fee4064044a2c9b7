//! `gsm-kv`: parses the command line and runs the store (see the crate docs, `lib.rs`).

use std::net::IpAddr;

const USAGE: &str = "usage: gsm-kv [--port P] [--bind ADDR] [--maxclients N] [--cluster]

A Redis-compatible (RESP2) key-value store sharded over every worker of a Gossamer job.
Run it alone or as a job: gsmrun -np N -t T gsm-kv --port P

  --port P      TCP port (default 6379); ranks that share a host use P, P+1, ... in rank order;
                0: each rank takes a free port and prints it
  --bind ADDR   address to listen on (default 127.0.0.1; 0.0.0.0 for every interface;
                there is no authentication)
  --maxclients N  clients each rank serves at once (default 10000, lowered to what the
                limit on open descriptors allows); the next get Redis's error and a close
  --cluster     cluster mode: every worker is a Redis Cluster shard with its own port (P, P+1,
                ... over the workers of a host, rank by rank) and a range of the 16384 hash
                slots; a key sent to another shard is answered MOVED, keys of several slots
                CROSSSLOT. Use cluster clients: redis-cli -c, redis-benchmark --cluster
  --cluster-announce-ip ADDR  the address shards are announced at (CLUSTER SLOTS, MOVED)
                when --bind is 0.0.0.0 (default: the host's first non-loopback IPv4 address)

Stop it with `redis-cli -p P shutdown` (the whole job), or SIGTERM/SIGINT to any rank.
Nothing is persisted.";

fn parse_args() -> Result<gsm_kv::server::Options, String> {
    let mut options = gsm_kv::server::Options {
        bind: IpAddr::from([127, 0, 0, 1]),
        port: 6379,
        maxclients: gsm_kv::server::MAX_CLIENTS,
        cluster: false,
        announce: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" | "-p" => {
                let v = value()?;
                options.port = v
                    .parse()
                    .map_err(|_| format!("--port: `{v}` is not a port number (0-65535)"))?;
            }
            "--bind" => {
                let v = value()?;
                options.bind = v
                    .parse()
                    .map_err(|_| format!("--bind: `{v}` is not an IP address"))?;
            }
            "--maxclients" => {
                let v = value()?;
                options.maxclients = match v.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(format!("--maxclients: `{v}` is not a positive number")),
                };
            }
            "--cluster" => options.cluster = true,
            "--cluster-announce-ip" => {
                let v = value()?;
                options.announce =
                    Some(v.parse().map_err(|_| {
                        format!("--cluster-announce-ip: `{v}` is not an IP address")
                    })?);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    Ok(options)
}

fn main() {
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("gsm-kv: {e}");
            std::process::exit(2);
        }
    };
    let config = match gossamer::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gsm-kv: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = gsm_kv::server::serve(options, config) {
        eprintln!("gsm-kv: {e}");
        std::process::exit(1);
    }
}
