//! Cluster mode (`--cluster`): one rank of 2 workers answers as 2 shards; a small client that
//! routes by following `MOVED` reaches the owner of every key, and `CROSSSLOT` refuses keys of
//! two slots.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use gsm_tests::process::spawn;

/// One request as RESP, and its reply's first line (simple replies and bulk strings).
fn call(conns: &mut HashMap<String, BufReader<TcpStream>>, addr: &str, args: &[&str]) -> String {
    let con = conns.entry(addr.to_string()).or_insert_with(|| {
        let s = TcpStream::connect(addr).expect("connects to a shard");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        BufReader::new(s)
    });
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    con.get_mut().write_all(req.as_bytes()).unwrap();
    let mut line = String::new();
    con.read_line(&mut line).unwrap();
    if line.starts_with('$') && line != "$-1\r\n" {
        line.clear();
        con.read_line(&mut line).unwrap();
    }
    line.trim_end().to_string()
}

/// Sends `args` to `addr`, following `MOVED` (at most once); the reply and who answered.
fn routed(
    conns: &mut HashMap<String, BufReader<TcpStream>>,
    addr: &str,
    args: &[&str],
) -> (String, String) {
    let first = call(conns, addr, args);
    match first.strip_prefix("-MOVED ") {
        Some(rest) => {
            let to = rest.split(' ').nth(1).expect("MOVED names an address");
            let again = call(conns, to, args);
            assert!(!again.starts_with("-MOVED"), "moved twice: {again}");
            (again, to.to_string())
        }
        None => (first, addr.to_string()),
    }
}

#[test]
fn a_routing_client_reaches_the_owner_of_every_key() {
    let mut cmd = Command::new(common::gsm_kv());
    cmd.args(["--port", "0", "--cluster"])
        .env("GSM_THREADS", "2");
    let mut job = spawn(&mut cmd);
    let ready = job.wait_for_stdout(common::START, |lines| {
        lines
            .iter()
            .filter(|l| l.text.contains("gsm-kv: shard "))
            .count()
            == 2
    });
    assert!(ready, "{}", job.wait(Duration::from_secs(1)).report());
    let mut shards = Vec::new();
    for l in job.stdout_lines() {
        // "gsm-kv: shard W of N (rank R) listening on ADDR:PORT, slots A-B"
        if l.text.starts_with("gsm-kv: shard ") {
            let words: Vec<&str> = l.text.split_whitespace().collect();
            shards.push(words[9].trim_end_matches(',').to_string());
        }
    }
    let mut conns = HashMap::new();
    let entry = shards[0].clone();
    let mut answered_by = std::collections::HashSet::new();
    for i in 0..64 {
        let key = format!("key:{i}");
        let (r, by) = routed(&mut conns, &entry, &["SET", &key, &i.to_string()]);
        assert_eq!(r, "+OK");
        answered_by.insert(by.clone());
        // The owner holds it: no redirection there, and the count of its slot includes it.
        assert_eq!(call(&mut conns, &by, &["GET", &key]), i.to_string());
        let slot = call(&mut conns, &by, &["CLUSTER", "KEYSLOT", &key]);
        let slot = slot.trim_start_matches(':');
        assert_ne!(
            call(&mut conns, &by, &["CLUSTER", "COUNTKEYSINSLOT", slot]),
            ":0"
        );
    }
    assert_eq!(answered_by.len(), 2, "both shards own keys");
    // Hash tags put keys in one slot; keys of two slots are refused.
    let (r, _) = routed(&mut conns, &entry, &["MSET", "{u}a", "1", "{u}b", "2"]);
    assert_eq!(r, "+OK");
    let cross = call(&mut conns, &entry, &["MGET", "key:1", "key:2", "key:3"]);
    assert!(cross.starts_with("-CROSSSLOT"), "{cross}");
    let nodes = call(&mut conns, &entry, &["CLUSTER", "INFO"]);
    assert!(nodes.starts_with("cluster_state:ok"), "{nodes}");
    let _ = call(&mut conns, &entry, &["SHUTDOWN", "NOSAVE"]);
    let done = job.wait(common::LIMIT);
    assert_eq!(done.code(), Some(0), "{}", done.report());
}
