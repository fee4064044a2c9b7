//! Fuzz target: arbitrary bytes as one request batch from another process, read to the end as a
//! trustee serves it (record by record, and by runs). A refusal is fine; a panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gossamer::wire::fuzzing::read_requests(data);
});
