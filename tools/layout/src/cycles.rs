//! Import cycles between sibling modules (modules with one parent: the files and folders of one
//! folder, or the inline modules of one file).
//!
//! A path written in module `a::x::y` that leads to `a::z::w` is an edge `x -> z` in `a`: a module
//! depends on what its descendants name. A module and its own ancestors or descendants do not make
//! an edge. Test code (test-only modules, `#[cfg(test)]` and `#[test]` items) is left out: a test
//! may reach anywhere. Each strongly connected group of two or more siblings is one breach,
//! listing each edge with the first path that makes it.

use crate::Breach;
use crate::modtree::{ModId, Tree};
use crate::refs::{ModRefs, Ref};
use crate::resolve::Resolver;
use crate::workspace::Workspace;
use std::collections::BTreeMap;

/// The first path (in file order) that makes an edge.
#[derive(Debug, Clone)]
struct Example {
    file: String,
    line: usize,
    text: String,
}

/// The sibling cycles of one crate.
pub fn check(ws: &Workspace, tree: &Tree, refs: &[ModRefs]) -> Vec<Breach> {
    let edges = edges(ws, tree, refs);
    let mut graph: BTreeMap<ModId, Vec<ModId>> = BTreeMap::new();
    for &(a, b) in edges.keys() {
        graph.entry(a).or_default().push(b);
    }
    let mut out = Vec::new();
    for group in strongly_connected(&graph) {
        let name = |m: ModId| tree.modules[m].path.last().cloned().unwrap_or_default();
        let parent = tree.modules[group[0]].parent.unwrap_or(0);
        let folder = ws.rel(&tree.modules[parent].dir);
        let mut names: Vec<String> = group.iter().map(|&m| name(m)).collect();
        names.sort();
        let mut detail = Vec::new();
        let mut first: Option<&Example> = None;
        for (&(a, b), ex) in &edges {
            if group.contains(&a) && group.contains(&b) {
                detail.push(format!(
                    "{} -> {} ({}:{} `{}`)",
                    name(a),
                    name(b),
                    ex.file,
                    ex.line,
                    ex.text
                ));
                first.get_or_insert(ex);
            }
        }
        let Some(first) = first else { continue };
        out.push(Breach {
            path: first.file.clone(),
            line: first.line,
            what: format!(
                "sibling import cycle in {folder}/ between {}: {}",
                names.join(", "),
                detail.join("; ")
            ),
        });
    }
    out
}

/// Sibling edges with their first example, ordered by (from, to).
fn edges(ws: &Workspace, tree: &Tree, refs: &[ModRefs]) -> BTreeMap<(ModId, ModId), Example> {
    let resolver = Resolver::new(tree, refs);
    let mut out: BTreeMap<(ModId, ModId), Example> = BTreeMap::new();
    for (m, module) in tree.modules.iter().enumerate() {
        if module.test_only {
            continue;
        }
        for r in refs[m].refs.iter().filter(|r| counts(r)) {
            let Some(t) = resolver.target(m, &r.segs) else {
                continue;
            };
            let Some((a, b)) = siblings(tree, m, t) else {
                continue;
            };
            let ex = Example {
                file: ws.rel(&module.file),
                line: r.line,
                text: r.text(),
            };
            let slot = out.entry((a, b)).or_insert_with(|| ex.clone());
            if (ex.file.as_str(), ex.line) < (slot.file.as_str(), slot.line) {
                *slot = ex;
            }
        }
    }
    out
}

/// Paths that can name a module of this crate: `use` paths, and in code the paths that start
/// at the crate, this module or a parent (a bare `x::f()` goes through an import or a child,
/// whose edge the `use` or the tree already gives).
fn counts(r: &Ref) -> bool {
    if r.test || r.global {
        return false;
    }
    r.is_use || matches!(r.segs[0].as_str(), "crate" | "$crate" | "self" | "super")
}

/// The two siblings under the deepest common ancestor of `m` and `t`, unless one of them is
/// the other's ancestor.
fn siblings(tree: &Tree, m: ModId, t: ModId) -> Option<(ModId, ModId)> {
    let (pm, pt) = (&tree.modules[m].path, &tree.modules[t].path);
    let common = pm.iter().zip(pt).take_while(|(a, b)| a == b).count();
    if common == pm.len() || common == pt.len() {
        return None;
    }
    Some((
        ancestor_at(tree, m, common + 1),
        ancestor_at(tree, t, common + 1),
    ))
}

/// The ancestor of `m` (or `m` itself) whose path has `depth` segments.
fn ancestor_at(tree: &Tree, mut m: ModId, depth: usize) -> ModId {
    while tree.modules[m].path.len() > depth {
        m = tree.modules[m].parent.unwrap_or(0);
    }
    m
}

/// Tarjan's strongly connected components of two or more nodes, each sorted.
fn strongly_connected(graph: &BTreeMap<ModId, Vec<ModId>>) -> Vec<Vec<ModId>> {
    struct State<'g> {
        graph: &'g BTreeMap<ModId, Vec<ModId>>,
        index: BTreeMap<ModId, usize>,
        low: BTreeMap<ModId, usize>,
        stack: Vec<ModId>,
        on_stack: std::collections::BTreeSet<ModId>,
        out: Vec<Vec<ModId>>,
    }
    fn visit(s: &mut State<'_>, v: ModId) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in s.graph.get(&v).map(Vec::as_slice).unwrap_or(&[]) {
            if !s.index.contains_key(&w) {
                visit(s, w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(&v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(&v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[&v] == s.index[&v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(&w);
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: Default::default(),
        out: Vec::new(),
    };
    for &v in graph.keys() {
        if !s.index.contains_key(&v) {
            visit(&mut s, v);
        }
    }
    s.out
}
