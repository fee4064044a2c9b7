use super::*;

fn args(v: &[&[u8]]) -> Vec<Vec<u8>> {
    v.iter().map(|a| a.to_vec()).collect()
}

#[test]
fn a_whole_multibulk_request_is_read_and_its_length_counted() {
    let req = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n";
    let (a, used) = parse(req).unwrap().unwrap();
    assert_eq!(a, args(&[b"GET", b"k"]));
    assert_eq!(used, 20);
    assert_eq!(parse(&req[used..]).unwrap(), None);
}

#[test]
fn every_prefix_of_a_request_asks_for_more() {
    let req = b"*3\r\n$3\r\nSET\r\n$2\r\n\x00\r\r\n$4\r\n\r\n\xff\n\r\n";
    for cut in 0..req.len() {
        assert_eq!(parse(&req[..cut]).unwrap(), None, "cut at {cut}");
    }
    let (a, used) = parse(req).unwrap().unwrap();
    assert_eq!(a, args(&[b"SET", b"\x00\r", b"\r\n\xff\n"]));
    assert_eq!(used, req.len());
}

#[test]
fn inline_commands_split_on_blanks() {
    let (a, used) = parse(b"  set  k\tv \r\nrest").unwrap().unwrap();
    assert_eq!(a, args(&[b"set", b"k", b"v"]));
    assert_eq!(used, 13);
    assert_eq!(parse(b"\r\n").unwrap().unwrap(), (Vec::new(), 2));
    assert_eq!(parse(b"PING").unwrap(), None);
}

#[test]
fn oversized_lengths_are_refused_before_their_bytes_arrive() {
    let too_big = format!("*1\r\n${}\r\n", MAX_BULK + 1);
    assert_eq!(
        parse(too_big.as_bytes()).unwrap_err().0,
        "ERR Protocol error: invalid bulk length"
    );
    let just = format!("*1\r\n${MAX_BULK}\r\n");
    assert_eq!(parse(just.as_bytes()).unwrap(), None);
    let many = format!("*{}\r\n", MAX_ARGS + 1);
    assert_eq!(
        parse(many.as_bytes()).unwrap_err().0,
        "ERR Protocol error: invalid multibulk length"
    );
    let mut sum = String::from("*5\r\n");
    for _ in 0..5 {
        sum.push_str(&format!("${MAX_BULK}\r\n"));
        sum.push_str(&"x".repeat(MAX_BULK));
        sum.push_str("\r\n");
    }
    assert!(parse(sum.as_bytes()).unwrap_err().0.contains("64 MiB"));
    let inline = vec![b'a'; MAX_INLINE + 1];
    assert_eq!(
        parse(&inline).unwrap_err().0,
        "ERR Protocol error: too big inline request"
    );
}

#[test]
fn malformed_headers_get_redis_texts() {
    let cases: &[(&[u8], &str)] = &[
        (b"*x\r\n", "ERR Protocol error: invalid multibulk length"),
        (b"*1\r\n:3\r\n", "ERR Protocol error: expected '$', got ':'"),
        (b"*1\r\n$-1\r\n", "ERR Protocol error: invalid bulk length"),
        (b"*1\r\n$3x\r\n", "ERR Protocol error: invalid bulk length"),
        (
            b"*1\r\n$1\r\nab\r\n",
            "ERR Protocol error: bulk string not followed by CRLF",
        ),
    ];
    for (input, text) in cases {
        assert_eq!(parse(input).unwrap_err().0, *text, "{input:?}");
    }
}

#[test]
fn replies_are_framed() {
    let mut out = Vec::new();
    simple(&mut out, "OK");
    error(&mut out, "ERR a\r\nb");
    integer(&mut out, -42);
    integer(&mut out, i64::MIN);
    bulk(&mut out, b"a\r\n");
    nil(&mut out);
    array(&mut out, 2);
    assert_eq!(
        out,
        b"+OK\r\n-ERR a  b\r\n:-42\r\n:-9223372036854775808\r\n$3\r\na\r\n\r\n$-1\r\n*2\r\n"
    );
}

#[test]
fn inline_quotes_are_read_as_redis_reads_them() {
    let words = |line: &[u8]| split_args(line).expect("balanced");
    assert_eq!(
        words(br#"set "a b" 'c d' "\x41\n\"" 'it\'s'"#),
        args(&[b"set", b"a b", b"c d", b"A\n\"", b"it's"])
    );
    assert_eq!(words(b"x\"y\""), args(&[b"xy"]));
    for bad in [
        &br#"set """test-key""" v"#[..],
        b"\"open",
        b"'open",
        b"\"a\"b",
    ] {
        assert_eq!(split_args(bad), None, "{:?}", String::from_utf8_lossy(bad));
    }
    assert_eq!(
        parse(b"set \"\"\"k\"\"\" v\r\n").unwrap_err().0,
        "ERR Protocol error: unbalanced quotes in request"
    );
}
