use super::*;
/// `Config::from_vars` with only `name` set to `value`.
fn with(name: &str, value: Raw) -> Result<Config, Error> {
    Config::from_vars(|n| if n == name { value.clone() } else { None })
}

fn set(v: &str) -> Raw {
    Some(Ok(v.to_string()))
}

#[test]
fn settings_override_the_defaults_with_suffixes() {
    assert_eq!(with("GSM_PIN", None), Ok(Config::default()));
    assert_eq!(with("GSM_SLOT_SIZE", set("64k")).unwrap().slot_size, 65536);
    assert_eq!(
        with("GSM_STACK_SIZE", set("1M")).unwrap().stack_size,
        1 << 20
    );
    assert_eq!(with("GSM_THREADS", set(" 8 ")).unwrap().workers, 8);
    assert!(with("GSM_PIN", set("on")).unwrap().pin);
    assert_eq!(
        with("GSM_THREADS", set("  ")).unwrap().workers,
        Config::default().workers,
        "blank means the default"
    );
}

#[test]
fn bad_values_name_their_variable_and_range() {
    use std::os::unix::ffi::OsStringExt;
    let not_utf8 = Some(Err(OsString::from_vec(b"8\xff".to_vec())));
    match with("GSM_THREADS", not_utf8) {
        Err(Error::Env { name, reason, .. }) => {
            assert_eq!(
                (name, reason.as_str()),
                ("GSM_THREADS", "expected UTF-8 text")
            )
        }
        other => panic!("a value that is not UTF-8 was taken for {other:?}"),
    }
    for v in ["0", "99999999999999999999999", "5000", "two", "-1", "1k"] {
        match with("GSM_THREADS", set(v)) {
            Err(Error::Env { reason, value, .. }) => {
                assert_eq!(reason, "expected a whole number of workers from 1 to 4096");
                assert_eq!(value, v);
            }
            other => panic!("GSM_THREADS={v}: {other:?}"),
        }
    }
    for (name, v) in [
        ("GSM_STACK_SIZE", "16777216G"),
        ("GSM_STACK_SIZE", "16K"),
        ("GSM_SLOT_SIZE", "4000"),
        ("GSM_SLOT_SIZE", "3G"),
        ("GSM_PIN", "maybe"),
    ] {
        let e = with(name, set(v)).unwrap_err().to_string();
        assert!(
            e.contains(name) && e.contains("expected"),
            "{name}={v}: {e}"
        );
    }
    let e = Config::default().stack_size(usize::MAX).validate();
    assert!(
        matches!(&e, Err(Error::Config(m)) if m.contains("stack_size")),
        "{e:?}"
    );
    let e = Config::default().slot_size(4000).validate();
    assert!(
        matches!(&e, Err(Error::Config(m)) if m.contains("a multiple of 64")),
        "{e:?}"
    );
    assert_eq!(Config::default().workers(4096).validate(), Ok(()));
    assert!(Config::default().workers(4097).validate().is_err());
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
