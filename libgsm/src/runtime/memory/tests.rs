use super::*;

#[test]
fn the_rings_of_a_host_grow_with_the_whole_job() {
    const GIB: u128 = 1 << 30;
    let layout = RingLayout {
        slots: 16,
        slot_size: 64 << 20,
    };
    let hosts = |h: &[&str]| h.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // Two ranks of three workers on one host: 2 x 6 x 5 rings of 1 GiB consumed there.
    let one_host = hosts(&["a", "a"]);
    assert!(job_rings_fit(&[3, 3], &one_host, "a", layout, Some(60 * GIB)).is_ok());
    let e = job_rings_fit(&[3, 3], &one_host, "a", layout, Some(59 * GIB)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid gossamer configuration: the job's 6 workers with 16 slots of 67108864 bytes \
         per ring need at least 60 GiB of rings on host a (2 rank(s), 6 workers there), more \
         than its 59 GiB of memory; lower the workers per rank, slots_per_ring or slot_size \
         (gsmrun -t, GSM_THREADS, GSM_SLOT_SIZE), or spread the ranks over more hosts"
    );
    // Spread over two hosts, each holds the rings its own workers consume: 2 x 3 x 5.
    let two_hosts = hosts(&["a", "b"]);
    assert!(job_rings_fit(&[3, 3], &two_hosts, "b", layout, Some(30 * GIB)).is_ok());
    assert!(job_rings_fit(&[3, 3], &two_hosts, "b", layout, Some(29 * GIB)).is_err());
    // Memory unknown: nothing to check against.
    assert!(job_rings_fit(&[3, 3], &one_host, "a", layout, None).is_ok());
}
