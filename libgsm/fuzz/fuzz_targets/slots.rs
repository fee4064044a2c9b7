//! Fuzz target: arbitrary bytes as a sequence of slots from one ring of another rank (`[u16 len]`
//! and the slot, see `read_slots`): batches are read, pieces of large records reassembled. The
//! first byte's low bit picks the lane (1: requests, 0: responses). A refusal is fine; a panic
//! is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&lane, slots)) = data.split_first() {
        let _ = gossamer::wire::fuzzing::read_slots(slots, lane & 1 == 1);
    }
});
