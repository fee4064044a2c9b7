use super::*;

fn two() -> Cluster {
    let nodes = vec![
        Node {
            ip: "127.0.0.1".into(),
            port: 7000,
        },
        Node {
            ip: "127.0.0.1".into(),
            port: 7001,
        },
    ];
    Cluster::new(nodes, 0, 0xabc)
}

fn args(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|a| a.as_bytes().to_vec())
        .collect()
}

fn text(r: Routed) -> String {
    match r {
        Routed::Reply(b) => String::from_utf8(b).unwrap(),
        other => panic!("not a reply: {other:?}"),
    }
}

/// A key of the slots of shard `shard` of 2 (slot 0..8191 is shard 0's).
fn key_on(shard: usize) -> String {
    (0..)
        .map(|i| format!("k{i}"))
        .find(|k| owner(key_slot(k.as_bytes()), 2) == shard)
        .unwrap()
}

#[test]
fn keys_of_this_shard_run_here_and_others_are_moved() {
    let c = two();
    let (mine, theirs) = (key_on(0), key_on(1));
    assert_eq!(c.route(&args(&format!("GET {mine}"))), Routed::Here);
    let slot = key_slot(theirs.as_bytes());
    assert_eq!(
        text(c.route(&args(&format!("set {theirs} v")))),
        format!("-MOVED {slot} 127.0.0.1:7001\r\n")
    );
    // No keys, or a wrong arity (planning answers it): here.
    assert_eq!(c.route(&args("PING")), Routed::Here);
    assert_eq!(c.route(&args("DBSIZE")), Routed::Here);
    assert_eq!(c.route(&args(&format!("GET {theirs} x"))), Routed::Here);
    // OBJECT names its key after the subcommand.
    assert!(text(c.route(&args(&format!("OBJECT ENCODING {theirs}")))).starts_with("-MOVED"));
}

#[test]
fn keys_of_several_slots_are_crossslot_and_hash_tags_join_them() {
    let c = two();
    let (a, b) = (key_on(0), key_on(1));
    let cross = "-CROSSSLOT Keys in request don't hash to the same slot\r\n";
    assert_eq!(text(c.route(&args(&format!("MGET {a} {b}")))), cross);
    assert_eq!(text(c.route(&args(&format!("MSET {b} 1 {a} 2")))), cross);
    // MSET's values are not keys.
    assert!(text(c.route(&args(&format!("MSET {b} {a}")))).starts_with("-MOVED"));
    let tagged = format!("MSET {{{a}}}:x 1 {{{a}}}:y 2 {a} 3");
    assert_eq!(c.route(&args(&tagged)), Routed::Here);
    assert_eq!(
        text(c.route(&args(&format!("RENAME {{{b}}}1 {{{b}}}2")))),
        format!("-MOVED {} 127.0.0.1:7001\r\n", key_slot(b.as_bytes()))
    );
}

#[test]
fn cluster_subcommands_answer_as_redis_7() {
    let c = two();
    assert_eq!(text(c.route(&args("CLUSTER KEYSLOT foo"))), ":12182\r\n");
    assert_eq!(
        text(c.route(&args("cluster myid"))),
        format!("$40\r\n{}\r\n", c.node_id(0))
    );
    assert_eq!(c.node_id(1).len(), 40);
    let nodes = text(c.route(&args("CLUSTER NODES")));
    assert!(
        nodes.contains(&format!(
            "{} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-8191\n",
            c.node_id(0)
        )),
        "{nodes}"
    );
    assert!(nodes.contains("127.0.0.1:7001@17001 master - 0 0 2 connected 8192-16383\n"));
    let slots = text(c.route(&args("CLUSTER SLOTS")));
    assert!(
        slots.starts_with("*2\r\n*3\r\n:0\r\n:8191\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n"),
        "{slots}"
    );
    let info = text(c.route(&args("CLUSTER INFO")));
    assert!(info.contains("cluster_state:ok\r\n") && info.contains("cluster_known_nodes:2\r\n"));
    let shards = text(c.route(&args("CLUSTER SHARDS")));
    assert!(shards.starts_with("*2\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:8191\r\n$5\r\nnodes\r\n"));
    assert_eq!(
        c.route(&args("CLUSTER COUNTKEYSINSLOT 5")),
        Routed::SlotKeys(5, None)
    );
    assert_eq!(
        c.route(&args("CLUSTER GETKEYSINSLOT 16383 10")),
        Routed::SlotKeys(16383, Some(10))
    );
    assert_eq!(
        text(c.route(&args("CLUSTER COUNTKEYSINSLOT 16384"))),
        "-ERR Invalid slot\r\n"
    );
    assert_eq!(
        text(c.route(&args("CLUSTER GETKEYSINSLOT 1 -1"))),
        "-ERR Invalid slot or number of keys\r\n"
    );
    assert_eq!(
        text(c.route(&args("CLUSTER KEYSLOT"))),
        "-ERR wrong number of arguments for 'cluster|keyslot' command\r\n"
    );
    assert_eq!(
        text(c.route(&args("CLUSTER FOO"))),
        "-ERR unknown subcommand 'FOO'. Try CLUSTER HELP.\r\n"
    );
    assert!(text(c.route(&args("CLUSTER MEET 1.2.3.4 5"))).contains("not supported"));
    assert_eq!(text(c.route(&args("READONLY"))), "+OK\r\n");
    assert_eq!(text(c.route(&args("asking"))), "+OK\r\n");
}
