//! FFI in one place per library: the crates that call the operating system or a C library are
//! named only in the module that wraps them. Read from the parsed paths (`use` trees, code,
//! macro calls, `extern crate`), so a comment or a string never counts, and a rename or a group
//! does not hide one.
//!
//! This reads a package's library and binaries, test modules included; its examples, benchmarks
//! and integration tests drive it from outside and are not read.

use crate::Breach;
use crate::modtree::Tree;
use crate::refs::ModRefs;
use crate::resolve::Resolver;
use crate::workspace::Workspace;
use std::collections::BTreeMap;

/// A crate that only some modules may name.
struct Rule {
    /// The crate's name as code writes it.
    krate: &'static str,
    /// The package the rule holds in; `None` for every package.
    package: Option<&'static str>,
    /// Where it may be named.
    home: Home,
}

enum Home {
    /// Under a module called `sys`, at any depth.
    Sys,
    /// Under this top-level module.
    Top(&'static str),
}

const RULES: &[Rule] = &[
    Rule {
        krate: "libc",
        package: None,
        home: Home::Sys,
    },
    Rule {
        krate: "rustix",
        package: None,
        home: Home::Sys,
    },
    Rule {
        krate: "rdma_sys",
        package: None,
        home: Home::Sys,
    },
    Rule {
        krate: "libfabric_sys",
        package: None,
        home: Home::Sys,
    },
    Rule {
        krate: "mpi",
        package: Some("gossamer"),
        home: Home::Top("bootstrap"),
    },
];

/// The FFI breaches of one crate of `package`.
pub fn check(ws: &Workspace, package: &str, tree: &Tree, refs: &[ModRefs]) -> Vec<Breach> {
    let resolver = Resolver::new(tree, refs);
    // (file, line) -> the paths named there, so that `kill(pid, libc::SIGKILL)` is one breach.
    let mut found: BTreeMap<(String, usize), (Vec<String>, String)> = BTreeMap::new();
    for (m, module) in tree.modules.iter().enumerate() {
        for r in &refs[m].refs {
            let first = r.segs[0].as_str();
            let Some(rule) = RULES.iter().find(|rule| rule.krate == first) else {
                continue;
            };
            if rule.package.is_some_and(|p| p != package) {
                continue;
            }
            // A module of the crate with that name shadows the extern crate.
            if !r.global && resolver.target(m, &r.segs[..1]).is_some() {
                continue;
            }
            let (home, place) = match rule.home {
                Home::Sys => (
                    module.path.iter().any(|s| s == "sys"),
                    "a `sys` module".to_string(),
                ),
                Home::Top(top) => (
                    module.path.first().is_some_and(|s| s == top),
                    format!("`{top}`"),
                ),
            };
            if !home {
                let e = found
                    .entry((ws.rel(&module.file), r.line))
                    .or_insert((Vec::new(), place));
                let text = format!("`{}`", r.text());
                if !e.0.contains(&text) {
                    e.0.push(text);
                }
            }
        }
    }
    found
        .into_iter()
        .map(|((path, line), (names, place))| Breach {
            path,
            line,
            what: format!("{} outside {place}: wrap the call there", names.join(", ")),
        })
        .collect()
}
