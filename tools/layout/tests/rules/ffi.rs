//! FFI crates named only where they are wrapped, read from parsed paths.

use crate::fixture::Fixture;

#[test]
fn libc_outside_sys_is_reported_however_it_is_written() {
    let f = Fixture::workspace("libc", &["tests"]);
    f.file("tests/src/lib.rs", "mod process;\nmod sys;\n")
        .file(
            "tests/src/process.rs",
            concat!(
                "use {rustix::fs, std::io};\n",
                "pub fn k(p: i32) { unsafe { libc::kill(p, libc::SIGKILL) }; }\n",
                "pub fn g() { let _ = format!(\"{}\", ::libc::SIGTERM); }\n",
                "// libc::kill in a comment\n",
                "pub fn s() -> &'static str { \"libc::kill\" }\n",
            ),
        )
        .file(
            "tests/src/sys.rs",
            "pub fn kill(p: i32) { unsafe { libc::kill(p, libc::SIGKILL) }; }\n",
        );
    assert_eq!(
        f.breaches(),
        [
            "tests/src/process.rs:1: `use rustix::fs` outside a `sys` module: wrap the call there",
            "tests/src/process.rs:2: `libc::kill`, `libc::SIGKILL` outside a `sys` module: wrap the call there",
            "tests/src/process.rs:3: `::libc::SIGTERM` outside a `sys` module: wrap the call there",
        ]
    );
}

#[test]
fn mpi_is_for_gossamer_bootstrap_only() {
    let f = Fixture::workspace("mpi", &["libgsm", "examples/graph500"]);
    f.file("libgsm/src/lib.rs", "mod bootstrap;\nmod worker;\n")
        .file(
            "libgsm/src/bootstrap/mod.rs",
            "mod calls;\nuse mpi::traits::Communicator;\n",
        )
        .file(
            "libgsm/src/bootstrap/calls.rs",
            "pub fn init() { let _ = mpi::initialize(); }\n",
        )
        .file("libgsm/src/worker.rs", "use mpi as m;\n")
        .file(
            "examples/graph500/src/main.rs",
            "use mpi::traits::Communicator;\nfn main() {}\n",
        );
    f.expect_one("libgsm/src/worker.rs:1: `use mpi` outside `bootstrap`", &[]);
}

#[test]
fn a_sys_module_at_any_depth_a_local_module_and_tests_are_fine() {
    let f = Fixture::workspace("sysdepth", &["gsmrun"]);
    f.file(
        "gsmrun/src/lib.rs",
        "mod hosts;\nmod libc;\nfn f() { libc::local(); }\n",
    )
    .file("gsmrun/src/hosts/mod.rs", "mod sys;\n")
    .file(
        "gsmrun/src/hosts/sys.rs",
        "use libc::c_int;\nuse rustix::process;\n",
    )
    .file("gsmrun/src/libc.rs", "pub fn local() {}\n")
    .file(
        "gsmrun/tests/cli.rs",
        "#[test]\nfn t() { unsafe { libc::kill(1, 0) }; }\n",
    )
    .file(
        "gsmrun/examples/e.rs",
        "fn main() { let _ = libc::SIGKILL; }\n",
    );
    f.expect_clean();
}
