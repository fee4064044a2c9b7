//! Graph500 BFS and SSSP.
pub mod kronecker;
pub mod mrg;
