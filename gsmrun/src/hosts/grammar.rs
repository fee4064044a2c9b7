//! The pest parser of hostfiles, `-H` values and Slurm node lists (`grammar.pest`), and its
//! [`Rule`]s, which the parser, the hostlist expander and the error reports all name. This module
//! only derives the parser; what a parse tree means is `parse.rs`'s business.

#[derive(pest_derive::Parser)]
#[grammar = "hosts/grammar.pest"]
pub(crate) struct Grammar;
