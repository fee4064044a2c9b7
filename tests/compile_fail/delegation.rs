// Compiled by tests/tests/diagnostics.rs, which expects each line marked `expect:` to fail with
// an error whose text holds the words after it. Not a test target of its own.
#![allow(dead_code, unused_variables)]

use gossamer::{Trust, WorkerId};

fn owned_string(t: &Trust<usize>) {
    let s = String::from("x");
    t.apply(move |p| *p += s.len()); // expect: cannot travel to another worker | `Trust::apply_with`
}

fn owned_vec(t: &Trust<u32>) {
    let v = vec![1u32, 2];
    t.apply_then(move |p| *p += v[0], |()| {}); // expect: cannot travel to another worker | not as a capture
}

fn trust_captured(t: &Trust<u64>, other: Trust<u64>) {
    t.apply(move |p| other.apply_then(|q| *q += 1, |()| {})); // expect: cannot travel to another worker | to delegate onward
}

fn spawned_box() {
    let b = Box::new(3u32);
    gossamer::spawn_on(WorkerId::new(1), move || *b); // expect: cannot travel to another worker
}

struct NotSerde(u32);

fn argument_not_wire(t: &Trust<u32>) {
    t.apply_with(NotSerde(1), |p, a| *p += a.0); // expect: cannot be the argument or result of a delegation | derive `serde::Serialize`
}

fn main() {}
