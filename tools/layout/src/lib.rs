//! The house rules of ARCHITECTURE.md that a machine can check, over every crate of the workspace.
//!
//! - No source file over [`MAX_FILE_LINES`] lines and no function over [`MAX_FN_LINES`] lines,
//!   anywhere in a workspace member: sources, tests, examples and benchmarks ([`size`]).
//! - No import cycle between sibling modules (modules of one folder) in the non-test code of any
//!   crate, with `use` trees, `super::`/`self::`/`crate::` paths and re-exports resolved to the
//!   module they name ([`cycles`]).
//! - FFI in one place: `mpi` only under gossamer's `bootstrap`, `libc`, `rustix`, `rdma_sys` and
//!   `libfabric_sys` only under a `sys` module ([`ffi`]).
//!
//! Every file is parsed with `syn`, so comments, strings and doc text never count, and the module
//! tree is the one the compiler builds from the crate roots (`mod` items, `#[path]`, `#[cfg(test)]`).
//! It does not expand macros: paths inside a macro call are read from its tokens, and the
//! functions of an item-position macro call are measured when its body parses as items.

pub mod cfg;
pub mod cycles;
pub mod ffi;
pub mod modtree;
pub mod refs;
pub mod resolve;
pub mod size;
pub mod workspace;

use std::fmt;
use std::path::{Path, PathBuf};

/// The longest source file allowed, in lines.
pub const MAX_FILE_LINES: usize = 1000;
/// The longest function allowed, in lines from its `fn` to its closing brace.
pub const MAX_FN_LINES: usize = 150;

/// One broken rule, printed as `path:line: what`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Breach {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The 1-based line the breach starts at.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.what)
    }
}

/// Why the check could not run (as opposed to a rule it found broken).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or folder could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A Rust file does not parse.
    #[error("{path}:{line}:{column}: does not parse: {message} (does `cargo check` pass?)")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where the parser stopped.
        line: usize,
        /// Where the parser stopped (1-based).
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// A Cargo.toml holds something this reader does not understand.
    #[error("{path}: {message}")]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
}

/// Checks every rule over the workspace at `root` and returns the breaches, sorted and without
/// repeats (a module reached from two crate roots is reported once).
pub fn check(root: &Path) -> Result<Vec<Breach>, Error> {
    let ws = workspace::Workspace::load(root)?;
    let mut sources = workspace::Sources::default();
    let mut out = Vec::new();
    for file in ws.rust_files()? {
        let parsed = sources.get(&file)?;
        out.extend(size::check_file(
            &ws.rel(&file),
            &parsed.text,
            &parsed.syntax,
        ));
    }
    for package in &ws.packages {
        for target in &package.targets {
            let tree = modtree::Tree::build(&target.root, &mut sources)?;
            let refs = refs::collect_all(&tree);
            if target.kind.has_cycle_rule() {
                out.extend(cycles::check(&ws, &tree, &refs));
            }
            if target.kind.has_ffi_rule() {
                out.extend(ffi::check(&ws, &package.name, &tree, &refs));
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}
