//! The compiler's messages for what cannot travel: each file of `tests/compile_fail/` is
//! type-checked by `rustc` against the gossamer (or gsm-collectives) library this test was built
//! with, and every line marked `// expect: a | b` must fail with an error whose text (message,
//! label and notes) holds each of the `|`-separated phrases. One `rustc --emit=metadata` per
//! file, a second or two each: no code is generated.
//!
//! The libraries are the newest `lib<name>-*.rlib` beside this test's executable (Cargo built
//! them for it); their dependencies are found there too (`-L dependency=`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The newest `lib<name>-*.rlib` in the directory of this test's executable.
fn rlib(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its executable");
    let deps = exe.parent().expect("a test executable sits in a directory");
    let prefix = format!("lib{name}-");
    std::fs::read_dir(deps)
        .expect("the deps directory is readable")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".rlib"))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| {
            panic!(
                "no {prefix}*.rlib in {}: build the tests first",
                deps.display()
            )
        })
}

/// Type-checks `file` against crate `name`; returns rustc's standard error.
fn check(file: &str, name: &str) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("compile_fail")
        .join(file);
    let deps = rlib(name)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let out_dir = std::env::temp_dir().join(format!("gsm-diagnostics-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("a scratch directory");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .args([
            "--edition",
            "2024",
            "--crate-type",
            "bin",
            "--emit=metadata",
        ])
        .arg("--out-dir")
        .arg(&out_dir)
        .arg("--extern")
        .arg(format!("{}={}", name, rlib(name).display()))
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg(&src)
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .expect("rustc runs");
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(
        !out.status.success(),
        "{file} compiled, but every marked line should fail"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The text of each error rustc reported, by the line of `file` it points to first.
fn errors_by_line(stderr: &str, file: &str) -> BTreeMap<usize, String> {
    let mut out: BTreeMap<usize, String> = BTreeMap::new();
    for block in stderr.split("\nerror").skip_while(|b| b.is_empty()) {
        let at = format!("{file}:");
        let Some(line) = block.lines().find_map(|l| {
            let rest = l.trim_start().strip_prefix("--> ")?;
            let i = rest.find(&at)?;
            rest[i + at.len()..]
                .split(':')
                .next()?
                .parse::<usize>()
                .ok()
        }) else {
            continue;
        };
        out.entry(line).or_default().push_str(block);
    }
    out
}

/// Checks every `expect:` line of `file` against crate `name`.
fn expect_messages(file: &str, name: &str) {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("compile_fail")
            .join(file),
    )
    .expect("the compile-fail source is readable");
    let stderr = check(file, name);
    let errors = errors_by_line(&format!("\n{stderr}"), file);
    let mut marked = 0;
    for (i, line) in src.lines().enumerate() {
        let Some((_, want)) = line.split_once("// expect: ") else {
            continue;
        };
        marked += 1;
        let n = i + 1;
        let got = errors
            .get(&n)
            .unwrap_or_else(|| panic!("{file}:{n} was expected to fail; rustc said:\n{stderr}"));
        for phrase in want.split(" | ") {
            assert!(
                got.contains(phrase.trim()),
                "{file}:{n}: the error does not say {phrase:?}:\n{got}"
            );
        }
    }
    assert!(marked > 0, "{file} marks no line");
}

#[test]
fn captures_and_arguments_that_cannot_travel_say_what_to_do() {
    expect_messages("delegation.rs", "gossamer");
}

#[test]
fn a_collective_over_data_that_is_not_plain_names_the_value_forms() {
    expect_messages("collectives.rs", "gsm_collectives");
}
