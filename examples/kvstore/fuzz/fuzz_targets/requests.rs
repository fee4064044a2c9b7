//! Fuzz target: arbitrary bytes as what a client sent, read request by request as a connection
//! does, each planned as a command. A protocol error is fine; a panic, a request that claims more
//! bytes than there are, or one that does not read back the same once re-encoded, is a bug.
#![no_main]

use gsm_kv::{command, resp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((args, used))) = resp::parse(rest) {
        assert!(used > 0 && used <= rest.len());
        rest = &rest[used..];
        if args.is_empty() {
            continue;
        }
        let mut again = Vec::new();
        resp::array(&mut again, args.len());
        for a in &args {
            resp::bulk(&mut again, a);
        }
        let (back, n) = resp::parse(&again).unwrap().unwrap();
        assert_eq!((back.as_slice(), n), (args.as_slice(), again.len()));
        let _ = command::plan(args);
    }
});
