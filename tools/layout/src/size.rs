//! File and function length. A function is measured from the line of its `fn` to the line of its
//! closing brace: free functions, methods and trait default methods, nested ones too, and those
//! written in an item-position macro call whose body parses as items (a test macro's cases).

use crate::{Breach, MAX_FILE_LINES, MAX_FN_LINES};
use syn::visit::{self, Visit};

/// The size breaches of one file; `rel` is the path breaches print.
pub fn check_file(rel: &str, text: &str, syntax: &syn::File) -> Vec<Breach> {
    let mut out = Vec::new();
    let lines = text.lines().count();
    if lines > MAX_FILE_LINES {
        out.push(Breach {
            path: rel.to_string(),
            line: 1,
            what: format!("{lines} lines (at most {MAX_FILE_LINES}): split it"),
        });
    }
    let mut fns = Functions { rel, out: &mut out };
    fns.visit_file(syntax);
    out
}

struct Functions<'a> {
    rel: &'a str,
    out: &'a mut Vec<Breach>,
}

impl Functions<'_> {
    fn measure(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        let n = end + 1 - start;
        if n > MAX_FN_LINES {
            self.out.push(Breach {
                path: self.rel.to_string(),
                line: start,
                what: format!("fn {} is {n} lines (at most {MAX_FN_LINES})", sig.ident),
            });
        }
    }
}

impl<'ast> Visit<'ast> for Functions<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(&f.sig, &f.block);
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.measure(&f.sig, &f.block);
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.measure(&f.sig, block);
        }
        visit::visit_trait_item_fn(self, f);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if let Ok(items) = mac.parse_body::<syn::File>() {
            self.visit_file(&items);
        }
        visit::visit_macro(self, mac);
    }
}
