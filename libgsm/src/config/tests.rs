use super::*;
#[test]
fn sizes_parse_with_suffixes() {
    assert_eq!(parse_size("4096"), Some(4096));
    assert_eq!(parse_size("64k"), Some(65536));
    assert_eq!(parse_size("1M"), Some(1 << 20));
    assert_eq!(parse_size("-1"), None);
    assert_eq!(parse_size("x"), None);
}
#[test]
fn bad_values_name_their_variable_and_range() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let not_utf8 = Err(std::env::VarError::NotUnicode(OsString::from_vec(
        b"8\xff".to_vec(),
    )));
    match var_value("GSM_THREADS", not_utf8) {
        Err(Error::Env { name, reason, .. }) => {
            assert_eq!((name, reason), ("GSM_THREADS", "not valid UTF-8"))
        }
        other => panic!("a value that is not UTF-8 was taken for {other:?}"),
    }
    assert_eq!(
        var_value("GSM_THREADS", Err(std::env::VarError::NotPresent)).ok(),
        Some(None)
    );
    let threads = |v: &str| {
        number_value(
            "GSM_THREADS",
            Some(v.into()),
            parse_count,
            "a count",
            workers_problem,
        )
    };
    assert_eq!(threads("").ok(), Some(None), "empty means the default");
    assert_eq!(threads(" ").ok(), Some(None), "blank means the default");
    assert_eq!(threads("3").ok(), Some(Some(3)));
    for (v, why) in [
        ("0", "expected 1 to 4096 workers"),
        ("99999999999999999999999", "expected 1 to 4096 workers"),
        ("5000", "expected 1 to 4096 workers"),
        ("two", "a count"),
        ("-1", "a count"),
    ] {
        match threads(v) {
            Err(Error::Env { reason, .. }) => assert_eq!(reason, why, "GSM_THREADS={v}"),
            other => panic!("GSM_THREADS={v}: {other:?}"),
        }
    }
    assert_eq!(parse_size("0"), Some(0), "zero is out of range, not junk");
    assert_eq!(parse_size("99999999999999999999999K"), Some(usize::MAX));
    assert!(stack_problem(parse_size("16777216G").unwrap()).is_some());
    assert_eq!(parse_count("1k"), None, "a count takes no suffix");
    assert_eq!(parse_count(" 8 "), Some(8));
    assert!(workers_problem(5000).is_some());
    assert!(stack_problem(usize::MAX).is_some());
    assert!(stack_problem(256 << 10).is_none());
    assert!(slot_problem(3 << 30).is_some());
    assert!(slot_problem(4000).is_some(), "not a multiple of 64");
    assert!(slot_problem(4096).is_none());
    let e = Config::default().stack_size(usize::MAX).validate();
    assert!(
        matches!(&e, Err(Error::Config(m)) if m.contains("stack_size")),
        "{e:?}"
    );
}

#[test]
fn ranks_sharing_an_unbound_host_share_its_cpus() {
    // Unbound (the mask is the whole host): the CPUs are divided, at least one each.
    assert_eq!(share_of_host(2, 2, Some(2)), 1);
    assert_eq!(share_of_host(16, 16, Some(4)), 4);
    assert_eq!(share_of_host(16, 16, Some(3)), 5);
    assert_eq!(share_of_host(2, 2, Some(8)), 1);
    // Alone on the host, or nothing known: all the CPUs it may use.
    assert_eq!(share_of_host(8, 8, Some(1)), 8);
    assert_eq!(share_of_host(8, 8, None), 8);
    // Bound by the launcher (a narrower mask): the mask as it is.
    assert_eq!(share_of_host(4, 16, Some(4)), 4);
    assert_eq!(share_of_host(1, 16, Some(16)), 1);
}

#[test]
fn memory_formula_matches_docs() {
    let c = Config::default().workers(16);
    assert_eq!(c.slot_memory_per_worker(), 2 << 20);
    assert_eq!(
        Config::default().workers(2).slot_memory_per_worker(),
        256 << 10
    );
}
