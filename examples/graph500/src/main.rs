//! Graph500 BFS and SSSP on Gossamer.
//!
//! Not written yet: the generator, CSR construction, the kernels and validation arrive with the
//! Graph500 issue. Until then this binary refuses to run rather than print made-up results.

fn main() {
    eprintln!("graph500: not implemented yet in this build of Gossamer; nothing was run");
    std::process::exit(2);
}
