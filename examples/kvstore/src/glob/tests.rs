use std::time::{Duration, Instant};

use super::*;

#[test]
fn stars_questions_classes_and_escapes_match_as_redis_does() {
    let yes: &[(&[u8], &[u8])] = &[
        (b"*", b""),
        (b"*", b"anything"),
        (b"h?llo", b"hello"),
        (b"h*llo", b"heeeello"),
        (b"h*llo", b"hllo"),
        (b"h[ae]llo", b"hallo"),
        (b"h[^e]llo", b"hallo"),
        (b"h[a-b]llo", b"hbllo"),
        (b"h[b-a]llo", b"hallo"),
        (b"h\\*llo", b"h*llo"),
        (b"[\\]]", b"]"),
        (b"a*b*c", b"aXXbYYc"),
        (b"*a", b"aaaa"),
        (b"ab\\", b"ab\\"),
        (b"[abc", b"b"),
        (b"\x00*\xff", b"\x00\r\n\xff"),
    ];
    for (p, s) in yes {
        assert!(matches(p, s, false), "{p:?} should match {s:?}");
    }
    let no: &[(&[u8], &[u8])] = &[
        (b"", b"a"),
        (b"h?llo", b"hllo"),
        (b"h[ae]llo", b"hillo"),
        (b"h[^e]llo", b"hello"),
        (b"h\\*llo", b"hello"),
        (b"a*b", b"aXXbc"),
        (b"HELLO", b"hello"),
        (b"a", b""),
    ];
    for (p, s) in no {
        assert!(!matches(p, s, false), "{p:?} should not match {s:?}");
    }
    assert!(matches(b"HE[K-M]LO", b"hello", true));
    assert!(matches(b"Max*", b"maxmemory", true));
}

#[test]
fn a_run_of_stars_before_a_byte_that_does_not_match_is_linear() {
    // Exponential in a backtracking matcher: 40 stars over 10 kB would never end there.
    let pattern = [
        vec![b'*'; 40],
        b"x".to_vec(),
        vec![b'a'; 40],
        b"*b".to_vec(),
    ]
    .concat();
    let subject = vec![b'a'; 10_000];
    let start = Instant::now();
    assert!(!matches(&pattern, &subject, false));
    let pattern = b"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
    assert!(!matches(pattern, &subject, true));
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}
