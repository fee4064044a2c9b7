//! The workspace as Cargo sees it: the members listed in the root Cargo.toml, each package's crate
//! roots (declared in its manifest or found where Cargo looks), and the Rust files under them.
//!
//! The manifests are read line by line for the few keys needed here (`members`, `name`, the
//! targets' `path`), not as full TOML: a member glob is refused with a message rather than guessed.

use crate::Error;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What a crate root builds, which decides the rules that read its module tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TargetKind {
    /// `src/lib.rs` or `[lib] path`.
    Lib,
    /// `src/main.rs`, `src/bin/*` or `[[bin]] path`.
    Bin,
    /// `examples/*` or `[[example]] path`.
    Example,
    /// `benches/*` or `[[bench]] path`.
    Bench,
    /// `tests/*` or `[[test]] path`: integration tests.
    Test,
}

impl TargetKind {
    /// Integration tests may reach anywhere; every other crate keeps its siblings acyclic.
    pub fn has_cycle_rule(self) -> bool {
        self != TargetKind::Test
    }

    /// FFI stays behind `sys` in what a package ships (its library and binaries); examples,
    /// benchmarks and integration tests drive it from outside.
    pub fn has_ffi_rule(self) -> bool {
        matches!(self, TargetKind::Lib | TargetKind::Bin)
    }

    fn section(self) -> &'static str {
        match self {
            TargetKind::Lib => "[lib]",
            TargetKind::Bin => "[[bin]]",
            TargetKind::Example => "[[example]]",
            TargetKind::Bench => "[[bench]]",
            TargetKind::Test => "[[test]]",
        }
    }
}

/// One crate root of a package.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    /// What it builds.
    pub kind: TargetKind,
    /// Its root file (`src/lib.rs`, `tests/cli.rs`, ...).
    pub root: PathBuf,
}

/// One workspace member.
#[derive(Debug, Clone)]
pub struct Package {
    /// `[package] name`.
    pub name: String,
    /// The folder of its Cargo.toml.
    pub dir: PathBuf,
    /// Its crate roots, each once.
    pub targets: Vec<Target>,
}

/// The members of a workspace.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The folder of the root Cargo.toml.
    pub root: PathBuf,
    /// The members, in the manifest's order.
    pub packages: Vec<Package>,
}

impl Workspace {
    /// Reads `root/Cargo.toml`'s `[workspace] members` and each member's manifest.
    pub fn load(root: &Path) -> Result<Workspace, Error> {
        let manifest = root.join("Cargo.toml");
        let text = read(&manifest)?;
        let members =
            string_array(&text, "[workspace]", "members").ok_or_else(|| Error::Manifest {
                path: manifest.clone(),
                message: "no `members = [...]` in `[workspace]`: run from the workspace root"
                    .into(),
            })?;
        let mut packages = Vec::new();
        for m in members {
            if m.contains(['*', '?', '[']) {
                return Err(Error::Manifest {
                    path: manifest.clone(),
                    message: format!("member `{m}` is a glob: list the members one by one"),
                });
            }
            packages.push(Package::load(&root.join(&m))?);
        }
        Ok(Workspace {
            root: root.to_path_buf(),
            packages,
        })
    }

    /// A path relative to the workspace root, with `/` separators, as breaches print it.
    pub fn rel(&self, path: &Path) -> String {
        let p = path.strip_prefix(&self.root).unwrap_or(path);
        p.components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// Every `.rs` file under a member's folder, except under `target/`, hidden folders and
    /// folders of other packages (a fuzz crate outside the workspace, a test fixture).
    pub fn rust_files(&self) -> Result<Vec<PathBuf>, Error> {
        let mut out = BTreeSet::new();
        for p in &self.packages {
            walk(&p.dir, true, &mut out)?;
        }
        Ok(out.into_iter().collect())
    }
}

fn walk(dir: &Path, top: bool, out: &mut BTreeSet<PathBuf>) -> Result<(), Error> {
    if !top && dir.join("Cargo.toml").exists() {
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for e in entries {
        let e = e.map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                walk(&path, false, out)?;
            }
        } else if name.ends_with(".rs") {
            out.insert(path);
        }
    }
    Ok(())
}

impl Package {
    fn load(dir: &Path) -> Result<Package, Error> {
        let manifest = dir.join("Cargo.toml");
        let text = read(&manifest)?;
        let name = string_key(&text, "[package]", "name").ok_or_else(|| Error::Manifest {
            path: manifest.clone(),
            message: "no `name` in `[package]`".into(),
        })?;
        let mut targets = BTreeSet::new();
        for kind in [
            TargetKind::Lib,
            TargetKind::Bin,
            TargetKind::Example,
            TargetKind::Bench,
            TargetKind::Test,
        ] {
            for p in section_paths(&text, kind.section()) {
                targets.insert(Target {
                    kind,
                    root: dir.join(p),
                });
            }
        }
        for (kind, found) in discovered(dir) {
            // A declared target wins over the same file found by Cargo's conventions.
            if !targets.iter().any(|t| t.root == found) {
                targets.insert(Target { kind, root: found });
            }
        }
        Ok(Package {
            name,
            dir: dir.to_path_buf(),
            targets: targets.into_iter().collect(),
        })
    }
}

/// The crate roots Cargo finds without a manifest entry.
fn discovered(dir: &Path) -> Vec<(TargetKind, PathBuf)> {
    let mut out = Vec::new();
    for (kind, file) in [
        (TargetKind::Lib, "src/lib.rs"),
        (TargetKind::Bin, "src/main.rs"),
    ] {
        if dir.join(file).is_file() {
            out.push((kind, dir.join(file)));
        }
    }
    for (kind, folder) in [
        (TargetKind::Bin, "src/bin"),
        (TargetKind::Example, "examples"),
        (TargetKind::Bench, "benches"),
        (TargetKind::Test, "tests"),
    ] {
        let Ok(entries) = fs::read_dir(dir.join(folder)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                if p.extension().is_some_and(|x| x == "rs") && p.is_file() {
                    Some(p)
                } else if p.join("main.rs").is_file() {
                    Some(p.join("main.rs"))
                } else {
                    None
                }
            })
            .collect();
        found.sort();
        out.extend(found.into_iter().map(|p| (kind, p)));
    }
    out
}

fn read(path: &Path) -> Result<String, Error> {
    fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The text of each table named `header` (a `[[bin]]` may repeat), up to the next header.
fn sections<'a>(text: &'a str, header: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') && !t.starts_with("[\"") && t.ends_with(']') && !t.contains('=') {
            if let Some(s) = current.take() {
                out.push(s);
            }
            if t == header {
                current = Some(Vec::new());
            }
        } else if let Some(s) = current.as_mut() {
            s.push(line);
        }
    }
    out.extend(current);
    out
}

fn strip_comment(line: &str) -> &str {
    let mut in_str = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_str = !in_str,
            '#' if !in_str => return &line[..i],
            _ => {}
        }
    }
    line
}

fn quoted(s: &str) -> Vec<String> {
    s.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn string_key(text: &str, header: &str, key: &str) -> Option<String> {
    let lines = sections(text, header).into_iter().next()?;
    value_of(&lines, key).and_then(|v| quoted(&v).into_iter().next())
}

/// The raw value of `key = ...` in a table, an array followed over lines to its `]`.
fn value_of(lines: &[&str], key: &str) -> Option<String> {
    let mut it = lines.iter().map(|l| strip_comment(l));
    while let Some(l) = it.next() {
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        if k.trim() != key {
            continue;
        }
        let mut v = v.trim().to_string();
        if v.starts_with('[') {
            while !v.contains(']') {
                v.push_str(it.next()?);
            }
        }
        return Some(v);
    }
    None
}

fn string_array(text: &str, header: &str, key: &str) -> Option<Vec<String>> {
    let lines = sections(text, header).into_iter().next()?;
    value_of(&lines, key).map(|v| quoted(&v))
}

fn section_paths(text: &str, header: &str) -> Vec<String> {
    sections(text, header)
        .iter()
        .filter_map(|lines| value_of(lines, "path").and_then(|v| quoted(&v).into_iter().next()))
        .collect()
}

/// A parsed Rust file.
#[derive(Debug)]
pub struct Parsed {
    /// Its text.
    pub text: String,
    /// Its syntax tree, with line numbers in every span.
    pub syntax: syn::File,
}

/// Each file read and parsed once, however many crate roots reach it.
#[derive(Debug, Default)]
pub struct Sources {
    files: BTreeMap<PathBuf, Rc<Parsed>>,
}

impl Sources {
    /// The parsed file at `path`.
    pub fn get(&mut self, path: &Path) -> Result<Rc<Parsed>, Error> {
        if let Some(p) = self.files.get(path) {
            return Ok(p.clone());
        }
        let text = read(path)?;
        let syntax = syn::parse_file(&text).map_err(|e| {
            let at = e.span().start();
            Error::Parse {
                path: path.to_path_buf(),
                line: at.line,
                column: at.column + 1,
                message: e.to_string(),
            }
        })?;
        let parsed = Rc::new(Parsed { text, syntax });
        self.files.insert(path.to_path_buf(), parsed.clone());
        Ok(parsed)
    }
}
