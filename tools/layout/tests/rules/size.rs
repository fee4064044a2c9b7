//! File and function length, everywhere in every member: the files the old script never read.

use crate::fixture::{Fixture, long_fn};

#[test]
fn a_long_function_in_a_test_file_is_reported() {
    let f = Fixture::workspace("testfn", &["tests"]);
    f.file("tests/src/lib.rs", "").file(
        "tests/tests/cluster.rs",
        &format!("#[test]\n{}", long_fn("big", 151, 0)),
    );
    f.expect_one(
        "tests/tests/cluster.rs:2: fn big is 151 lines (at most 150)",
        &[],
    );
}

#[test]
fn a_long_method_or_nested_or_macro_function_is_reported() {
    let f = Fixture::workspace("method", &["benches"]);
    f.file(
        "benches/src/main.rs",
        &format!(
            "struct S;\nimpl S {{\n{}}}\nfn main() {{}}\n",
            long_fn("m", 160, 4)
        ),
    )
    .file(
        "benches/src/lib.rs",
        &format!("pub fn outer() {{\n{}}}\n", long_fn("inner", 151, 4)),
    )
    .file(
        "benches/tests/cases.rs",
        &format!("suite! {{\n{}}}\n", long_fn("case", 152, 4)),
    )
    .file("benches/tests/ok.rs", &long_fn("fits", 150, 0));
    let found = f.breaches();
    assert_eq!(
        found,
        [
            // The outer function holds the inner one, so it is longer still.
            "benches/src/lib.rs:1: fn outer is 153 lines (at most 150)",
            "benches/src/lib.rs:2: fn inner is 151 lines (at most 150)",
            "benches/src/main.rs:3: fn m is 160 lines (at most 150)",
            "benches/tests/cases.rs:2: fn case is 152 lines (at most 150)",
        ]
    );
}

#[test]
fn a_long_file_outside_libgsm_and_gsmrun_is_reported() {
    let f = Fixture::workspace("longfile", &["collectives", "examples/graph500"]);
    let body = "// a line\n".repeat(1001);
    f.file("collectives/src/lib.rs", "")
        .file("collectives/tests/suite/mod.rs", &body)
        .file(
            "examples/graph500/src/main.rs",
            &format!("fn main() {{}}\n{}", "\n".repeat(998)),
        );
    f.expect_one(
        "collectives/tests/suite/mod.rs:1: 1001 lines (at most 1000)",
        &[],
    );
}

#[test]
fn an_out_of_line_test_module_does_not_shorten_the_file() {
    let f = Fixture::workspace("testmod", &["libgsm"]);
    f.file(
        "libgsm/src/lib.rs",
        &format!("#[cfg(test)]\nmod tests;\n{}", long_fn("late", 200, 0)),
    )
    .file("libgsm/src/tests.rs", "");
    f.expect_one(
        "libgsm/src/lib.rs:3: fn late is 200 lines (at most 150)",
        &[],
    );
}
