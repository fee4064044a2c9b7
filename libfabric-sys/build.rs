//! Builds the bindings to the system's libfabric: bindgen over `rdma/fabric.h` and its
//! companions, and `shim.c`, which turns libfabric's `static inline` calls (almost all of its
//! API: `fi_domain`, `fi_endpoint`, `fi_mr_reg`, `fi_write`, `fi_cq_read`, ...) into real
//! functions named `gsm_fi_*` that Rust can link to.
//!
//! Headers come from `/usr/include` (Debian's `libfabric-dev`), or from `$LIBFABRIC_DIR/include`
//! with the library in `$LIBFABRIC_DIR/lib` when that is set.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=src/shim.h");
    println!("cargo:rerun-if-env-changed=LIBFABRIC_DIR");
    let mut includes = Vec::new();
    if let Ok(dir) = env::var("LIBFABRIC_DIR") {
        let dir = PathBuf::from(dir);
        includes.push(dir.join("include"));
        println!(
            "cargo:rustc-link-search=native={}",
            dir.join("lib").display()
        );
    }
    let header_found = includes
        .iter()
        .chain(std::iter::once(&PathBuf::from("/usr/include")))
        .any(|d| d.join("rdma/fabric.h").exists());
    if !header_found {
        panic!(
            "libfabric-sys: rdma/fabric.h not found; install libfabric-dev (Debian/Ubuntu) or set \
             LIBFABRIC_DIR to a libfabric install (scripts/install-deps does the former)"
        );
    }
    println!("cargo:rustc-link-lib=fabric");

    let mut build = cc::Build::new();
    build.file("src/shim.c").warnings(true);
    for i in &includes {
        build.include(i);
    }
    build.compile("gsm_fabric_shim");

    let mut b = bindgen::Builder::default()
        .header("src/shim.h")
        .allowlist_function("fi_getinfo|fi_freeinfo|fi_dupinfo|fi_fabric|fi_strerror|fi_version")
        .allowlist_function("fi_tostr")
        .allowlist_function("gsm_fi_.*")
        .allowlist_type("fi_.*")
        .allowlist_var("FI_.*")
        .allowlist_var("GSM_FI_.*")
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for i in &includes {
        b = b.clang_arg(format!("-I{}", i.display()));
    }
    let bindings = b
        .generate()
        .expect("libfabric-sys: bindgen could not read the libfabric headers");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings
        .write_to_file(out)
        .expect("libfabric-sys: could not write the bindings");
}
