use super::*;

#[test]
fn a_long_failure_note_is_cut_at_a_character_and_says_so() {
    assert_eq!(cut_note("short", 100), "short");
    let long = "é".repeat(100);
    let note = cut_note(&long, 80);
    assert!(note.len() <= 80, "{} bytes", note.len());
    assert!(
        note.starts_with("éé") && note.ends_with("has all of it]"),
        "{note}"
    );
    let exact = "x".repeat(80);
    assert_eq!(cut_note(&exact, 80), exact);
}

#[test]
fn errors_can_cross_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<BootstrapError>();
}

#[test]
fn a_world_of_another_size_than_the_launcher_started_is_refused() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_string())
        }
    };
    // gsmrun's count comes first, then Open MPI's, then Hydra's.
    assert!(check_world(2, &env(&[("GSM_SIZE", "2"), ("PMI_SIZE", "1")])).is_ok());
    assert!(check_world(4, &env(&[("OMPI_COMM_WORLD_SIZE", "4")])).is_ok());
    assert!(check_world(1, &env(&[])).is_ok());
    assert!(check_world(1, &env(&[("PMI_SIZE", "not a number")])).is_ok());
    let e = check_world(1, &env(&[("PMI_SIZE", " 2 ")])).unwrap_err();
    assert!(
        matches!(
            e,
            BootstrapError::WorldMismatch {
                mpi: 1,
                launcher: 2,
                var: "PMI_SIZE"
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with(
            "MPI_Init made a job of 1 rank(s), but the launcher started 2 (PMI_SIZE=2): this \
             program's MPI library is not the one of its launcher"
        ),
        "{e}"
    );
}

#[test]
fn records_of_different_lengths_decode() {
    let a = encode_record(7, &BinaryId::FileHash(1), "alpha", b"").unwrap();
    let b = encode_record(8, &BinaryId::BuildId(vec![9; 20]), "b", &[5; 300]).unwrap();
    let counts = [a.len() as i32, b.len() as i32];
    let all = [a, b].concat();
    let peers = decode_records(&all, &counts).unwrap();
    assert_eq!(peers[0].pid, 7);
    assert_eq!(peers[0].hostname, "alpha");
    assert!(peers[0].endpoint.is_empty());
    assert_eq!(peers[1].rank, 1);
    assert_eq!(peers[1].endpoint, vec![5; 300]);
    assert!(matches!(
        decode_records(&all[..all.len() - 1], &counts),
        Err(BootstrapError::Malformed { rank: 1, .. })
    ));
}

#[test]
fn a_mismatch_names_hosts_ranks_and_identities() {
    let peer = |rank, host: &str, id| PeerInfo {
        rank,
        hostname: host.into(),
        pid: 1,
        binary_id: id,
        endpoint: Vec::new(),
    };
    let peers = [
        peer(0, "n0", BinaryId::BuildId(vec![0xaa; 4])),
        peer(1, "n0", BinaryId::BuildId(vec![0xaa; 4])),
        peer(2, "n1", BinaryId::FileHash(0x1234)),
    ];
    let err = check_same_build(&peers).unwrap_err().to_string();
    for part in [
        "rank 0 on host n0",
        "build-id aaaaaaaa",
        "rank 2 on host n1",
    ] {
        assert!(err.contains(part), "{err}");
    }
    assert!(
        err.contains("0000000000001234") && err.contains("same build"),
        "{err}"
    );
    assert!(!err.contains("rank 1"), "{err}");
    assert!(check_same_build(&peers[..2]).is_ok());
}
