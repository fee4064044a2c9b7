//! `gsmrun`: the Gossamer job launcher, as a library so that tests can check a launch plan's argv
//! without spawning anything. `main.rs` only parses arguments, calls the library and maps the error
//! to an exit code.

pub mod hosts;
pub mod placement;
