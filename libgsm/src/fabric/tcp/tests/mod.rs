//! Tests of the tcp fabric beyond the conformance suite: strangers are dropped without touching
//! the job, a vanished peer is reported, the listener's address, the wire encodings, who
//! connects to whom and which connections are two-way. The measurements are in `measure`.

mod measure;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::net::Ipv4Addr;

use super::handshake::{
    Accepted, Expect, HELLO_LEN, Hello, check_hello, decode_endpoint, encode_endpoint,
};
use super::*;
use crate::bootstrap::KEY_LEN;
use crate::fabric::Lane;
use crate::fabric::conformance::{Rank, job};
use crate::sys::net;
use crate::wire::ring::RingLayout;

fn layout(slots: u32, slot_size: u32) -> RingLayout {
    RingLayout::new(slots, slot_size).unwrap()
}

/// Waits (bounded) until the server closes `s`; panics if it sends anything or stays open.
fn expect_dropped(s: &mut TcpStream, within: Duration, what: &str) {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Ok(n) => panic!("{what}: the listener sent {n} bytes instead of dropping it"),
        Err(e) => panic!("{what}: not dropped within {within:?}: {e}"),
    }
}

fn frame(dst: u32, lane: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = dst.to_le_bytes().to_vec();
    f.extend_from_slice(&((lane << 31) | payload.len() as u32).to_le_bytes());
    f.extend_from_slice(payload);
    f
}

fn no_data_anywhere(ranks: &[Rank<Tcp>]) {
    for r in ranks {
        for l in &r.links.incoming {
            assert!(
                !l.consumer.has_data(),
                "rank {} worker {} has data from {} ({:?})",
                r.topo.rank,
                l.local,
                l.remote,
                l.lane
            );
        }
        let f = r.failures.lock().unwrap();
        assert!(f.is_empty(), "rank {} reported {f:?}", r.topo.rank);
    }
}

/// Moves `n` messages from rank 0's first worker to rank 1's first worker and checks them.
fn moves_data(ranks: &mut [Rank<Tcp>], n: u32) {
    let (a, b) = ranks.split_at_mut(1);
    let to = a[0].topo.first_worker(1);
    let mut p = a[0].take_out(0, to, Lane::Request);
    let mut c = b[0].take_in(0, 0, Lane::Request);
    let bell = a[0].bell(to);
    let start = Instant::now();
    let mut sent = 0u32;
    let mut got = 0u32;
    while got < n {
        if sent < n
            && let Some(mut w) = p.try_reserve()
        {
            w.buf()[..4].copy_from_slice(&sent.to_le_bytes());
            w.publish(4);
            bell.ring();
            sent += 1;
        }
        if let Some(r) = c.try_poll().unwrap() {
            assert_eq!(r.bytes(), &got.to_le_bytes());
            got += 1;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "stuck at {got}/{n}"
        );
    }
}

#[test]
fn strangers_are_dropped_without_touching_the_job() {
    let mut ranks = job::<Tcp>(&[1, 1], layout(8, 256));
    let addr = ranks[1].fabric.local_addr();
    let key = ranks[1].topo.key;

    // Garbage.
    let mut s = TcpStream::connect(addr).unwrap();
    let mut x = 0x1234_5678_9abc_def0u64;
    let garbage: Vec<u8> = (0..300)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    s.write_all(&garbage).unwrap();
    expect_dropped(&mut s, Duration::from_secs(10), "garbage");

    // A well-formed hello with the wrong key, then a well-formed frame.
    let mut wrong = key;
    wrong[5] ^= 1;
    let hello = Hello {
        key: wrong,
        src_rank: 0,
        src_local: 0,
        dst_rank: 1,
        layout: layout(8, 256),
        back: Some(0),
        per_host: true,
    };
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&hello.encode()).unwrap();
    let _ = s.write_all(&frame(1, 0, b"evil"));
    expect_dropped(&mut s, Duration::from_secs(10), "wrong key");

    // The right key, but a second connection from a worker that is already connected.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&Hello { key, ..hello }.encode()).unwrap();
    let _ = s.write_all(&frame(1, 0, b"evil"));
    expect_dropped(&mut s, Duration::from_secs(10), "duplicate");

    // A connection that never says anything.
    let mut s = TcpStream::connect(addr).unwrap();
    expect_dropped(&mut s, HELLO_TIMEOUT + Duration::from_secs(5), "silent");

    // Nothing reached a ring or the job, and the real links still work.
    std::thread::sleep(Duration::from_millis(100));
    no_data_anywhere(&ranks);
    moves_data(&mut ranks, 1000);
    no_data_anywhere(&ranks);
}

/// Rank 1 of a two-rank job set up by hand; the test plays rank 0 over raw sockets.
fn hand_made_rank_1(
    layout: RingLayout,
) -> (
    Tcp,
    std::net::TcpListener,
    Arc<Mutex<Vec<FabricError>>>,
    [u8; KEY_LEN],
) {
    hand_made_rank_1_with(layout, 1, |_, _| {})
}

/// [`hand_made_rank_1`] with `workers0` workers on rank 0, and `early` called with rank 1's
/// address and the key between its `prepare` and its `create`.
fn hand_made_rank_1_with(
    layout: RingLayout,
    workers0: u32,
    early: impl FnOnce(SocketAddr, [u8; KEY_LEN]),
) -> (
    Tcp,
    std::net::TcpListener,
    Arc<Mutex<Vec<FabricError>>>,
    [u8; KEY_LEN],
) {
    let rank0 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let settings = Settings {
        bind: Some(Ipv4Addr::LOCALHOST.into()),
        connect_timeout: Duration::from_secs(10),
    };
    let (mut t, _) = Tcp::prepare(&settings).unwrap();
    let key = [0x5au8; KEY_LEN];
    early(t.local_addr(), key);
    let topo = Topology {
        rank: 1,
        workers: vec![workers0, 1],
        hosts: vec!["host-a".into(), "host-b".into()],
        layout,
        job_id: "tcp-hand".into(),
        key,
    };
    let failures = Arc::new(Mutex::new(Vec::new()));
    let f2 = failures.clone();
    let hooks = Hooks {
        wake: Arc::new(|_| {}),
        fail: Arc::new(move |e| f2.lock().unwrap().push(e)),
    };
    let peer = Peer {
        rank: 0,
        endpoint: encode_endpoint(rank0.local_addr().unwrap()),
    };
    t.create(&topo, &[peer], hooks).unwrap();
    (t, rank0, failures, key)
}

/// Connects to `t` (rank 1) as rank 0's worker 0 and sends its hello (two-way: rank 1's worker
/// 0 writes back on it).
fn hello_as_rank_0(t: &Tcp, key: [u8; KEY_LEN], layout: RingLayout) -> TcpStream {
    let mut s = TcpStream::connect(t.local_addr()).unwrap();
    let hello = Hello {
        key,
        src_rank: 0,
        src_local: 0,
        dst_rank: 1,
        layout,
        back: Some(0),
        per_host: true,
    };
    s.write_all(&hello.encode()).unwrap();
    s
}

#[test]
fn a_bad_frame_on_an_authenticated_connection_ends_the_job() {
    let layout = layout(4, 64);
    let (mut t, _rank0, failures, key) = hand_made_rank_1(layout);
    let mut s = hello_as_rank_0(&t, key, layout);
    let mut links = t.attach().expect("the hand-made peer authenticated");
    let i = links
        .incoming
        .iter()
        .position(|l| l.remote == 0 && l.lane == Lane::Response)
        .unwrap();
    let mut c = links.incoming.swap_remove(i).consumer;
    // A good frame (worker 1 is rank 1's only worker) arrives.
    s.write_all(&frame(1, 1, b"fine")).unwrap();
    let start = Instant::now();
    loop {
        if let Some(r) = c.try_poll().unwrap() {
            assert_eq!(r.bytes(), b"fine");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the frame did not arrive"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // A frame longer than a slot is a protocol error, reported naming the peer.
    s.write_all(&frame(1, 0, &[0u8; 65])).unwrap();
    let start = Instant::now();
    while failures.lock().unwrap().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no failure reported"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let f = failures.lock().unwrap().clone();
    assert!(
        matches!(&f[0], FabricError::Protocol { peer: 0, host, detail, .. }
            if host == "host-a" && detail.contains("65 bytes")),
        "{f:?}"
    );
    assert!(!c.has_data());
    expect_dropped(&mut s, Duration::from_secs(5), "protocol breaker");
}

/// Set in the environment of a child process that [`run_in_child`] started.
const CHILD_VAR: &str = "GSM_TCP_TEST_CHILD";

/// Runs test `name` of this binary again, alone, in a child process with [`CHILD_VAR`] set (for a
/// test that changes what the whole process may do), killing it after `within`; panics with its
/// output unless it ran and passed.
fn run_in_child(name: &str, within: Duration) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut killed = false;
    while child.try_wait().unwrap().is_none() {
        if !killed && start.elapsed() > within {
            let _ = child.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !killed && stdout.contains("1 passed"),
        "{name} in a child process ({:?}{}):\n{stdout}\n{}",
        out.status,
        if killed {
            format!(", killed after {within:?}")
        } else {
            String::new()
        },
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_failing_accept_is_named_and_retried() {
    if std::env::var_os(CHILD_VAR).is_none() {
        // It exhausts the process's descriptors.
        return run_in_child(
            "fabric::tcp::tests::a_failing_accept_is_named_and_retried",
            Duration::from_secs(60),
        );
    }
    let layout = layout(4, 64);
    let (mut t, _rank0, failures, key) = hand_made_rank_1(layout);
    t.connect_timeout = Duration::from_secs(1);
    // Use up every descriptor but one, which the connection below takes: the I/O thread's
    // accept then fails with EMFILE.
    net::limit_descriptors(256).unwrap();
    let mut hog = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        hog.push(f);
    }
    hog.pop();
    let _peer = hello_as_rank_0(&t, key, layout);
    match t.attach() {
        Err(e @ FabricError::Os { .. }) => {
            let e = e.to_string();
            assert!(
                e.contains("accepting connections on")
                    && e.contains("Too many open files")
                    && e.contains("rank 0 (host host-a)"),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
    // With descriptors again, the queued connection is taken without a new one.
    drop(hog);
    t.connect_timeout = Duration::from_secs(10);
    t.attach()
        .expect("the queued connection was accepted once descriptors were free");
    assert!(failures.lock().unwrap().is_empty());
}

#[test]
fn more_peers_than_max_hellos_all_get_in() {
    let layout = layout(4, 64);
    let n = 2 * MAX_HELLOS as u32 + 3;
    let mut socks = Vec::new();
    // Every one of rank 0's workers connects and says hello before rank 1 accepts anything.
    let (mut t, _rank0, failures, _) = hand_made_rank_1_with(layout, n, |addr, key| {
        for l in 0..n {
            let mut s = TcpStream::connect(addr).unwrap();
            let hello = Hello {
                key,
                src_rank: 0,
                src_local: l,
                dst_rank: 1,
                layout,
                back: (l == 0).then_some(0),
                per_host: true,
            };
            s.write_all(&hello.encode()).unwrap();
            socks.push(s);
        }
    });
    t.connect_timeout = Duration::from_secs(10);
    t.attach().expect("every worker of rank 0 was accepted");
    assert!(failures.lock().unwrap().is_empty());
}

#[test]
fn set_up_does_not_jam_when_the_backlog_is_smaller_than_the_connections() {
    // Each rank's listener queues 3 connections (backlog 2) and each rank makes 12 to the other:
    // a rank that waited for its own connects before accepting would jam with its peer.
    let start = Instant::now();
    let mut ranks = crate::fabric::conformance::job_with::<Tcp>(&[12, 12], layout(8, 64), |t| {
        net::listen(t.listener.as_ref().unwrap().as_fd(), 2).unwrap();
    });
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    moves_data(&mut ranks, 100);
    no_data_anywhere(&ranks);
}

#[test]
fn a_connect_that_times_out_names_this_rank_as_the_one_that_could_not_connect() {
    // Rank 0's listener never accepts and its queue (backlog 0) is full: the kernel drops the
    // SYNs of further connects.
    let rank0 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    net::listen(rank0.as_fd(), 0).unwrap();
    let addr0 = rank0.local_addr().unwrap();
    let _filler = TcpStream::connect(addr0).unwrap();
    let _more = TcpStream::connect_timeout(&addr0, Duration::from_millis(200));
    let settings = Settings {
        bind: Some(Ipv4Addr::LOCALHOST.into()),
        connect_timeout: Duration::from_secs(1),
    };
    let (mut t, _) = Tcp::prepare(&settings).unwrap();
    // The test's rank is rank 0 (the lower rank connects), its dead peer rank 1.
    let topo = Topology {
        rank: 0,
        workers: vec![1, 1],
        hosts: vec!["host-a".into(), "host-b".into()],
        layout: layout(4, 64),
        job_id: "tcp-hand".into(),
        key: [1; KEY_LEN],
    };
    let hooks = Hooks {
        wake: Arc::new(|_| {}),
        fail: Arc::new(|e| panic!("{e}")),
    };
    let peer = Peer {
        rank: 1,
        endpoint: encode_endpoint(addr0),
    };
    let e = t.create(&topo, &[peer], hooks).unwrap_err().to_string();
    assert!(
        e.contains("connecting worker 0 to rank 1 (host host-b)")
            && e.contains("no answer within 1 s")
            && !e.contains("did not connect"),
        "{e}"
    );
}

#[test]
fn both_ends_of_every_connection_keep_alive_and_send_at_once() {
    let ranks = job::<Tcp>(&[1, 2], layout(8, 64));
    let listeners: Vec<u16> = ranks.iter().map(|r| r.fabric.local_addr().port()).collect();
    let mut seen = std::collections::HashSet::new();
    let (mut connected, mut accepted) = (0, 0);
    // The fabric's sockets belong to its I/O thread: find them among this process's
    // descriptors by their ports (a two-way connection's halves are two descriptors of one
    // socket: counted once).
    for (fd, local, peer) in fabric_sockets() {
        if listeners.contains(&peer) {
            connected += seen.insert((local, peer)) as usize;
        } else if listeners.contains(&local) {
            accepted += seen.insert((local, peer)) as usize;
        } else {
            continue;
        }
        let got = net::keep_alive_of(fd).unwrap();
        let want = net::KeepAlive {
            on: true,
            idle: KEEPALIVE_IDLE,
            interval: KEEPALIVE_INTERVAL,
            probes: KEEPALIVE_PROBES,
            // Not set: it would also drop a live peer that keeps a zero window (`keep_alive`).
            user_timeout_ms: 0,
            // Both ends write on a two-way connection: Nagle's algorithm and the peer's delayed
            // ACKs would hold small frames for 40 ms each.
            nodelay: true,
        };
        assert_eq!(got, want, "socket {fd} ({local} -> {peer})");
    }
    // Rank 0's worker connects to rank 1, two-way with rank 1's worker 0; rank 1's worker 1
    // has no partner and connects to rank 0.
    assert_eq!((connected, accepted), (2, 2));
}

/// This process's IPv4 TCP sockets: (descriptor, local port, peer port).
fn fabric_sockets() -> Vec<(RawFd, u16, u16)> {
    let mut v = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let Ok(fd) = entry
            .unwrap()
            .file_name()
            .to_string_lossy()
            .parse::<RawFd>()
        else {
            continue;
        };
        if let Some((local, peer)) = net::ipv4_ports(fd) {
            v.push((fd, local, peer));
        }
    }
    v
}

/// Counts the fabric's connections in this process (found by their ports, as above): those that
/// connected to a listener of `ranks`, and those a listener accepted; each socket once, however
/// many descriptors it has.
fn count_sockets(ranks: &[Rank<Tcp>]) -> (usize, usize) {
    let listeners: Vec<u16> = ranks.iter().map(|r| r.fabric.local_addr().port()).collect();
    let mut seen = std::collections::HashSet::new();
    let (mut connected, mut accepted) = (0, 0);
    for (_, local, peer) in fabric_sockets() {
        if !seen.insert((local, peer)) {
            continue;
        }
        if listeners.contains(&peer) {
            connected += 1;
        } else if listeners.contains(&local) {
            accepted += 1;
        }
    }
    (connected, accepted)
}

/// The connection model between ranks: one two-way connection per pair of workers with the same
/// index (the lower rank's connects), plus a one-way one per worker without a partner, so a job
/// of 4 ranks × 2 workers, every rank a tcp peer of every other (two hosts of two ranks each,
/// with `--fabric tcp`), has 2 connections per pair of ranks, 12 in all, each seen at both ends
/// (it was 24 with a one-way connection per (worker, peer rank)); 3 ranks of 3, 1 and 2 workers
/// have, between ranks 0-1, 0-2 and 1-2, 1 + 2 + 1 two-way connections and 2 + 1 + 1 one-way
/// ones (one per worker without a partner): 8. `gsm-bench remote` prints the same count
/// (`connections`).
#[test]
fn a_job_has_one_connection_per_pair_of_workers_between_two_ranks() {
    let mut ranks = job::<Tcp>(&[2, 2, 2, 2], layout(4, 64));
    assert_eq!(count_sockets(&ranks), (12, 12));
    moves_data(&mut ranks, 10);
    no_data_anywhere(&ranks);
    drop(ranks);
    let mut ranks = job::<Tcp>(&[3, 1, 2], layout(4, 64));
    assert_eq!(count_sockets(&ranks), (8, 8));
    moves_data(&mut ranks, 10);
    no_data_anywhere(&ranks);
}

/// An accepted connection carries data one way, so its ACKs are delayed (`connect::delay_acks`):
/// a bare ACK per frame read was a packet more on the path of every round trip.
/// The kernel's ping-pong flag is read back before any data arrives, so no delayed-ACK timer
/// can have turned it off yet.
#[test]
fn incoming_connections_delay_their_acks() {
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let _out = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (sock, _) = listener.accept().unwrap();
    assert!(
        !net::acks_delayed(sock.as_fd()).unwrap(),
        "a fresh socket acks at once"
    );
    connect::delay_acks(&sock);
    assert!(net::acks_delayed(sock.as_fd()).unwrap());
}

/// The worker path: a worker's own bell writes its socket, the peer's `Turn::Poll`
/// reads it on the peer worker's thread; after `Turn::Park` the I/O thread delivers instead and
/// wakes the worker; the next poll takes the sockets back. Each phase must move its message
/// within the time limit, whoever moves it.
#[test]
fn workers_write_and_read_their_own_sockets_and_hand_them_over_to_park() {
    use crate::fabric::Turn;
    let mut ranks = job::<Tcp>(&[1, 2], layout(8, 64));
    let (a, b) = ranks.split_at_mut(1);
    let to = a[0].topo.first_worker(1) + 1;
    let bell = a[0].worker_bell(0, to);
    let (poll0, poll1) = (b[0].progress_hook(0), b[0].progress_hook(1));
    let mut p = a[0].take_out(0, to, Lane::Request);
    let mut c = b[0].take_in(1, 0, Lane::Request);
    let send = |p: &mut crate::wire::ring::Producer, v: u32| {
        let mut w = p.try_reserve().expect("room in the shadow ring");
        w.buf()[..4].copy_from_slice(&v.to_le_bytes());
        w.publish(4);
        bell.ring();
    };
    let within = crate::fabric::conformance::within;
    // Worker 0 of rank 1 polls: it reads the socket and delivers to worker 1's ring.
    poll0.turn(Turn::Poll);
    send(&mut p, 1);
    within("a polling worker delivers", &mut || {
        poll0.turn(Turn::Poll);
        c.try_poll()
            .unwrap()
            .is_some_and(|r| r.bytes() == 1u32.to_le_bytes())
    });
    // Both workers park: the I/O thread delivers and rings worker 1's doorbell.
    assert!(!poll0.turn(Turn::Park));
    assert!(!poll1.turn(Turn::Park));
    send(&mut p, 2);
    within(
        "the I/O thread delivers while every worker sleeps",
        &mut || {
            c.try_poll()
                .unwrap()
                .is_some_and(|r| r.bytes() == 2u32.to_le_bytes())
        },
    );
    // Polling again takes the socket back.
    poll1.turn(Turn::Poll);
    send(&mut p, 3);
    within("a worker that polls again delivers", &mut || {
        poll1.turn(Turn::Poll);
        c.try_poll()
            .unwrap()
            .is_some_and(|r| r.bytes() == 3u32.to_le_bytes())
    });
    no_data_anywhere(&ranks);
}

/// Home-first reading: while a connection's home worker polls, the
/// rank's other worker leaves that connection to it, even for frames addressed to itself, until
/// the home's polls stand still for `STALE_POLLS` of its own; once the home parks, the other
/// worker reads at once. A frame never waits for a worker that does not read.
#[test]
fn the_home_worker_reads_its_connection_first() {
    use crate::fabric::Turn;
    let mut ranks = job::<Tcp>(&[1, 2], layout(8, 64));
    let (a, b) = ranks.split_at_mut(1);
    let to = a[0].topo.first_worker(1) + 1;
    let bell = a[0].worker_bell(0, to);
    let (home, other) = (b[0].progress_hook(0), b[0].progress_hook(1));
    let mut p = a[0].take_out(0, to, Lane::Request);
    let mut c = b[0].take_in(1, 0, Lane::Request);
    let mut send = |v: u32| {
        let mut w = p.try_reserve().expect("room in the shadow ring");
        w.buf()[..4].copy_from_slice(&v.to_le_bytes());
        w.publish(4);
        bell.ring();
        // Loopback delivers within microseconds; this leaves no doubt the frame is there.
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut got = |v: u32| {
        c.try_poll()
            .unwrap()
            .is_some_and(|r| r.bytes() == v.to_le_bytes())
    };
    // Both poll; a first frame takes the I/O thread's one-shot arming out of the way.
    home.turn(Turn::Poll);
    other.turn(Turn::Poll);
    send(0);
    crate::fabric::conformance::within("the home delivers", &mut || {
        home.turn(Turn::Poll);
        got(0)
    });
    std::thread::sleep(Duration::from_millis(50));
    // The frame is for worker 1, but the connection is worker 0's, which polls.
    send(1);
    home.turn(Turn::Poll);
    assert!(got(1), "the home reads its connection");
    send(2);
    for i in 0..io::STALE_POLLS {
        assert!(
            !other.turn(Turn::Poll),
            "poll {i} read the home's connection"
        );
    }
    assert!(!got(2), "the other worker read while the home polls");
    // The home's polls stood still for STALE_POLLS of the other's: it reads.
    assert!(other.turn(Turn::Poll), "a standing home's frames wait");
    assert!(got(2));
    // The home parks: the other worker reads at once.
    home.turn(Turn::Poll);
    assert!(!home.turn(Turn::Park));
    send(3);
    assert!(other.turn(Turn::Poll), "a parked home's frames wait");
    assert!(got(3));
    no_data_anywhere(&ranks);
}

#[test]
fn attach_names_a_peer_that_never_connects() {
    let (mut t, _rank0, failures, _) = hand_made_rank_1(layout(4, 64));
    t.connect_timeout = Duration::from_millis(300);
    match t.attach() {
        Err(FabricError::Timeout { peer: 0, host, .. }) => assert_eq!(host, "host-a"),
        other => panic!("{other:?}"),
    }
    assert!(failures.lock().unwrap().is_empty());
}

#[test]
fn a_vanished_peer_is_reported_once() {
    let mut ranks = job::<Tcp>(&[1, 2], layout(8, 256));
    drop(ranks.pop());
    let start = Instant::now();
    while ranks[0].failures.lock().unwrap().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "rank 0 did not notice that rank 1 vanished"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    let f = ranks[0].failures.lock().unwrap().clone();
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        matches!(&f[0], FabricError::PeerLost { peer: 1, host, .. } if host == "localhost"),
        "{f:?}"
    );
}

#[test]
fn after_closing_a_peer_leaving_is_not_a_failure() {
    let mut ranks = job::<Tcp>(&[2, 1], layout(8, 256));
    moves_data(&mut ranks, 10);
    for r in &mut ranks {
        r.fabric.closing();
    }
    drop(ranks.pop());
    std::thread::sleep(Duration::from_millis(500));
    let f = ranks[0].failures.lock().unwrap().clone();
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn the_listener_never_binds_every_interface_by_default() {
    let settings = Settings {
        bind: None,
        connect_timeout: Duration::from_secs(1),
    };
    let (t, endpoint) = Tcp::prepare(&settings).unwrap();
    assert!(
        !t.local_addr().ip().is_unspecified(),
        "bound to {}",
        t.local_addr()
    );
    assert_eq!(decode_endpoint(&endpoint).unwrap(), t.local_addr());

    // Asked explicitly, it does, and advertises an address a peer can connect to.
    let settings = Settings {
        bind: Some(Ipv4Addr::UNSPECIFIED.into()),
        connect_timeout: Duration::from_secs(1),
    };
    let (t, endpoint) = Tcp::prepare(&settings).unwrap();
    assert!(t.local_addr().ip().is_unspecified());
    let advertised = decode_endpoint(&endpoint).unwrap();
    assert!(!advertised.ip().is_unspecified());
    assert_eq!(advertised.port(), t.local_addr().port());
}

#[test]
fn endpoints_round_trip_and_bad_ones_are_named() {
    for a in ["127.0.0.1:4242", "[::1]:65535", "[fe80::1:2]:1"] {
        let a: SocketAddr = a.parse().unwrap();
        assert_eq!(decode_endpoint(&encode_endpoint(a)).unwrap(), a);
    }
    let e = decode_endpoint(&[]).unwrap_err();
    assert!(e.contains("no tcp endpoint"), "{e}");
    let e = decode_endpoint(&[4, 1, 2, 3]).unwrap_err();
    assert!(e.contains("4 bytes instead of 7"), "{e}");
    let e = decode_endpoint(&[9, 0, 0]).unwrap_err();
    assert!(e.contains("unknown address family 9"), "{e}");
    let e = decode_endpoint(&[4, 0, 0, 0, 0, 0, 80]).unwrap_err();
    assert!(e.contains("cannot be connected to"), "{e}");
}

/// The groups of a job of `workers` per rank on `hosts`, seen from `rank`, every rank of
/// another host a tcp peer.
fn groups_of(rank: u32, workers: &[u32], hosts: &[&str], per_host: bool) -> groups::Groups {
    let topo = Topology {
        rank,
        workers: workers.to_vec(),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        layout: layout(8, 256),
        job_id: "groups".into(),
        key: [0; KEY_LEN],
    };
    let is_peer: Vec<bool> = (0..hosts.len())
        .map(|r| hosts[r] != hosts[rank as usize])
        .collect();
    groups::Groups::new(&topo, &is_peer, per_host).0
}

#[test]
fn hellos_are_checked_field_by_field() {
    let key = [7u8; KEY_LEN];
    let workers = [2, 3, 1];
    let is_peer = [true, false, true];
    let groups = groups_of(1, &workers, &["a", "b", "c"], true);
    let x = Expect {
        key: &key,
        rank: 1,
        workers: &workers,
        is_peer: &is_peer,
        layout: layout(8, 256),
        two_way: true,
        groups: &groups,
    };
    let good = Hello {
        key,
        src_rank: 0,
        src_local: 1,
        dst_rank: 1,
        layout: layout(8, 256),
        back: Some(1),
        per_host: true,
    };
    let accepted = |src_rank, src_local, back| Accepted {
        src_rank,
        src_local,
        back,
    };
    assert_eq!(check_hello(&good.encode(), &x), Ok(accepted(0, 1, Some(1))));
    // Rank 2 is higher than rank 1: rank 1's worker 0 connects to it, and rank 2's worker 0
    // writes back on that connection; one of its own is refused.
    let high = Hello {
        src_rank: 2,
        src_local: 0,
        back: None,
        ..good
    };
    let e = check_hello(&high.encode(), &x).unwrap_err();
    assert!(
        e.contains("writes back on this rank's worker 0's connection"),
        "{e}"
    );
    let without = Expect {
        two_way: false,
        ..x
    };
    let one_way = Hello { back: None, ..good };
    assert_eq!(
        check_hello(&one_way.encode(), &without),
        Ok(accepted(0, 1, None))
    );
    let refused = |h: [u8; HELLO_LEN], want: &str| {
        let e = check_hello(&h, &x).unwrap_err();
        assert!(e.contains(want), "{e:?} does not say {want:?}");
    };
    let mut b = good.encode();
    b[0] = b'X';
    refused(b, "magic");
    let mut b = good.encode();
    b[8] = 1;
    refused(b, "version 1");
    refused(
        Hello {
            per_host: false,
            ..good
        }
        .encode(),
        "it makes connections per (worker, rank), this rank per (worker, host)",
    );
    let mut b = good.encode();
    b[43] ^= 0x80;
    refused(b, "wrong job key");
    refused(
        Hello {
            dst_rank: 2,
            ..good
        }
        .encode(),
        "meant for rank 2",
    );
    refused(
        Hello {
            src_rank: 1,
            ..good
        }
        .encode(),
        "rank 1 is not a tcp peer",
    );
    refused(
        Hello {
            src_rank: 9,
            ..good
        }
        .encode(),
        "rank 9 is not a tcp peer",
    );
    refused(
        Hello {
            src_local: 2,
            ..good
        }
        .encode(),
        "rank 0 has no worker 2",
    );
    refused(
        Hello {
            layout: layout(16, 256),
            ..good
        }
        .encode(),
        "16 slots of 256 bytes",
    );
    // Who writes back must be what both ends compute.
    refused(one_way.encode(), "is one-way, this rank expects it two-way");
    refused(
        Hello {
            back: Some(0),
            ..good
        }
        .encode(),
        "with worker 0 of rank 1 writing back, this rank expects it two-way, with worker 1",
    );
    refused(
        Hello {
            back: Some(0),
            ..high
        }
        .encode(),
        "(is GSM_TCP_TWO_WAY the same on every rank?)",
    );
    let e = check_hello(&good.encode(), &without).unwrap_err();
    assert!(e.contains("expects it one-way"), "{e}");
}

#[test]
fn the_lower_rank_connects_and_partners_write_back() {
    let workers = [2, 3];
    let g = groups_of(0, &workers, &["a", "b"], true);
    // Rank 0's workers 0 and 1 connect two-way; rank 1's worker 2 (global 4) has no partner.
    assert_eq!(g.partner(0, 1, true), Some(2));
    assert_eq!(g.partner(1, 1, true), Some(3));
    assert_eq!(g.partner(4, 0, true), None);
    assert_eq!(g.partner(2, 0, true), None);
    let who = |me: u32| {
        g.members(me)
            .iter()
            .copied()
            .filter(|&w| g.connects(w, 1 - me, true))
            .collect::<Vec<_>>()
    };
    assert_eq!((who(0), who(1)), (vec![0, 1], vec![4]));
    // Rank 1's worker 2 reaches rank 0's worker 0 (2 mod 2), one-way.
    assert_eq!(g.target(4, 0), 0);
    // Without pairing, everyone connects, one-way.
    assert_eq!(g.partner(0, 1, false), None);
    assert!(g.connects(2, 0, false));
}

/// Connections between two hosts: (two-way pairs, one-way) for a layout, from every rank's view.
fn count(workers: &[u32], hosts: &[&str], per_host: bool) -> usize {
    let mut n = 0;
    for me in 0..workers.len() as u32 {
        let g = groups_of(me, workers, hosts, per_host);
        let mine = g.mine();
        for l in 0..workers[me as usize] {
            let w = g.global(l);
            n += g.remote().filter(|&h| g.connects(w, h, true)).count();
        }
        assert!(g.members(mine).iter().all(|&w| g.rank(w) == me || per_host));
    }
    n
}

#[test]
fn one_connection_per_worker_and_remote_host() {
    // 2 hosts x 2 ranks x 2 workers: 4 two-way connections per host pair (8 per rank pair).
    let (w, h) = ([2, 2, 2, 2], ["a", "a", "b", "b"]);
    assert_eq!(count(&w, &h, true), 4);
    assert_eq!(count(&w, &h, false), 8);
    // Round-robin placement: the same count, reading spread over both ranks of each host.
    let rr = ["a", "b", "a", "b"];
    assert_eq!(count(&w, &rr, true), 4);
    let g = groups_of(0, &w, &rr, true);
    let readers: Vec<u32> = g
        .members(g.of_rank(1))
        .iter()
        .map(|&x| g.reader(x))
        .collect();
    assert_eq!(readers, vec![0, 0, 2, 2]);
    // Unequal hosts: 3 workers on one, 1 on the other: 3 connections (1 two-way).
    assert_eq!(count(&[1, 2, 1], &["a", "a", "b"], true), 3);
    // --fabric tcp on one host keeps per-rank connections.
    let topo = Topology {
        rank: 0,
        workers: vec![1, 1],
        hosts: vec!["a".into(), "a".into()],
        layout: layout(8, 256),
        job_id: "groups".into(),
        key: [0; KEY_LEN],
    };
    let (g, why) = groups::Groups::new(&topo, &[false, true], true);
    assert!(!g.per_host && why.is_some_and(|w| w.contains("--fabric tcp")));
}
