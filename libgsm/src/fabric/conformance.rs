//! The fabric conformance suite: the same tests, run against every fabric of this build.
//!
//! A job of several ranks is simulated inside the test process: one thread per rank goes through
//! the fabric's phases (prepare, exchange, create, barrier, attach, barrier, sealed) exactly as
//! the runtime does, with a `std::sync::Barrier` standing in for MPI. The tests then use the ring
//! ends the fabric returned, from several threads, and check what a runtime relies on: every
//! (local worker, remote worker, lane) has both ends; bytes arrive exactly and in order, whatever
//! the length from 0 to a full slot; a full ring pushes back and then drains without loss; several
//! producers into one consumer keep their own orders; a bell wakes a sleeping consumer.
//!
//! Every wait is bounded (a test fails rather than hangs), and the simulated ranks' resources are
//! released when the test drops them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use super::{Doorbell, Fabric, FabricError, Hooks, Lane, Links, Peer, Settings, Topology};
use crate::wire::ring::{Consumer, Producer, RingLayout};

/// The limit on any single wait in these tests.
const PATIENCE: Duration = Duration::from_secs(30);

/// A fabric the suite opens by its type, through its own `prepare` (the runtime opens the
/// same through [`super::FABRICS`]); `conformance!` implements it.
pub(super) trait Open: Fabric + Sized + 'static {
    fn open(settings: &Settings) -> Result<(Self, Vec<u8>), FabricError>;
}

/// One simulated rank after set-up.
pub(super) struct Rank<F> {
    #[allow(
        dead_code,
        reason = "held so that the fabric lives as long as its ring ends"
    )]
    pub fabric: F,
    pub links: Links,
    pub topo: Topology,
    /// Rung by the fabric's `Hooks::wake` (index = local worker).
    pub woken: Arc<Vec<Doorbell>>,
    /// Failures the fabric reported.
    pub failures: Arc<Mutex<Vec<FabricError>>>,
}

impl<F> Rank<F> {
    pub fn take_out(&mut self, local: u32, remote: u32, lane: Lane) -> Producer {
        let i = self
            .links
            .outgoing
            .iter()
            .position(|l| l.local == local && l.remote == remote && l.lane == lane)
            .unwrap_or_else(|| panic!("no outgoing link {local} -> {remote} {lane:?}"));
        self.links.outgoing.swap_remove(i).producer
    }

    pub fn take_in(&mut self, local: u32, remote: u32, lane: Lane) -> Consumer {
        let i = self
            .links
            .incoming
            .iter()
            .position(|l| l.local == local && l.remote == remote && l.lane == lane)
            .unwrap_or_else(|| panic!("no incoming link {local} <- {remote} {lane:?}"));
        self.links.incoming.swap_remove(i).consumer
    }

    pub fn bell(&self, remote: u32) -> super::Bell {
        self.links
            .bells
            .iter()
            .find(|(g, _)| *g == remote)
            .map(|(_, b)| b.clone())
            .unwrap_or_else(|| panic!("no bell for remote worker {remote}"))
    }

    /// The bell local worker `local` rings after publishing to remote worker `remote` (for the
    /// fabrics whose workers write their own connections: `Links::worker_bells`).
    pub fn worker_bell(&self, local: u32, remote: u32) -> super::Bell {
        self.links
            .worker_bells
            .iter()
            .find(|(l, g, _)| *l == local && *g == remote)
            .map(|(_, _, bell)| bell.clone())
            .unwrap_or_else(|| panic!("no bell of worker {local} for remote worker {remote}"))
    }

    /// The progress hook of local worker `local` (`Links::progress`).
    pub fn progress_hook(&self, local: u32) -> super::Progress {
        self.links
            .progress
            .iter()
            .find(|(w, _)| *w == local)
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| panic!("no progress hook for local worker {local}"))
    }

    /// The doorbell a consumer of local worker `local` sleeps on.
    pub fn sleeper(&self, local: u32) -> Doorbell {
        match &self.links.local_bells {
            Some(b) => b[local as usize].clone(),
            None => self.woken[local as usize].clone(),
        }
    }
}

static JOBS: AtomicU64 = AtomicU64::new(0);

/// Waits until `f` holds, failing the test with `what` after 10 s (yielding in between, so a
/// fabric thread on the same CPU can run).
pub(super) fn within(what: &str, f: &mut dyn FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "{what}"
        );
        std::thread::yield_now();
    }
}

/// Sets up a job of `workers.len()` ranks in this process; rank `r` has `workers[r]` workers.
pub(super) fn job<F: Open>(workers: &[u32], layout: RingLayout) -> Vec<Rank<F>> {
    job_with(workers, layout, |_| {})
}

/// [`job`], with `after_prepare` called on each rank's fabric between its `prepare` and the
/// exchange (to change what a test needs changed, such as a listener's backlog).
pub(super) fn job_with<F: Open>(
    workers: &[u32],
    layout: RingLayout,
    after_prepare: fn(&F),
) -> Vec<Rank<F>> {
    let n = workers.len();
    let job_id = format!(
        "gsm-conf-{}-{}",
        std::process::id(),
        JOBS.fetch_add(1, Ordering::Relaxed)
    );
    let mut key = [0u8; crate::bootstrap::KEY_LEN];
    for (i, k) in key.iter_mut().enumerate() {
        *k = (i as u8).wrapping_mul(31).wrapping_add(7);
    }
    let barrier = Arc::new(Barrier::new(n));
    let endpoints: Arc<Mutex<Vec<Vec<u8>>>> = Arc::new(Mutex::new(vec![Vec::new(); n]));
    let handles: Vec<_> = (0..n as u32)
        .map(|rank| {
            let (barrier, endpoints) = (barrier.clone(), endpoints.clone());
            let topo = Topology {
                rank,
                workers: workers.to_vec(),
                hosts: vec!["localhost".to_string(); n],
                layout,
                job_id: job_id.clone(),
                key,
            };
            std::thread::spawn(move || -> Result<Rank<F>, FabricError> {
                let settings = Settings {
                    bind: Some(std::net::Ipv4Addr::LOCALHOST.into()),
                    connect_timeout: Duration::from_secs(10),
                };
                let prepared = F::open(&settings);
                if let Ok((f, e)) = &prepared {
                    after_prepare(f);
                    endpoints.lock().unwrap()[rank as usize] = e.clone();
                }
                // Every thread reaches every barrier, even after a failure, so none is left
                // waiting.
                barrier.wait();
                let (mut fabric, _) = match prepared {
                    Ok(p) => p,
                    Err(e) => {
                        barrier.wait();
                        barrier.wait();
                        return Err(e);
                    }
                };
                let peers: Vec<Peer> = endpoints
                    .lock()
                    .unwrap()
                    .iter()
                    .enumerate()
                    .filter(|(r, _)| *r as u32 != rank)
                    .map(|(r, e)| Peer {
                        rank: r as u32,
                        endpoint: e.clone(),
                    })
                    .collect();
                let local = topo.local_workers();
                let woken: Arc<Vec<Doorbell>> =
                    Arc::new((0..local).map(|_| Doorbell::heap()).collect());
                let failures = Arc::new(Mutex::new(Vec::new()));
                let (w2, f2) = (woken.clone(), failures.clone());
                let hooks = Hooks {
                    wake: Arc::new(move |l| w2[l as usize].ring()),
                    fail: Arc::new(move |e| f2.lock().unwrap().push(e)),
                };
                let created = fabric.create(&topo, &peers, hooks);
                barrier.wait();
                let links = created.and_then(|()| fabric.attach());
                barrier.wait();
                let links = links?;
                fabric.sealed();
                Ok(Rank {
                    fabric,
                    links,
                    topo,
                    woken,
                    failures,
                })
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| match h.join() {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => panic!("fabric set-up failed: {e}"),
            Err(_) => panic!("a simulated rank panicked during set-up"),
        })
        .collect()
}

fn layout(slots: u32, slot_size: u32) -> RingLayout {
    RingLayout::new(slots, slot_size).unwrap()
}

/// The bytes of message `seq` of stream `stream`, of length `len`.
fn fill(buf: &mut [u8], stream: u32, seq: u32) {
    let mut x = (u64::from(stream) << 32 | u64::from(seq)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for b in buf.iter_mut() {
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        *b = x as u8;
    }
}

fn len_of(stream: u32, seq: u32, slot_size: u32) -> usize {
    // Lengths cover 0, 1, a full slot and values in between.
    match seq % 7 {
        0 => 0,
        1 => slot_size as usize,
        2 => 1,
        _ => {
            ((u64::from(seq) * 2654435761 + u64::from(stream)) % u64::from(slot_size + 1)) as usize
        }
    }
}

/// Publishes `count` messages of stream `stream`, waiting (bounded) for space. Returns how many
/// times the ring was found full.
fn send(p: &mut Producer, bell: &super::Bell, stream: u32, count: u32) -> u64 {
    let slot_size = p.layout().slot_size;
    let mut full = 0;
    let start = Instant::now();
    for seq in 0..count {
        loop {
            if let Some(mut w) = p.try_reserve() {
                let len = len_of(stream, seq, slot_size);
                fill(&mut w.buf()[..len], stream, seq);
                w.publish(len as u32);
                bell.ring();
                break;
            }
            full += 1;
            assert!(
                start.elapsed() < PATIENCE,
                "stream {stream}: no free slot for {PATIENCE:?} at message {seq}"
            );
            std::thread::yield_now();
        }
    }
    full
}

/// Receives `count` messages of stream `stream` and checks each byte.
fn receive(c: &mut Consumer, stream: u32, count: u32) {
    let slot_size = c.layout().slot_size;
    let start = Instant::now();
    let mut expect = vec![0u8; slot_size as usize];
    for seq in 0..count {
        loop {
            match c.try_poll() {
                Ok(Some(r)) => {
                    let len = len_of(stream, seq, slot_size);
                    fill(&mut expect[..len], stream, seq);
                    assert_eq!(
                        r.bytes().len(),
                        len,
                        "stream {stream} message {seq}: length"
                    );
                    assert!(
                        r.bytes() == &expect[..len],
                        "stream {stream} message {seq}: bytes"
                    );
                    break;
                }
                Ok(None) => {
                    assert!(
                        start.elapsed() < PATIENCE,
                        "stream {stream}: message {seq} did not arrive within {PATIENCE:?}"
                    );
                    std::thread::yield_now();
                }
                Err(e) => panic!("stream {stream}: {e}"),
            }
        }
    }
}

/// Every (local, remote, lane) pair has both ends and every remote worker a bell.
pub(super) fn every_pair_has_both_ends<F: Open>() {
    let workers = [2, 1, 3];
    let ranks = job::<F>(&workers, layout(4, 256));
    for r in &ranks {
        let t = &r.topo;
        let remote: Vec<u32> = (0..t.ranks())
            .filter(|&p| p != t.rank)
            .flat_map(|p| t.workers_of(p))
            .collect();
        for local in 0..t.local_workers() {
            for &g in &remote {
                for lane in [Lane::Request, Lane::Response] {
                    let n_out = r
                        .links
                        .outgoing
                        .iter()
                        .filter(|l| l.local == local && l.remote == g && l.lane == lane)
                        .count();
                    let n_in = r
                        .links
                        .incoming
                        .iter()
                        .filter(|l| l.local == local && l.remote == g && l.lane == lane)
                        .count();
                    assert_eq!(
                        (n_out, n_in),
                        (1, 1),
                        "rank {} local {local} remote {g} {lane:?}",
                        t.rank
                    );
                }
            }
        }
        let expected = t.local_workers() as usize * remote.len() * 2;
        assert_eq!(r.links.outgoing.len(), expected);
        assert_eq!(r.links.incoming.len(), expected);
        for &g in &remote {
            assert!(
                r.links.bells.iter().any(|(b, _)| *b == g),
                "no bell for {g}"
            );
        }
        if let Some(b) = &r.links.local_bells {
            assert_eq!(b.len(), t.local_workers() as usize);
        }
        assert!(r.failures.lock().unwrap().is_empty());
    }
}

/// Bytes arrive exactly and in order on both lanes, in both directions.
pub(super) fn ordered_exact_bytes<F: Open>() {
    let mut ranks = job::<F>(&[1, 2], layout(8, 512));
    let (a, b) = ranks.split_at_mut(1);
    let (r0, r1) = (&mut a[0], &mut b[0]);
    // rank 0 worker 0 (global 0) <-> rank 1 worker 1 (global 2).
    let mut req_out = r0.take_out(0, 2, Lane::Request);
    let mut req_in = r1.take_in(1, 0, Lane::Request);
    let mut resp_out = r1.take_out(1, 0, Lane::Response);
    let mut resp_in = r0.take_in(0, 2, Lane::Response);
    let (bell_to_1, bell_to_0) = (r0.bell(2), r1.bell(0));
    std::thread::scope(|s| {
        s.spawn(|| send(&mut req_out, &bell_to_1, 1, 3000));
        s.spawn(|| receive(&mut req_in, 1, 3000));
        s.spawn(|| send(&mut resp_out, &bell_to_0, 2, 3000));
        s.spawn(|| receive(&mut resp_in, 2, 3000));
    });
    for r in &ranks {
        assert!(r.failures.lock().unwrap().is_empty());
    }
}

/// A ring whose consumer does not read fills up (the producer sees it full), and then everything
/// arrives in order once the consumer reads.
pub(super) fn full_ring_pushes_back_then_drains<F: Open>() {
    let mut ranks = job::<F>(&[1, 1], layout(4, 64));
    let (a, b) = ranks.split_at_mut(1);
    let mut p = a[0].take_out(0, 1, Lane::Request);
    let mut c = b[0].take_in(0, 0, Lane::Request);
    let bell = a[0].bell(1);
    // Publish without reading until the producer sees no free slot for a while (a fabric may
    // buffer in between, e.g. TCP's socket buffers, but not without bound).
    let mut published = 0u32;
    let mut stuck_since: Option<Instant> = None;
    let start = Instant::now();
    loop {
        match p.try_reserve() {
            Some(mut w) => {
                let len = len_of(7, published, 64);
                fill(&mut w.buf()[..len], 7, published);
                w.publish(len as u32);
                bell.ring();
                published += 1;
                stuck_since = None;
                assert!(
                    published < 5_000_000,
                    "no back-pressure after {published} slots"
                );
            }
            None => {
                let since = *stuck_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(300) {
                    break;
                }
                std::thread::yield_now();
            }
        }
        assert!(
            start.elapsed() < PATIENCE,
            "back-pressure test did not settle"
        );
    }
    assert!(
        published >= 4,
        "only {published} slots fit before the ring was full"
    );
    // Now read everything and keep sending more.
    let more = 200;
    std::thread::scope(|s| {
        s.spawn(|| {
            let start = Instant::now();
            for seq in published..published + more {
                loop {
                    if let Some(mut w) = p.try_reserve() {
                        let len = len_of(7, seq, 64);
                        fill(&mut w.buf()[..len], 7, seq);
                        w.publish(len as u32);
                        bell.ring();
                        break;
                    }
                    assert!(start.elapsed() < PATIENCE);
                    std::thread::yield_now();
                }
            }
        });
        s.spawn(|| receive(&mut c, 7, published + more));
    });
}

/// Several producers (workers of one rank, and of two ranks) into one consumer worker: each
/// stream keeps its order and nothing is lost.
pub(super) fn concurrent_producers<F: Open>() {
    let mut ranks = job::<F>(&[2, 1, 1], layout(8, 256));
    // Target: rank 1's worker (global 2). Producers: globals 0 and 1 (rank 0) and 3 (rank 2).
    let mut ins: Vec<(u32, Consumer)> = [0u32, 1, 3]
        .iter()
        .map(|&g| (g, ranks[1].take_in(0, g, Lane::Request)))
        .collect();
    let mut outs: Vec<(u32, Producer, super::Bell)> = Vec::new();
    for (rank, local, g) in [(0usize, 0u32, 0u32), (0, 1, 1), (2, 0, 3)] {
        let p = ranks[rank].take_out(local, 2, Lane::Request);
        outs.push((g, p, ranks[rank].bell(2)));
    }
    let count = 2000;
    std::thread::scope(|s| {
        for (g, p, bell) in outs.iter_mut() {
            let g = *g;
            s.spawn(move || send(p, bell, 100 + g, count));
        }
        s.spawn(|| {
            // One consumer thread polls all three rings, as a worker does.
            let mut next = [0u32; 3];
            let mut expect = vec![0u8; 256];
            let start = Instant::now();
            while next.iter().any(|&n| n < count) {
                for (i, (g, c)) in ins.iter_mut().enumerate() {
                    if next[i] == count {
                        continue;
                    }
                    match c.try_poll() {
                        Ok(Some(r)) => {
                            let (stream, seq) = (100 + *g, next[i]);
                            let len = len_of(stream, seq, 256);
                            fill(&mut expect[..len], stream, seq);
                            assert!(r.bytes() == &expect[..len], "stream {stream} message {seq}");
                            next[i] += 1;
                        }
                        Ok(None) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
                assert!(start.elapsed() < PATIENCE, "stuck at {next:?}");
                std::thread::yield_now();
            }
        });
    });
}

/// A consumer asleep on its doorbell wakes up when a producer publishes and rings.
pub(super) fn bells_wake_sleepers<F: Open>() {
    let mut ranks = job::<F>(&[1, 1], layout(4, 128));
    let (a, b) = ranks.split_at_mut(1);
    let mut p = a[0].take_out(0, 1, Lane::Request);
    let mut c = b[0].take_in(0, 0, Lane::Request);
    let bell = a[0].bell(1);
    let sleeper = b[0].sleeper(0);
    for round in 0..20u32 {
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let start = Instant::now();
                loop {
                    if let Some(r) = c.try_poll().expect("ring") {
                        assert_eq!(r.bytes(), &round.to_le_bytes());
                        return start.elapsed();
                    }
                    assert!(start.elapsed() < PATIENCE, "round {round}: nothing arrived");
                    sleeper.sleep(Duration::from_secs(10), || !c.has_data());
                }
            });
            // Let the consumer fall asleep, then publish and ring once.
            let t = Instant::now();
            while !sleeper.is_sleeping() && t.elapsed() < Duration::from_secs(2) {
                std::thread::yield_now();
            }
            let mut w = p.try_reserve().expect("a free slot");
            w.buf()[..4].copy_from_slice(&round.to_le_bytes());
            w.publish(4);
            bell.ring();
            let waited = waiter.join().unwrap();
            assert!(
                waited < Duration::from_secs(5),
                "round {round}: woke after {waited:?}"
            );
        });
    }
}

/// Records as the runtime sends them: many small requests batched per slot, a 1 MiB request
/// streamed through consecutive slots, and more small ones after it, all decoded in order on the
/// other side with the checks a worker applies to slots from another rank.
pub(super) fn records_batch_and_stream<F: Open>() {
    use crate::wire::record::{Large, OutQueue, Partial, RequestReader, Sink, Src, classify};
    let mut ranks = job::<F>(&[1, 1], layout(8, 1024));
    let (a, b) = ranks.split_at_mut(1);
    let p = a[0].take_out(0, 1, Lane::Request);
    let mut c = b[0].take_in(0, 0, Lane::Request);
    let bell = a[0].bell(1);
    let big: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let small = 3000u32;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut q = OutQueue::new(1024, Sink::Ring(Box::new(p)), true);
            for i in 0..small {
                q.push_request(Some(0x100), i, 1, i, Src::slice(&i.to_le_bytes()), None, 0);
                if i == small / 2 {
                    q.push_request(
                        Some(0x200),
                        7,
                        7,
                        u32::MAX,
                        Src::slice(&[9; 5]),
                        Some(Src::slice(&big)),
                        0,
                    );
                }
                if q.backlog() > 4 {
                    q.flush_sealed();
                    bell.ring();
                }
            }
            let start = Instant::now();
            loop {
                q.flush();
                bell.ring();
                if !q.is_dirty() {
                    break;
                }
                assert!(
                    start.elapsed() < PATIENCE,
                    "the sender could not drain its queue"
                );
                std::thread::yield_now();
            }
        });
        s.spawn(|| {
            let start = Instant::now();
            let (mut next, mut got_big, mut slots) = (0u32, false, 0u32);
            let mut partial = None;
            while next < small || !got_big {
                let slot = match c.try_poll() {
                    Ok(Some(slot)) => slot,
                    Ok(None) => {
                        assert!(start.elapsed() < PATIENCE, "stuck at record {next}");
                        std::thread::yield_now();
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                };
                slots += 1;
                let bytes = slot.bytes_uninit();
                match classify(bytes) {
                    Large::Batch => {
                        // SAFETY: a batch from the peer's encoder, read without pointers.
                        let r = unsafe { RequestReader::new(bytes, false) }.expect("a batch");
                        for rec in r {
                            assert_eq!(rec.req, next, "records out of order");
                            // SAFETY: small records carry the 4 initialised bytes of `next`.
                            let v = unsafe {
                                std::ptr::read_unaligned(rec.cap().as_ptr().cast::<u32>())
                            };
                            assert_eq!(v, next);
                            next += 1;
                        }
                    }
                    piece => {
                        if let Some(done) =
                            Partial::feed(&mut partial, piece, true).expect("a valid piece")
                        {
                            assert_eq!(done.code, 0x200);
                            assert_eq!(next, small / 2 + 1, "the large record kept its place");
                            let rec = done.into_request();
                            assert_eq!((rec.req, rec.idx, rec.cap_len), (u32::MAX, 7, 5));
                            // SAFETY: the streamed body is initialised bytes.
                            let arg: Vec<u8> = rec
                                .arg()
                                .iter()
                                .map(|b| unsafe { b.assume_init() })
                                .collect();
                            assert!(arg == big, "the 1 MiB argument differs");
                            got_big = true;
                        }
                    }
                }
            }
            assert!(
                slots as usize > (1 << 20) / 1024,
                "only {slots} slots: the large record was not streamed"
            );
        });
    });
}

macro_rules! conformance {
    ($name:ident, $fabric:ty) => {
        impl Open for $fabric {
            fn open(settings: &Settings) -> Result<(Self, Vec<u8>), FabricError> {
                <$fabric>::prepare(settings)
            }
        }

        mod $name {
            #[test]
            fn every_pair_has_both_ends() {
                super::every_pair_has_both_ends::<$fabric>();
            }
            #[test]
            fn ordered_exact_bytes() {
                super::ordered_exact_bytes::<$fabric>();
            }
            #[test]
            fn full_ring_pushes_back_then_drains() {
                super::full_ring_pushes_back_then_drains::<$fabric>();
            }
            #[test]
            fn concurrent_producers() {
                super::concurrent_producers::<$fabric>();
            }
            #[test]
            fn bells_wake_sleepers() {
                super::bells_wake_sleepers::<$fabric>();
            }
            #[test]
            fn records_batch_and_stream() {
                super::records_batch_and_stream::<$fabric>();
            }
        }
    };
}

conformance!(shm, crate::fabric::shm::Shm);
conformance!(tcp, crate::fabric::tcp::Tcp);
#[cfg(feature = "ofi")]
conformance!(ofi, crate::fabric::ofi::Ofi);
