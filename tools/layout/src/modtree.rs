//! A crate's module tree, built as the compiler does from its root file: inline `mod x { .. }`,
//! out-of-line `mod x;` found at `x.rs` or `x/mod.rs` (or at its `#[path]`), and which modules
//! are test-only (`#[cfg(test)]` on the module or on an ancestor).

use crate::Error;
use crate::cfg::is_test_only;
use crate::workspace::Sources;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Index of a module in [`Tree::modules`]; the crate root is 0.
pub type ModId = usize;

/// One module.
#[derive(Debug)]
pub struct Module {
    /// Its path from the crate root (`["segment", "rma"]`); empty for the root.
    pub path: Vec<String>,
    /// The file its items are written in.
    pub file: PathBuf,
    /// The folder its out-of-line children live in.
    pub dir: PathBuf,
    /// Test code: `#[cfg(test)]` here or on an ancestor.
    pub test_only: bool,
    /// Its items; a child module's items belong to the child.
    pub items: Vec<syn::Item>,
    /// The enclosing module (none for the root).
    pub parent: Option<ModId>,
    /// Child modules by name.
    pub children: BTreeMap<String, ModId>,
}

/// The modules of one crate.
#[derive(Debug)]
pub struct Tree {
    /// Root first, then depth-first in the order of their `mod` items.
    pub modules: Vec<Module>,
}

impl Tree {
    /// Builds the tree of the crate whose root file is `root`. A `mod x;` whose file is missing
    /// is left out (the compiler reports it; a cfg'd-out module may name a file of another
    /// platform).
    pub fn build(root: &Path, sources: &mut Sources) -> Result<Tree, Error> {
        let mut tree = Tree {
            modules: Vec::new(),
        };
        let items = sources.get(root)?.syntax.items.clone();
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        let place = Place {
            file: root.to_path_buf(),
            dir,
            in_file: true,
        };
        tree.add(None, String::new(), place, false, items, sources)?;
        Ok(tree)
    }

    /// The child of `m` called `name`.
    pub fn child(&self, m: ModId, name: &str) -> Option<ModId> {
        self.modules[m].children.get(name).copied()
    }

    fn add(
        &mut self,
        parent: Option<ModId>,
        name: String,
        place: Place,
        test_only: bool,
        items: Vec<syn::Item>,
        sources: &mut Sources,
    ) -> Result<ModId, Error> {
        let Place { file, dir, in_file } = place;
        let id = self.modules.len();
        let mut path = parent
            .map(|p| self.modules[p].path.clone())
            .unwrap_or_default();
        if parent.is_some() {
            path.push(name.clone());
        }
        self.modules.push(Module {
            path,
            file: file.clone(),
            dir: dir.clone(),
            test_only,
            items: Vec::new(),
            parent,
            children: BTreeMap::new(),
        });
        if let Some(p) = parent {
            self.modules[p].children.insert(name, id);
        }
        let mut own = Vec::with_capacity(items.len());
        for item in items {
            let syn::Item::Mod(m) = item else {
                own.push(item);
                continue;
            };
            let child = m.ident.to_string();
            let test = test_only || is_test_only(&m.attrs);
            if let Some((_, content)) = m.content {
                let place = Place {
                    file: file.clone(),
                    dir: dir.join(&child),
                    in_file: false,
                };
                self.add(Some(id), child, place, test, content, sources)?;
                continue;
            }
            let Some((child_file, child_dir)) = locate(&m.attrs, &child, &file, &dir, in_file)
            else {
                continue;
            };
            let child_items = sources.get(&child_file)?.syntax.items.clone();
            let place = Place {
                file: child_file,
                dir: child_dir,
                in_file: true,
            };
            self.add(Some(id), child, place, test, child_items, sources)?;
        }
        self.modules[id].items = own;
        Ok(id)
    }
}

/// Where a module's items are written and where its out-of-line children are looked for.
struct Place {
    file: PathBuf,
    dir: PathBuf,
    /// False inside an inline module, where `#[path]` is relative to the module's folder.
    in_file: bool,
}

/// The file of `mod name;` and the folder of its own children. `in_file` is false inside an
/// inline module, where `#[path]` is relative to the module's folder rather than the file's.
fn locate(
    attrs: &[syn::Attribute],
    name: &str,
    file: &Path,
    dir: &Path,
    in_file: bool,
) -> Option<(PathBuf, PathBuf)> {
    if let Some(p) = path_attr(attrs) {
        let base = if in_file {
            file.parent()?.to_path_buf()
        } else {
            dir.to_path_buf()
        };
        let f = base.join(p);
        // A file named by `#[path]` holds its children beside it, as a mod.rs does.
        let d = f.parent()?.to_path_buf();
        return f.is_file().then_some((f, d));
    }
    let flat = dir.join(format!("{name}.rs"));
    if flat.is_file() {
        return Some((flat, dir.join(name)));
    }
    let nested = dir.join(name).join("mod.rs");
    nested.is_file().then(|| (nested, dir.join(name)))
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}
