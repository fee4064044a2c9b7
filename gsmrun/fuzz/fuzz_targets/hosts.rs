//! Fuzz target: arbitrary bytes, read as UTF-8 lossily, through the hostfile parser, the `-H`
//! parser and the Slurm variable parsers. Any panic is a bug; errors are fine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = gsmrun::hosts::parse_hostfile(Path::new("fuzz"), &text);
    let _ = gsmrun::hosts::parse_host_option(&text);
    let _ = gsmrun::hosts::slurm::expand_nodelist(&text);
    let _ = gsmrun::hosts::slurm::parse_tasks_per_node(&text);
});
