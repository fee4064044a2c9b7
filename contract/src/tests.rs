//! Tests of the table, the reader, the launcher's check, the contract and the generated page.

use crate::contract::{
    FABRIC_WORDS, FabricChoice, FabricKind, Stage, is_job_segment, segment_name, tcp_segment_name,
};
use crate::setting::{Fallback, Kind, Layer, Setting};
use crate::{CheckError, check, get_from, suggest, table};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

fn set(v: &str) -> Option<Result<String, OsString>> {
    Some(Ok(v.to_string()))
}

#[test]
fn every_setting_is_named_once_with_a_default_it_allows() {
    let mut names: Vec<&str> = table::ALL.iter().map(|s| s.name).collect();
    assert!(names.iter().all(|n| n.starts_with("GSM_") && n.len() > 4));
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "a setting is listed twice");
    for s in table::ALL {
        if let Fallback::Value(d) = s.default {
            assert!(
                s.kind.parse(d).is_ok(),
                "{}'s default {d:?} is not allowed",
                s.name
            );
        }
        assert!(!s.doc.is_empty(), "{} has no doc", s.name);
        assert_eq!(table::find(s.name), Some(s));
    }
    assert_eq!(table::find("GSM_NOPE"), None);
}

#[test]
fn unset_or_blank_is_the_default_and_a_set_value_wins() {
    let slot = |raw| get_from::<usize>(&table::SLOT_SIZE, raw);
    assert_eq!(slot(None), Ok(4096));
    assert_eq!(slot(set("  ")), Ok(4096));
    assert_eq!(slot(set("64K")), Ok(65536));
    assert_eq!(slot(set(" 1m ")), Ok(1 << 20));
    assert_eq!(get_from::<bool>(&table::PIN, None), Ok(false));
    assert_eq!(get_from::<bool>(&table::PIN, set("YES")), Ok(true));
    assert_eq!(get_from::<Option<usize>>(&table::THREADS, None), Ok(None));
    assert_eq!(
        get_from::<Option<usize>>(&table::THREADS, set("3")),
        Ok(Some(3))
    );
    assert_eq!(
        get_from::<Duration>(&table::STALL_REPORT, set("0.5")),
        Ok(Duration::from_millis(500))
    );
    assert_eq!(get_from::<&str>(&table::FABRIC, set("TCP")), Ok("tcp"));
    assert_eq!(
        get_from::<Option<std::net::IpAddr>>(&table::TCP_BIND, set("10.0.0.1")),
        Ok(Some([10, 0, 0, 1].into()))
    );
}

#[test]
fn a_bad_value_names_the_variable_the_value_and_what_is_allowed() {
    let e = get_from::<usize>(&table::SLOT_SIZE, set("4000")).unwrap_err();
    assert_eq!((e.name, e.value.as_str()), ("GSM_SLOT_SIZE", "4000"));
    assert_eq!(
        e.expected,
        "expected 256 bytes to 64 MiB (K/M/G suffixes), a multiple of 64"
    );
    assert_eq!(
        e.to_string(),
        "GSM_SLOT_SIZE=\"4000\" is not valid: expected 256 bytes to 64 MiB (K/M/G suffixes), a \
         multiple of 64"
    );
    for v in ["0", "5000", "1k", "two", "-1", "99999999999999999999999"] {
        let e = get_from::<Option<usize>>(&table::THREADS, set(v)).unwrap_err();
        assert_eq!(
            e.expected, "expected a whole number of workers from 1 to 4096",
            "{v}"
        );
    }
    let e = get_from::<bool>(&table::PIN, set("maybe")).unwrap_err();
    assert_eq!(e.expected, "expected 1/true/on/yes or 0/false/off/no");
    let e = get_from::<usize>(&table::COLL_PIECE, set("0")).unwrap_err();
    assert!(
        e.expected.contains("at least 1 byte,") || e.expected.ends_with("at least 1 byte"),
        "{e}"
    );
    let e = get_from::<usize>(&table::STACK_SIZE, set("16777216G")).unwrap_err();
    assert_eq!(e.expected, "expected 64 KiB to 1 GiB (K/M/G suffixes)");
    let not_utf8 = Some(Err(OsString::from_vec(b"8\xff".to_vec())));
    let e = get_from::<Option<usize>>(&table::THREADS, not_utf8).unwrap_err();
    assert_eq!(
        (e.name, e.expected.as_str()),
        ("GSM_THREADS", "expected UTF-8 text")
    );
}

#[test]
#[should_panic(
    expected = "GSM_THREADS (count) cannot be read as a number (it has no fixed default)"
)]
fn reading_a_setting_without_a_fixed_default_as_a_bare_value_is_a_bug() {
    let _ = get_from::<usize>(&table::THREADS, None);
}

#[test]
fn the_launcher_s_check_refuses_unknown_names_and_bad_values() {
    assert_eq!(check("PATH", "anything"), Ok(()));
    assert_eq!(check("GSM_SLOT_SIZE", "8K"), Ok(()));
    assert_eq!(
        check("GSM_SLOT_SIZE", ""),
        Ok(()),
        "blank means the default"
    );
    assert_eq!(
        check("GSM_SLOTSIZE", "8K"),
        Err(CheckError::Unknown {
            name: "GSM_SLOTSIZE".into(),
            suggestion: Some("GSM_SLOT_SIZE")
        })
    );
    let e = check("GSM_SLOTSIZE", "8K").unwrap_err().to_string();
    assert_eq!(
        e,
        "GSM_SLOTSIZE is not a Gossamer setting; did you mean GSM_SLOT_SIZE?"
    );
    let e = check("GSM_WHATEVER", "1").unwrap_err().to_string();
    assert_eq!(
        e,
        "GSM_WHATEVER is not a Gossamer setting (docs/settings.md lists them)"
    );
    match check("GSM_FABRIC", "udp") {
        Err(CheckError::Invalid(e)) => {
            assert_eq!((e.name, e.value.as_str()), ("GSM_FABRIC", "udp"));
            assert!(e.expected.contains("auto, shm, tcp, ofi, verbs"), "{e}");
        }
        other => panic!("GSM_FABRIC=udp: {other:?}"),
    }
}

#[test]
fn suggestions_are_close_names_only() {
    assert_eq!(suggest("GSM_THREAD"), Some("GSM_THREADS"));
    assert_eq!(suggest("gsm_threads"), Some("GSM_THREADS"));
    assert_eq!(suggest("GSM_COLL_PEICE"), Some("GSM_COLL_PIECE"));
    assert_eq!(suggest("GSM_FABRICS"), Some("GSM_FABRIC"));
    assert_eq!(suggest("GSM_X"), None);
    assert_eq!(suggest("GSM_TOTALLY_ELSE"), None);
    assert_eq!(crate::read::distance("kitten", "sitting"), 3);
}

#[test]
fn kinds_describe_what_they_allow() {
    let count = Kind::Count {
        min: 1,
        max: 9,
        unit: "things",
    };
    assert!(count.parse("1k").is_err(), "a count takes no suffix");
    assert!(count.parse(" 9 ").is_ok());
    assert!(
        Kind::Choice(&["a", "b"])
            .parse("c")
            .unwrap_err()
            .contains("one of a, b")
    );
    assert!(Kind::Address.parse("host").is_err());
    assert_eq!(Layer::ALL.len(), 7);
    let all_layers = Layer::ALL
        .iter()
        .all(|l| table::ALL.iter().any(|s: &Setting| s.layer == *l));
    assert!(all_layers, "a layer with no settings");
}

#[test]
fn stage_bytes_are_distinct_and_read_back() {
    for s in Stage::ALL {
        assert_eq!(Stage::from_byte(s.byte()), Some(s));
    }
    assert_eq!(Stage::Joining.byte(), b'J');
    assert_eq!(Stage::from_byte(b'x'), None);
}

#[test]
fn fabric_names_read_back() {
    for c in FabricChoice::all() {
        assert_eq!(FabricChoice::parse(c.name()), Some(c));
        assert!(table::FABRIC.kind.parse(c.name()).is_ok());
        assert!(FABRIC_WORDS.contains(&c.name()));
    }
    for &k in FabricKind::ALL {
        assert_eq!(FabricKind::named(k.name()), Some(k));
        assert_eq!(k.to_string(), k.name());
        for a in k.aliases() {
            assert_eq!(FabricChoice::parse(a), Some(FabricChoice::Only(k)));
            assert_eq!(
                FabricKind::named(a),
                None,
                "an offer names a fabric by its name"
            );
        }
    }
    // Every word GSM_FABRIC's setting takes is a choice, and the other way round.
    for w in FABRIC_WORDS {
        assert!(FabricChoice::parse(w).is_some(), "{w}");
    }
    assert_eq!(
        FABRIC_WORDS.len(),
        1 + FabricKind::ALL
            .iter()
            .map(|k| 1 + k.aliases().len())
            .sum::<usize>()
    );
    assert_eq!(
        FabricChoice::parse(" RDMA "),
        Some(FabricChoice::Only(FabricKind::Verbs))
    );
    assert_eq!(FabricChoice::parse(""), Some(FabricChoice::Auto));
    assert_eq!(FabricChoice::parse("udp"), None);
    assert_eq!(
        FabricChoice::listed(FabricChoice::all()),
        "auto, shm, tcp, ofi or verbs"
    );
    assert_eq!(FabricChoice::listed([FabricChoice::Auto]), "auto");
    assert_eq!(FabricKind::Tcp.not_built("auto"), None);
    let said = FabricKind::Ofi.not_built("auto, shm or tcp").unwrap();
    assert_eq!(
        said,
        "this build of Gossamer has no ofi fabric (cargo feature `ofi` of the gossamer crate, \
         which needs libfabric-dev); this build takes auto, shm or tcp"
    );
}

#[test]
fn only_the_job_s_own_segments_match() {
    let job = "gsm-12-ab";
    assert_eq!(segment_name(job, 3), "gsm-12-ab-r3");
    assert_eq!(tcp_segment_name(job, 3), "gsm-12-ab-r3-tcp");
    for yes in ["gsm-12-ab-r0", "gsm-12-ab-r1023", "gsm-12-ab-r3-tcp"] {
        assert!(is_job_segment(yes, job), "{yes}");
    }
    for no in [
        "gsm-12-abc-r0",
        "gsm-12-ab-r",
        "gsm-12-ab-rx",
        "gsm-12-ab-r0.lock",
        "gsm-12-ab-r-1",
        "xgsm-12-ab-r0",
        "gsm-12-ab",
        "gsm-12-a-r0",
        "gsm-12-ab-r99999999999",
        "gsm-12-ab-r-tcp",
        "gsm-12-ab-r3-tcpx",
    ] {
        assert!(!is_job_segment(no, job), "{no}");
    }
    assert!(!is_job_segment("-r0", ""));
    assert!(!is_job_segment("a/b-r0", "a/b"));
}

#[test]
fn the_committed_reference_page_is_the_table_s() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/settings.md");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let wanted = crate::doc::render(table::ALL);
    assert!(
        committed == wanted,
        "docs/settings.md is not what the settings table says; regenerate it from the \
         workspace root with `{}`",
        crate::doc::REGENERATE
    );
}
