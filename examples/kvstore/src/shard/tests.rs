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

fn hash(key: &[u8], op: HashOp) -> Op {
    Op::Hash(key.to_vec(), op)
}

fn pairs(words: &[&str]) -> Vec<(Vec<u8>, Vec<u8>)> {
    words
        .chunks(2)
        .map(|p| (p[0].as_bytes().to_vec(), p[1].as_bytes().to_vec()))
        .collect()
}

#[test]
fn hashes_keep_insertion_order_until_they_grow_and_vanish_when_emptied() {
    let mut s = Shard::new();
    let set = |p: &[&str]| hash(b"h", HashOp::Set(pairs(p), false));
    assert_eq!(s.run(set(&["b", "1", "a", "2"])), Answer::Int(2));
    assert_eq!(s.run(set(&["b", "3", "c", "4"])), Answer::Int(1));
    let all = |s: &mut Shard| s.run(hash(b"h", HashOp::GetAll));
    let flat = |w: &[&str]| Answer::Values(w.iter().map(|x| Some(x.as_bytes().to_vec())).collect());
    assert_eq!(all(&mut s), flat(&["b", "3", "a", "2", "c", "4"]));
    assert_eq!(
        s.run(Op::Type(b"h".to_vec())),
        Answer::Status("hash".into())
    );
    // A string command on a hash, and a hash command on a string, answer WRONGTYPE.
    let wrong = Answer::Error(WRONGTYPE.into());
    assert_eq!(s.run(Op::Get(b"h".to_vec())), wrong);
    s.run(set_plain(b"str", b"v"));
    assert_eq!(s.run(hash(b"str", HashOp::Len)), wrong);
    // Past the listpack limits the hash is a table for good.
    let long = "x".repeat(65);
    s.run(set(&["long", &long]));
    let Some(Entry {
        value: Value::Hash(h),
        ..
    }) = s.map.get(b"h".as_slice())
    else {
        panic!("not a hash");
    };
    assert_eq!(h.encoding(), "hashtable");
    let del = HashOp::Del(
        ["a", "b", "c", "long", "zz"]
            .map(|f| f.as_bytes().to_vec())
            .to_vec(),
    );
    assert_eq!(s.run(hash(b"h", del)), Answer::Int(4));
    assert_eq!(s.run(Op::Exists(vec![b"h".to_vec()])), Answer::Int(0));
    assert_eq!(
        s.run(hash(b"h", HashOp::IncrBy(b"n".to_vec(), 5))),
        Answer::Int(5)
    );
    assert_eq!(
        s.run(hash(
            b"h",
            HashOp::IncrByFloat(b"n".to_vec(), b"0.5".to_vec())
        )),
        Answer::Bulk(b"5.5".to_vec())
    );
    assert_eq!(
        s.run(hash(b"h", HashOp::IncrBy(b"n".to_vec(), 1))),
        Answer::Error("ERR hash value is not an integer".into())
    );
}

fn set_plain(key: &[u8], value: &[u8]) -> Op {
    set(key, value, Ttl::Clear, Cond::Always)
}
