//! What each module names: every `use` tree flattened to its leaves (groups, `self`, renames,
//! globs), every path of two or more segments in its code (types, expressions, patterns, the
//! tokens of macro calls), and the names its `use` items bring into scope, which resolve later
//! paths and re-exports. Attributes and doc text are not read; a child module's code is its own.

use crate::cfg::is_test_only;
use crate::modtree::Tree;
use proc_macro2::{Spacing, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use syn::visit::{self, Visit};
use syn::{Item, UseTree};

/// One path a module names.
#[derive(Debug, Clone)]
pub struct Ref {
    /// Its segments as written; a group's `self` leaf names the group's prefix
    /// (`use a::{self}` is `["a"]`), a glob names the module it reads (`use a::*` is `["a"]`).
    pub segs: Vec<String>,
    /// Written with a leading `::`: an extern crate.
    pub global: bool,
    /// Written in a `use` item (else in code or a macro call).
    pub is_use: bool,
    /// In test code: a `#[cfg(test)]` or `#[test]` item, or a test-only module.
    pub test: bool,
    /// The line of its last segment.
    pub line: usize,
}

impl Ref {
    /// The path as the breach quotes it.
    pub fn text(&self) -> String {
        let lead = if self.global { "::" } else { "" };
        let kw = if self.is_use { "use " } else { "" };
        format!("{kw}{lead}{}", self.segs.join("::"))
    }
}

/// The names a module's `use` items bring into scope.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Binding name -> the path it stands for, relative to the module.
    pub imports: BTreeMap<String, Vec<String>>,
    /// The modules read with `use path::*`, relative to the module.
    pub globs: Vec<Vec<String>>,
    /// The names of the items the module defines (types, functions, constants, macros).
    pub defined: BTreeSet<String>,
}

/// What one module names, and its scope.
#[derive(Debug, Clone, Default)]
pub struct ModRefs {
    /// In the order written.
    pub refs: Vec<Ref>,
    /// Its imports.
    pub scope: Scope,
}

/// The references of every module of a tree, by module id.
pub fn collect_all(tree: &Tree) -> Vec<ModRefs> {
    tree.modules
        .iter()
        .map(|m| {
            let mut c = Collector {
                out: ModRefs::default(),
                test_depth: usize::from(m.test_only),
            };
            for item in &m.items {
                c.visit_item(item);
                if let Some(name) = item_name(item) {
                    c.out.scope.defined.insert(name);
                }
            }
            c.out
        })
        .collect()
}

struct Collector {
    out: ModRefs,
    test_depth: usize,
}

impl Collector {
    fn push(&mut self, segs: Vec<String>, global: bool, is_use: bool, line: usize) {
        let test = self.test_depth > 0;
        self.out.refs.push(Ref {
            segs,
            global,
            is_use,
            test,
            line,
        });
    }

    fn use_tree(&mut self, tree: &UseTree, prefix: &mut Vec<String>, global: bool) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix, global);
                prefix.pop();
            }
            UseTree::Name(n) => self.use_leaf(prefix, &n.ident, None, global),
            UseTree::Rename(r) => self.use_leaf(prefix, &r.ident, Some(&r.rename), global),
            UseTree::Glob(g) => {
                let line = g.star_token.spans[0].start().line;
                self.push(prefix.clone(), global, true, line);
                if !global {
                    self.out.scope.globs.push(prefix.clone());
                }
            }
            UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix, global);
                }
            }
        }
    }

    fn use_leaf(
        &mut self,
        prefix: &[String],
        ident: &syn::Ident,
        rename: Option<&syn::Ident>,
        global: bool,
    ) {
        let mut segs = prefix.to_vec();
        if ident != "self" {
            segs.push(ident.to_string());
        }
        let Some(last) = segs.last().cloned() else {
            return;
        };
        let binding = rename.map(|r| r.to_string()).unwrap_or(last);
        if binding != "_" && !global {
            self.out.scope.imports.insert(binding, segs.clone());
        }
        self.push(segs, global, true, ident.span().start().line);
    }

    /// Paths in a macro call's tokens: `a::b` runs of identifiers, `$crate` read as `crate`.
    fn scan(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            if let TokenTree::Group(g) = &tts[i] {
                self.scan(g.stream());
                i += 1;
                continue;
            }
            // `::x` not continuing a path (`a::x` is read from `a`): an extern crate.
            let global = i >= 2
                && is_colons(&tts, i - 2)
                && !(i >= 3 && matches!(tts[i - 3], TokenTree::Ident(_)));
            let TokenTree::Ident(first) = &tts[i] else {
                i += 1;
                continue;
            };
            let dollar = i >= 1 && matches!(&tts[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
            let mut segs = vec![if dollar && first == "crate" {
                "crate".to_string()
            } else {
                first.to_string()
            }];
            let mut line = first.span().start().line;
            let mut j = i + 1;
            while is_colons(&tts, j) {
                let Some(TokenTree::Ident(next)) = tts.get(j + 2) else {
                    break;
                };
                segs.push(next.to_string());
                line = next.span().start().line;
                j += 3;
            }
            if segs.len() >= 2 || global {
                self.push(segs, global && !dollar, false, line);
            }
            i = j.max(i + 1);
        }
    }
}

/// `::` at `tts[i..i + 2]`.
fn is_colons(tts: &[TokenTree], i: usize) -> bool {
    matches!(
        (tts.get(i), tts.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast Item) {
        let test = is_test_only(item_attrs(item));
        self.test_depth += usize::from(test);
        // A module inside a function body is not in the tree: its code is read with the function's.
        match item {
            Item::Use(u) => self.use_tree(&u.tree, &mut Vec::new(), u.leading_colon.is_some()),
            Item::ExternCrate(e) => self.push(
                vec![e.ident.to_string()],
                true,
                true,
                e.ident.span().start().line,
            ),
            _ => visit::visit_item(self, item),
        }
        self.test_depth -= usize::from(test);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        let test = is_test_only(attrs);
        self.test_depth += usize::from(test);
        visit::visit_impl_item(self, item);
        self.test_depth -= usize::from(test);
    }

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() >= 2 || path.leading_colon.is_some() {
            let segs = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = path
                .segments
                .last()
                .map_or(0, |s| s.ident.span().start().line);
            self.push(segs, path.leading_colon.is_some(), false, line);
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.scan(mac.tokens.clone());
    }
}

fn item_name(item: &Item) -> Option<String> {
    let ident = match item {
        Item::Const(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Fn(i) => &i.sig.ident,
        Item::Macro(i) => i.ident.as_ref()?,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::TraitAlias(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

fn item_attrs(item: &Item) -> &[syn::Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}
