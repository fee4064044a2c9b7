//! Which module of the crate a path leads to: `crate::`, `$crate::`, `self::` and `super::`
//! prefixes, child modules, and names a module imports (its `use` items, re-exports included,
//! and its globs), followed to the module where the name comes from.
//!
//! A path to an item ends at the item's module: `crate::Notify` with `pub use notify::Notify` in
//! the crate root leads to `notify`. A path into another crate or the standard library leads
//! nowhere.

use crate::modtree::{ModId, Tree};
use crate::refs::ModRefs;

/// Re-exports of re-exports are followed this deep; a `use` cycle (which does not compile)
/// stops here instead of looping.
const MAX_HOPS: u32 = 16;

/// Resolves paths in one crate.
#[derive(Debug)]
pub struct Resolver<'a> {
    tree: &'a Tree,
    refs: &'a [ModRefs],
}

impl<'a> Resolver<'a> {
    /// A resolver over `tree`, with each module's scope in `refs` (by module id).
    pub fn new(tree: &'a Tree, refs: &'a [ModRefs]) -> Resolver<'a> {
        Resolver { tree, refs }
    }

    /// The module that `segs`, written in module `from`, leads to.
    pub fn target(&self, from: ModId, segs: &[String]) -> Option<ModId> {
        self.resolve(from, segs, 0)
    }

    fn resolve(&self, from: ModId, segs: &[String], hops: u32) -> Option<ModId> {
        if hops > MAX_HOPS {
            return None;
        }
        let (first, rest) = segs.split_first()?;
        let start = match first.as_str() {
            "crate" | "$crate" => 0,
            "self" => from,
            "super" => self.tree.modules[from].parent?,
            name => match self.lookup(from, name, hops)? {
                Found::Module(m) => m,
                Found::Item(m) => return Some(m),
                Found::Import(m, path) => {
                    let mut full = path;
                    full.extend_from_slice(rest);
                    return self.resolve(m, &full, hops + 1);
                }
            },
        };
        self.walk(start, rest, hops)
    }

    /// Follows `rest` down from module `m`: into child modules, then through an imported name
    /// to where it comes from; anything else is an item of the module reached.
    fn walk(&self, mut m: ModId, rest: &[String], hops: u32) -> Option<ModId> {
        for (i, s) in rest.iter().enumerate() {
            match s.as_str() {
                "self" => continue,
                "super" => {
                    m = self.tree.modules[m].parent?;
                    continue;
                }
                _ => {}
            }
            match self.lookup(m, s, hops) {
                Some(Found::Module(c)) => m = c,
                Some(Found::Item(at)) => return Some(at),
                Some(Found::Import(at, path)) => {
                    let mut full = path;
                    full.extend_from_slice(&rest[i + 1..]);
                    // A name `m` re-exports from outside the crate is still reached through `m`.
                    return self.resolve(at, &full, hops + 1).or(Some(m));
                }
                None => return Some(m),
            }
        }
        Some(m)
    }

    /// `name` in module `m`: a child module, an item it defines, a name it imports, or a name
    /// one of its globs brings.
    fn lookup(&self, m: ModId, name: &str, hops: u32) -> Option<Found> {
        if let Some(c) = self.tree.child(m, name) {
            return Some(Found::Module(c));
        }
        let scope = &self.refs[m].scope;
        if scope.defined.contains(name) {
            return Some(Found::Item(m));
        }
        if let Some(path) = scope.imports.get(name) {
            return Some(Found::Import(m, path.clone()));
        }
        if hops >= MAX_HOPS {
            return None;
        }
        scope.globs.iter().find_map(|g| {
            let gm = self.resolve(m, g, hops + 1)?;
            if gm == m {
                return None;
            }
            self.lookup(gm, name, hops + 1)
        })
    }
}

/// What a name in a module stands for.
enum Found {
    /// A child module.
    Module(ModId),
    /// An item defined in the module.
    Item(ModId),
    /// An import, written in the module given, of the path given.
    Import(ModId, Vec<String>),
}
