//! Tests of the shm fabric beyond the conformance suite: a segment's mode and life cycle, a
//! leftover segment, a corrupt or missing peer segment refused with a message naming it, the
//! documented size, and the host boards.

use std::sync::atomic::{AtomicU64, Ordering};

use super::layout::*;
use super::*;
use crate::board::BOARD_BYTES;
use crate::wire::ring::RingLayout;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

static N: AtomicU64 = AtomicU64::new(0);

fn job_id() -> String {
    format!(
        "gsm-test-shm-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn path(job: &str, rank: u32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/{}", segment_name(job, rank)))
}

fn topo(job: &str, rank: u32, workers: &[u32]) -> Topology {
    Topology {
        rank,
        workers: workers.to_vec(),
        hosts: vec!["localhost".into(); workers.len()],
        layout: RingLayout::new(4, 128).unwrap(),
        job_id: job.to_string(),
        key: [0; crate::bootstrap::KEY_LEN],
    }
}

fn hooks() -> Hooks {
    Hooks {
        wake: Arc::new(|_| {}),
        fail: Arc::new(|_| {}),
    }
}

fn peers(rank: u32, n: u32) -> Vec<Peer> {
    (0..n)
        .filter(|&r| r != rank)
        .map(|r| Peer {
            rank: r,
            endpoint: Vec::new(),
        })
        .collect()
}

/// Creates every rank's segment (create never waits, so one thread does), without attaching.
fn created(job: &str, workers: &[u32]) -> Vec<Shm> {
    let n = workers.len() as u32;
    (0..n)
        .map(|r| {
            let (mut s, _) = Shm::prepare(&Settings::default()).unwrap();
            s.create(&topo(job, r, workers), &peers(r, n), hooks())
                .unwrap();
            s
        })
        .collect()
}

#[test]
fn segment_is_private_while_set_up_and_gone_after_sealed() {
    let job = job_id();
    let mut ranks = created(&job, &[2, 1]);
    for r in 0..2 {
        let meta = std::fs::metadata(path(&job, r)).expect("segment exists after create");
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600, "rank {r}");
        assert!(meta.len() > 0);
    }
    let links: Vec<Links> = ranks.iter_mut().map(|s| s.attach().unwrap()).collect();
    assert!(path(&job, 0).exists() && path(&job, 1).exists());
    for s in &mut ranks {
        s.sealed();
    }
    assert!(!path(&job, 0).exists() && !path(&job, 1).exists());
    // The rings still work after the names are gone: one slot from rank 1 to rank 0.
    let mut links = links;
    let (a, b) = links.split_at_mut(1);
    let i = b[0]
        .outgoing
        .iter()
        .position(|l| l.remote == 1 && l.lane == Lane::Request)
        .unwrap();
    let mut w = b[0].outgoing[i].producer.try_reserve().unwrap();
    w.buf()[..3].copy_from_slice(b"abc");
    w.publish(3);
    let j = a[0]
        .incoming
        .iter()
        .position(|l| l.local == 1 && l.remote == 2 && l.lane == Lane::Request)
        .unwrap();
    let r = a[0].incoming[j].consumer.try_poll().unwrap().unwrap();
    assert_eq!(r.bytes(), b"abc");
}

#[test]
fn a_second_create_with_the_same_id_fails_and_leaves_the_first_alone() {
    let job = job_id();
    let t = topo(&job, 0, &[1, 1]);
    let (mut first, _) = Shm::prepare(&Settings::default()).unwrap();
    first.create(&t, &peers(0, 2), hooks()).unwrap();
    let (mut second, _) = Shm::prepare(&Settings::default()).unwrap();
    let err = second.create(&t, &peers(0, 2), hooks()).unwrap_err();
    let msg = err.to_string();
    let p = path(&job, 0);
    assert!(msg.contains(&p.display().to_string()), "{msg}");
    assert!(msg.contains("already exists"), "{msg}");
    assert!(msg.contains("previous job"), "{msg}");
    drop(second);
    assert!(p.exists(), "the failed create removed the first's segment");
    drop(first);
    assert!(!p.exists());
}

#[test]
fn dropping_without_sealing_removes_the_segment() {
    let job = job_id();
    let ranks = created(&job, &[1, 2, 1]);
    for r in 0..3 {
        assert!(path(&job, r).exists());
    }
    drop(ranks);
    for r in 0..3 {
        assert!(!path(&job, r).exists(), "rank {r}'s segment is left");
    }
}

/// Corrupts rank 1's segment with `damage`, then rank 0 attaches: it must get an error
/// naming rank 1, and not crash.
fn refused(what: &str, damage: impl FnOnce(&mut std::fs::File)) -> String {
    let job = job_id();
    let mut ranks = created(&job, &[2, 2]);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path(&job, 1))
        .unwrap();
    damage(&mut f);
    drop(f);
    let err = ranks[0]
        .attach()
        .expect_err(&format!("{what}: attach succeeded"));
    let msg = err.to_string();
    assert!(msg.contains("rank 1"), "{what}: {msg}");
    assert!(
        msg.contains(&path(&job, 1).display().to_string()),
        "{what}: {msg}"
    );
    drop(ranks);
    assert!(!path(&job, 0).exists() && !path(&job, 1).exists());
    msg
}

fn write_at(f: &mut std::fs::File, off: u64, bytes: &[u8]) {
    f.seek(SeekFrom::Start(off)).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn a_corrupt_peer_segment_is_refused() {
    let m = refused("garbage header", |f| {
        write_at(f, 0, &[0xA5; HEADER_BYTES]);
    });
    assert!(m.contains("not a Gossamer shm segment"), "{m}");
    let m = refused("wrong version", |f| {
        write_at(f, H_VERSION as u64, &99u32.to_ne_bytes())
    });
    assert!(m.contains("version"), "{m}");
    let m = refused("not ready", |f| write_at(f, H_READY as u64, &[0; 4]));
    assert!(m.contains("ready"), "{m}");
    let m = refused("wrong rank", |f| {
        write_at(f, H_RANK as u64, &7u32.to_ne_bytes())
    });
    assert!(m.contains("rank 7"), "{m}");
    let m = refused("huge ring count", |f| {
        write_at(f, H_RINGS as u64, &u32::MAX.to_ne_bytes())
    });
    assert!(m.contains("ring count"), "{m}");
    let m = refused("table elsewhere", |f| {
        write_at(f, H_TABLE as u64, &(1u64 << 40).to_ne_bytes())
    });
    assert!(m.contains("header places"), "{m}");
    let m = refused("board elsewhere", |f| {
        write_at(f, H_BOARD as u64, &8u64.to_ne_bytes())
    });
    assert!(m.contains("header places"), "{m}");
    let m = refused("smaller board", |f| {
        write_at(f, H_BOARD_LEN as u64, &4096u64.to_ne_bytes())
    });
    assert!(m.contains("header places"), "{m}");
    let m = refused("truncated", |f| f.set_len(4096).unwrap());
    assert!(m.contains("bytes long"), "{m}");
    let m = refused("tiny", |f| f.set_len(16).unwrap());
    assert!(m.contains("header"), "{m}");
    // First table entry: 128 + 2 doorbells × 64 = 256.
    let table = (HEADER_BYTES + 2 * BELL_STRIDE) as u64;
    let m = refused("ring outside", |f| {
        write_at(f, table + E_OFFSET as u64, &(u64::MAX - 8).to_ne_bytes())
    });
    assert!(m.contains("ring table entry 0"), "{m}");
    let m = refused("misaligned ring", |f| {
        let mut b = [0u8; 8];
        use std::io::Read;
        f.seek(SeekFrom::Start(table + E_OFFSET as u64)).unwrap();
        f.read_exact(&mut b).unwrap();
        let off = u64::from_ne_bytes(b) + 8;
        write_at(f, table + E_OFFSET as u64, &off.to_ne_bytes())
    });
    assert!(m.contains("ring table entry 0"), "{m}");
    let m = refused("bad lane", |f| {
        write_at(f, table + E_LANE as u64, &5u32.to_ne_bytes())
    });
    assert!(m.contains("lane 5"), "{m}");
    let m = refused("duplicate ring", |f| {
        // Entry 1 (the response ring of the same pair) claims to be a request ring too.
        write_at(
            f,
            table + (ENTRY_BYTES + E_LANE) as u64,
            &0u32.to_ne_bytes(),
        )
    });
    assert!(m.contains("second"), "{m}");
    let m = refused("bad producer", |f| {
        write_at(f, table + E_PRODUCER as u64, &3u32.to_ne_bytes())
    });
    assert!(m.contains("producer worker 3"), "{m}");
    let m = refused("loose permissions", |f| {
        f.set_permissions(std::fs::Permissions::from_mode(0o644))
            .unwrap()
    });
    assert!(m.contains("mode 600"), "{m}");
}

#[test]
fn a_missing_peer_segment_is_a_clear_error() {
    let job = job_id();
    let mut ranks = created(&job, &[1, 1]);
    std::fs::remove_file(path(&job, 1)).unwrap();
    let msg = ranks[0].attach().unwrap_err().to_string();
    assert!(
        msg.contains("rank 1") && msg.contains("did not create it"),
        "{msg}"
    );
}

#[test]
fn bad_job_ids_are_refused_before_touching_dev_shm() {
    for bad in ["", "a/b", &"x".repeat(300)] {
        let (mut s, _) = Shm::prepare(&Settings::default()).unwrap();
        let err = s.create(&topo(bad, 0, &[1, 1]), &peers(0, 2), hooks());
        assert!(matches!(err, Err(FabricError::Choice { .. })), "{bad:?}");
    }
}

#[test]
fn the_segment_size_follows_the_documented_formula() {
    let job = job_id();
    let workers = [3, 2, 1];
    let ranks = created(&job, &workers);
    let b = RingLayout::new(4, 128).unwrap().bytes();
    assert_eq!(b, 128 + 4 * (128 + 64));
    for (r, &l) in workers.iter().enumerate() {
        let others: usize = workers.iter().map(|&w| w as usize).sum::<usize>() - l as usize;
        let rings = 2 * l as usize * others;
        let head = (128 + 64 * l as usize).div_ceil(64) * 64 + 32 * rings;
        let expected = (head.div_ceil(128) * 128 + rings * b).div_ceil(4096) * 4096 + (4 << 20);
        let len = std::fs::metadata(path(&job, r as u32)).unwrap().len();
        assert_eq!(len as usize, expected, "rank {r}");
    }
    drop(ranks);
}

#[test]
fn every_rank_maps_every_host_board_and_sees_the_same_bytes() {
    let job = job_id();
    let mut ranks = created(&job, &[2, 1, 1]);
    let links: Vec<Links> = ranks.iter_mut().map(|s| s.attach().unwrap()).collect();
    let boards: Vec<crate::board::Board> = links
        .into_iter()
        .enumerate()
        .map(|(r, l)| {
            let mut seen: Vec<usize> = l.boards.iter().map(|b| b.0).collect();
            seen.sort_unstable();
            assert_eq!(seen, vec![0, 1, 2], "rank {r} maps every board");
            crate::board::Board::new(r, vec![1, 2, 3], l.boards, vec![vec![false; 3]; 3])
        })
        .collect();
    // Each rank writes a word of its own board; every rank reads every rank's word.
    for (r, b) in boards.iter().enumerate() {
        let own = b.region(r).unwrap();
        assert_eq!(own.len(), BOARD_BYTES);
        assert_eq!(
            own.word(BOARD_BYTES - 8).load(Ordering::Relaxed),
            0,
            "zeroed"
        );
        own.word(BOARD_BYTES - 8)
            .store(0x100 + r as u64, Ordering::Release);
    }
    for b in &boards {
        for r in 0..3 {
            let word = b.region(r).unwrap().word(BOARD_BYTES - 8);
            assert_eq!(word.load(Ordering::Acquire), 0x100 + r as u64);
        }
        assert!(!b.can_copy(0, 1), "nothing was probed");
        assert!(
            b.read_from(b.rank(), 0, &mut [0u8; 1]).is_err(),
            "not oneself"
        );
    }
    for s in &mut ranks {
        s.sealed();
    }
}

#[test]
fn a_board_word_outside_the_board_is_refused() {
    let job = job_id();
    let mut ranks = created(&job, &[1, 1]);
    let mut links: Vec<Links> = ranks.iter_mut().map(|s| s.attach().unwrap()).collect();
    let b = crate::board::Board::new(0, vec![1, 2], std::mem::take(&mut links[0].boards), vec![]);
    let region = b.region(1).unwrap();
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| region.word(BOARD_BYTES)))
            .is_err()
    );
    assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| region.word(4))).is_err());
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(
            || region.ptr(BOARD_BYTES - 4, 8)
        ))
        .is_err()
    );
    assert!(b.region(2).is_none());
    for s in &mut ranks {
        s.sealed();
    }
}
