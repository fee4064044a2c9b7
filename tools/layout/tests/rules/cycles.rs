//! Sibling import cycles, written in each way that hid them from the old text-matching script,
//! and the code that must not make an edge.

use crate::fixture::Fixture;

/// A crate `a` with `lib.rs` declaring `mods` and each `(file, text)` written under `a/src/`.
fn krate(name: &str, files: &[(&str, &str)]) -> Fixture {
    let f = Fixture::workspace(name, &["a"]);
    for (file, text) in files {
        f.file(&format!("a/src/{file}"), text);
    }
    f
}

#[test]
fn a_grouped_crate_use_makes_an_edge() {
    let f = krate(
        "grouped",
        &[
            ("lib.rs", "mod notify;\nmod worker;\n"),
            (
                "notify.rs",
                "use crate::worker::Worker;\npub struct Notify(Worker);\n",
            ),
            (
                "worker.rs",
                "use crate::{notify::Notify, other};\npub struct Worker;\n",
            ),
        ],
    );
    f.expect_one(
        "a/src/notify.rs:1: sibling import cycle in a/src/ between notify, worker",
        &[
            "worker -> notify (a/src/worker.rs:1 `use crate::notify::Notify`)",
            "notify -> worker",
        ],
    );
}

#[test]
fn a_super_group_makes_an_edge() {
    let f = krate(
        "supergroup",
        &[
            ("lib.rs", "mod segment;\n"),
            ("segment/mod.rs", "mod remote;\nmod rma;\npub struct Key;\n"),
            (
                "segment/rma.rs",
                "use super::{Key, remote};\npub fn put() { remote::get() }\n",
            ),
            ("segment/remote.rs", "pub fn get() { super::rma::put() }\n"),
        ],
    );
    f.expect_one(
        "a/src/segment/remote.rs:1: sibling import cycle in a/src/segment/ between remote, rma",
        &[
            "rma -> remote (a/src/segment/rma.rs:1 `use super::remote`)",
            "`super::rma::put`",
        ],
    );
}

#[test]
fn a_nested_group_makes_an_edge() {
    let f = krate(
        "nested",
        &[
            ("lib.rs", "mod a;\nmod b;\n"),
            (
                "a.rs",
                "use crate::{b::{B, deep::{self as d}}};\npub struct A;\n",
            ),
            ("b/mod.rs", "pub mod deep;\npub struct B;\n"),
            ("b/deep.rs", "use crate::a::A;\n"),
        ],
    );
    f.expect_one(
        "a/src/a.rs:1: sibling import cycle in a/src/ between a, b",
        &["a -> b", "b -> a"],
    );
}

#[test]
fn renames_and_globs_make_edges() {
    let f = krate(
        "renames",
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            (
                "a.rs",
                "use crate::b as other;\npub fn fa() { other::fb() }\n",
            ),
            ("b.rs", "use crate::c::*;\npub fn fb() {}\n"),
            ("c.rs", "use crate::a::{fa as run};\n"),
        ],
    );
    f.expect_one(
        "a/src/a.rs:1: sibling import cycle in a/src/ between a, b, c",
        &[
            "a -> b (a/src/a.rs:1 `use crate::b`)",
            "b -> c (a/src/b.rs:1 `use crate::c`)",
            "c -> a",
        ],
    );
}

#[test]
fn a_root_reexport_leads_to_its_module() {
    let f = krate(
        "reexport",
        &[
            (
                "lib.rs",
                "mod notify;\nmod worker;\npub use notify::{Notify, Other};\n",
            ),
            (
                "notify.rs",
                "pub struct Notify;\npub struct Other;\npub fn f() { crate::worker::g() }\n",
            ),
            ("worker.rs", "pub fn g() { let _ = crate::Notify; }\n"),
        ],
    );
    f.expect_one(
        "a/src/notify.rs:3: sibling import cycle in a/src/ between notify, worker",
        &["worker -> notify (a/src/worker.rs:1 `crate::Notify`)"],
    );
}

#[test]
fn a_folder_reexport_leads_to_its_module() {
    let f = krate(
        "folder",
        &[
            ("lib.rs", "mod io;\n"),
            (
                "io/mod.rs",
                "mod link;\nmod shared;\npub use link::Link;\npub use shared::*;\n",
            ),
            (
                "io/link.rs",
                "use super::Shared;\npub struct Link(Shared);\n",
            ),
            (
                "io/shared.rs",
                "pub struct Shared;\nfn f(_: super::Link) {}\n",
            ),
        ],
    );
    f.expect_one(
        "a/src/io/link.rs:1: sibling import cycle in a/src/io/ between link, shared",
        &["`use super::Shared`", "`super::Link`"],
    );
}

#[test]
fn paths_in_code_macros_and_inline_modules_make_edges() {
    let f = krate(
        "inline",
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            (
                "a.rs",
                "mod inner {\n    pub fn f() -> u8 { crate::b::N }\n}\n",
            ),
            (
                "b.rs",
                "pub const N: u8 = 1;\npub fn g() { println!(\"{}\", $crate_free(crate::c::M)); }\n",
            ),
            (
                "c.rs",
                "pub const M: u8 = 2;\nfn h() -> u8 { super::a::inner::f() }\n",
            ),
        ],
    );
    // `$crate_free` is not Rust but still tokens: the macro's paths are read from them.
    f.expect_one(
        "a/src/a.rs:2: sibling import cycle in a/src/ between a, b, c",
        &[
            "a -> b (a/src/a.rs:2 `crate::b::N`)",
            "b -> c (a/src/b.rs:2 `crate::c::M`)",
            "c -> a",
        ],
    );
}

#[test]
fn an_out_of_line_test_module_at_the_top_hides_nothing_below() {
    let f = krate(
        "testtop",
        &[
            ("lib.rs", "mod a;\nmod b;\n"),
            (
                "a.rs",
                "#[cfg(test)]\nmod tests;\n\nuse crate::b::B;\npub struct A(B);\n",
            ),
            ("a/tests.rs", "use crate::b::B;\n"),
            ("b.rs", "pub struct B;\npub fn f(_: crate::a::A) {}\n"),
        ],
    );
    f.expect_one(
        "a/src/a.rs:4: sibling import cycle in a/src/ between a, b",
        &["a -> b", "b -> a"],
    );
}

#[test]
fn test_code_makes_no_edge() {
    let f = krate(
        "testcode",
        &[
            ("lib.rs", "mod a;\nmod b;\n"),
            (
                "a.rs",
                "use crate::b::B;\npub struct A(B);\n#[cfg(test)]\nmod tests;\n",
            ),
            ("a/tests.rs", "use crate::b::B;\n"),
            (
                "b.rs",
                concat!(
                    "pub struct B;\n",
                    "#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
                    "#[cfg(all(test, loom))]\nmod loom_model { use crate::a::A; }\n",
                    "#[cfg(test)]\nuse crate::a::A;\n",
                    "#[test]\nfn t() { let _ = crate::a::A; }\n",
                    "// crate::a::A in a comment\n",
                    "/// and [`crate::a::A`] in docs\n",
                    "pub fn s() -> &'static str { \"crate::a::A\" }\n",
                ),
            ),
        ],
    );
    f.expect_clean();
}

#[test]
fn a_module_that_may_build_outside_tests_counts() {
    let f = krate(
        "anytest",
        &[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            (
                "b.rs",
                "pub struct B;\n#[cfg(any(test, feature = \"x\"))]\nmod extra { use crate::a::A; }\n",
            ),
        ],
    );
    f.expect_one(
        "a/src/a.rs:1: sibling import cycle in a/src/ between a, b",
        &["b -> a (a/src/b.rs:3"],
    );
}

#[test]
fn a_module_and_its_ancestors_or_descendants_make_no_edge() {
    let f = krate(
        "ancestors",
        &[
            ("lib.rs", "mod a;\npub use a::inner::X;\npub struct Root;\n"),
            (
                "a/mod.rs",
                "pub mod inner;\nuse crate::Root;\nuse self::inner::X as Y;\n",
            ),
            (
                "a/inner.rs",
                "pub struct X;\nuse super::super::Root;\nuse crate::a::Y;\n",
            ),
        ],
    );
    f.expect_clean();
}

#[test]
fn a_path_attribute_is_followed() {
    let f = krate(
        "pathattr",
        &[
            ("lib.rs", "mod a;\n#[path = \"elsewhere/bee.rs\"]\nmod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            ("elsewhere/bee.rs", "pub struct B;\nuse crate::a::A;\n"),
        ],
    );
    f.expect_one(
        "a/src/a.rs:1: sibling import cycle in a/src/ between a, b",
        &["a/src/elsewhere/bee.rs:2"],
    );
}

#[test]
fn every_member_and_binary_is_read_but_not_integration_tests() {
    let f = Fixture::workspace("members", &["examples/kv", "tools/x"]);
    f.file(
        "examples/kv/src/main.rs",
        "mod conn;\nmod server;\nfn main() {}\n",
    )
    .file(
        "examples/kv/src/conn.rs",
        "use crate::server;\npub fn serve() {}\n",
    )
    .file(
        "examples/kv/src/server.rs",
        "pub fn run() { crate::conn::serve() }\n",
    )
    .file("tools/x/src/lib.rs", "")
    .file("tools/x/tests/t/main.rs", "mod p;\nmod q;\n")
    .file("tools/x/tests/t/p.rs", "use crate::q::Q;\npub struct P;\n")
    .file("tools/x/tests/t/q.rs", "use crate::p::P;\npub struct Q;\n")
    // A package that is not a member (a fuzz crate) is not read.
    .file(
        "examples/kv/fuzz/Cargo.toml",
        "[package]\nname = \"fuzz\"\n",
    )
    .file("examples/kv/fuzz/src/main.rs", "mod p;\nmod q;\n")
    .file(
        "examples/kv/fuzz/src/p.rs",
        "use crate::q::Q;\npub struct P;\n",
    )
    .file(
        "examples/kv/fuzz/src/q.rs",
        "use crate::p::P;\npub struct Q;\n",
    );
    f.expect_one(
        "examples/kv/src/conn.rs:1: sibling import cycle in examples/kv/src/ between conn, server",
        &["conn -> server (examples/kv/src/conn.rs:1 `use crate::server`)"],
    );
}

#[test]
fn a_clean_tree_is_clean() {
    let f = krate(
        "clean",
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::C;\n"),
            (
                "a.rs",
                "use crate::{b::B, C};\nuse std::collections::HashMap;\npub struct A(B, C);\n",
            ),
            ("b.rs", "use super::c::*;\npub struct B(C);\n"),
            ("c.rs", "pub struct C;\n"),
        ],
    );
    f.expect_clean();
}
