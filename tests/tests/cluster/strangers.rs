//! Strangers on a rank's tcp listener: dropped and reported, and the job completes.

use super::*;

/// The gossamer listener of each rank: the listening sockets that are bound to an address
/// (Open MPI's TCP transport in the same process listens on the unspecified address; gossamer's
/// never does unless configured to), as rank → address.
fn gossamer_listeners(
    ranks: &std::collections::BTreeMap<u32, u32>,
) -> Option<Vec<(u32, SocketAddr)>> {
    let mut found = Vec::new();
    for (rank, pid) in ranks {
        let bound: Vec<SocketAddr> = tcp_listeners(*pid)
            .into_iter()
            .filter(|a| !a.ip().is_unspecified())
            .collect();
        match bound.as_slice() {
            [one] => found.push((*rank, *one)),
            [] => return None,
            many => panic!("rank {rank} (pid {pid}) listens on several bound addresses: {many:?}"),
        }
    }
    Some(found)
}

/// Sends `bytes` on a new connection to `to`, and keeps the connection open (returned) so the
/// listener, not our close, decides its fate.
fn send(to: SocketAddr, bytes: &[u8]) -> std::io::Result<TcpStream> {
    let mut sock = TcpStream::connect_timeout(&to, Duration::from_secs(2))?;
    sock.write_all(bytes)?;
    Ok(sock)
}

/// What happened to one attempt of the stranger test.
enum Attempt {
    /// The listeners were found and attacked; the job's result.
    Done(Finished),
    /// The listeners did not appear in time, or were gone when the strangers connected (timing,
    /// not a wrong result): worth another try, once the job's own results are checked.
    NoListener(Finished),
}

fn strangers_attempt() -> Attempt {
    let guard = PidGuard::new();
    let job = spawn(&mut job_command(2, Some("tcp"), &[]));
    let prefix = job_prefix(job.pid() as u32);
    let mut watched = false;
    let mut started = false;
    // Some(Some(listeners)) when found, Some(None) when the job ended first.
    let listeners = poll(Duration::from_secs(20), || {
        let found = ranks(&prefix, "cluster_check");
        if found.len() != 2 {
            let alive = !job_processes(&prefix).is_empty();
            started |= alive;
            return (started && !alive).then_some(None);
        }
        if !watched {
            for rank_pid in found.values() {
                guard.watch(*rank_pid, "cluster_check");
            }
            watched = true;
        }
        gossamer_listeners(&found).map(Some)
    });
    let Some(Some(listeners)) = listeners else {
        return Attempt::NoListener(job.wait(LIMIT));
    };
    // The job inherits this environment, so it uses the same ring geometry.
    let config = gossamer::Config::from_env().unwrap_or_default();
    let mut open = Vec::new();
    let mut missed = false;
    let mut garbage = b"GET / HTTP/1.0\r\n\r\n".to_vec();
    garbage.extend((0..200u32).map(|i| (i * 37 % 251) as u8));
    for (rank, addr) in &listeners {
        let other = 1 - rank;
        let mut forged = hello(
            &[0xA5; 32],
            other,
            0,
            *rank,
            config.slots_per_ring as u32,
            config.slot_size as u32,
            (other < *rank).then_some(0),
        )
        .to_vec();
        // A frame for the rank's first worker, as an authenticated peer would send it.
        forged.extend(frame(rank * WORKERS, 0, &[0x42; 64]));
        for bytes in [&garbage, &forged] {
            match send(*addr, bytes) {
                Ok(sock) => open.push(sock),
                Err(err) => {
                    // The run that owned the listener may have ended just now.
                    eprintln!("connecting to rank {rank}'s listener {addr}: {err}");
                    missed = true;
                }
            }
        }
    }
    let done = job.wait(LIMIT);
    drop(open);
    assert_nothing_left(&prefix, &guard, "the stranger test", &done);
    if missed {
        Attempt::NoListener(done)
    } else {
        Attempt::Done(done)
    }
}

/// Strangers connect to each rank's tcp listener while the job runs: one sends garbage, one a
/// hello that is well-formed except for the job key, followed by a frame. Both are dropped and
/// reported; the job completes with every result right.
#[test]
fn strangers_on_the_tcp_listener_are_dropped_and_the_job_completes() {
    let _serial = serial();
    let what = "gsmrun -np 2 --fabric tcp cluster_check with strangers connecting";
    let mut done = None;
    for attempt in 1..=3 {
        match strangers_attempt() {
            Attempt::Done(finished) => {
                done = Some(finished);
                break;
            }
            Attempt::NoListener(finished) => {
                // Never retry over a wrong result: the job itself must still have passed.
                assert_exit(&finished, 0, what);
                if let Err(problem) = check_results(&finished.stdout, 2, WORKERS, &example_checks())
                {
                    panic!("{what}: {problem}\n{}", finished.report());
                }
                eprintln!(
                    "{what}: attempt {attempt}: the listeners were not found in time\n{}",
                    finished.report()
                );
            }
        }
    }
    let done = done.unwrap_or_else(|| panic!("{what}: no listener found in 3 attempts"));
    let report = done.report();
    assert_exit(&done, 0, what);
    if let Err(problem) = check_results(&done.stdout, 2, WORKERS, &example_checks()) {
        panic!("{what}: {problem}\n{report}");
    }
    // Counted in the whole of stderr: forwarded output of two ranks need not keep lines whole.
    let dropped = done
        .stderr
        .matches("gossamer: tcp: dropped a connection from ")
        .count();
    assert_eq!(
        dropped, 4,
        "{what}: expected 4 `dropped a connection` reports (2 strangers × 2 ranks)\n{report}"
    );
    for reason in ["(wrong magic bytes)", "wrong job key"] {
        let count = done.stderr.matches(reason).count();
        assert_eq!(
            count, 2,
            "{what}: expected one `dropped a connection … {reason}` report per rank, got {count}\n{report}"
        );
    }
    eprintln!("{what}: the ranks reported:\n{}", done.stderr);
}
