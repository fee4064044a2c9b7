use super::*;
use std::time::Duration;

fn set(key: &[u8], value: &[u8], ttl: Ttl, cond: Cond) -> Op {
    Op::Set {
        key: key.to_vec(),
        value: value.to_vec(),
        ttl,
        cond,
        get: false,
    }
}

#[test]
fn set_conditions_and_get() {
    let mut s = Shard::new();
    assert_eq!(
        s.run(set(b"k", b"1", Ttl::Clear, Cond::Present)),
        Answer::Nil
    );
    assert_eq!(s.run(set(b"k", b"1", Ttl::Clear, Cond::Absent)), Answer::Ok);
    assert_eq!(
        s.run(set(b"k", b"2", Ttl::Clear, Cond::Absent)),
        Answer::Nil
    );
    assert_eq!(s.run(Op::Get(b"k".to_vec())), Answer::Bulk(b"1".to_vec()));
    let swap = Op::Set {
        key: b"k".to_vec(),
        value: b"3".to_vec(),
        ttl: Ttl::Clear,
        cond: Cond::Present,
        get: true,
    };
    assert_eq!(s.run(swap), Answer::Bulk(b"1".to_vec()));
    assert_eq!(s.run(Op::Get(b"k".to_vec())), Answer::Bulk(b"3".to_vec()));
}

#[test]
fn keys_expire_and_ttl_reports_them() {
    let mut s = Shard::new();
    s.run(set(b"k", b"v", Ttl::Expire(When::In(30)), Cond::Always));
    assert_eq!(s.run(Op::Ttl(b"k".to_vec(), false)), Answer::Int(0));
    let Answer::Int(ms) = s.run(Op::Ttl(b"k".to_vec(), true)) else {
        panic!()
    };
    assert!((1..=30).contains(&ms));
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(s.run(Op::Get(b"k".to_vec())), Answer::Nil);
    assert_eq!(s.run(Op::Ttl(b"k".to_vec(), false)), Answer::Int(-2));
    s.run(set(b"p", b"v", Ttl::Clear, Cond::Always));
    assert_eq!(s.run(Op::Ttl(b"p".to_vec(), false)), Answer::Int(-1));
    assert_eq!(
        s.run(Op::Expire(
            b"p".to_vec(),
            When::In(100_000),
            ExpireIf::Always
        )),
        Answer::Int(1)
    );
    assert_eq!(s.run(Op::Ttl(b"p".to_vec(), false)), Answer::Int(100));
    s.run(set(b"p", b"w", Ttl::Keep, Cond::Always));
    assert_eq!(s.run(Op::Ttl(b"p".to_vec(), false)), Answer::Int(100));
    assert_eq!(
        s.run(Op::Expire(b"p".to_vec(), When::In(0), ExpireIf::Always)),
        Answer::Int(1)
    );
    assert_eq!(s.run(Op::Exists(vec![b"p".to_vec()])), Answer::Int(0));
    assert_eq!(
        s.run(Op::Expire(b"p".to_vec(), When::In(10), ExpireIf::Always)),
        Answer::Int(0)
    );
}

#[test]
fn purge_drops_only_expired_keys() {
    let mut s = Shard::new();
    s.run(set(b"a", b"v", Ttl::Expire(When::In(1)), Cond::Always));
    s.run(set(b"b", b"v", Ttl::Clear, Cond::Always));
    std::thread::sleep(Duration::from_millis(5));
    s.purge_expired();
    assert_eq!(s.len(), 1);
    assert_eq!(s.run(Op::DbSize), Answer::Int(1));
}

#[test]
fn incr_checks_integers_and_overflow() {
    let mut s = Shard::new();
    assert_eq!(s.run(Op::IncrBy(b"n".to_vec(), 5)), Answer::Int(5));
    assert_eq!(s.run(Op::IncrBy(b"n".to_vec(), -7)), Answer::Int(-2));
    s.run(set(b"x", b"01", Ttl::Clear, Cond::Always));
    assert_eq!(
        s.run(Op::IncrBy(b"x".to_vec(), 1)),
        Answer::Error(NOT_INTEGER.into())
    );
    s.run(set(
        b"m",
        i64::MAX.to_string().as_bytes(),
        Ttl::Clear,
        Cond::Always,
    ));
    assert!(
        matches!(s.run(Op::IncrBy(b"m".to_vec(), 1)), Answer::Error(e) if e.contains("overflow"))
    );
    for bad in [
        &b""[..],
        b"-",
        b"+1",
        b" 1",
        b"-0",
        b"1.0",
        b"99999999999999999999",
    ] {
        assert_eq!(parse_i64(bad), None, "{bad:?}");
    }
    assert_eq!(parse_i64(b"-12"), Some(-12));
    assert_eq!(parse_i64(b"0"), Some(0));
}

#[test]
fn multi_key_operations() {
    let mut s = Shard::new();
    let pairs = vec![
        (b"a".to_vec(), b"1".to_vec()),
        (b"b".to_vec(), b"2".to_vec()),
    ];
    assert_eq!(s.run(Op::MSet(pairs)), Answer::Ok);
    assert_eq!(
        s.run(Op::MGet(vec![b"a".to_vec(), b"z".to_vec(), b"b".to_vec()])),
        Answer::Values(vec![Some(b"1".to_vec()), None, Some(b"2".to_vec())])
    );
    assert_eq!(
        s.run(Op::Exists(vec![
            b"a".to_vec(),
            b"a".to_vec(),
            b"z".to_vec()
        ])),
        Answer::Int(2)
    );
    assert_eq!(
        s.run(Op::Del(vec![b"a".to_vec(), b"a".to_vec(), b"z".to_vec()])),
        Answer::Int(1)
    );
    assert_eq!(s.run(Op::FlushAll), Answer::Ok);
    assert!(s.is_empty());
}
