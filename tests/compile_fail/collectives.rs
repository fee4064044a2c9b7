// Compiled by tests/tests/diagnostics.rs (see delegation.rs beside it).
#![allow(dead_code, unused_variables)]

fn strings(team: &gsm_collectives::Team) {
    let mut v = vec![String::new()];
    let _ = team.broadcast(&mut v, 0); // expect: is not plain data | `broadcast_value`
}

fn main() {}
